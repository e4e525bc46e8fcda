"""L2, max and debiased L2 calibration error: ``ece(norm=, debias=)``, ``ece_l2``, ``ece_l2_debiased``.

Against a plain loop written here, torchmetrics' ``norm="l1" | "l2" | "max"`` (float64) and the
``uncertainty-calibration`` package of Kumar et al. 2019 (``plugin_ce`` and ``unbiased_l2_ce`` on
calibkit's bins, and its own unit-test examples).
"""

import math
import warnings

import numpy as np
import pytest
import torch
from calibration import utils as kumar
from torchmetrics.functional.classification.calibration_error import _ce_compute

import calibkit
from calibkit.metrics.bootstrap import bootstrap_intervals
from tests.conftest import softmax


def plain_l2(probs, labels, n_bins, debias):
    """Top-label bins ((m-1)/M, m/M], one sample at a time."""
    bins = [[] for _ in range(n_bins)]
    for row, label in zip(probs, labels):
        conf = max(row)
        pred = list(row).index(conf)
        b = max(math.ceil(conf * n_bins) - 1, 0)
        bins[b].append((conf, 1.0 if pred == label else 0.0))
    total = 0.0
    for members in bins:
        n = len(members)
        if n == 0 or (debias and n < 2):
            continue
        conf = sum(c for c, _ in members) / n
        acc = sum(a for _, a in members) / n
        term = (acc - conf) ** 2
        if debias:
            term -= acc * (1 - acc) / (n - 1)
        total += n / len(labels) * term
    return math.sqrt(max(total, 0.0))


def kumar_top_label(probs, labels, n_bins, debias):
    """Kumar et al.'s estimators on calibkit's equal-width bins (their ``fast_bin`` is right-closed)."""
    conf, pred = probs.max(1), probs.argmax(1)
    data = list(zip(conf, (pred == labels).astype(float)))
    edges = [(m + 1) / n_bins for m in range(n_bins)]
    binned = kumar.bin(data, edges)
    return kumar.unbiased_l2_ce(binned) if debias else kumar.plugin_ce(binned, power=2)


def away_from_edges(values, n_bins, margin=1e-6):
    scaled = values * n_bins
    return np.abs(scaled - np.round(scaled)) > margin * n_bins


def random_case(seed, n, k, scale=2.0):
    rng = np.random.default_rng(seed)
    probs = softmax(rng.normal(size=(n, k)) * scale)
    labels = rng.integers(0, k, n)
    return probs, labels


@pytest.mark.parametrize("debias", [False, True])
@pytest.mark.parametrize("seed,n,k,n_bins", [(0, 50, 3, 15), (1, 400, 5, 10), (2, 7, 2, 4), (3, 2000, 8, 30)])
def test_l2_equals_plain_loop(seed, n, k, n_bins, debias):
    probs, labels = random_case(seed, n, k)
    expected = plain_l2(probs.tolist(), labels.tolist(), n_bins, debias)
    got = calibkit.ece(probs, labels, n_bins=n_bins, norm="l2", debias=debias)
    assert got == pytest.approx(expected, abs=1e-12)
    named = calibkit.ece_l2_debiased if debias else calibkit.ece_l2
    assert named(probs, labels, n_bins=n_bins) == got


@pytest.mark.parametrize("seed,k,n_bins", [(0, 4, 15), (1, 10, 10), (2, 3, 7), (3, 5, 40)])
def test_norms_equal_torchmetrics_float64(seed, k, n_bins):
    # torchmetrics' multiclass_calibration_error casts to float32 before binning; its compute step
    # on float64 confidences is the float64 result (bins [lo, hi): values on an edge left out).
    probs, labels = random_case(seed, 5000, k)
    keep = away_from_edges(probs.max(1), n_bins)
    probs, labels = probs[keep], labels[keep]
    conf = torch.tensor(probs.max(1))
    correct = torch.tensor((probs.argmax(1) == labels).astype(np.float64))
    for norm in ("l1", "l2", "max"):
        theirs = _ce_compute(conf, correct, n_bins, norm=norm).item()
        assert calibkit.ece(probs, labels, n_bins=n_bins, norm=norm) == pytest.approx(theirs, abs=1e-12)
    # Its debias option (off in its public functions) is Kumar et al.'s estimator too.
    theirs = _ce_compute(conf, correct, n_bins, norm="l2", debias=True).item()
    assert calibkit.ece(probs, labels, n_bins=n_bins, norm="l2", debias=True) == pytest.approx(theirs, abs=1e-12)


@pytest.mark.parametrize("seed,n,k,n_bins", [(0, 300, 3, 15), (1, 5000, 6, 10), (2, 40, 4, 20), (3, 12, 2, 5)])
def test_l2_and_debiased_equal_kumar_et_al_on_random_data(seed, n, k, n_bins):
    probs, labels = random_case(seed, n, k, scale=1.5)
    keep = away_from_edges(probs.max(1), n_bins)
    probs, labels = probs[keep], labels[keep]
    for debias in (False, True):
        expected = kumar_top_label(probs, labels, n_bins, debias)
        got = calibkit.ece(probs, labels, n_bins=n_bins, norm="l2", debias=debias)
        assert got == pytest.approx(expected, abs=1e-12)


def test_on_kumar_et_als_own_examples():
    # util_test.py, test_get_two_label_ce and test_get_three_label_ce (top-label, p = 2): every
    # distinct confidence falls in its own bin of 15, as in their discrete binning.
    pt5, pt6 = [0.5, 0.5], [0.4, 0.6]
    probs = np.array([pt5, pt5, pt5, pt6, pt5, pt6, pt6, pt6, pt6])
    labels = np.array([0, 1, 0, 1, 0, 1, 1, 1, 0])
    true_ce = (4 / 9 * 0.25**2 + 5 / 9 * 0.2**2) ** 0.5
    assert calibkit.ece_l2(probs, labels) == pytest.approx(true_ce, abs=1e-12)
    theirs = kumar.get_calibration_error(probs, labels, p=2, debias=True, mode="top-label")
    assert calibkit.ece_l2_debiased(probs, labels) == pytest.approx(theirs, abs=1e-12)
    assert calibkit.ece_l2_debiased(probs, labels) < true_ce

    l0, l1, l2 = [0.6, 0.3, 0.1], [0.1, 0.8, 0.1], [0.1, 0.0, 0.9]
    probs = np.array([l0] * 6 + [l1] * 4 + [l2] * 4)
    labels = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2])
    true_top_ce = (6 / 14 * (5 / 6 - 0.6) ** 2 + 4 / 14 * 0.05**2 + 4 / 14 * 0.1**2) ** 0.5
    assert calibkit.ece_l2(probs, labels) == pytest.approx(true_top_ce, abs=1e-12)
    theirs = kumar.get_calibration_error(probs, labels, p=2, debias=True, mode="top-label")
    assert calibkit.ece_l2_debiased(probs, labels) == pytest.approx(theirs, abs=1e-12)


def test_debiased_is_zero_when_the_gaps_are_noise_and_close_to_plugin_on_large_bins():
    # Perfectly calibrated labels: the plug-in L2 sits above 0 by the bins' noise, the debiased
    # estimate much closer to 0.
    rng = np.random.default_rng(7)
    probs = softmax(rng.normal(size=(20000, 3)))
    labels = np.array([rng.choice(3, p=row) for row in probs])
    plugin = calibkit.ece_l2(probs, labels)
    debiased = calibkit.ece_l2_debiased(probs, labels)
    assert debiased < plugin / 2
    # A miscalibrated model: the correction is small next to the gap.
    labels = rng.integers(0, 3, 20000)
    probs_sharp = softmax(rng.normal(size=(20000, 3)) * 4)
    plugin = calibkit.ece_l2(probs_sharp, labels)
    assert calibkit.ece_l2_debiased(probs_sharp, labels) == pytest.approx(plugin, rel=0.01)


def test_token_input_and_logits_and_report():
    rng = np.random.default_rng(8)
    logits = rng.normal(size=(6, 9, 4)) * 2
    labels = rng.integers(0, 4, (6, 9))
    labels[:, 6:] = -100
    flat_p = softmax(logits.reshape(-1, 4))[labels.ravel() != -100]
    flat_y = labels.ravel()[labels.ravel() != -100]
    for debias in (False, True):
        expected = plain_l2(flat_p.tolist(), flat_y.tolist(), 15, debias)
        got = calibkit.ece(logits, labels, norm="l2", debias=debias, from_logits=True)
        assert got == pytest.approx(expected, abs=1e-12)
    report = calibkit.calibration_report(logits, labels, metrics=("ece_l2", "ece_l2_debiased"), from_logits=True)
    assert report["ece_l2"] == pytest.approx(plain_l2(flat_p.tolist(), flat_y.tolist(), 15, False), abs=1e-12)
    assert report["ece_l2_debiased"] == pytest.approx(plain_l2(flat_p.tolist(), flat_y.tolist(), 15, True), abs=1e-12)


def test_streaming_and_bootstrap_carry_both():
    probs, labels = random_case(9, 3000, 5)
    acc = calibkit.CalibrationAccumulator(("ece_l2", "ece_l2_debiased"))
    for part in np.array_split(np.arange(3000), 7):
        acc.update(probs[part], labels[part])
    report = acc.compute()
    assert report["ece_l2"] == pytest.approx(calibkit.ece_l2(probs, labels), abs=1e-12)
    assert report["ece_l2_debiased"] == pytest.approx(calibkit.ece_l2_debiased(probs, labels), abs=1e-12)
    intervals = bootstrap_intervals(probs, labels, metrics=("ece_l2", "ece_l2_debiased"), bootstrap=200)["intervals"]
    for name in ("ece_l2", "ece_l2_debiased"):
        low, high = intervals[name]
        assert low < report[name] < high


def test_bad_norm_and_debias_are_refused():
    probs, labels = random_case(10, 20, 3)
    with pytest.raises(ValueError, match="`norm`"):
        calibkit.ece(probs, labels, norm="l3")
    with pytest.raises(ValueError, match="`debias`"):
        calibkit.ece(probs, labels, debias="yes")
    for norm in ("l1", "max"):
        with pytest.raises(ValueError, match="norm='l2' only"):
            calibkit.ece(probs, labels, norm=norm, debias=True)


def test_max_norm_is_mce_and_l1_is_ece():
    probs, labels = random_case(11, 500, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert calibkit.ece(probs, labels, norm="max") == calibkit.mce(probs, labels)
        assert calibkit.ece(probs, labels, norm="l1") == calibkit.ece(probs, labels)
