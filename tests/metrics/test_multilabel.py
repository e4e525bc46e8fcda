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
    with pytest.raises(ValueError, match=r"needs labels of shape \(2,\); for multi-label data .*pass multilabel=True"):
        calibkit.ece(np.array([[0.9, 0.2], [0.1, 0.7]]), np.array([[1.0, 0.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="`probs`.*outside"):
        calibkit.multilabel_report(np.array([[1.5, 0.2], [0.1, 0.7]]), np.array([[1, 0], [0, 1]]))


# ------------------------------------------------------------------------------------------
# The multilabel setting at every door


def assert_same_multilabel(got, want, tol=1e-12, skip=()):
    assert np.array_equal(got["support"], want["support"]) and got["n"] == want["n"]
    for key in ("macro", "weighted", "micro"):
        for m, value in want[key].items():
            if m not in skip:
                assert got[key][m] == pytest.approx(value, rel=tol, abs=tol, nan_ok=True), (key, m)
    for m, values in want["per_label"].items():
        if m not in skip:
            np.testing.assert_allclose(got["per_label"][m], values, rtol=tol, atol=tol)
    for m in ("cece", "msece", "wsece", "ece_variance"):
        assert got[m] == pytest.approx(want[m], rel=tol, abs=tol)


def test_calibration_report_with_the_setting_is_the_multilabel_report():
    z, y = multilabel_data(logits=True)
    want = calibkit.multilabel_report(z, y, from_logits=True, n_bins=10)
    got = calibkit.calibration_report(z, y, from_logits=True, multilabel=True, n_bins=10)
    assert_same_multilabel(got, want, tol=0)
    settings = calibkit.CalibrationSettings(from_logits=True, multilabel=True, n_bins=10)
    assert_same_multilabel(calibkit.calibration_report(z, y, settings=settings), want, tol=0)
    with pytest.raises(ValueError, match=r"`multilabel=True` and `settings.multilabel=True`"):
        calibkit.calibration_report(z, y, multilabel=True, settings=settings)
    with pytest.raises(ValueError, match="`multilabel` must be"):
        calibkit.calibration_report(z, y, multilabel="yes")


@pytest.mark.parametrize("logits", [False, True])
def test_the_accumulator_streams_labels_and_equals_one_pass(logits):
    import pickle

    from calibkit.metrics.exact_ace import ExactACE

    values, y = multilabel_data(n=900, seed=3, logits=logits)
    y[::11, 1] = -100  # skipped decisions
    want = calibkit.multilabel_report(values, y, from_logits=logits, theta=5)
    acc = calibkit.CalibrationAccumulator(from_logits=logits, multilabel=True, theta=5)
    other = calibkit.CalibrationAccumulator(from_logits=logits, multilabel=True, theta=5)
    acc.update(values[:250], y[:250]).update(values[250:600], y[250:600])
    other.update(values[600:], y[600:])
    merged = pickle.loads(pickle.dumps(acc)).merge(other)  # another process's accumulator
    got = merged.compute()
    assert_same_multilabel(got, want, skip=("ace",))  # all but ACE equal one pass
    bound = got["ace_error_bound"]  # ACE streamed: an estimate, with how far it may be from the exact one
    assert np.all(np.abs(got["per_label"]["ace"] - want["per_label"]["ace"]) <= bound["per_label"] + 1e-12)
    for avg in ("macro", "weighted", "micro"):
        assert abs(got[avg]["ace"] - want[avg]["ace"]) <= bound[avg] + 1e-12, avg
    assert list(got["per_label"]) == list(want["per_label"])
    with pytest.raises(ValueError, match="`accumulator` is multi-label: ExactACE makes single-label ACE exact"):
        ExactACE(merged)
    with pytest.raises(ValueError, match="`probs` has 3 labels but earlier batches had 5"):
        acc.update(values[:10, :3], y[:10, :3])
    with pytest.raises(ValueError, match="multi-hot"):
        acc.update(values[:2], np.full((2, 5), 2))


def test_the_accumulator_on_torch_tensors_and_the_torch_engine():
    import torch

    from calibkit.metrics.backends import use_backend

    z, y = multilabel_data(n=400, seed=4, logits=True)
    want = calibkit.CalibrationAccumulator(from_logits=True, multilabel=True, metrics=["ece", "brier"])
    want = want.update(z, y).compute()
    with use_backend("torch"):
        acc = calibkit.CalibrationAccumulator(from_logits=True, multilabel=True, metrics=["ece", "brier"])
        got = acc.update(torch.from_numpy(z), torch.from_numpy(y)).compute()
    assert list(got["micro"]) == ["ece", "brier"]
    assert_same_multilabel(got, want)


def test_the_bootstrap_resamples_rows_with_every_label_and_one_label_is_the_binary_bootstrap():
    from calibkit.metrics.bootstrap import bootstrap_intervals

    z, y = multilabel_data(n=600, seed=6, logits=True)
    out = bootstrap_intervals(z, y, from_logits=True, multilabel=True, bootstrap=150, metrics=["ece", "brier"], seed=3)
    point = calibkit.multilabel_report(z, y, from_logits=True, metrics=["ece", "brier"])
    for avg in ("macro", "weighted", "micro"):
        for m in ("ece", "brier"):
            low, high = out["intervals"][avg][m]
            assert low <= point[avg][m] <= high, (avg, m)
    low, high = out["per_label"]["ece"]
    assert low.shape == (5,) and np.all(low <= point["per_label"]["ece"]) and np.all(point["per_label"]["ece"] <= high)
    assert out["intervals"]["cece"][0] < out["intervals"]["cece"][1]
    # one label: the same blocks, weights and formulas as the binary bootstrap of its column
    one = bootstrap_intervals(
        z[:, :1], y[:, :1], from_logits=True, multilabel=True, bootstrap=80, metrics=["ece", "brier"]
    )
    binary = bootstrap_intervals(z[:, 0], y[:, 0].astype(int), from_logits=True, bootstrap=80, metrics=["ece", "brier"])
    for m in ("ece", "brier"):
        assert one["intervals"]["micro"][m] == pytest.approx(binary["intervals"][m], rel=1e-12)


def test_per_label_ece_equals_scikit_learns_calibration_curve_per_label():
    """scikit-learn's calibration_curve (uniform bins) gives each label's reliability points; with
    the bin counts of the same binning, sum_b n_b / N |acc_b - conf_b| is that label's ECE."""
    from sklearn.calibration import calibration_curve

    p, y = multilabel_data(n=3000, k=4, seed=8)
    p = p.astype(np.float64)
    report = calibkit.multilabel_report(p, y, metrics=["ece"], n_bins=10)
    for j in range(p.shape[1]):
        prob_true, prob_pred = calibration_curve(y[:, j], p[:, j], n_bins=10, strategy="uniform")
        edges = np.linspace(0.0, 1.0, 11)
        counts = np.bincount(np.searchsorted(edges[1:-1], p[:, j], side="right"), minlength=10)
        counts = counts[counts > 0]
        want = float(np.sum(counts / len(p) * np.abs(prob_true - prob_pred)))
        assert report["per_label"]["ece"][j] == pytest.approx(want, rel=1e-9), j


def test_a_bad_multi_hot_label_in_a_tensor_is_placed():
    import torch

    labels = torch.tensor([[0, 1, 0], [1, 0, 2], [0, 0, 0]])
    with pytest.raises(ValueError, match=r"got 2 at position \(1, 2\)"):
        calibkit.calibration_report(torch.rand(3, 3), labels, multilabel=True)


def test_metrics_not_defined_per_label_are_refused_and_tiny_bootstraps_are_nan():
    from calibkit.metrics.bootstrap import bootstrap_intervals

    p, y = multilabel_data(n=50)
    with pytest.raises(ValueError, match=r"\['aurc'\] are not defined per label"):
        calibkit.calibration_report(p, y, multilabel=True, metrics=["ece", "aurc"])
    only_summary = calibkit.calibration_report(p, y, multilabel=True, metrics=["cece"])
    assert list(only_summary["macro"]) == ["ece"] and only_summary["cece"] >= 0
    out = bootstrap_intervals([[0.7, 0.2]], [[1, 0]], multilabel=True, bootstrap=1, seed=2)  # no replicate draws a row
    assert np.isnan(out["intervals"]["macro"]["ece"][0]) and np.isnan(out["intervals"]["cece"][1])
