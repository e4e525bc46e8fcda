"""Bin edges pinned on both engines: a value on an edge belongs to the bin below (right-closed bins,
SPEC.md), p = 0.6 lands in bin 6 of 10 counting from 1, i.e. ``(0.5, 0.6]``.

Random floats never land on an edge, so the engines are compared here on values that do, for
every metric that bins (top-label, class-wise, region and entropic sign), against the plain
loops of tests/metrics/reference.py.
"""

import math

import numpy as np
import pytest

import calibkit
from calibkit.metrics.backends import use_backend
from tests.metrics import reference as ref

EDGES = np.array([0.55, 0.6, 0.65, 0.7, 0.75, 0.8])


def edge_data(seed: int = 0, n: int = 600):
    """Two-class rows whose top probability sits on a bin edge of 10 and 20 bins."""
    rng = np.random.default_rng(seed)
    top = rng.choice(EDGES, n)
    probs = np.stack([top, 1.0 - top], axis=1)
    flip = rng.random(n) < 0.5
    probs[flip] = probs[flip][:, ::-1]  # the top class is either column
    labels = rng.integers(0, 2, n)
    return probs, labels


@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_an_edge_value_belongs_to_the_bin_below(engine):
    probs = np.array([[0.6, 0.4], [0.4, 0.6], [0.55, 0.45], [0.8, 0.2]])
    with use_backend(engine):
        bins = calibkit.reliability_bins(probs, [0, 0, 1, 0], n_bins=10)
    # 1-based bins: 0.6 -> bin 6 (0.5, 0.6], 0.55 -> bin 6 (0.5, 0.6], 0.8 -> bin 8 (0.7, 0.8]
    assert bins["count"].tolist() == [0, 0, 0, 0, 0, 3, 0, 1, 0, 0]
    assert bins["confidence"][5] == pytest.approx((0.6 + 0.6 + 0.55) / 3)


@pytest.mark.parametrize("engine", ["numba", "torch"])
@pytest.mark.parametrize("n_bins", [10, 20])
def test_top_label_bins_on_edges(engine, n_bins):
    probs, labels = edge_data(1)
    rows, binary = ref.rows_of(probs, labels)
    table = ref.bins(ref.top_pairs(rows, binary), n_bins)
    with use_backend(engine):
        got = calibkit.reliability_bins(probs, labels, n_bins=n_bins)
    assert got["count"].tolist() == [row[0] for row in table]


@pytest.mark.parametrize("engine", ["numba", "torch"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_binned_metric_on_edges_matches_the_loops(engine, dtype):
    probs, labels = edge_data(2)
    probs = probs.astype(dtype)
    rows, binary = ref.rows_of(probs, labels)  # the float32 values, read in float64
    pairs = ref.top_pairs(rows, binary)
    per_class = ref.subset_ece(rows, binary, 2, 10)
    counts = [sum(1 for _, y in rows if y == k) for k in range(2)]
    want = {
        "ece": ref.ece(pairs, 10),
        "mce": ref.mce(pairs, 10),
        "esce": ref.esce(pairs, 10),
        "rbece": ref.rbece(pairs, 10, 5),
        "sce": ref.sce(rows, 2, 10),
        **ref.class_summary(per_class, counts, ref.ece(pairs, 10)),
    }
    with use_backend(engine):
        got = calibkit.calibration_report(probs, labels, n_bins=10, sce_bins=10, rbece_bins=10, esce_bins=10, theta=5)
        subset = calibkit.subset_ece(probs, labels, n_bins=10)
    for name, value in want.items():
        assert got[name] == pytest.approx(value, rel=1e-12, abs=1e-15), name
    assert np.allclose(subset, per_class, rtol=1e-12)
    assert not any(math.isnan(v) for v in want.values())
