"""Bin edges pinned on both engines: a value on an edge belongs to the bin below (right-closed bins,
SPEC.md), p = 0.6 lands in bin 6 of 10 counting from 1, i.e. ``(0.5, 0.6]``.

Random floats never land on an edge, so the engines are compared here on values that do, for
every metric that bins (top-label, class-wise, region and entropic sign), against the plain
loops of tests/metrics/reference.py.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
        **ref.class_summary(per_class, counts, ref.ece(ref.top_pairs(rows, False), 10)),
    }
    with use_backend(engine):
        got = calibkit.calibration_report(probs, labels, n_bins=10, sce_bins=10, rbece_bins=10, esce_bins=10, theta=5)
        subset = calibkit.subset_ece(probs, labels, n_bins=10)
    for name, value in want.items():
        assert got[name] == pytest.approx(value, rel=1e-12, abs=1e-15), name
    assert np.allclose(subset, per_class, rtol=1e-12)
    assert not any(math.isnan(v) for v in want.values())


@settings(max_examples=40, deadline=None)
@given(
    total=st.integers(2, 40),
    k=st.sampled_from([2, 3, 5]),  # each class count up to 8 compiles its own short-row kernels
    n=st.integers(1, 300),
    n_bins=st.sampled_from([2, 3, 4, 5, 8, 10, 15, 20]),
    dtype=st.sampled_from([np.float16, np.float32, np.float64]),
    from_logits=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_both_engines_bin_values_on_edges_alike(total, k, n, n_bins, dtype, from_logits, seed):
    # Every probability is count/total: on an edge whenever total and n_bins share a factor; as
    # logits, log(count), whose softmax the two engines compute with different exp functions.
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.integers(0, total + 1, (n, k - 1)), axis=1)
    counts = np.diff(np.concatenate([np.zeros((n, 1)), cuts, np.full((n, 1), total)], axis=1), axis=1)
    labels = rng.integers(0, k, n)
    if from_logits:
        values = np.log(np.maximum(counts, 0.5)).astype(dtype)  # a zero count: a small logit
    else:
        values = (counts / total).astype(dtype)
        if dtype == np.float16 and np.any(np.abs(values.astype(np.float64).sum(1) - 1) > 1e-3):
            return  # float16 rounding pushed a row past the row-sum tolerance: refused by both, not binned
    bins = dict(n_bins=n_bins, sce_bins=n_bins, rbece_bins=n_bins, esce_bins=n_bins, fce_bins=n_bins, theta=0)
    results = []
    for engine in ("numba", "torch"):
        with use_backend(engine):
            results.append(calibkit.calibration_report(values, labels, from_logits=from_logits, **bins))
    kernels, torch_ = results
    for key, want in kernels.items():
        if key.startswith("ace"):  # equal-mass ranges: near-ties may split apart (SPEC.md)
            continue
        np.testing.assert_allclose(torch_[key], want, rtol=1e-12, atol=1e-15, err_msg=key)
