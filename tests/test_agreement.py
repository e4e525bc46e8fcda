"""Agreement of sampled answers: normalisation, grouping, the vectorised counts against a plain loop, and logs.

The real log is lm-evaluation-harness's own: the demo's task (``calibkit.demos.llm_harness``) run
with ``repeats: 5`` and ``do_sample`` on a tiny random GPT-2 (the model of
tests/test_generations_harness.py).
"""

import json
import math
from collections import Counter

import numpy as np
import pytest

from calibkit.cli import main
from calibkit.lm.generations import (
    agreement_scores,
    answer_agreement,
    generations_report,
    group_answers,
    normalize_answer,
    read_agreement,
    read_generations,
)
from calibkit.lm.sources import names

WORDS = ["Paris", "paris.", "The Paris", "Lyon", "4", "four", "4.0", "Four!", "40", "3.5", "3.50", "an apple", "Apple"]


def plain_loop(samples, key=normalize_answer, same=None):
    """One question at a time: groups in order first seen, the largest first-seen on ties, its share and entropy."""
    out = {"answer": [], "agreement": [], "entropy": [], "groups": []}
    for answers in samples:
        heads, sizes, firsts = [], [], []
        for a in answers:
            for g, head in enumerate(heads):
                if same(head, a) if same else key(head) == key(a):
                    sizes[g] += 1
                    break
            else:
                heads.append(a)
                sizes.append(1)
                firsts.append(a)
        best = max(range(len(sizes)), key=lambda g: (sizes[g], -g))
        k = len(answers)
        out["answer"].append(firsts[best])
        out["agreement"].append(sizes[best] / k)
        out["entropy"].append(-sum(s / k * math.log(s / k) for s in sizes))
        out["groups"].append(len(sizes))
    return out


def random_samples(n, seed=0, words=WORDS):
    rng = np.random.default_rng(seed)
    return [[str(w) for w in rng.choice(words, rng.integers(1, 8))] for _ in range(n)]


def check_against_loop(got, want):
    assert got["answer"] == want["answer"]
    np.testing.assert_allclose(got["agreement"], want["agreement"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got["entropy"], want["entropy"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got["semantic_entropy"], np.exp(-np.array(want["entropy"])), rtol=0, atol=1e-12)
    assert got["groups"].tolist() == want["groups"]


@pytest.mark.parametrize(
    "a,b",
    [
        ("3.0", "3"), ("3.50", "3.5"), ("1,000", "1000"), ("The Four.", "4"), ("four legs", "4 legs"),
        ("An apple!", "apple"), ("  PARIS ", "paris"), ("twenty", "20"), ("-2", "-2.0"), ("don't", "dont"),
        ("the answer is 3.", "answer is 3"),
    ],
)  # fmt: skip
def test_normalisation_makes_these_agree(a, b):
    assert normalize_answer(a) == normalize_answer(b)


@pytest.mark.parametrize("a,b", [("3.1", "3"), ("4", "40"), ("3.5", "35"), ("paris", "parish"), ("1,000", "1 000")])
def test_normalisation_keeps_these_apart(a, b):
    assert normalize_answer(a) != normalize_answer(b)


def test_normalised_forms():
    assert normalize_answer("The 3.0 Apples, a dozen!") == "3 apples dozen"
    assert normalize_answer("?!") == ""  # punctuation alone agrees with nothing but itself
    assert normalize_answer("2,5") == "2 5"  # not a thousands separator: two numbers


def test_the_counts_equal_a_plain_loop():
    samples = random_samples(300)
    check_against_loop(answer_agreement(samples), plain_loop(samples))
    exact = answer_agreement(samples, key=str)
    check_against_loop(exact, plain_loop(samples, key=str))
    assert (exact["groups"] >= answer_agreement(samples)["groups"]).all()  # normalising only merges groups


def test_a_users_key_and_a_users_same_test():
    samples = random_samples(200, seed=1)
    first_letter = lambda a: normalize_answer(a)[:1]  # noqa: E731
    check_against_loop(answer_agreement(samples, key=first_letter), plain_loop(samples, key=first_letter))

    def close(a, b):  # not transitive: the answer joins the first group whose first answer it is close to
        x, y = normalize_answer(a), normalize_answer(b)
        return x == y or (x[:1].isdigit() and y[:1].isdigit() and abs(len(x) - len(y)) <= 1)

    check_against_loop(answer_agreement(samples, same=close), plain_loop(samples, same=close))
    calls = []
    answer_agreement([["a", "b", "c"]], same=lambda a, b: calls.append((a, b)) or False)
    assert calls == [("a", "b"), ("a", "c"), ("b", "c")]  # each new answer against each group's first


def test_scores_take_any_labels_and_break_ties_by_first_seen():
    question = np.array([0, 0, 0, 0, 1, 1, 1, 2])
    label = np.array([7, 3, 3, 7, 9, 5, 5, 0])
    s = agreement_scores(question, label)
    assert s["majority"].tolist() == [0, 5, 7]  # question 0: 7 and 3 tie, 7 seen first
    assert s["agreement"].tolist() == [0.5, 2 / 3, 1.0] and s["groups"].tolist() == [2, 2, 1]
    np.testing.assert_allclose(s["entropy"], [math.log(2), -(1 / 3 * math.log(1 / 3) + 2 / 3 * math.log(2 / 3)), 0])
    q, lab = group_answers([["x", "y", "y", "x"], ["z", "w", "w"], ["v"]], key=str)
    dense = agreement_scores(q, lab)
    for name in ("majority", "agreement", "entropy", "groups", "samples"):
        np.testing.assert_array_equal(dense[name], s[name])


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: group_answers([["a"]], key=str, same=lambda a, b: True), "give `key` or `same`, not both"),
        (lambda: group_answers([["a"]], key="lower"), "`key` must be a callable, got str"),
        (lambda: group_answers([["a"], []]), "question 1 has no list of answers"),
        (lambda: group_answers(["abc"]), "question 0 has no list of answers: 'abc'"),
        (lambda: agreement_scores(np.array([0, 2]), np.array([0, 0])), "question 1 has no sample"),
        (lambda: agreement_scores(np.array([0, 0]), np.array([0])), "differ in shape"),
        (lambda: read_agreement(".", answer="first"), "`answer` must be one of"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def sampled_table(n=60, seed=2):
    """Rows of one sample each: repeated ids, a correct per sample (right when it says the gold), a judge score."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        gold = str(rng.choice(["Paris", "4"]))
        for _ in range(rng.integers(2, 7)):
            said = str(rng.choice(WORDS))
            right = normalize_answer(said) == normalize_answer(gold)
            rows.append(
                {"task": "trivia", "id": f"q{i}", "answer": said, "correct": int(right), "judge": rng.uniform()}
            )
    return rows


def test_a_table_of_repeated_ids(tmp_path, capsys):
    rows = sampled_table()
    file = write_jsonl(tmp_path / "samples.jsonl", rows)
    data = read_agreement(file)
    ids = list(dict.fromkeys(r["id"] for r in rows))
    by_id = {i: [r for r in rows if r["id"] == i] for i in ids}
    want = plain_loop([[r["answer"] for r in by_id[i]] for i in ids])
    assert data.ids.tolist() == ids and data.answers == want["answer"]
    np.testing.assert_allclose(data.confidence["agreement"], want["agreement"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(data.confidence["semantic_entropy"], np.exp(-np.array(want["entropy"])), atol=1e-12)
    first_row = [next(r for r in by_id[i] if r["answer"] == a) for i, a in zip(ids, want["answer"])]
    assert data.correct.tolist() == [r["correct"] for r in first_row]  # the majority answer's own sample
    np.testing.assert_array_equal(data.confidence["judge"], [r["judge"] for r in first_row])
    assert data.kinds["agreement"] == "samples" and data.kinds["judge"] == "given"
    with pytest.raises(ValueError, match="`read_agreement` reads them"):
        read_generations(file)  # one answer a question: the hint names the way in
    with pytest.raises(ValueError, match="is a table"):
        read_agreement(file, answer="scored")
    argv = ["generations", "--answers", str(file), "--confidence", "agreement,semantic_entropy,judge", "--json"]
    assert main([*argv, "--resplits", "0"]) == 0
    got = json.loads(capsys.readouterr().out)["pooled"]
    assert got["questions"] == 60 and got["accuracy"] == pytest.approx(np.mean(data.correct))
    assert set(got["sources"]) == {"agreement", "semantic_entropy", "judge"}


# the harness's own log: the demo's task with repeats on a tiny random GPT-2 (about 10 s)
REPEATS = 5


@pytest.fixture(scope="module")
def repeats_log(tmp_path_factory):
    """The demo's agreement section on a tiny GPT-2: its harness log, the log's samples and the section."""
    pytest.importorskip("lm_eval")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from calibkit.demos.llm_agreement import agreement_section
    from calibkit.demos.llm_answers import is_right
    from tests.test_generations_harness import WORDS as VOCAB
    from tests.test_generations_harness import build_model

    folder = tmp_path_factory.mktemp("lm_eval_repeats")
    rng = np.random.default_rng(0)
    examples = [{"input": " ".join(rng.choice(VOCAB, 4)), "target_scores": {"alpha": 1, "beta": 0}} for _ in range(10)]
    path = build_model(folder, [e["input"] for e in examples])
    model, tokenizer = AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)
    # a random GPT-2's next-token logits are nearly flat: a low temperature makes its samples agree, but not always
    part = agreement_section(
        model, tokenizer, examples=examples, shots="", is_right=is_right, resplits=3, seed=0, folder=folder,
        repeats=REPEATS, temperature=0.002,
    )  # fmt: skip
    (file,) = (folder / "output").rglob("samples_*.jsonl")
    return folder / "output", [json.loads(line) for line in file.read_text().splitlines()], part


def test_a_harness_repeats_log_equals_a_plain_loop(repeats_log):
    out, samples, _ = repeats_log
    samples = sorted(samples, key=lambda s: s["doc_id"])
    texts = [s["resps"][0] for s in samples]
    assert all(len(t) == REPEATS for t in texts)
    length_is_even = lambda answer, target: float(len(answer) % 2 == 0)  # noqa: E731  any metric of (answer, target)
    for key in (normalize_answer, str):
        data = read_agreement(out, key=key, score=length_is_even)
        data = data.subset(np.argsort(data.ids.astype(int)))
        want = plain_loop(texts, key=key)
        assert data.answers == want["answer"]
        np.testing.assert_allclose(data.confidence["agreement"], want["agreement"], rtol=0, atol=1e-12)
        np.testing.assert_allclose(data.confidence["semantic_entropy"], np.exp(-np.array(want["entropy"])), atol=1e-12)
        assert data.correct.tolist() == [length_is_even(a, s["target"]) for a, s in zip(want["answer"], samples)]
        assert data.questions == [s["arguments"]["gen_args_0"]["arg_0"] for s in samples]
    exact = plain_loop(texts, key=str)
    assert 1 < np.mean(exact["groups"]) < REPEATS  # the samples agree on some questions, not all


def test_the_harness_scored_answer_and_its_agreement(repeats_log):
    out, samples, _ = repeats_log
    samples = sorted(samples, key=lambda s: s["doc_id"])
    data = read_agreement(out, key=str, answer="scored")
    data = data.subset(np.argsort(data.ids.astype(int)))
    firsts = [s["filtered_resps"][0] for s in samples]
    assert firsts == [s["resps"][0][0] for s in samples]  # the default filter, take_first
    assert data.answers == firsts
    assert data.correct.tolist() == [s["holds_gold"] for s in samples]  # as the harness scored it
    shares = [Counter(s["resps"][0])[f] / REPEATS for s, f in zip(samples, firsts)]
    np.testing.assert_allclose(data.confidence["agreement"], shares, rtol=0, atol=1e-12)
    majority = plain_loop([s["resps"][0] for s in samples], key=str)["answer"]
    outside = sum(m != f for m, f in zip(majority, firsts))
    assert outside > 0  # the first sample is not always the majority: then the harness did not score the majority
    with pytest.raises(ValueError, match=f"{outside} of 10 questions are so: log the task with a majority_vote"):
        read_agreement(out, key=str)


def test_the_command_reads_a_repeats_log(repeats_log, capsys):
    out, samples, _ = repeats_log
    argv = ["generations", "--answers", str(out), "--confidence", "agreement,semantic_entropy"]
    assert main([*argv, "--agreement-answer", "scored", "--json", "--resplits", "0"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["pooled"]["questions"] == 10 and got["kinds"]["semantic_entropy"] == "samples"
    scored = read_agreement(out, answer="scored")
    assert got["pooled"]["sources"]["agreement"]["mean_confidence"] == pytest.approx(
        scored.confidence["agreement"].mean()
    )
    # the majority (the default): normalised, this log's first samples fall in their majority groups
    majority = read_agreement(out)
    by_id = {str(sample["doc_id"]): sample for sample in samples}
    assert majority.correct.tolist() == [by_id[i]["holds_gold"] for i in majority.ids]  # the harness's metric, read
    assert main([*argv, "--json", "--resplits", "0"]) == 0
    got = json.loads(capsys.readouterr().out)["pooled"]["sources"]
    assert got["agreement"]["mean_confidence"] == pytest.approx(majority.confidence["agreement"].mean())
    with pytest.raises(SystemExit):  # argparse's choices
        main([*argv, "--agreement-answer", "first"])
    assert "invalid choice: 'first'" in capsys.readouterr().err


def test_the_demo_section_judges_agreement_beside_the_sequence_probability(repeats_log):
    from calibkit.demos.llm_answers import is_right

    out, samples, part = repeats_log
    data = read_agreement(out, score=lambda answer, gold: float(is_right(answer, gold)))
    data = data.subset(np.argsort(data.ids.astype(int)))
    got = part["json"]
    assert got["answers"] == data.answers and got["accuracy"] == pytest.approx(data.correct.mean())
    assert got["repeats"] == REPEATS and got["unanimous"] == np.mean(data.confidence["agreement"] == 1)
    sources = got["report"]["pooled"]["sources"]
    assert list(sources) == [*names("samples"), "sequence", "sequence_normalized"]  # every source of the samples
    assert all(row["answers"] == 10 for row in sources.values())
    assert sources["agreement"]["ece"] == pytest.approx(
        generations_report(data)["pooled"]["sources"]["agreement"]["ece"]
    )
    # each source of the samples against each sequence source on AURC; the counts' on ECE too
    assert len(got["claims"]) == len(names("samples")) * 2 + 2 * 2
    assert got["best_ranking"] == min(names("samples"), key=lambda s: sources[s]["aurc"])
    assert f"{got['best_ranking']} ranks the answers best" in part["text"] and "| eigv |" in part["text"]
    assert all(sentence.startswith("sampled answers: ") for _, sentence in part["verdicts"])
    assert "| agreement |" in part["text"] and "| sequence |" in part["text"]
