"""Consistency scores of sampled answers: LM-Polygraph 0.7.0's numbers, the similarities, and bad input.

LM-Polygraph's estimators ran on fixed texts and matrices in tests/data/lm_polygraph/consistency.json,
written by make_consistency.py beside it (``.ci/run`` installs lm-polygraph ``--no-deps`` and reruns
it with ``--check``): these tests need no LM-Polygraph and never skip. ROUGE-L is checked against
rouge_score (installed with lm-eval, a test dependency) and the batched scores against a plain loop.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from calibkit.lm.generations import read_agreement
from calibkit.lm.generations.consistency import (
    CONSISTENCY,
    consistency_confidences,
    consistency_scores,
    consistency_uncertainties,
    graph_uncertainties,
    lexical_similarity,
)
from calibkit.lm.generations.similarity import (
    exact_matrices,
    jaccard_matrices,
    rouge_l_matrices,
    rouge_tokens,
    similarity_matrices,
)

STORED = json.loads((Path(__file__).parent / "data" / "lm_polygraph" / "consistency.json").read_text())
INPUTS, OUTPUTS = STORED["inputs"], STORED["outputs"]
BATCHES = range(len(STORED["samples"]))
TOL = 1e-9


def test_the_stored_inputs_are_the_scripts():
    import importlib.util

    path = Path(__file__).parent / "data" / "lm_polygraph" / "make_consistency.py"
    spec = importlib.util.spec_from_file_location("make_consistency", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)  # numpy only: LM-Polygraph is imported when its estimators run
    assert script.inputs() == INPUTS and list(script.SAMPLES) == STORED["samples"]
    assert STORED["lm_polygraph"] == "0.7.0" and all(len(v) == len(BATCHES) for v in OUTPUTS.values())


def close(got, want):
    np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float), rtol=0, atol=TOL)


@pytest.mark.parametrize("b", BATCHES)
def test_texts_give_lm_polygraphs_lexsim_and_jaccard_graph_scores(b):
    texts = INPUTS["texts"][b]
    u = consistency_uncertainties(texts, similarity="jaccard", stem=True)  # LexicalSimilarity stems
    close(u["lexsim_rouge_l"], OUTPUTS["LexicalSimilarity_rougeL"][b])
    close(jaccard_matrices(texts), OUTPUTS["Jaccard_matrix"][b])
    i, j = np.triu_indices(len(texts[0]), 1)
    close(u["lexsim_jaccard"], -np.asarray(OUTPUTS["Jaccard_matrix"][b])[:, i, j].mean(axis=1))
    close(u["eigv"], OUTPUTS["EigValLaplacian_Jaccard_score"][b])
    close(u["deg"], OUTPUTS["DegMat_Jaccard_score"][b])
    close(u["ecc"], OUTPUTS["Eccentricity_Jaccard_score"][b])


@pytest.mark.parametrize("prefix", ["", "onehot_"])
@pytest.mark.parametrize("b", BATCHES)
def test_nli_matrices_give_lm_polygraphs_graph_scores(b, prefix):
    entail, contra = np.array(INPUTS[f"{prefix}entail"][b]), np.array(INPUTS[f"{prefix}contra"][b])
    u = graph_uncertainties(entail, contra)
    close(u["num_sem_sets"], OUTPUTS[f"{prefix}NumSemSets"][b])
    close(u["kle"], OUTPUTS[f"{prefix}KernelLanguageEntropy"][b])
    for affinity, similarity in (("entail", entail), ("contra", 1 - contra)):
        u = graph_uncertainties(similarity)
        close(u["eigv"], OUTPUTS[f"{prefix}EigValLaplacian_{affinity}"][b])
        close(u["deg"], OUTPUTS[f"{prefix}DegMat_{affinity}"][b])
        close(u["ecc"], OUTPUTS[f"{prefix}Eccentricity_{affinity}"][b])


@pytest.mark.parametrize("b", BATCHES)
def test_a_callable_giving_the_nli_matrices_gives_the_same_numbers(b):
    texts = INPUTS["texts"][b]
    entail, contra = np.array(INPUTS["entail"][b]), np.array(INPUTS["contra"][b])
    calls = []

    def nli(answers):
        calls.append(len(answers))
        assert answers == texts  # one call: every question has the same number of answers
        return {"entail": entail, "contra": contra}

    u = consistency_uncertainties(texts, similarity=nli)
    assert calls == [len(texts)]
    for name in ("num_sem_sets", "kle", "eigv", "deg", "ecc"):
        close(u[name], OUTPUTS[{"num_sem_sets": "NumSemSets", "kle": "KernelLanguageEntropy"}.get(
            name, {"eigv": "EigValLaplacian_entail", "deg": "DegMat_entail", "ecc": "Eccentricity_entail"}.get(name)
        )][b])  # fmt: skip


def test_questions_of_different_sizes_are_batched_by_size_and_keep_their_order():
    texts = [q for batch in INPUTS["texts"] for q in batch]
    order = np.random.default_rng(0).permutation(len(texts))
    mixed = [texts[i] for i in order]
    sizes = []

    def jaccard(answers):
        sizes.append(len(answers[0]))
        return jaccard_matrices(answers)

    got = consistency_uncertainties(mixed, similarity=jaccard, stem=True)
    assert sorted(sizes) == sorted(STORED["samples"])  # one call a number of samples
    want = np.concatenate(OUTPUTS["EigValLaplacian_Jaccard_score"])[order]
    close(got["eigv"], want)
    close(got["lexsim_rouge_l"], np.concatenate(OUTPUTS["LexicalSimilarity_rougeL"])[order])


def rouge_reference(texts, stem):
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=stem)
    k = len(texts)
    out = np.eye(k)
    for i in range(k):
        for j in range(i + 1, k):
            out[i, j] = out[j, i] = scorer.score(texts[i], texts[j])["rougeL"].fmeasure
    return out


@pytest.mark.parametrize("stem", [False, True])
def test_rouge_l_equals_rouge_score_on_long_and_repetitive_answers(stem):
    rng = np.random.default_rng(1)
    words = ["the", "cat", "cats", "running", "runs", "sat", "on", "mat", "a", "Mat!", "dog", "4", "x-ray", ""]
    texts = [[" ".join(rng.choice(words, rng.integers(0, 40))) for _ in range(6)] for _ in range(25)]
    got = rouge_l_matrices(texts, stem=stem)
    want = np.stack([rouge_reference(t, stem) for t in texts])
    close(got, want)
    assert rouge_tokens("Running, cats!", stem=True) == ["run", "cat"]


def test_the_lcs_is_blocked_without_changing_it(monkeypatch):
    from calibkit.lm.generations import similarity

    texts = [[" ".join(f"w{i % 7}" for i in range(n)) for n in (3, 9, 14)]] * 5
    whole = rouge_l_matrices(texts)
    monkeypatch.setattr(similarity, "_PAIR_CELLS", 16)  # one pair at a time
    close(rouge_l_matrices(texts), whole)


def plain_graph(similarity):
    """One question at a time, written as the papers say: components by search, eigenvalues of one matrix."""
    k = similarity.shape[0]
    w = (similarity + similarity.T) / 2
    d = w.sum(axis=1)
    lap = np.eye(k) - w / np.sqrt(np.outer(d, d))
    values, vectors = np.linalg.eigh(lap)
    linked = (similarity > 0.5) & (similarity.T > 0.5)
    seen, sets = set(), 0
    for start in range(k):
        if start not in seen:
            sets += 1
            stack = [start]
            while stack:
                node = stack.pop()
                if node not in seen:
                    seen.add(node)
                    stack.extend(j for j in range(k) if linked[node, j] and j != node)
    kept = [vectors[:, m] for m in range(k) if values[m] < 0.9]
    return {
        "num_sem_sets": sets,
        "eigv": sum(max(0.0, 1 - v) for v in values),
        "deg": 1 - w.sum() / k**2,
        "ecc": np.sqrt(sum(np.sum((v - v.mean()) ** 2) for v in kept)),
    }


def test_batched_graph_scores_equal_one_question_at_a_time():
    rng = np.random.default_rng(2)
    s = rng.uniform(size=(30, 7, 7))
    got = graph_uncertainties(s)
    for q in range(30):
        for name, value in plain_graph(s[q]).items():
            assert got[name][q] == pytest.approx(value, abs=TOL), (q, name)


def test_exact_similarity_counts_meanings():
    texts = [["Paris", "paris.", "Lyon", "The Paris"], ["4", "four", "4.0", "Four!"], ["a", "b", "c", "d"]]
    assert exact_matrices(texts)[0].astype(int).tolist() == [[1, 1, 0, 1], [1, 1, 0, 1], [0, 0, 1, 0], [1, 1, 0, 1]]
    u = consistency_uncertainties(texts, similarity="exact")
    groups = np.array([2, 1, 4])
    close(u["num_sem_sets"], groups)
    close(u["eigv"], groups)  # a graph of cliques: one zero eigenvalue a clique
    close(u["ecc"] ** 2, groups - 1)
    c = consistency_scores(texts, similarity="exact")
    for name in ("num_sem_sets", "eigv", "ecc"):
        close(c[name], 1 / groups)  # one over the number of meanings, as the module says


def test_equal_scores_are_equal_after_the_eigendecompositions_rounding():
    rng = np.random.default_rng(4)
    texts = [[str(w) for w in rng.choice(["a", "b", "c", "d", "e"], 6)] for _ in range(300)]
    c = consistency_scores(texts, similarity="exact")
    # one over the number of meanings, three ways: equal numbers, so that AURC reads no rounding noise as a ranking
    assert (c["eigv"] == c["num_sem_sets"]).all() and (c["ecc"] == c["num_sem_sets"]).all()


def test_confidences_are_decreasing_maps_into_the_unit_interval():
    rng = np.random.default_rng(3)
    words = ["yes", "no", "maybe so", "yes indeed", "no way", "Yes."]
    texts = [[str(w) for w in rng.choice(words, 5)] for _ in range(200)]
    u = consistency_uncertainties(texts)
    c = consistency_confidences(u, np.full(200, 5))
    assert tuple(c) == CONSISTENCY
    for name in CONSISTENCY:
        assert ((c[name] >= 0) & (c[name] <= 1)).all(), name
        order = np.argsort(u[name], kind="stable")
        assert (np.diff(c[name][order]) <= 1e-12).all(), name  # more uncertain, less confident
    close(c["kle"], 5.0 ** -u["kle"])
    close(c["lexsim_jaccard"], -u["lexsim_jaccard"])
    close(c["deg"], 1 - u["deg"])


def test_empty_answers_follow_lm_polygraphs_conventions():
    texts = [["", "", "..."], ["", "Paris", "Paris"]]
    assert jaccard_matrices(texts)[0].tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]  # LM-Polygraph's Jaccard
    assert rouge_l_matrices(texts)[0].tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]  # rouge_score: no token, 0
    assert exact_matrices(texts)[0].tolist() == [[1, 1, 1], [1, 1, 1], [1, 1, 1]]  # normalised, all the empty answer
    c = consistency_scores(texts)
    assert c["lexsim_rouge_l"].tolist() == pytest.approx([0, 1 / 3])


def test_lexical_similarity_reads_the_upper_triangle():
    s = np.array([[[1, 0.2, 0.4], [0.9, 1, 0.6], [0.9, 0.9, 1]]])
    close(lexical_similarity(s), [-0.4])


# Bad input: one ValueError naming the argument.


def test_a_question_with_one_sample_is_refused_or_nan_with_a_warning(tmp_path):
    with pytest.raises(ValueError, match=r"^`samples`: question 1 has one sampled answer \(1 of 3 questions do\)"):
        consistency_scores([["a", "b"], ["a"], ["c", "c"]])
    got = consistency_scores([["a", "b"], ["a"], ["c", "c"]], single="nan")
    for name in CONSISTENCY:
        assert np.isnan(got[name][1]) and not np.isnan(got[name][[0, 2]]).any(), name
    rows = [{"id": i, "answer": a, "correct": 1} for i, a in (("0", "x"), ("0", "x y"), ("1", "z"))]
    file = tmp_path / "samples.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.warns(UserWarning, match=r"`samples`: 1 of 2 questions have one sampled answer: the consistency"):
        data = read_agreement(file)
    assert data.confidence["agreement"].tolist() == [0.5, 1.0]  # the counts' sources are defined with one
    assert np.isnan(data.confidence["eigv"][1]) and not np.isnan(data.confidence["eigv"][0])
    with pytest.raises(ValueError, match="`single` must be one of"):
        consistency_scores([["a", "b"]], single="zero")


@pytest.mark.parametrize(
    "samples, match",
    [
        ([["a", "b"], []], r"`samples`: question 1 has no list of answers"),
        ([["a", "b"], "ab"], r"`samples`: question 1 has no list of answers"),
        ([["a", None]], r"`samples`: question 0 has an answer that is not a string: None"),
    ],
)
def test_questions_without_answers_are_refused(samples, match):
    with pytest.raises(ValueError, match=match):
        consistency_scores(samples)


@pytest.mark.parametrize(
    "returned, match",
    [
        (lambda a: np.ones((len(a), 3)), r"`similarity` returned an array of shape \(2, 3\) for 2 questions of 3 "),
        (lambda a: np.ones((len(a), 2, 2)), r"expected \(2, 3, 3\)"),
        (lambda a: np.full((len(a), 3, 3), 1.5), r"`similarity` returned 1.5 at \[question, i, j\] = \[0, 0, 0\]"),
        (lambda a: np.full((len(a), 3, 3), -0.1), r"similarities must be in \[0, 1\]"),
        (lambda a: np.full((len(a), 3, 3), np.nan), r"`similarity` returned nan"),
        (lambda a: "a matrix", r"`similarity` returned str, not a numeric array|shape \(\)"),
        (lambda a: {"entail": np.ones((len(a), 3, 3))}, r"`similarity` returned a dict with keys \['entail'\]"),
        (
            lambda a: {"entail": np.ones((len(a), 3, 3)), "contra": np.full((len(a), 3, 3), 2.0)},
            r"`similarity` returned\['contra'\] 2.0",
        ),
        (lambda a: np.zeros((len(a), 3, 3)), r"`similarity`: answer 0 of question 0 has similarity 0 to every answer"),
    ],
)
def test_a_similarity_of_the_wrong_shape_or_range_is_refused(returned, match):
    with pytest.raises(ValueError, match=match):
        consistency_scores([["a", "b", "c"], ["d", "e", "f"]], similarity=returned)


def test_an_unknown_similarity_is_refused_by_every_door(tmp_path):
    with pytest.raises(ValueError, match=r"`similarity` must be one of \['exact', 'jaccard', 'rouge_l'\]"):
        consistency_scores([["a", "b"]], similarity="cosine")
    with pytest.raises(ValueError, match=r"`similarity` must be one of"):
        similarity_matrices([["a", "b"]], similarity=3)
    with pytest.raises(ValueError, match=r"`similarity` must be one of"):
        read_agreement(tmp_path, similarity="nli")


def test_read_agreement_passes_the_similarity_on(tmp_path):
    rows = [{"id": str(i // 3), "answer": a, "correct": 1} for i, a in enumerate(["Paris", "paris.", "Lyon"] * 4)]
    file = tmp_path / "samples.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every question has three samples: no warning
        exact = read_agreement(file, similarity="exact")
        jaccard = read_agreement(file)
    assert exact.confidence["num_sem_sets"].tolist() == [0.5] * 4  # "Paris" and "paris." agree once normalised
    assert jaccard.confidence["num_sem_sets"].tolist() == pytest.approx([1 / 3] * 4)  # "paris." is another word
    assert exact.confidence["lexsim_jaccard"].tolist() == jaccard.confidence["lexsim_jaccard"].tolist()
    assert list(exact.confidence) == list(CONSISTENCY and exact.confidence)
    assert set(CONSISTENCY) <= set(exact.confidence) and exact.kinds["eigv"] == "samples"
