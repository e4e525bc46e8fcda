"""Score decomposition (CORP: miscalibration, discrimination, uncertainty) against model-diagnostics' decompose."""

import numpy as np
import pytest

from calibkit.metrics.decomposition import binary_decomposition, score_decomposition

md = pytest.importorskip("model_diagnostics.scoring")


def reference(p, y, score):
    fn = md.SquaredError() if score == "brier" else md.LogLoss()
    frame = md.decompose(y_obs=np.asarray(y, dtype=float), y_pred=np.asarray(p, dtype=float), scoring_function=fn)
    return {k: float(frame[k][0]) for k in ("miscalibration", "discrimination", "uncertainty", "score")}


def cases():
    """Ten binary problems: calibrated, over- and under-confident, ties, extremes, N from 50 to 1M."""
    rng = np.random.default_rng(0)
    out = []
    for n, shape in [(50, 1.0), (200, 0.5), (1000, 2.0), (5000, 1.0), (20_000, 0.3), (1_000_000, 1.5)]:
        truth = rng.uniform(0.02, 0.98, n)
        y = (rng.uniform(size=n) < truth).astype(float)
        p = truth**shape / (truth**shape + (1 - truth) ** shape)  # shape > 1 over-, < 1 under-confident
        out.append((p, y))
    truth = rng.uniform(size=3000)
    y = (rng.uniform(size=3000) < truth).astype(float)
    out.append((np.round(truth, 1).clip(0.05, 0.95), y))  # many ties
    out.append((np.full(400, 0.3), (rng.uniform(size=400) < 0.3).astype(float)))  # one value: no discrimination
    out.append((np.where(y > 0, 0.8, 0.2)[:1000], y[:1000]))  # two values, perfectly separating
    out.append((rng.uniform(0.01, 0.99, 700), (rng.uniform(size=700) < 0.5).astype(float)))  # no information
    return out


@pytest.mark.parametrize("score", ["brier", "log"])
@pytest.mark.parametrize("case", range(10))
def test_binary_decomposition_equals_model_diagnostics(case, score):
    p, y = cases()[case]
    got, want = binary_decomposition(p, y, score), reference(p, y, score)
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-9, abs=1e-12), key
    assert got["score"] == pytest.approx(got["miscalibration"] - got["discrimination"] + got["uncertainty"])


def test_the_top_label_and_each_class_of_class_probabilities():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(600, 4)) * 2
    labels = rng.integers(0, 4, 600)
    labels[:7] = -100
    out = score_decomposition(logits, labels, from_logits=True, per_class=True, score="log")
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    p, y = probs[7:], labels[7:]
    top = p.argmax(axis=1)
    want = reference(p[np.arange(len(y)), top], (top == y).astype(float), "log")
    assert out["top_label"]["miscalibration"] == pytest.approx(want["miscalibration"], rel=1e-9)
    for k in range(4):
        want = reference(p[:, k], (y == k).astype(float), "log")
        assert out["per_class"]["discrimination"][k] == pytest.approx(want["discrimination"], rel=1e-9)


def test_one_dimensional_binary_input_is_the_class_one_probability():
    rng = np.random.default_rng(2)
    p = rng.uniform(size=300)
    y = (rng.uniform(size=300) < p).astype(int)
    got = score_decomposition(p, y)["top_label"]
    assert got["score"] == pytest.approx(reference(p, y, "brier")["score"], rel=1e-12)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="`score` must be one of"):
        score_decomposition(np.array([0.5]), np.array([1]), score="spherical")
    with pytest.raises(ValueError, match="probs"):
        score_decomposition(np.array([[0.5, 0.7]]), np.array([1]))  # a row that does not sum to 1


def test_probabilities_one_ulp_apart_are_pooled_as_the_reference_pools_them():
    # scikit-learn's isotonic fit (the reference's) merges values closer than the float64 resolution
    p = np.array([0.3, 0.6, np.nextafter(0.6, 1), 0.9])
    y = np.array([0.0, 0.0, 1.0, 1.0])
    got = binary_decomposition(p, y)
    assert got["miscalibration"] == pytest.approx(0.03, abs=1e-15)
    assert got["discrimination"] == pytest.approx(0.125, abs=1e-15)
    for key, want in reference(p, y, "brier").items():
        assert got[key] == pytest.approx(want, rel=1e-12, abs=1e-15), key


def softmax_of_rounded_logits(n, k, seed):
    """Softmaxes of small integer logits: equal logits in another order give probabilities one ulp apart."""
    rng = np.random.default_rng(seed)
    logits = np.vstack([rng.integers(-2, 3, size=(n, k)), np.diag(6.0 + np.arange(k))])  # a lone top value per class
    labels = np.concatenate([rng.integers(0, k, n), np.arange(k)])
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return logits.astype(float), labels, e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("score", ["brier", "log"])
@pytest.mark.parametrize(("n", "k", "seed"), [(300, 6, 307), (3000, 5, 3000)])  # seeds where pooling matters
def test_softmaxes_of_rounded_logits_equal_the_reference_top_label_and_per_class(n, k, seed, score):
    logits, labels, probs = softmax_of_rounded_logits(n, k, seed)
    top = probs.argmax(axis=1)
    conf = probs[np.arange(len(labels)), top]
    distinct = np.unique(conf)
    assert (np.diff(distinct) < 1e-15).any()  # the near ties this test is about are there
    out = score_decomposition(logits, labels, from_logits=True, per_class=True, score=score)
    for key, want in reference(conf, (top == labels).astype(float), score).items():
        assert out["top_label"][key] == pytest.approx(want, rel=1e-12, abs=1e-15), key
    for c in range(k):
        for key, want in reference(probs[:, c], (labels == c).astype(float), score).items():
            assert out["per_class"][key][c] == pytest.approx(want, rel=1e-12, abs=1e-15), (c, key)


def test_a_near_tie_at_the_largest_probability_reads_the_fitted_value():
    # the reference reads its fit as NaN above the group's first value; calibkit the group's value
    p = np.array([0.3, np.nextafter(0.9, 0), 0.9])
    y = np.array([0.0, 0.0, 1.0])
    got = binary_decomposition(p, y)
    pooled = binary_decomposition(np.array([0.3, np.nextafter(0.9, 0), np.nextafter(0.9, 0)]), y)
    for key in ("miscalibration", "discrimination"):
        assert got[key] == pytest.approx(pooled[key], abs=1e-15)
        assert np.isfinite(got[key])


def test_a_run_of_near_ties_is_cut_where_it_passes_the_resolution_from_its_first_value():
    # scikit-learn's rule: a group takes values less than 1e-15 above its *first* value, so a run
    # of values one ulp apart (each close to its neighbour) splits after about nine ulps
    p = np.concatenate([[0.2], 0.5 + np.arange(14) * np.spacing(0.5), [0.8]])
    y = np.array([0.0] * 6 + [1.0] * 10)
    got, want = binary_decomposition(p, y), reference(p, y, "brier")
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-12, abs=1e-15), key
    merged = binary_decomposition(np.where(np.abs(p - 0.5) < 1e-14, 0.5, p), y)  # the whole run as one group
    assert abs(merged["miscalibration"] - got["miscalibration"]) > 0.05
