"""Language models on multiple-choice benchmarks (calibkit.lm.multiple_choice), read from the logs the
tools write: lm-evaluation-harness itself runs here, offline, on a tiny random causal LM with a
tokenizer trained in the test and a local task of 3-, 4- and 5-choice questions.

Every number is checked against the harness's own accuracies and against plain loops over the
samples file (tests/metrics/reference.py), the questions unpadded.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calibkit.cli import main
from calibkit.lm.multiple_choice import ChoiceData, choice_probabilities, multiple_choice_report, read_choices
from tests.metrics import reference as ref
from tests.test_pages import check_page

WORDS = "alpha beta gamma delta red green blue cat dog bird one two three four five is the a of what which".split()


def build_run(folder: Path) -> Path:
    """Write a tiny GPT-2 with a trained BPE tokenizer and a local task, then run lm_eval on it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    rng = np.random.default_rng(0)
    rows = []
    for i in range(30):
        k = (3, 4, 5)[i % 3]
        choices = [str(w) for w in rng.choice(WORDS, k, replace=False)]
        choices[0] = choices[0] + " é"  # a two-byte character: characters and bytes differ
        rows.append({"question": " ".join(rng.choice(WORDS, 4)), "choices": choices, "answer": int(rng.integers(k))})
    data = folder / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["[UNK]", "<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([json.dumps(r) for r in rows] * 5, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", unk_token="[UNK]")
    fast.save_pretrained(folder / "model")
    import torch

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(fast), n_positions=128, n_embd=32, n_layer=1, n_head=2)
    GPT2LMHeadModel(config).save_pretrained(folder / "model")
    (folder / "tasks").mkdir()
    (folder / "tasks" / "tiny_mc.yaml").write_text(
        "task: tiny_mc\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: {data}\ntest_split: test\noutput_type: multiple_choice\n"
        'doc_to_text: "Question: {{question}}\\nAnswer:"\ndoc_to_choice: "{{choices}}"\ndoc_to_target: answer\n'
        "metric_list:\n  - metric: acc\n  - metric: acc_norm\n  - metric: acc_bytes\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [
        sys.executable, "-m", "lm_eval", "--model", "hf",
        "--model_args", f"pretrained={folder / 'model'},dtype=float32",
        "--include_path", str(folder / "tasks"), "--tasks", "tiny_mc", "--output_path", str(folder / "out"),
        "--log_samples", "--device", "cpu", "--batch_size", "8",
    ]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder / "out"


@pytest.fixture(scope="module")
def harness_run(tmp_path_factory):
    pytest.importorskip("lm_eval")
    return build_run(tmp_path_factory.mktemp("lm_eval"))


def plain_rows(samples_file: Path, score: str):
    """(softmax over the question's own choices, gold) per sample: a loop over the file as written."""
    rows = []
    for line in samples_file.read_text(encoding="utf-8").splitlines():
        sample = json.loads(line)
        ll = [float(r[0]) for r in sample["filtered_resps"]]
        texts = [sample["arguments"][f"gen_args_{j}"]["arg_1"][1:] for j in range(len(ll))]  # without " "
        if score == "chars":
            ll = [v / len(t) for v, t in zip(ll, texts)]
        elif score == "bytes":
            ll = [v / len(t.encode("utf-8")) for v, t in zip(ll, texts)]
        top = max(ll)
        e = [math.exp(v - top) for v in ll]
        rows.append(([v / sum(e) for v in e], int(sample["target"])))
    return rows


@pytest.mark.parametrize("score, harness_metric", [("loglik", "acc"), ("chars", "acc_norm"), ("bytes", "acc_bytes")])
def test_the_harness_run_reads_with_its_accuracies_and_the_loops_numbers(harness_run, score, harness_metric):
    results = json.loads(next(harness_run.rglob("results_*.json")).read_text())["results"]["tiny_mc"]
    report = multiple_choice_report(read_choices(harness_run), score=score, theta=0)
    got = report["tasks"]["tiny_mc"]
    assert got["accuracy"] == pytest.approx(results[f"{harness_metric},none"], abs=1e-12)
    assert report["score"] == score and got["questions"] == 30 and got["choices"] == [3, 4, 5]
    rows = plain_rows(next(harness_run.rglob("samples_tiny_mc_*.jsonl")), score)
    pairs = ref.top_pairs(rows, False)
    want = {
        "ece": ref.ece(pairs, 15), "mce": ref.mce(pairs, 15), "esce": ref.esce(pairs, 10),
        "rbece": ref.rbece(pairs, 20, 0),
        "fce": ref.fce(pairs, 15), "overconfidence": ref.overconfidence(rows), "ecd": ref.ecd(rows),
        "brier": ref.brier(rows, False), "nll": ref.nll(rows), "accuracy": ref.accuracy(rows),
    }  # fmt: skip
    for name, value in want.items():
        assert got[name] == pytest.approx(value, rel=1e-9, abs=1e-12), name
    for name in ("cece", "sce", "ace", "subset_ece"):  # 3 to 5 choices: no fixed answer positions
        assert got[name] is None, name
    assert report["pooled"]["ece"] == got["ece"]


def test_the_cli_reads_the_harness_folder(harness_run, capsys):
    assert main(["choices", "--predictions", str(harness_run), "--score", "chars", "--json", "--theta", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["score"] == "chars" and "acc_norm" in out["source"]
    assert main(["choices", "--predictions", str(harness_run)]) == 0
    table = capsys.readouterr().out
    assert "| tiny_mc | 3-5 | 30 |" in table and "(pooled)" in table


# ----------------------------------------------------------------------------------------------
# Samples files as the harness writes them (every value a string), for the cases a tiny run
# does not produce: mutual information, text targets, multiple_input tasks, bad samples.


def sample(doc_id, lls, target, continuations=None, contexts=None, **metrics):
    continuations = continuations or [f" c{j}" for j in range(len(lls))]
    contexts = contexts or ["Q:"] * len(lls)
    return {
        "doc_id": doc_id,
        "doc": {},
        "target": str(target),
        "arguments": {
            f"gen_args_{j}": {"arg_0": c, "arg_1": t} for j, (c, t) in enumerate(zip(contexts, continuations))
        },
        "resps": [[[str(v), "False"]] for v in lls],
        "filtered_resps": [[str(v), "False"] for v in lls],
        "filter": "none",
        "metrics": list(metrics),
        **{k: v for k, v in metrics.items()},
    }


def write_samples(folder: Path, task: str, samples, delimiter=None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / f"samples_{task}_2026-01-01T00-00-00.000001.jsonl"
    file.write_text("".join(json.dumps(s) + "\n" for s in samples))
    if delimiter is not None:
        config = {"configs": {task: {"target_delimiter": delimiter}}}
        (folder / "results_2026-01-01T00-00-00.000001.json").write_text(json.dumps(config))
    return file


def test_mutual_information_text_targets_and_delimiters(tmp_path):
    mutual = sample(
        0, [-1.0, -3.0, -0.5, -9.0], 0, continuations=[" a", " b", " a", " b"], contexts=["Q:", "Q:", "", ""]
    )
    text = sample(1, [-2.0, -1.0], "bb", continuations=["::aa", "::bb"], acc=1.0)
    write_samples(tmp_path / "run", "mix", [mutual], delimiter=" ")
    data = read_choices(tmp_path / "run")
    assert data.loglik.tolist() == [[-1.0, -3.0]] and data.gold.tolist() == [0]  # the unconditional half dropped
    file = write_samples(tmp_path / "other", "text", [text], delimiter="::")
    data = read_choices(file)
    assert data.gold.tolist() == [1] and data.chars.tolist() == [[2.0, 2.0]]  # the delimiter is no part of the length


def test_a_target_of_one_index_in_a_list_is_that_choice_and_of_several_is_refused(tmp_path):
    """The harness accepts ``doc_to_target`` ``[1]`` and scores ``pred in gold``: the one choice it names."""
    one = sample(0, [-2.0, -1.0], [1], acc=1.0)
    assert read_choices(write_samples(tmp_path / "one", "t", [one])).gold.tolist() == [1]
    several = sample(1, [-2.0, -1.0], [0, 1], acc=1.0)
    with pytest.raises(ValueError, match=r"doc_id 1: `target` '\[0, 1\]' names several gold choices"):
        read_choices(write_samples(tmp_path / "several", "t", [several]))


def test_a_multiple_input_task_takes_its_gold_from_acc_where_that_is_exact(tmp_path):
    # Winogrande-style: the choices are in the contexts, the continuation is shared; `target` is that text.
    right = sample(0, [-1.0, -2.0], "rest", continuations=[" rest"] * 2, contexts=["A", "B"], acc=1.0)
    wrong = sample(1, [-1.0, -2.0], "rest", continuations=[" rest"] * 2, contexts=["A", "B"], acc=0.0)
    data = read_choices(write_samples(tmp_path, "wino", [right, wrong]))
    assert data.gold.tolist() == [0, 1]
    with pytest.raises(ValueError, match=r"score='chars' needs each choice's length.*doc_id 0"):
        choice_probabilities(data, "chars")
    three = sample(7, [-1.0, -2.0, -3.0], "rest", continuations=[" rest"] * 3, contexts=["A", "B", "C"], acc=0.0)
    with pytest.raises(ValueError, match=r"doc_id 7: no gold choice can be derived"):
        read_choices(write_samples(tmp_path / "x", "wino", [three]))


@pytest.mark.parametrize(
    "bad, message",
    [
        (sample(3, [-1.0, -2.0], 0, acc=0.0), r"doc_id 3: the gold choice 0 .* disagrees with the file's `acc`"),
        (sample(4, [-1.0, float("nan")], 0), r"doc_id 4: the log-likelihood of choice 1 is not finite"),
        (sample(5, [-1.0, -2.0], 2), r"doc_id 5: `target` '2' is no index of the 2 choices"),
        (sample(6, [], 0), r"doc_id 6: the question has no choice"),
        (sample(8, [-1.0, -2.0], "nothing"), r"doc_id 8: `target` 'nothing' is neither an index nor the text"),
        ({"doc_id": 9, "arguments": {}}, r"doc_id 9: missing key 'filtered_resps'"),
    ],
)
def test_a_bad_sample_is_refused_naming_the_file_and_doc_id(tmp_path, capsys, bad, message):
    good = sample(0, [-1.0, -2.0], 0, acc=1.0)
    file = write_samples(tmp_path, "t", [good, bad])
    with pytest.raises(ValueError, match=message):
        read_choices(file)
    assert main(["choices", "--predictions", str(file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and file.name in err


def test_two_runs_of_one_task_in_a_folder_are_refused(tmp_path):
    write_samples(tmp_path / "a", "t", [sample(0, [-1.0, -2.0], 0)])
    write_samples(tmp_path / "b", "t", [sample(0, [-1.0, -2.0], 0)])
    with pytest.raises(ValueError, match=r"task 't' is in .* and .*two runs"):
        read_choices(tmp_path)


# ----------------------------------------------------------------------------------------------
# calibkit's own format


def choice_rows(n=400, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        k = 4 if i % 2 else 3
        ll = (-rng.gamma(2.0, 2.0, k)).tolist()
        rows.append({"task": "even" if i % 2 == 0 else "odd", "choice_logprobs": ll, "gold": int(rng.integers(k))})
    return rows


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_the_choice_format_per_task_and_pooled_equals_the_loops(tmp_path, suffix):
    rows = choice_rows()
    file = tmp_path / f"preds{suffix}"
    if suffix == ".jsonl":
        file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        pq.write_table(pa.Table.from_pylist(rows), file)
    report = multiple_choice_report(read_choices(file), theta=0)
    for task, k in (("even", 3), ("odd", 4)):
        mine = [r for r in rows if r["task"] == task]
        plain = []
        for r in mine:
            e = [math.exp(v - max(r["choice_logprobs"])) for v in r["choice_logprobs"]]
            plain.append(([v / sum(e) for v in e], r["gold"]))
        got = report["tasks"][task]
        assert got["ece"] == pytest.approx(ref.ece(ref.top_pairs(plain, False), 15), rel=1e-12)
        assert got["brier"] == pytest.approx(ref.brier(plain, False), rel=1e-12)
        ranked = sorted(ref.top_pairs(plain, False), key=lambda pair: -pair[0])  # no ties in random scores
        risks = [sum(1 - a for _, a in ranked[:j]) / j for j in range(1, len(ranked) + 1)]
        assert got["aurc"] == pytest.approx(sum(risks) / len(risks), rel=1e-12)
        assert got["selective_accuracy"] == pytest.approx(1 - risks[math.ceil(0.8 * len(risks)) - 1], rel=1e-12)
        per_position = ref.subset_ece(plain, False, k, 15)  # a fixed number of choices: answer positions
        assert np.allclose(got["subset_ece"], per_position, rtol=1e-12)
        assert got["positions"].endswith(", ".join("ABCD"[:k]))
    assert report["pooled"]["questions"] == 400 and report["pooled"]["cece"] is None


def test_the_choice_format_token_counts_give_the_per_token_score(tmp_path):
    rows = choice_rows()[:60]
    rng = np.random.default_rng(3)
    for r in rows:
        r["choice_tokens"] = rng.integers(1, 6, len(r["choice_logprobs"])).tolist()
    file = tmp_path / "preds.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = multiple_choice_report(read_choices(file), score="tokens", theta=0)["pooled"]
    right = []
    for r in rows:  # the per-token score's best choice, in a loop
        per_token = [v / t for v, t in zip(r["choice_logprobs"], r["choice_tokens"])]
        right.append(per_token.index(max(per_token)) == r["gold"])
    assert got["accuracy"] == pytest.approx(np.mean(right), abs=1e-12)
    assert np.mean(right) != multiple_choice_report(read_choices(file), theta=0)["pooled"]["accuracy"]


@pytest.mark.parametrize(
    "score, named",
    [
        ("loglik", "log-likelihood (acc)"),
        ("chars", "per character (acc_norm)"),
        ("bytes", "per UTF-8 byte (acc_bytes)"),
        ("tokens", "per token (acc_norm_token)"),
    ],
)
def test_the_cli_table_names_the_score(tmp_path, capsys, score, named):
    rows = choice_rows()[:40]
    for r in rows:
        r["choice_tokens"] = [len(c) for c in r["choices"]] if "choices" in r else [2] * len(r["choice_logprobs"])
        r["choice_chars"] = r["choice_bytes"] = r["choice_tokens"]
    file = tmp_path / "preds.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["choices", "--predictions", str(file), "--score", score, "--theta", "0"]) == 0
    assert named in capsys.readouterr().out  # the tokens score was titled "per UTF-8 byte"


@pytest.mark.parametrize(
    "rows, message",
    [
        ([{"choice_logprobs": [-1.0, -2.0], "gold": 2}], r"question 0: `gold` 2 is no index of 2 choices"),
        ([{"choice_logprobs": [], "gold": 0}], r"question 0: `choice_logprobs` holds 0 values"),
        (
            [{"choice_logprobs": [-1.0], "gold": 0}, {"choice_logprobs": [-1.0, float("nan")], "gold": 0}],
            r"question 1: a log-likelihood is not finite",
        ),
        (
            [{"choice_logprobs": [-1.0, -2.0], "gold": 0, "choice_chars": [3.0]}],
            r"question 0: `choice_chars` holds 1 values for 2 choices",
        ),
        ([{"choice_logprobs": [-1.0, -2.0], "gold": 0.5}], r"`gold` must hold one integer index"),
        ([{"choice_logprobs": [-1.0, -2.0]}], r"needs `choice_logprobs` and `gold` columns"),
        (  # one question twice, with differing golds: which is right would depend on the order (issue 62)
            [{"doc_id": d, "choice_logprobs": [-1.0, -2.0], "gold": g} for d, g in ((7, 0), (8, 1), (7, 1))],
            r"^`location`: .*preds\.jsonl, doc_id 7: appears twice in task 'preds' \(questions 0 and 2\)",
        ),
    ],
)
def test_the_choice_format_refuses_bad_questions_by_number(tmp_path, rows, message):
    file = tmp_path / "preds.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    if "NaN" in file.read_text():  # JSON holds no NaN: Parquet does
        file = tmp_path / "preds.parquet"
        pq.write_table(pa.Table.from_pylist(rows), file)
    with pytest.raises(ValueError, match=message):
        read_choices(file)


def test_scores_are_named_and_validated():
    data = ChoiceData(
        np.array(["t"], dtype=object), np.array([0], dtype=object), np.array([[-2.0, -4.0]]), np.array([0]),
        np.array([[2.0, 1.0]]), np.array([[2.0, 4.0]]), np.array(["f"], dtype=object),
    )  # fmt: skip
    assert choice_probabilities(data, "chars")[0] == pytest.approx([1 / (1 + math.exp(-3)), 1 / (1 + math.exp(3))])
    assert choice_probabilities(data, "bytes")[0] == pytest.approx([0.5, 0.5])
    with pytest.raises(ValueError, match=r"`score` must be one of \['loglik', 'chars', 'bytes', 'tokens'\]"):
        multiple_choice_report(data, score="acc_norm")


# ----------------------------------------------------------------------------------------------
# Temperature scaling over the choices


def tempered_questions(n=400, temperature=3.0, seed=0):
    """Scores whose softmax at ``temperature`` is calibrated by construction; every third question has 3 choices."""
    rng = np.random.default_rng(seed)
    ll = -rng.gamma(2.0, 2.0, (n, 4)) * temperature
    ll[::3, 3] = np.nan
    z = np.where(np.isnan(ll), -np.inf, ll / temperature)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    gold = (p.cumsum(1) > rng.random((n, 1))).argmax(1)
    return ChoiceData(
        np.array(["t"] * n, dtype=object), np.arange(n).astype(object), ll, gold, None, None,
        np.array(["f"] * n, dtype=object),
    )  # fmt: skip


def test_temperature_scaling_over_the_choices_finds_the_temperature_and_helps(tmp_path):
    from calibkit.lm.multiple_choice import choice_logits, choice_temperature_scaling

    data = tempered_questions()
    z = choice_logits(data)
    assert np.all(z[::3, 3] < z[::3, :3].min(1) - 9e6)  # a missing choice: far below, softmax 0
    result = choice_temperature_scaling(data, resplits=8)
    entry = result["tasks"]["t"]
    assert 2.4 < entry["temperature"] < 3.6  # calibrated at T = 3 by construction
    assert entry["ece"]["verdict"] == "holds" and entry["nll"]["verdict"] == "holds"
    assert entry["accuracy"]["verdict"] == "unchanged"  # TS keeps each question's best choice
    assert entry["nll"]["ts"]["mean"] < entry["nll"]["uncalibrated"]["mean"]
    few = choice_temperature_scaling(data.select(np.arange(10)), resplits=2)
    assert "t" in few["skipped"] and not few["tasks"]


def test_a_task_without_a_temperature_is_skipped_and_the_others_reported():
    """A model at or below chance on one task (common on MMLU subtasks for small models): the fit
    fails there; it stopped the whole run (exit 2, no table for any task)."""
    from calibkit.lm.multiple_choice import choice_temperature_scaling, format_choice_table, format_ts_table

    data = tempered_questions(n=120)
    wrong = data.select(~np.isnan(data.loglik).any(1))  # questions of 4 choices
    wrong = ChoiceData(  # the gold: always the worst choice
        np.array(["below_chance"] * len(wrong.gold), dtype=object), wrong.doc_id, wrong.loglik,
        wrong.loglik.argmin(1), None, None, wrong.source,
    )  # fmt: skip
    both = ChoiceData(
        *(np.concatenate([getattr(data, f), getattr(wrong, f)]) for f in ("task", "doc_id", "loglik", "gold")),
        None, None, np.concatenate([data.source, wrong.source]),
    )  # fmt: skip
    result = choice_temperature_scaling(both, resplits=4)
    assert list(result["tasks"]) == ["t"] and "no temperature can be fitted" in result["skipped"]["below_chance"]
    table = format_ts_table(result)
    assert table.splitlines()[3].count("|") == table.splitlines()[0].count("|")  # the skipped row, full width
    assert table.endswith(result["skipped"]["below_chance"])
    report = multiple_choice_report(both, metrics="ece")  # a string names one metric, as in calibration_report
    assert "ece" in report["pooled"] and "cece" not in report["pooled"]
    assert "| questions | accuracy | ece | aurc | selective_accuracy |" in format_choice_table(report)


def test_the_cli_calibrates_per_task(tmp_path, capsys):
    data = tempered_questions(n=120)
    rows = [
        {"task": "t", "choice_logprobs": [v for v in row if not np.isnan(v)], "gold": int(g)}
        for row, g in zip(data.loglik.tolist(), data.gold)
    ]
    file = tmp_path / "preds.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert (
        main(["choices", "--predictions", str(file), "--calibrate", "--resplits", "4", "--output", str(tmp_path / "o")])
        == 0
    )
    out = capsys.readouterr().out
    assert "Temperature scaling over the choices" in out and "| t | 120 |" in out
    saved = json.loads((tmp_path / "o" / "report.json").read_text())
    assert saved["temperature_scaling"]["tasks"]["t"]["ece"]["paired"]["n"] == 4
    page = (tmp_path / "o" / "index.html").read_text()
    assert "Reliability per task" in page and "data:image/png;base64," in page and "<table>" in page
    check_page(page)  # the one page design: the answer first, nothing empty, nothing fetched
    assert (tmp_path / "o" / "reliability.png").read_bytes().startswith(b"\x89PNG")
    facts = page.split('<p class="facts">', 1)[1].split("</p>", 1)[0]  # what the confidence is: said once
    assert (
        facts
        == f"{file} (120 questions) · 1 task · confidence: the softmax over the choices of the log-likelihood (acc)"
    )


# ----------------------------------------------------------------------------------------------
# lighteval details files, written by lighteval's own classes (tests/data/lighteval/make_details*.py:
# 0.13's Pipeline for the nested layout, 0.10's loggers for the flat one)

LIGHTEVAL = Path(__file__).parent / "data" / "lighteval"
LAYOUTS = {"nested (0.11+)": LIGHTEVAL, "flat (0.8-0.10)": LIGHTEVAL / "old"}


def lighteval_plain_rows(file: Path, score: str):
    """(softmax over the choices, gold) per question, straight from the Parquet rows, in a loop."""
    rows, seen = [], set()
    for row in pq.read_table(file).to_pylist():
        if "doc" in row:
            choices, ll, gold = row["doc"]["choices"], row["model_response"]["logprobs"], row["doc"]["gold_index"]
        else:
            choices, ll, gold = row["choices"], [p[0] for p in row["predictions"]], row["gold_index"][0]
            key = (row["example"], tuple(ll[: len(choices)]))
            if len(ll) == 2 * len(choices) and key in seen:
                continue  # a PMI task writes each question twice
            seen.add(key)
        ll = ll[: len(choices)]
        if score == "chars":
            ll = [v / len(c) for v, c in zip(ll, choices)]
        if score == "tokens":
            ll = [v / len(t) for v, t in zip(ll, row["model_response"]["output_tokens"])]
        top = max(ll)
        e = [math.exp(v - top) for v in ll]
        rows.append(([v / sum(e) for v in e], gold))
    return rows


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("score, metric", [("loglik", "acc"), ("chars", "acc_norm")])
def test_lighteval_details_read_with_its_accuracies_and_the_loops_numbers(layout, score, metric):
    folder = LAYOUTS[layout]
    results = json.loads(next((folder / "results").rglob("results_*.json")).read_text())["results"]
    report = multiple_choice_report(read_choices(folder / "details"), score=score, theta=0)
    assert len(report["tasks"]) == 2
    for task, got in report["tasks"].items():
        assert got["questions"] == 12
        assert got["accuracy"] == pytest.approx(results[task][metric], abs=1e-12), task
        file = next((folder / "details").rglob(f"details_{task}_*.parquet"))
        rows = lighteval_plain_rows(file, score)
        pairs = ref.top_pairs(rows, False)
        assert got["ece"] == pytest.approx(ref.ece(pairs, 15), rel=1e-9, abs=1e-12)
        assert got["brier"] == pytest.approx(ref.brier(rows, False), rel=1e-9)
        assert got["nll"] == pytest.approx(ref.nll(rows), rel=1e-9)


def test_lighteval_token_score_is_its_acc_norm_token(tmp_path):
    results = json.loads(next((LIGHTEVAL / "results").rglob("results_*.json")).read_text())["results"]
    report = multiple_choice_report(read_choices(LIGHTEVAL / "details"), score="tokens", theta=0)
    checked = [task for task in report["tasks"] if "acc_norm_token" in results[task]]
    assert checked  # the file's own accuracy of that score is there to check against
    for task in checked:
        got = report["tasks"][task]
        assert got["accuracy"] == pytest.approx(results[task]["acc_norm_token"], abs=1e-12), task
        rows = lighteval_plain_rows(next((LIGHTEVAL / "details").rglob(f"details_{task}_*.parquet")), "tokens")
        assert got["ece"] == pytest.approx(ref.ece(ref.top_pairs(rows, False), 15), rel=1e-9, abs=1e-12)
    source = next((LIGHTEVAL / "details").rglob(f"details_{checked[0]}_*.parquet"))
    rows = pq.read_table(source).to_pylist()
    for row in rows:  # token counts that would flip acc_norm_token: the file contradicts itself
        tokens = row["model_response"]["output_tokens"]
        if row["metric"]["acc_norm_token"] == 1:  # the other choices' scores per token rise towards 0
            for j in range(len(tokens)):
                tokens[j] = tokens[j] if j == row["doc"]["gold_index"] else tokens[j] * 1000
    spoiled = tmp_path / source.name
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(source)), spoiled)
    with pytest.raises(ValueError, match=r"the file's `acc_norm_token` is 1(\.0)?, but its log-likelihoods pick"):
        read_choices(spoiled)
    flat = read_choices(LAYOUTS["flat (0.8-0.10)"] / "details")  # 0.8-0.10 kept no tokens
    with pytest.raises(ValueError, match="score='tokens' needs each choice's length in tokens"):
        multiple_choice_report(flat, score="tokens")


def test_lighteval_documented_column_names_and_bad_questions(tmp_path):
    source = next((LIGHTEVAL / "details").rglob("details_calibkit_mc4*.parquet"))
    table = pq.read_table(source)
    renamed = table.rename_columns([f"__{name}__" for name in table.column_names])  # as lighteval's docs name them
    pq.write_table(renamed, tmp_path / source.name)
    assert read_choices(tmp_path / source.name).gold.tolist() == read_choices(source).gold.tolist()
    rows = table.to_pylist()

    def spoiled(change, name="details_t_2026-01-01T00-00-00.000001.parquet"):
        copy = json.loads(json.dumps(rows))
        change(copy[4])
        file = tmp_path / name
        pq.write_table(pa.Table.from_pylist(copy, schema=table.schema), file)
        return file

    def two_golds(r):
        r["doc"]["gold_index"] = None

    def nan_score(r):
        r["model_response"]["logprobs"][1] = float("nan")

    def wrong_acc(r):
        r["metric"]["acc"] = 1 - r["metric"]["acc"]

    question = rows[4]["doc"]["id"]
    for change, message in ((nan_score, "not finite"), (wrong_acc, "the file's `acc` is .*, but its log-likelihoods")):
        with pytest.raises(ValueError, match=rf"question {question}: .*{message}"):
            read_choices(spoiled(change))
    with pytest.raises(ValueError, match=r"`gold_index` None is not one index"):
        read_choices(spoiled(two_golds))
    pq.write_table(pa.table({"x": [1]}), tmp_path / "details_u_2026-01-01T00-00-00.000001.parquet")
    with pytest.raises(ValueError, match="is no lm-evaluation-harness samples file, lighteval details file"):
        read_choices(tmp_path / "details_u_2026-01-01T00-00-00.000001.parquet")


@pytest.mark.parametrize("layout", ["flat", "nested"])
def test_lighteval_acc_norm_of_the_no_space_normalisation_is_read(tmp_path, layout):
    """lighteval logs LogProbCharNorm(ignore_first_space=True) (agieval and many suites) as
    `acc_norm` too: one character less where a choice starts with a space. Here the two
    normalisations pick different choices; the file's acc_norm (no space) picks the gold."""
    ll, choices, gold = [-2.0, -3.5], [" ab", " abcd"], 1  # with the space: -0.667, -0.7; without: -1, -0.875
    row = (
        {"example": "Q?", "choices": choices, "gold_index": [gold], "predictions": [[v, 0.0] for v in ll],
         "metrics": {"acc": 0, "acc_norm": 1}}
        if layout == "flat"
        else {"doc": {"query": "Q?", "choices": choices, "gold_index": gold, "id": "0"},
              "model_response": {"logprobs": ll}, "metric": {"acc": 0, "acc_norm": 1}}
    )  # fmt: skip
    file = tmp_path / "details_lighteval|agieval:sat-math|0_2024-05-01T12-00-00.000001.parquet"
    pq.write_table(pa.Table.from_pylist([row]), file)
    assert read_choices(file).gold.tolist() == [1]
    row["metrics" if layout == "flat" else "metric"]["acc_norm"] = 0  # but both normalisations pick the gold:
    row["predictions" if layout == "flat" else "model_response"] = (
        [[-3.0, 0.0], [-3.5, 0.0]] if layout == "flat" else {"logprobs": [-3.0, -3.5]}
    )  # -1 and -0.875 with the space, -1.5 and -1.17 without
    pq.write_table(pa.Table.from_pylist([row]), file)
    with pytest.raises(ValueError, match=r"`acc_norm` is 0, but its log-likelihoods pick choice 1 for the gold 1"):
        read_choices(file)


def test_logs_are_told_by_their_content_not_their_names(tmp_path):
    from calibkit.lm.multiple_choice import is_choice_location

    harness = write_samples(tmp_path / "h", "t", [sample(0, [-1.0, -2.0], 0, acc=1.0)])
    renamed = tmp_path / "my_run.jsonl"
    renamed.write_bytes(harness.read_bytes())
    details = next((LIGHTEVAL / "details").rglob("details_calibkit_mc4*.parquet"))
    renamed_details = tmp_path / "mc4.parquet"
    renamed_details.write_bytes(details.read_bytes())
    assert read_choices(renamed).task.tolist() == ["my_run"]  # the task: the file's stem when not the tool's name
    assert read_choices(renamed_details).gold.tolist() == read_choices(details).gold.tolist()
    shards = tmp_path / "shards"
    shards.mkdir()
    pq.write_table(pa.table({"probs": [[0.5, 0.5]], "labels": [0]}), shards / "a.parquet")
    assert is_choice_location(str(tmp_path / "h")) and is_choice_location(str(renamed_details))
    assert not is_choice_location(str(shards))  # class predictions: the shard reader's
    with pytest.raises(ValueError, match="is no lm-evaluation-harness samples file, lighteval details file"):
        read_choices(shards / "a.parquet")


def test_a_task_at_chance_is_said_to_be_so(tmp_path, capsys):
    """Random scores over 4 choices: the table says the task is at chance, beside TS's verdicts; an
    informative task gets no such line."""
    rng = np.random.default_rng(5)
    rows = []
    for _ in range(300):
        gold = int(rng.integers(4))
        noise = rng.normal(size=4).tolist()
        informed = [v + (3.0 if j == gold else 0.0) for j, v in enumerate(noise)]
        rows.append({"task": "noise", "choice_logprobs": noise, "gold": gold})
        rows.append({"task": "known", "choice_logprobs": informed, "gold": gold})
    path = tmp_path / "choices.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["choices", "--predictions", str(path), "--calibrate", "--resplits", "3"]) == 0
    text = capsys.readouterr().out
    assert "at chance: noise's accuracy" in text and "(250 questions)" not in text
    assert "noise's accuracy 0.260 is within two standard errors of chance (0.250, 300 questions)" in text
    assert "at chance: known" not in text
