"""Classic metrics against established libraries (test-only dependencies), and accumulation error."""

import math

import numpy as np
import pytest
import torch
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss, log_loss
from torchmetrics.functional.classification import binary_calibration_error, multiclass_calibration_error

import calibkit
from tests.conftest import softmax


def away_from_edges(values, n_bins, margin=1e-6):
    """Rows whose binned value is not within ``margin`` of a bin edge (libraries differ there)."""
    scaled = values * n_bins
    return np.abs(scaled - np.round(scaled)) > margin * n_bins


@pytest.mark.parametrize("seed,k,n_bins", [(0, 4, 15), (1, 10, 10), (2, 3, 7)])
def test_ece_mce_equal_torchmetrics(seed, k, n_bins):
    rng = np.random.default_rng(seed)
    probs = softmax(rng.normal(size=(5000, k)) * 2)
    keep = away_from_edges(probs.max(1), n_bins)
    probs, labels = probs[keep], rng.integers(0, k, keep.sum())
    for norm, ours in (("l1", calibkit.ece), ("max", calibkit.mce)):
        theirs = multiclass_calibration_error(
            torch.tensor(probs), torch.tensor(labels), num_classes=k, n_bins=n_bins, norm=norm
        )
        assert ours(probs, labels, n_bins=n_bins) == pytest.approx(theirs.item(), abs=1e-6)


def test_binary_ece_equals_torchmetrics_positive_class_convention():
    rng = np.random.default_rng(3)
    p = rng.random(4000)
    p = p[away_from_edges(p, 15)]
    y = (rng.random(p.size) < p**1.5).astype(int)
    theirs = binary_calibration_error(torch.tensor(p), torch.tensor(y), n_bins=15).item()
    assert calibkit.ece(p, y) == pytest.approx(theirs, abs=1e-6)


def test_brier_and_nll_equal_scikit_learn():
    rng = np.random.default_rng(4)
    probs = softmax(rng.normal(size=(3000, 5)))
    labels = rng.integers(0, 5, 3000)
    assert calibkit.nll(probs, labels) == pytest.approx(log_loss(labels, probs, labels=range(5)), abs=1e-9)
    expected = brier_score_loss(labels, probs, labels=range(5), scale_by_half=False)
    assert calibkit.brier(probs, labels) == pytest.approx(expected, abs=1e-9)
    p, y = probs[:, 1], (labels == 1).astype(int)
    assert calibkit.brier(p, y) == pytest.approx(brier_score_loss(y, p), abs=1e-9)
    assert calibkit.nll(p, y) == pytest.approx(log_loss(y, p), abs=1e-9)


def test_sce_equals_scikit_learn_calibration_curves():
    # SCE = mean over classes of the count-weighted gap of each class's one-vs-rest reliability curve.
    rng = np.random.default_rng(5)
    probs = softmax(rng.normal(size=(4000, 3)) * 1.5)
    labels = rng.integers(0, 3, 4000)
    keep = away_from_edges(probs, 15).all(axis=1)
    probs, labels = probs[keep], labels[keep]
    per_class = []
    for k in range(3):
        frac_pos, mean_pred = calibration_curve(labels == k, probs[:, k], n_bins=15, strategy="uniform")
        counts = np.histogram(probs[:, k], bins=np.linspace(0, 1, 16))[0]
        per_class.append(np.sum(counts[counts > 0] / len(labels) * np.abs(frac_pos - mean_pred)))
    assert calibkit.sce(probs, labels) == pytest.approx(np.mean(per_class), abs=1e-9)


def test_ece_has_no_accumulation_error_at_ten_million():
    # float64 brute force with exactly rounded sums (math.fsum) per bin
    rng = np.random.default_rng(6)
    n = 10_000_000
    conf = rng.uniform(0.25, 1.0, n)
    probs = np.stack([conf, 1 - conf], axis=1).astype(np.float64)
    probs = probs / probs.sum(1, keepdims=True)
    labels = (rng.random(n) > conf**0.8).astype(np.int64)  # correct with prob conf^0.8
    confidence = probs.max(1)
    correct = (probs.argmax(1) == labels).astype(np.float64)
    bins = np.clip(np.ceil(confidence * 15).astype(np.int64) - 1, 0, 14)
    order = np.argsort(bins, kind="stable")
    edges = np.searchsorted(bins[order], np.arange(16))
    total = 0.0
    for b in range(15):
        idx = order[edges[b] : edges[b + 1]]
        total += abs(math.fsum(correct[idx]) - math.fsum(confidence[idx]))
    exact = total / n
    assert calibkit.ece(probs, labels) == pytest.approx(exact, abs=1e-10)
    assert calibkit.ece(probs.astype(np.float32), labels) == pytest.approx(exact, abs=1e-6)
