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
