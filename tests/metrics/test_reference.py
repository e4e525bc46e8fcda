"""Every metric against the plain-loop references of tests/metrics/reference.py."""

import math

import numpy as np
import pytest

import calibkit
from tests.conftest import make_data
from tests.metrics import reference as ref

CASES = [
    # kind, n, classes, from_logits, n_bins
    ("multiclass", 300, 4, False, 15),
    ("multiclass", 257, 3, True, 10),
    ("multiclass", 120, 7, False, 5),
    ("multiclass", 90, 2, True, 1),
    ("binary", 300, 2, False, 15),
    ("binary", 211, 2, True, 7),
    ("token", 40, 5, False, 15),
    ("token", 35, 3, True, 12),
]


def close(a, b, tol=1e-9):
    if isinstance(b, float) and math.isnan(b):
        return math.isnan(a)
    return abs(a - b) <= tol * max(1.0, abs(b))


# Rows of 16 classes or more take other kernel paths (vectorised maxima, fixed-point softmax
# sums, a first class-wise bin summed apart); float32 input takes the spare-bit argmax.
LONG_CASES = [
    # kind, n, classes, from_logits, n_bins, dtype
    ("multiclass", 310, 20, False, 15, np.float64),
    ("multiclass", 290, 33, False, 15, np.float32),
    ("multiclass", 260, 33, True, 10, np.float64),
    ("multiclass", 240, 20, True, 15, np.float32),
    ("token", 30, 17, False, 15, np.float32),
    ("token", 25, 18, True, 6, np.float64),
    ("multiclass", 500, 300, True, 15, np.float32),  # softmax sums in two fixed-point words
]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("kind,n,k,from_logits,n_bins", CASES)
def test_report_matches_reference(seed, kind, n, k, from_logits, n_bins):
    probs, labels = make_data(seed, kind, n, k, from_logits)
    check_report(probs, labels, k, from_logits, n_bins)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("kind,n,k,from_logits,n_bins,dtype", LONG_CASES)
def test_report_on_long_rows_matches_reference(seed, kind, n, k, from_logits, n_bins, dtype):
    probs, labels = make_data(seed, kind, n, k, from_logits, sharpness=3.0)
    probs = probs.astype(dtype)  # the reference reads the very same (rounded) values
    check_report(probs, labels, k, from_logits, n_bins)
    # SCE alone takes the class-wise pass without the ACE histogram
    rows, _ = ref.rows_of(probs, labels, from_logits=from_logits)
    alone = calibkit.sce(probs, labels, sce_bins=n_bins, from_logits=from_logits)
    assert close(alone, ref.sce(rows, k, n_bins)), (alone, ref.sce(rows, k, n_bins))


@pytest.mark.parametrize("sce_bins", [4, 8, 10, 15, 16])
def test_long_row_class_wise_bins_on_bucket_edges(sce_bins):
    # The report builds long rows' class-wise bins from the ACE buckets: values exactly on a
    # bin edge m/M that is also a bucket edge (0.5, 0.25, 0.75, ...) belong to the bin below.
    rng = np.random.default_rng(sce_bins)
    k = 20
    templates = np.array(
        [
            [0.5, 0.25, 0.125, 0.0625] + [0.0625 / 16] * 16,
            [0.75, 0.125, 0.0625] + [0.0625 / 17] * 17,
            [0.375, 0.3, 0.2, 0.1] + [0.025 / 16] * 16,
        ]
    )
    probs = templates[rng.integers(0, 3, 600)]
    probs = np.take_along_axis(probs, rng.permuted(np.tile(np.arange(k), (600, 1)), axis=1), axis=1)
    labels = rng.integers(0, k, 600)
    rows, _ = ref.rows_of(probs, labels, from_logits=False)
    expected = ref.sce(rows, k, sce_bins)
    report = calibkit.calibration_report(probs, labels, sce_bins=sce_bins)
    assert close(report["sce"], expected), (report["sce"], expected)
    assert close(calibkit.sce(probs, labels, sce_bins=sce_bins), expected)


def test_long_row_class_wise_bins_come_from_ace_buckets_only_for_few_bins(monkeypatch):
    # Bins narrower than the widest ACE bucket (1/32) would cut most buckets, and the exact pass
    # would copy most of the data: past CLASSWISE_FROM_ACE_MAX_BINS the first pass keeps its
    # own class-wise histogram.
    from calibkit.metrics import _kernels

    copied = []
    binned = _kernels.classwise_of_samples

    def spy(samples, *args):
        copied.append(samples.size)
        return binned(samples, *args)

    monkeypatch.setattr(_kernels, "classwise_of_samples", spy)
    probs, labels = make_data(0, "multiclass", 400, 20, False, sharpness=3.0)
    rows, _ = ref.rows_of(probs, labels, from_logits=False)
    for sce_bins, derived in ((32, True), (33, False), (1000, False)):
        copied.clear()
        report = calibkit.calibration_report(probs, labels, sce_bins=sce_bins)
        assert bool(copied) == derived, sce_bins
        assert close(report["sce"], ref.sce(rows, 20, sce_bins))


def check_report(probs, labels, k, from_logits, n_bins):
    rows, binary = ref.rows_of(probs, labels, from_logits=from_logits)
    num_classes = 2 if binary else k
    theta = 3
    got = calibkit.calibration_report(
        probs,
        labels,
        from_logits=from_logits,
        n_bins=n_bins,
        ace_ranges=n_bins,
        sce_bins=n_bins,
        rbece_bins=n_bins + 5,
        theta=theta,
        fce_bins=n_bins,
        esce_bins=max(n_bins - 3, 1),
    )
    pairs = ref.top_pairs(rows, binary)
    per_class = ref.subset_ece(rows, binary, num_classes, n_bins)
    counts = [sum(1 for _, y in rows if y == c) for c in range(num_classes)]
    overall = ref.ece(pairs, n_bins)
    expected = {
        "ece": overall,
        "mce": ref.mce(pairs, n_bins),
        "ace": ref.ace(rows, num_classes, n_bins),
        "sce": ref.sce(rows, num_classes, n_bins),
        "rbece": ref.rbece(pairs, n_bins + 5, theta),
        "fce": ref.fce(pairs, n_bins),
        "overconfidence": ref.overconfidence(rows),
        "ecd": ref.ecd(rows),
        "esce": ref.esce(pairs, max(n_bins - 3, 1)),
        "brier": ref.brier(rows, binary),
        "nll": ref.nll(rows),
        "accuracy": ref.accuracy(rows),
        # the variance is around the top-label ECE (for 1-D binary input not `ece`, SPEC.md)
        **ref.class_summary(per_class, counts, ref.ece(ref.top_pairs(rows, False), n_bins)),
    }
    for name, value in expected.items():
        assert close(got[name], value), (name, got[name], value)
    np.testing.assert_allclose(got["subset_ece"], per_class, rtol=1e-9, atol=1e-12)
    assert got["n"] == len(rows)
    assert got["num_classes"] == num_classes
    assert got["ace_error_bound"] == 0.0


@pytest.mark.parametrize("kind,n,k,from_logits,n_bins", CASES[:1] + CASES[4:5] + CASES[6:7])
def test_single_metric_functions_match_report(kind, n, k, from_logits, n_bins):
    probs, labels = make_data(3, kind, n, k, from_logits)
    kw = {"from_logits": from_logits}
    report = calibkit.calibration_report(probs, labels, n_bins=n_bins, theta=3, **kw)
    assert calibkit.ece(probs, labels, n_bins=n_bins, **kw) == pytest.approx(report["ece"], abs=1e-12)
    assert calibkit.mce(probs, labels, n_bins=n_bins, **kw) == pytest.approx(report["mce"], abs=1e-12)
    assert calibkit.ace(probs, labels, **kw) == pytest.approx(report["ace"], abs=1e-12)
    assert calibkit.sce(probs, labels, **kw) == pytest.approx(report["sce"], abs=1e-12)
    for name in ("cece", "msece", "wsece", "ece_variance"):
        assert getattr(calibkit, name)(probs, labels, n_bins=n_bins, **kw) == pytest.approx(report[name], abs=1e-12)
    np.testing.assert_allclose(calibkit.subset_ece(probs, labels, n_bins=n_bins, **kw), report["subset_ece"])
    assert calibkit.rbece(probs, labels, theta=3, **kw) == pytest.approx(report["rbece"], abs=1e-12)
    assert calibkit.fce(probs, labels, **kw) == pytest.approx(report["fce"], abs=1e-12)
    assert calibkit.overconfidence(probs, labels, **kw) == pytest.approx(report["overconfidence"], abs=1e-12)
    assert calibkit.ecd(probs, labels, **kw) == pytest.approx(report["ecd"], abs=1e-12)
    assert calibkit.esce(probs, labels, **kw) == pytest.approx(report["esce"], abs=1e-12)
    assert calibkit.brier(probs, labels, **kw) == pytest.approx(report["brier"], abs=1e-12)
    assert calibkit.nll(probs, labels, **kw) == pytest.approx(report["nll"], abs=1e-12)


def test_reliability_bins_match_reference():
    probs, labels = make_data(5, "multiclass", 400, 3)
    rows, binary = ref.rows_of(probs, labels)
    pairs = ref.top_pairs(rows, binary)
    value, bins = calibkit.ece(probs, labels, n_bins=10, return_bins=True)
    table = ref.bins(pairs, 10)
    np.testing.assert_array_equal(bins["count"], [t[0] for t in table])
    for b, (cnt, sc, sa) in enumerate(table):
        if cnt:
            assert bins["confidence"][b] == pytest.approx(sc / cnt)
            assert bins["accuracy"][b] == pytest.approx(sa / cnt)
            assert bins["gap"][b] == pytest.approx(sa / cnt - sc / cnt)
            members = [r for r, (c, _) in zip(rows, pairs) if ref.bin_of(c, 10) == b]
            assert bins["ecd"][b] == pytest.approx(ref.ecd(members))
        else:
            assert math.isnan(bins["confidence"][b])
    assert bins["ece_contribution"].sum() == pytest.approx(value)
    np.testing.assert_allclose(bins["edges"], np.linspace(0, 1, 11))
    e, b2 = calibkit.esce(probs, labels, return_bins=True)
    assert b2["esce_contribution"].sum() == pytest.approx(e)
    d, b3 = calibkit.ecd(probs, labels, return_bins=True)
    assert np.nansum(b3["ecd"] * b3["count"]) / b3["count"].sum() == pytest.approx(d)


def test_ties_take_first_index_and_exact_edges():
    # A tie between classes predicts the first class; right-closed bins: 0.5 in (0.4, 0.6], 0.8 in (0.6, 0.8].
    probs = np.array([[0.5, 0.5], [0.5, 0.5], [0.2, 0.8]])
    labels = np.array([0, 1, 1])
    bins = calibkit.reliability_bins(probs, labels, n_bins=5)
    assert bins["count"].tolist() == [0, 0, 2, 1, 0]
    assert bins["accuracy"][2] == 0.5
    assert calibkit.calibration_report(probs, labels)["accuracy"] == pytest.approx(2 / 3)
    # 0 goes to the first bin, 0.2 closes it, 1.0 closes the last (binary 1-D: class-1 probability)
    assert calibkit.reliability_bins([0.0, 0.2, 1.0], [0, 1, 1], n_bins=5)["count"].tolist() == [2, 0, 0, 0, 1]
