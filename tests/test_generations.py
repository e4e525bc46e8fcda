"""Confidence of generated answers: the readers, the verbalized parser, the report and the recalibrations.

Every number is checked against a plain loop written here (ECE, Brier, NLL and AURC of a score
against correctness), and the recalibrations against scikit-learn's.
"""

import json
import math

import numpy as np
import pytest

from calibkit.lm.generations import (
    apply_score_map,
    fit_score_map,
    generations_report,
    parse_confidence,
    read_generations,
    recalibration_resplits,
    verbalized_confidence,
)
from calibkit.metrics.decomposition import binary_decomposition


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def answers(n=400, seed=0):
    """Rows of the generations format: two tasks, a well-calibrated and an over-confident source."""
    rng = np.random.default_rng(seed)
    truth = rng.uniform(0.05, 0.95, n)  # the chance each answer is right
    right = (rng.uniform(size=n) < truth).astype(int)
    rows = []
    for i in range(n):
        rows.append(
            {
                "task": "trivia" if i % 3 else "math",
                "id": f"q{i}",
                "question": f"question {i}",
                "answer": f"answer {i}. Confidence: {round(100 * truth[i])}%",
                "correct": int(right[i]),
                "judge": float(truth[i]),
                "overconfident": float(np.sqrt(truth[i])),
            }
        )
    rows[min(5, n - 1)]["judge"] = None  # the judge gave no score here
    return rows


# -- plain-loop references -------------------------------------------------------------------


def ece_loop(p, y, bins=15):
    total = 0.0
    for b in range(bins):
        inside = [i for i in range(len(p)) if (b == 0 and p[i] <= 1 / bins) or (b / bins < p[i] <= (b + 1) / bins)]
        if inside:
            total += abs(sum(y[i] for i in inside) - sum(p[i] for i in inside))
    return total / len(p)


def aurc_loop(p, y):
    order = sorted(range(len(p)), key=lambda i: -p[i])
    risks, wrong = [], 0
    for k, i in enumerate(order, start=1):
        wrong += 1 - y[i]
        risks.append(wrong / k)
    return sum(risks) / len(risks)


def test_each_source_equals_a_plain_loop(tmp_path):
    rows = answers()
    data = read_generations(write_jsonl(tmp_path / "gen.jsonl", rows))
    report = generations_report(data)
    for source in ("judge", "overconfident"):
        kept = [r for r in rows if r[source] is not None]
        p, y = [r[source] for r in kept], [r["correct"] for r in kept]
        got = report["pooled"]["sources"][source]
        assert got["answers"] == len(kept) and got["without"] == pytest.approx(1 - len(kept) / len(rows))
        assert got["ece"] == pytest.approx(ece_loop(p, y), rel=1e-9)
        assert got["brier"] == pytest.approx(np.mean([(a - b) ** 2 for a, b in zip(p, y)]), rel=1e-9)
        nll = -np.mean([math.log(a) if b else math.log(1 - a) for a, b in zip(p, y)])
        assert got["nll"] == pytest.approx(nll, rel=1e-9)
        assert got["aurc"] == pytest.approx(aurc_loop(p, y), rel=1e-9)
        parts = binary_decomposition(np.array(p), np.array(y), "brier")  # equal to model-diagnostics' (tested there)
        assert got["miscalibration"] == parts["miscalibration"] and got["discrimination"] == parts["discrimination"]
        assert parts["score"] == pytest.approx(got["brier"], rel=1e-12)
    math_rows = [r for r in rows if r["task"] == "math"]
    assert report["tasks"]["math"]["questions"] == len(math_rows)
    assert report["tasks"]["math"]["accuracy"] == pytest.approx(np.mean([r["correct"] for r in math_rows]))
    got = report["tasks"]["math"]["sources"]["overconfident"]["ece"]
    assert got == pytest.approx(ece_loop([r["overconfident"] for r in math_rows], [r["correct"] for r in math_rows]))
    assert report["best"] == {"calibration": "judge", "ranking": report["best"]["ranking"], "rejection": "judge"}
    assert report["kinds"] == {"judge": "given", "overconfident": "given"}


@pytest.mark.parametrize("scored", [False, True])
def test_each_sources_rejection_metrics_read_the_correct_score_as_given(tmp_path, scored):
    """PRR, ROC AUC, AUGRC, ... against the ``correct`` column: a score where it is one, 0/1 otherwise."""
    from calibkit.lm.generations.report import REJECTION
    from calibkit.metrics.bootstrap import rejection_intervals
    from calibkit.metrics.rejection import rejection_metrics

    rows = answers(300)
    rng = np.random.default_rng(7)
    for r in rows:  # a ROUGE-like score: right answers score higher
        r["correct"] = round(0.55 * r["correct"] + 0.45 * float(rng.random()), 3) if scored else r["correct"]
    data = read_generations(write_jsonl(tmp_path / "gen.jsonl", rows))
    report = generations_report(data, bootstrap=40, seed=2, threshold=0.6)
    for source in ("judge", "overconfident"):
        kept = [r for r in rows if r[source] is not None]
        p, q = np.array([r[source] for r in kept]), np.array([r["correct"] for r in kept], dtype=float)
        got = report["pooled"]["sources"][source]
        want = rejection_metrics(p, q, threshold=0.6)
        for m in REJECTION:  # None where undefined (no share of the answers within the risk)
            assert (np.nan if got[m] is None else got[m]) == pytest.approx(want[m], abs=1e-12, nan_ok=True), m
        ci = rejection_intervals(p, q, bootstrap=40, seed=2, threshold=0.6)["intervals"]
        nan = lambda v: np.nan if v is None else v  # noqa: E731
        assert all([nan(v) for v in got["intervals"][m]] == pytest.approx(list(ci[m]), nan_ok=True) for m in REJECTION)
        assert ("aurc" in got["intervals"]) is not scored  # AURC reads right/wrong: its interval where they agree
        if not scored:
            assert got["aurc"] == pytest.approx(want["aurc"], abs=1e-12)
    prr = {s: v["prr"] for s, v in report["pooled"]["sources"].items()}
    assert report["best"]["rejection"] == max(prr, key=prr.get)


@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_correctness_written_as_words_reads_true_as_1_and_false_as_0(tmp_path, suffix):
    words = ["true", "false", "True", " FALSE ", "false", "TRUE"]
    rows = [{"id": f"q{i}", "answer": f"a{i}", "correct": w, "judge": 0.5} for i, w in enumerate(words)]
    path = tmp_path / f"gen.{suffix}"
    if suffix == "jsonl":  # JSON strings: the reader looks the word up
        write_jsonl(path, rows + [{"id": "q6", "answer": "a6", "correct": "0", "judge": 0.5}])
    else:  # pyarrow reads a column of true/false as booleans
        path.write_text(
            "id,answer,correct,judge\n" + "".join(f"{r['id']},{r['answer']},{r['correct'].strip()},0.5\n" for r in rows)
        )
    got = read_generations(path).correct.tolist()
    assert got == [1.0, 0.0, 1.0, 0.0, 0.0, 1.0] + ([0.0] if suffix == "jsonl" else [])


def test_a_score_correctness_is_thresholded(tmp_path):
    rows = answers(60)
    for r in rows:
        r["correct"] = 0.7 if r["correct"] else 0.2  # e.g. an F1
    data = read_generations(write_jsonl(tmp_path / "gen.jsonl", rows))
    at_half = generations_report(data, threshold=0.5)["pooled"]["accuracy"]
    assert at_half == pytest.approx(np.mean([r["correct"] > 0.5 for r in rows]))
    assert generations_report(data, threshold=0.8)["pooled"]["accuracy"] == 0.0
    with pytest.raises(ValueError, match="`threshold` must be a number in"):
        generations_report(data, threshold=0)


# -- verbalized confidence ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Paris. Confidence: 80%", 0.8),
        ("Paris\nConfidence: 80", 0.8),
        ("Paris\nconfidence level = 0.35", 0.35),
        ("Paris. Confidence is 7/10.", 0.7),
        ("Paris (confidence: 3 out of 4)", 0.75),
        ("Paris. I am 95 percent sure.", 0.95),
        ("Paris\n60%", 0.6),
        ("Confidence: 10%. On reflection: Paris. Confidence: 90%", 0.9),  # the last one counts
        ("The answer is 0.5", None),
        ("It grew by 40% last year", None),  # a percentage in a sentence is no confidence
        ("Paris", None),
        ("Paris\n0.8", None),  # a bare number on its own line may be the answer: never read
        ("Paris\n80", None),
        ("What is 6 x 7?\n42", None),
    ],
)
def test_verbalized_forms(text, expected):
    got = parse_confidence(text)
    assert (math.isnan(got) and expected is None) or got == pytest.approx(expected)


def test_verbalized_refusals_and_words():
    with pytest.raises(ValueError, match="above 100"):
        parse_confidence("Confidence: 120%")
    with pytest.raises(ValueError, match="above 100"):
        parse_confidence("Confidence: 300")
    with pytest.raises(ValueError, match=r"gen.jsonl, row 1: confidence '12/10' is above 100%"):
        verbalized_confidence(["Confidence: 50%", "12/10"], ["gen.jsonl, row 0", "gen.jsonl, row 1"])
    assert math.isnan(parse_confidence("Paris (confidence: high)"))  # words only with a mapping
    assert parse_confidence("Paris (confidence: high)", {"high": 0.9}) == 0.9
    with pytest.raises(ValueError, match="`words`: the confidence of 'high' must be a number in"):
        verbalized_confidence(["x"], ["r0"], {"high": 9})


# -- recalibration ----------------------------------------------------------------------------


def test_recalibration_maps_equal_scikit_learn():
    from sklearn.isotonic import IsotonicRegression
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(1)
    s = rng.uniform(0.01, 0.99, 500)
    y = (rng.uniform(size=500) < s**2).astype(float)
    test = np.linspace(0.001, 0.999, 97)
    platt = fit_score_map("platt", s, y)
    logit = lambda v: np.log(v) - np.log1p(-v)  # noqa: E731
    reference = LogisticRegression(C=1e12, tol=1e-12, max_iter=10_000).fit(logit(s)[:, None], y)
    np.testing.assert_allclose(
        apply_score_map(platt, test), reference.predict_proba(logit(test)[:, None])[:, 1], rtol=1e-6
    )
    iso = IsotonicRegression(out_of_bounds="clip").fit(s, y)
    np.testing.assert_allclose(apply_score_map(fit_score_map("isotonic", s, y), test), iso.predict(test), atol=1e-12)
    hist = apply_score_map(fit_score_map("histogram", s, y), test)
    for value, t in zip(hist, test):  # a plain loop: the share of right answers in the bin of t
        b = max(math.ceil(t * 15) - 1, 0)
        inside = [yy for ss, yy in zip(s, y) if max(math.ceil(ss * 15) - 1, 0) == b]
        assert value == pytest.approx(np.mean(inside) if inside else (b + 0.5) / 15)


def test_recalibrating_an_over_confident_source_holds(tmp_path):
    data = read_generations(write_jsonl(tmp_path / "gen.jsonl", answers(600, seed=2)))
    out = recalibration_resplits(data, sources=["overconfident", "judge"], resplits=10)
    verdicts = {v["claim"]: v["verdict"] for v in out["verdicts"]}
    assert verdicts["isotonic-recalibrated overconfident lowers ECE below raw overconfident"] == "holds"
    assert verdicts["platt-recalibrated overconfident lowers ECE below raw overconfident"] == "holds"
    assert out["values"]["overconfident"]["raw"]["ece"].shape == (10,)


# -- readers and bad input --------------------------------------------------------------------


def harness_samples(path, filters=("none",), metric="exact_match"):
    """A generate_until samples file as lm-evaluation-harness 0.4 writes it (values as strings)."""
    lines = []
    for f in filters:
        for i, (answer, right) in enumerate([("Paris. Confidence: 90%", 1), ("Lyon. Confidence: 60%", 0)]):
            lines.append(
                {
                    "doc_id": i, "doc": {"q": f"q{i}"}, "target": "Paris",
                    "arguments": {"gen_args_0": {"arg_0": f"Question {i}?", "arg_1": {"until": ["\n"]}}},
                    "resps": [[answer]], "filtered_resps": [answer.split(".")[0] if f != "none" else answer],
                    "filter": f, "metrics": [metric], metric: right,
                }
            )  # fmt: skip
    return write_jsonl(path, lines)


def test_harness_samples_are_read_as_the_harness_writes_them(tmp_path):
    file = harness_samples(tmp_path / "samples_capitals_2026-11-27T10-00-00.000000.jsonl")
    data = read_generations(tmp_path)
    assert data.task.tolist() == ["capitals", "capitals"] and data.ids.tolist() == ["0", "1"]
    assert data.correct.tolist() == [1.0, 0.0] and data.questions == ["Question 0?", "Question 1?"]
    two = harness_samples(tmp_path / "other" / "samples_x_2026-11-27T10-00-00.jsonl", filters=("strict", "flex"))
    with pytest.raises(ValueError, match=r"holds the filters \['strict', 'flex'\]: name one"):
        read_generations(two)
    picked = read_generations(two, harness_filter="flex")
    assert picked.answers == ["Paris", "Lyon"] and picked.raw == ["Paris. Confidence: 90%", "Lyon. Confidence: 60%"]
    assert len(read_generations(file)) == 2


@pytest.mark.parametrize(
    "change,message",
    [
        ({"judge": 1.3}, r"gen.jsonl, row 2: confidence 'judge' = 1.3 is outside \[0, 1\]"),
        ({"judge": 80}, r"is outside \[0, 1\] \(a percentage\? divide the column by 100\)"),
        ({"correct": 2}, r"row 2: correct = 2 is neither 0/1 nor a score in \[0, 1\]"),
        ({"answer": "  "}, r"row 2: the answer is empty"),
        ({"id": "q0"}, r"row 0 and .*row 2: two answers to question id 'q0' of task 'math'"),
        ({"judge": "high"}, r"column 'judge' is string: every column besides"),
    ],
)
def test_bad_input_names_the_file_and_the_row(tmp_path, change, message):
    rows = answers(6)
    rows[2].update(change)
    if "id" in change:
        rows[2]["task"] = rows[0]["task"]
    if change.get("judge") == "high":
        for r in rows:
            r["judge"] = "high"
    with pytest.raises(ValueError, match=message):
        read_generations(write_jsonl(tmp_path / "gen.jsonl", rows))


def test_missing_columns_and_unknown_files(tmp_path):
    rows = [{k: v for k, v in r.items() if k != "id"} for r in answers(4)]
    with pytest.raises(ValueError, match=r"^`location`: .*gen.jsonl has no column 'id'"):
        read_generations(write_jsonl(tmp_path / "gen.jsonl", rows))
    with pytest.raises(ValueError, match=r"^`location`: no such file or folder: "):  # the argument: not --generations
        read_generations(tmp_path / "nowhere")
    old = tmp_path / "samples_t_2026-01-01T00-00-00.jsonl"
    old.write_text(
        json.dumps({"doc_id": 0, "arguments": {"gen_args_0": {"arg_0": "q", "arg_1": {}}}, "filtered_resps": ["a"]})
        + "\n"
    )
    with pytest.raises(ValueError, match="unknown lm-evaluation-harness version"):
        read_generations(old)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match="is neither an lm-evaluation-harness generate_until samples file"):
        read_generations(tmp_path / "notes.txt")


# -- white-box sources ------------------------------------------------------------------------

WORDS = ["question", "possible", "answer", "is", "the", "a", "b", "true", "false", "paris", "lyon", "capital", "of"]


def tiny_lm_and_tokenizer(folder):
    from transformers import BertTokenizer, GPT2Config, GPT2LMHeadModel

    (folder / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, ":", "(", ")", "?", "."]) + "\n"
    )
    tokenizer = BertTokenizer(str(folder / "vocab.txt"))  # positional: vocab_file in transformers 4, vocab in 5
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=128, n_embd=16, n_layer=1, n_head=2)
    return GPT2LMHeadModel(config).eval(), tokenizer


def test_whitebox_sources_equal_a_per_answer_loop(tmp_path):
    import torch

    from calibkit.lm.generations.whitebox import PTRUE_PROMPT, whitebox_confidence

    model, tokenizer = tiny_lm_and_tokenizer(tmp_path)
    questions = ["the capital of paris ?", "capital ?", "the capital of lyon is the capital ?"] * 4
    answers = ["paris", "lyon lyon .", "the capital of paris is lyon"] * 3 + ["a", "b", "true"]
    got = whitebox_confidence(model, tokenizer, questions, answers)
    true_id, false_id = tokenizer.convert_tokens_to_ids(["true", "false"])
    for i, (q, a) in enumerate(zip(questions, answers)):  # one answer at a time, no padding
        prompt = tokenizer(q)["input_ids"]
        reply = tokenizer(a, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([prompt + reply])).logits[0].double(), dim=-1)
        token_lp = [float(logp[len(prompt) + t - 1, reply[t]]) for t in range(len(reply))]
        assert got["sequence"][i] == pytest.approx(math.exp(sum(token_lp)), rel=1e-6)
        assert got["sequence_normalized"][i] == pytest.approx(math.exp(np.mean(token_lp)), rel=1e-6)
        ids = tokenizer(PTRUE_PROMPT.format(q=q, a=a))["input_ids"]
        with torch.no_grad():
            p = torch.softmax(model(torch.tensor([ids])).logits[0, -1].double(), dim=-1)
        assert got["ptrue"][i] == pytest.approx(float(p[true_id] / (p[true_id] + p[false_id])), rel=1e-6)


def test_the_library_doors_refuse_bad_arguments_by_name(tmp_path):
    from calibkit.lm.generations.whitebox import whitebox_confidence

    data = read_generations(write_jsonl(tmp_path / "gen.jsonl", answers(40)))
    with pytest.raises(
        ValueError,
        match=r"`sources`: unknown confidence source 'nope'; known: judge \(in the data\), overconfident \(in the data",
    ):
        generations_report(data, sources=["nope"])
    with pytest.raises(ValueError, match="the generations have no confidence source"):
        generations_report(data, sources=[])
    with pytest.raises(ValueError, match="`threshold` must be a number in"):
        generations_report(data, threshold=True)
    with pytest.raises(ValueError, match="`resplits` must be an integer"):
        recalibration_resplits(data, resplits=0)
    with pytest.raises(ValueError, match=r"`methods` has unknown names \['beta'\]"):
        recalibration_resplits(data, methods=("platt", "beta"))
    with pytest.raises(ValueError, match="unknown confidence source 'nope'"):
        recalibration_resplits(data, sources=["nope"])
    with pytest.raises(ValueError, match="`method` must be one of"):
        fit_score_map("beta", np.array([0.5]), np.array([1.0]))
    with pytest.raises(ValueError, match="no answer with a confidence to fit"):
        fit_score_map("platt", np.array([]), np.array([]))
    model, tokenizer = tiny_lm_and_tokenizer(tmp_path)
    with pytest.raises(
        ValueError, match="`sources`: unknown confidence source 'entropy'; known: sequence, sequence_normalized, ptrue$"
    ):
        whitebox_confidence(model, tokenizer, ["q"], ["a"], ("entropy",))
    with pytest.raises(ValueError, match="2 questions for 1 answers"):
        whitebox_confidence(model, tokenizer, ["q", "r"], ["a"])
    with pytest.raises(ValueError, match="answer 0 has no token"):
        whitebox_confidence(model, tokenizer, ["q"], [""], ("sequence",))


def test_next_token_logprobs_equal_answer_logprobs_of_one_token_answers(tmp_path):
    """Scoring one-token choices from the prompt's next-token distribution (one pass per prompt,
    batched by length) gives answer_logprobs' numbers on each choice."""
    from calibkit.lm.generations.whitebox import answer_logprobs, next_token_logprobs

    model, tokenizer = tiny_lm_and_tokenizer(tmp_path)
    prompts = ["capital ?", "the capital of paris is the capital of lyon ?", "a", "true or false ?"] * 3
    choices = [["paris", "lyon"], ["true", "false", "a"], ["b", "paris", "lyon", "true"], ["false"]] * 3
    ids = [tokenizer.convert_tokens_to_ids(cs) for cs in choices]
    got = next_token_logprobs(model, tokenizer, prompts, ids)
    sums, counts = answer_logprobs(model, tokenizer, [p for p, cs in zip(prompts, choices) for _ in cs],
                                   [c for cs in choices for c in cs])  # fmt: skip
    assert counts.tolist() == [1] * len(counts)
    np.testing.assert_allclose(np.concatenate(got), sums, rtol=0, atol=1e-5)


def test_the_llm_demos_table_shows_prr_and_augrc_beside_ece_and_aurc(tmp_path):
    from calibkit.demos.llm_text import number, source_table

    report = generations_report(read_generations(write_jsonl(tmp_path / "gen.jsonl", answers(200))))
    head, _, *rows = source_table(report)
    names = [c.strip() for c in head.strip("|").split("|")]
    assert names == ["source", "answers", "mean confidence", "ece", "brier", "nll", "aurc", "prr", "augrc"]
    for line, (source, row) in zip(rows, report["pooled"]["sources"].items()):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[0] == source and cells[-2:] == [number(row["prr"]), number(row["augrc"])]


def test_answer_quality_exact_match_after_normalisation_and_a_callable_hook():
    from calibkit.lm.generations.quality import answer_quality
    from calibkit.metrics.rejection import rejection_metrics

    answers, gold = ["The Eiffel Tower!", "three", "a cat", "Rome"], ["eiffel tower", "3", "dog", "rome"]
    assert answer_quality(answers, gold).tolist() == [1.0, 1.0, 0.0, 1.0]
    halves = answer_quality(answers, gold, lambda a, g: [0.5] * len(a))  # the hook: ROUGE-L, a judge, batched
    assert halves.tolist() == [0.5] * 4
    quality = answer_quality(answers, gold)  # what the rejection metrics read
    assert rejection_metrics([0.9, 0.8, 0.1, 0.7], quality)["prr"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "args, message",
    [
        ((["a"], ["a", "b"]), r"`gold` has 2 answers for 1 `answers`"),
        ((["a"], ["a"], "bleu"), r"`measure`: unknown measure 'bleu'; known: exact_match, or a callable"),
        ((["a"], ["a"], 3), r"`measure` must be one of exact_match or a callable"),
        ((["a", "b"], ["a", "b"], lambda a, g: [1.0]), r"`measure` returned shape \(1,\) for 2 answers"),
        ((["a"], ["a"], lambda a, g: [1.5]), r"`measure` must score in \[0, 1\]; answer 0 scored 1.5"),
        ((["a"], ["a"], lambda a, g: ["x"]), r"`measure` returned no numbers"),
    ],
)
def test_answer_quality_refuses_bad_input_naming_the_argument(args, message):
    from calibkit.lm.generations.quality import answer_quality

    with pytest.raises(ValueError, match=message):
        answer_quality(*args)
