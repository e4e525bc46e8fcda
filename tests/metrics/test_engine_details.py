"""Details of the engines and the input checks that the metric values alone do not pin down.

Written against mutants that survived the mutation run (benchmarks/mutation.py): each test
names the quantity it pins; small inputs, so that it also runs with the kernels as plain Python.
"""

import numpy as np
import pytest
import torch

import calibkit
from calibkit.metrics.backends import use_backend
from calibkit.metrics.engines import fill_statistics
from calibkit.metrics.registry import plan
from calibkit.metrics.settings import CalibrationSettings
from calibkit.metrics.validation import _device_labels, prepare


def data(n=400, k=4, seed=0, masked=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 2
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    y = rng.integers(0, k, n)
    y[rng.choice(n, masked, replace=False)] = -100
    return p, y


@pytest.mark.parametrize(
    "dtype, expected",
    [(np.int8, np.float32), (np.int16, np.float32), (np.int32, np.float32), (np.int64, np.float64)],
)
def test_integer_probabilities_become_the_float_of_their_width(dtype, expected):
    """0/1 probabilities stored as integers: up to 4 bytes as float32, 8 bytes as float64."""
    p = np.array([[0, 1], [1, 0]], dtype=dtype)
    assert prepare(p, [1, 0], from_logits=False, ignore_index=-100, next_token=False).values.dtype == expected


@pytest.mark.parametrize("bad", [2.0**63, -(2.0**64), float("nan"), 1.5])
def test_float_label_tensors_outside_int64_are_refused_at_their_position(bad):
    """The labels of a tensor on a device are checked there (CPU stands in for CUDA)."""
    labels = torch.tensor([1.0, 0.0, bad, 0.0], dtype=torch.float64)
    with pytest.raises(ValueError, match=r"`labels` must be integers that fit in int64.* at position 2"):
        _device_labels(labels, "cpu")
    assert _device_labels(torch.tensor([1.0, -(2.0**63), 2.0**62]), "cpu").dtype == torch.int64


def test_exact_ace_is_the_same_for_any_number_of_thread_ranges(monkeypatch):
    """The gather of the cut buckets' samples writes each range's samples after the previous ones."""
    monkeypatch.setattr("calibkit.metrics.engines.threads._MIN_ROWS_PER_THREAD", 100)  # ranges of a few rows
    p, y = data(n=900, k=3, seed=1)
    one = calibkit.calibration_report(p, y, metrics=["ace"], num_threads=1)
    for threads in (2, 3, 5):
        many = calibkit.calibration_report(p, y, metrics=["ace"], num_threads=threads)
        assert many["ace"] == pytest.approx(one["ace"], rel=1e-12) and many["ace_error_bound"] == 0.0, threads


@pytest.mark.parametrize("fce_bins", [2, 3, 7, 15])
def test_torch_fuzzy_sums_equal_the_kernels(fce_bins):
    """Every fuzzy bin with a membership is among the torch engine's candidate bins."""
    p, y = data(n=600, k=3, seed=fce_bins)
    sums = plan(["fce"], CalibrationSettings(fce_bins=fce_bins))
    prep = prepare(p, y, from_logits=False, ignore_index=-100, next_token=False)
    kernel = fill_statistics(prep, sums, ignore_index=-100, engine="numba").statistics.fuzzy
    torch_sums = fill_statistics(prep, sums, ignore_index=-100, engine="torch").statistics.fuzzy
    np.testing.assert_allclose(torch_sums, kernel, rtol=1e-12, atol=1e-12)


def test_torch_probability_rows_skip_the_masked_labels():
    p, y = data(n=300, k=4, seed=3, masked=60)
    with use_backend("numba"):
        expected = calibkit.ece(torch.from_numpy(p), torch.from_numpy(y))
    with use_backend("torch"):
        got = calibkit.ece(torch.from_numpy(p), torch.from_numpy(y))
    assert got == pytest.approx(expected, abs=1e-12)
    assert got == pytest.approx(calibkit.ece(p[y != -100], y[y != -100]), abs=1e-12)


def test_torch_sums_of_row_ranges_equal_the_kernels():
    """The torch engine's sums over each given range (the bootstrap's blocks), not over all rows."""
    p, y = data(n=500, k=3, seed=4)
    sums = plan(["ece", "sce", "nll"], CalibrationSettings())
    prep = prepare(p, y, from_logits=False, ignore_index=-100, next_token=False)
    ranges = [(0, 120), (120, 333), (333, 500)]
    kernel = fill_statistics(prep, sums, ignore_index=-100, engine="numba", ranges=ranges, keep_parts=True)
    torch_ = fill_statistics(prep, sums, ignore_index=-100, engine="torch", ranges=ranges, keep_parts=True)
    for a, b in zip(kernel.parts, torch_.parts):
        assert a.n == b.n
        np.testing.assert_allclose(b.top, a.top, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_class_wise_bin_counts_of_long_rows_add_up_to_the_rows(engine):
    """Long rows (K >= 16) add their many small values to each column's first bin in a vector
    loop: every column's bin counts must still add up to the rows counted."""
    p, y = data(n=200, k=20, seed=5, masked=17)
    sums = plan(["sce"], CalibrationSettings())
    prep = prepare(p, y, from_logits=False, ignore_index=-100, next_token=False)
    stats = fill_statistics(prep, sums, ignore_index=-100, engine=engine).statistics
    np.testing.assert_array_equal(stats.classwise[:, :, 0].sum(axis=1), np.full(20, 183.0))
    first_bin = ((p[y != -100] * 15) * (1 - 2.0**-40) <= 1.0).sum(axis=0)  # the kernels' bin-1 test
    np.testing.assert_array_equal(stats.classwise[:, 0, 0], first_bin)
