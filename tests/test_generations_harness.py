"""A real lm-evaluation-harness ``generate_until`` run, read by ``calibkit report --generations``.

The harness runs here, offline, on a tiny random GPT-2 with a BPE tokenizer trained in the test
and a local task of short questions. Greedy decoding is deterministic: a first run gives the
model's answers, and the task's targets are then set to them for half of the questions, so that
the second run's ``exact_match`` is 1 there and 0 elsewhere.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from calibkit.cli import main
from calibkit.lm.generations import read_generations

WORDS = "alpha beta gamma delta red green blue cat dog bird one two three four five is the a of what which".split()


def build_model(folder: Path, questions: list[str], positions: int = 128) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["[UNK]", "<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(questions * 5 + ["True", "False"] * 200, trainer)  # P(True) reads each as one token
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", unk_token="[UNK]")
    fast.save_pretrained(folder / "model")
    import torch

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(fast), n_positions=positions, n_embd=32, n_layer=1, n_head=2)
    GPT2LMHeadModel(config).save_pretrained(folder / "model")
    return folder / "model"


def run_harness(folder: Path, model: Path, rows: list[dict], name: str) -> Path:
    data = folder / f"{name}.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks = folder / f"tasks_{name}"
    tasks.mkdir()
    (tasks / "tiny_gen.yaml").write_text(
        "task: tiny_gen\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: {data}\ntest_split: test\noutput_type: generate_until\n"
        'doc_to_text: "Question: {{question}}\\nAnswer:"\ndoc_to_target: answer\n'
        "generation_kwargs:\n  until: ['\\n']\n  max_gen_toks: 6\n  do_sample: false\n"
        "metric_list:\n  - metric: exact_match\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [
        sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={model},dtype=float32",
        "--include_path", str(tasks), "--tasks", "tiny_gen", "--output_path", str(folder / f"out_{name}"),
        "--log_samples", "--device", "cpu", "--batch_size", "8",
    ]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder / f"out_{name}"


def samples_of(out: Path) -> list[dict]:
    files = sorted(out.rglob("samples_tiny_gen_*.jsonl"))
    assert len(files) == 1, files
    return [json.loads(line) for line in files[0].read_text().splitlines()]


pytestmark = pytest.mark.slow  # two harness runs, 20 s: with the slow tests (.ci/run runs them)


@pytest.fixture(scope="module")
def harness_run(tmp_path_factory):
    pytest.importorskip("lm_eval")
    folder = tmp_path_factory.mktemp("lm_eval_gen")
    rng = np.random.default_rng(0)
    rows = [{"question": " ".join(rng.choice(WORDS, 4)), "answer": "zzz"} for _ in range(24)]
    model = build_model(folder, [r["question"] for r in rows])
    first = samples_of(run_harness(folder, model, rows, "first"))
    said = {s["doc_id"]: s["filtered_resps"][0] for s in first}
    for i, row in enumerate(rows):  # the model's own answer is the target of every other question
        row["answer"] = said[i].strip() if i % 2 == 0 else "zzz"
    return run_harness(folder, model, rows, "second"), model, rows


def test_the_harness_samples_read_as_written(harness_run):
    out, _, rows = harness_run
    samples = samples_of(out)
    data = read_generations(out)
    assert len(data) == len(rows) and set(data.task) == {"tiny_gen"}
    by_id = {s["doc_id"]: s for s in samples}
    for i, ident in enumerate(data.ids):
        sample = by_id[int(ident)]
        assert data.correct[i] == float(sample["exact_match"])
        assert data.answers[i] == sample["filtered_resps"][0]
        assert data.questions[i] == sample["arguments"]["gen_args_0"]["arg_0"]
    right = data.correct[np.argsort(data.ids.astype(int))]
    assert right.tolist() == [1.0 if i % 2 == 0 else 0.0 for i in range(len(rows))]  # as the targets were set


def test_the_cli_scores_the_run_with_the_models_own_probabilities(harness_run, capsys):
    out, model, _ = harness_run
    argv = ["generations", "--answers", str(out), "--model", str(model), "--confidence", "sequence,ptrue"]
    assert main([*argv, "--json", "--resplits", "0"]) == 0
    report = json.loads(capsys.readouterr().out)
    pooled = report["pooled"]
    assert pooled["questions"] == 24 and pooled["accuracy"] == 0.5
    assert set(pooled["sources"]) == {"sequence", "ptrue"}
    assert all(pooled["sources"][s]["answers"] == 24 for s in ("sequence", "ptrue"))
    # greedy answers are the model's likeliest: their sequence probability is the same whether right or wrong
    # (the targets were chosen after the fact), so it cannot rank them: AURC near the error rate
    assert 0.2 < pooled["sources"]["sequence"]["aurc"] < 0.8
