"""Multi-label heads: every binary metric per label against the plain loops of
tests/metrics/reference.py, the three averages as scikit-learn defines them, CECE over labels,
and the input rules (multi-hot labels, never guessed)."""

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss

import calibkit
from calibkit.metrics.formulas import class_wise_summary
from tests.metrics import reference as ref


def multilabel_data(n=500, k=5, seed=0, logits=False):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 2 + rng.normal(size=k)  # labels of different frequency
    p = 1 / (1 + np.exp(-z))
    y = (rng.random((n, k)) < p**1.5).astype(np.float32)  # over-confident, float multi-hot as BCE takes it
    return (z if logits else p), y


def loops(p, y, metric):
    rows, binary = ref.rows_of(p, y.astype(int))
    pairs = ref.top_pairs(rows, binary)
    return {
        "ece": lambda: ref.ece(pairs, 15),
        "mce": lambda: ref.mce(pairs, 15),
        "rbece": lambda: ref.rbece(pairs, 20, 40),
        "fce": lambda: ref.fce(pairs, 15),
        "esce": lambda: ref.esce(pairs, 10),
        "brier": lambda: ref.brier(rows, binary),
        "nll": lambda: ref.nll(rows),
        "ecd": lambda: ref.ecd(rows),
        "ace": lambda: ref.ace(rows, 2, 15),
    }[metric]()


METRICS = ("ece", "mce", "rbece", "fce", "esce", "brier", "nll", "ecd", "ace")


def test_every_label_and_every_average_equals_the_loops():
    p, y = multilabel_data()
    r = calibkit.multilabel_report(p, y)
    support = y.sum(axis=0)
    np.testing.assert_array_equal(r["support"], support)
    for metric in METRICS:
        per_label = np.array([loops(p[:, j], y[:, j], metric) for j in range(p.shape[1])])
        np.testing.assert_allclose(r["per_label"][metric], per_label, rtol=1e-10, atol=1e-13, err_msg=metric)
        assert r["macro"][metric] == pytest.approx(np.nanmean(per_label), rel=1e-10), metric
        has = ~np.isnan(per_label)
        weighted = (per_label[has] * support[has]).sum() / support[has].sum()
        assert r["weighted"][metric] == pytest.approx(weighted, rel=1e-10), metric
        assert r["micro"][metric] == pytest.approx(loops(p.reshape(-1), y.reshape(-1), metric), rel=1e-10), metric
    summary = class_wise_summary(r["per_label"]["ece"], support, r["micro"]["ece"])
    for key in ("cece", "msece", "wsece", "ece_variance"):
        assert r[key] == pytest.approx(summary[key], rel=1e-12)


def test_brier_per_label_agrees_with_scikit_learn_and_logits_with_probabilities():
    z, y = multilabel_data(logits=True, seed=3)
    p = 1 / (1 + np.exp(-z))
    r = calibkit.multilabel_report(p, y, metrics=["brier", "ece"])
    want = [brier_score_loss(y[:, j], p[:, j]) for j in range(p.shape[1])]
    np.testing.assert_allclose(r["per_label"]["brier"], want, rtol=1e-12)
    from_logits = calibkit.multilabel_report(z, y, metrics=["brier", "ece"], from_logits=True)
    np.testing.assert_allclose(from_logits["per_label"]["ece"], r["per_label"]["ece"], rtol=1e-9)


def test_ignored_decisions_are_skipped_and_a_label_with_none_left_is_nan():
    p, y = multilabel_data(n=200, k=3, seed=5)
    y = y.astype(np.int64)
    masked = y.copy()
    masked[:50, 0] = -100
    masked[:, 2] = -100
    r = calibkit.multilabel_report(p, masked, metrics=["ece"])
    assert r["per_label"]["ece"][0] == pytest.approx(loops(p[50:, 0], y[50:, 0], "ece"), rel=1e-10)
    assert np.isnan(r["per_label"]["ece"][2]) and r["n"] == 150 + 200
    assert r["macro"]["ece"] == pytest.approx(np.mean(r["per_label"]["ece"][:2]), rel=1e-12)


@pytest.mark.parametrize(
    "labels, message",
    [
        (np.array([[1, 2], [0, 1]]), r"must be multi-hot .*got 2 at position \(0, 1\)"),
        (np.array([[1, 0]]), r"`labels` must have the shape of `probs` \(2, 2\)"),
        (np.array([["a", "b"], ["c", "d"]]), r"`labels` must hold 0, 1"),
        (np.full((2, 2), -100), r"no decision to evaluate"),
    ],
)
def test_bad_multilabel_input_is_refused_by_name(labels, message):
    with pytest.raises(ValueError, match=message):
        calibkit.multilabel_report(np.array([[0.9, 0.2], [0.1, 0.7]]), labels)


def test_a_multi_hot_matrix_given_to_a_single_label_metric_names_the_multilabel_door():
    with pytest.raises(ValueError, match=r"needs labels of shape \(2,\); for multi-label data .*multilabel_report"):
        calibkit.ece(np.array([[0.9, 0.2], [0.1, 0.7]]), np.array([[1.0, 0.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="`probs`.*outside"):
        calibkit.multilabel_report(np.array([[1.5, 0.2], [0.1, 0.7]]), np.array([[1, 0], [0, 1]]))
