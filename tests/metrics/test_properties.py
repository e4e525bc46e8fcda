"""Invariants: batching and merging equal one pass, permutations change nothing, the ACE bound holds."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import calibkit
from calibkit.metrics import CalibrationAccumulator
from tests.conftest import make_data

SCALARS = [m for m in calibkit.METRICS if m != "subset_ece"] + ["accuracy"]


def assert_reports_equal(a, b, tol=1e-9, skip=()):
    for key in SCALARS:
        if key in skip:
            continue
        np.testing.assert_allclose(a[key], b[key], rtol=tol, atol=tol, equal_nan=True, err_msg=key)
    np.testing.assert_allclose(a["subset_ece"], b["subset_ece"], rtol=tol, atol=tol, equal_nan=True)
    assert a["n"] == b["n"]


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


data_cases = st.tuples(
    st.integers(0, 10_000),
    st.sampled_from(["binary", "multiclass", "token"]),
    st.integers(2, 6),
    st.booleans(),
    st.sampled_from([None, 1]),  # round probabilities to 1 decimal: many exact ties
)


def build(seed, kind, k, from_logits, decimals, n=120):
    probs, labels = make_data(seed, kind, n, k, from_logits, sharpness=1.5)
    if decimals is not None and not from_logits:
        if kind == "binary":
            probs = np.round(probs, decimals)
        else:
            probs = np.round(probs, decimals)
            probs[..., -1] = 1 - probs[..., :-1].sum(-1)  # keep rows summing to 1
            bad = (probs < 0).any(-1)
            probs[bad] = 1.0 / k
    return probs, labels


@settings(max_examples=40, deadline=None)
@given(case=data_cases, cuts=st.lists(st.floats(0, 1), max_size=5))
def test_random_batches_merged_equal_one_pass(case, cuts):
    seed, kind, k, from_logits, decimals = case
    probs, labels = build(seed, kind, k, from_logits, decimals)
    edges = sorted({0, len(labels), *(int(c * len(labels)) for c in cuts)})
    one = quiet(CalibrationAccumulator(from_logits=from_logits, theta=2).update(probs, labels).compute)
    # two shards (two "processes"), each fed uneven batches, then merged
    shards = [CalibrationAccumulator(from_logits=from_logits, theta=2) for _ in range(2)]
    for i, (a, b) in enumerate(zip(edges[:-1], edges[1:])):
        shards[i % 2].update(probs[a:b], labels[a:b])
    merged = quiet(shards[0].merge(shards[1]).compute)
    assert_reports_equal(merged, one)
    assert merged["ace_error_bound"] == pytest.approx(one["ace_error_bound"], abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(case=data_cases, perm_seed=st.integers(0, 1000))
def test_permuting_samples_changes_nothing(case, perm_seed):
    seed, kind, k, from_logits, decimals = case
    probs, labels = build(seed, kind, k, from_logits, decimals)
    order = np.random.default_rng(perm_seed).permutation(len(labels))
    a = quiet(calibkit.calibration_report, probs, labels, from_logits=from_logits, theta=2)
    b = quiet(calibkit.calibration_report, probs[order], labels[order], from_logits=from_logits, theta=2)
    assert_reports_equal(a, b)


@settings(max_examples=40, deadline=None)
@given(case=data_cases, n_ranges=st.integers(1, 20))
def test_streaming_ace_within_its_bound_of_exact(case, n_ranges):
    seed, kind, k, from_logits, decimals = case
    probs, labels = build(seed, kind, k, from_logits, decimals, n=300)
    exact = calibkit.ace(probs, labels, ace_ranges=n_ranges, from_logits=from_logits)
    stream = CalibrationAccumulator(["ace"], ace_ranges=n_ranges, from_logits=from_logits)
    out = stream.update(probs, labels).compute()
    assert abs(out["ace"] - exact) <= out["ace_error_bound"] + 1e-12


def test_streaming_ace_is_close_on_real_sized_data():
    # measured: |error| 5e-7 .. 7e-5 at 1e4 .. 1e6 samples; the worst-case bound is ~0.03
    probs, labels = make_data(0, "multiclass", 100_000, 5, sharpness=3)
    exact = calibkit.ace(probs, labels)
    out = CalibrationAccumulator(["ace"]).update(probs, labels).compute()
    assert abs(out["ace"] - exact) <= out["ace_error_bound"] < 0.05
    assert abs(out["ace"] - exact) < 5e-4


def test_threads_do_not_change_the_result():
    probs, labels = make_data(1, "token", 30_000, 4, from_logits=True)
    one = quiet(calibkit.calibration_report, probs, labels, from_logits=True, num_threads=1)
    many = quiet(calibkit.calibration_report, probs, labels, from_logits=True, num_threads=4)
    assert_reports_equal(one, many)


def test_merge_rejects_different_settings():
    a = CalibrationAccumulator(n_bins=10).update([[0.2, 0.8]], [1])
    with pytest.raises(ValueError, match="n_bins"):
        a.merge(CalibrationAccumulator(n_bins=15))
    with pytest.raises(ValueError, match=r"`probs` of batch 1 \(counting from 0\) has 3 classes"):
        a.update([[0.2, 0.3, 0.5]], [1])


def test_accumulator_skips_all_padding_batches():
    acc = CalibrationAccumulator(["ece"])
    acc.update(np.full((2, 3, 2), 0.5), np.full((2, 3), -100))
    acc.update([[0.9, 0.1]], [0])
    assert acc.compute()["n"] == 1
