"""Every kernel path, both engines and the input checks on small inputs, against plain-loop references.

Small on purpose (tens of rows): these run in well under a second each, also with the kernels as plain
Python (``NUMBA_DISABLE_JIT=1``, as benchmarks/mutation.py runs them), and still reach every mode
(probabilities, logits, binary of each, tokens with ignored labels), short rows and long rows
(K >= 16, float32 and float64), ties, values on bin edges and the input errors with their first row.
"""

import math

import numpy as np
import pytest

import calibkit
from calibkit.metrics._kernels import bins as kbins
from calibkit.metrics._kernels.constants import ACE_BUCKETS, ACE_OFFSET
from calibkit.metrics.backends import use_backend
from tests.conftest import make_data
from tests.metrics import reference as ref
from tests.metrics.test_reference import check_report, close

SMALL_CASES = [
    # kind, n, classes, from_logits, n_bins, dtype, sharpness
    ("multiclass", 40, 4, False, 5, np.float64, 2.0),
    ("multiclass", 37, 3, True, 4, np.float64, 2.0),
    ("multiclass", 30, 5, True, 6, np.float32, 3.0),
    ("multiclass", 30, 4, False, 3, np.float32, 2.0),
    ("binary", 45, 2, False, 6, np.float64, 2.0),
    ("binary", 41, 2, True, 5, np.float64, 2.0),
    ("binary", 33, 2, True, 4, np.float32, 2.0),
    ("token", 8, 3, False, 5, np.float64, 2.0),
    ("token", 7, 4, True, 4, np.float64, 2.0),
    ("multiclass", 1500, 4, True, 5, np.float64, 2.0),  # 3 blocks of the short-row kernels
    ("multiclass", 30, 12, False, 5, np.float64, 2.0),  # 9-15 classes: the kernels for any count
    ("token", 6, 11, True, 4, np.float32, 2.0),
    ("multiclass", 25, 20, False, 5, np.float64, 3.0),
    ("multiclass", 25, 18, False, 4, np.float32, 3.0),
    ("multiclass", 25, 17, True, 5, np.float64, 3.0),
    ("multiclass", 25, 33, True, 6, np.float32, 3.0),
    ("token", 4, 17, True, 5, np.float32, 3.0),
    ("multiclass", 12, 300, True, 4, np.float32, 3.0),
]


def small(case, seed):
    kind, n, k, from_logits, n_bins, dtype, sharpness = case
    probs, labels = make_data(seed, kind, n, k, from_logits, length=5, sharpness=sharpness)
    return probs.astype(dtype), labels


@pytest.mark.parametrize("engine", ["numba", "torch"])
@pytest.mark.parametrize("case", SMALL_CASES, ids=lambda c: f"{c[0]}-{c[2]}-{'logits' if c[3] else 'probs'}-{c[5]}")
def test_report_on_small_inputs_matches_plain_loops(engine, case):
    kind, n, k, from_logits, n_bins, dtype, _ = case
    for seed in (0, 1):
        probs, labels = small(case, seed)
        with use_backend(engine):
            check_report(probs, labels, k, from_logits, n_bins)


@pytest.mark.parametrize("engine", ["numba", "torch"])
@pytest.mark.parametrize("n_bins", [1, 2, 5, 10])
def test_reliability_table_on_edges_and_ties_matches_plain_loops(engine, n_bins):
    # confidences exactly on bin edges m/10 (in the bin below), ties (first class predicted) and 0/1
    probs = np.array(
        [
            [0.5, 0.5, 0.0],
            [0.2, 0.3, 0.5],
            [0.1, 0.1, 0.8],
            [0.6, 0.2, 0.2],
            [0.4, 0.4, 0.2],
            [1.0, 0.0, 0.0],
            [0.0, 0.7, 0.3],
            [0.3, 0.3, 0.4],
            [0.25, 0.45, 0.3],
            [0.9, 0.05, 0.05],
        ]
    )
    labels = np.array([1, 2, 0, 0, 0, 0, 1, 2, 1, 0])
    rows, binary = ref.rows_of(probs, labels)
    pairs = ref.top_pairs(rows, binary)
    table = ref.bins(pairs, n_bins)
    with use_backend(engine):
        value, bins = calibkit.ece(probs, labels, n_bins=n_bins, return_bins=True)
        check_report(probs, labels, 3, False, n_bins)
    np.testing.assert_array_equal(bins["count"], [t[0] for t in table])
    for b, (count, conf, acc) in enumerate(table):
        if count:
            assert bins["confidence"][b] == pytest.approx(conf / count, abs=1e-12)
            assert bins["accuracy"][b] == pytest.approx(acc / count, abs=1e-12)
        else:
            assert math.isnan(bins["confidence"][b])
    assert value == pytest.approx(ref.ece(pairs, n_bins), abs=1e-12)


@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_single_metrics_on_small_token_input_match_plain_loops(engine):
    probs, labels = make_data(4, "token", 6, 4, False, length=5)
    rows, binary = ref.rows_of(probs, labels)
    pairs = ref.top_pairs(rows, binary)
    with use_backend(engine):
        assert close(calibkit.ece(probs, labels, n_bins=4), ref.ece(pairs, 4))
        assert close(calibkit.mce(probs, labels, n_bins=4), ref.mce(pairs, 4))
        assert close(calibkit.ace(probs, labels, ace_ranges=3), ref.ace(rows, 4, 3))
        assert close(calibkit.sce(probs, labels, sce_bins=4), ref.sce(rows, 4, 4))
        assert close(calibkit.brier(probs, labels), ref.brier(rows, binary))
        assert close(calibkit.nll(probs, labels), ref.nll(rows))
        assert close(calibkit.ecd(probs, labels), ref.ecd(rows))
        assert close(calibkit.overconfidence(probs, labels), ref.overconfidence(rows))
        assert close(calibkit.fce(probs, labels, fce_bins=4), ref.fce(pairs, 4))
        assert close(calibkit.esce(probs, labels, esce_bins=4), ref.esce(pairs, 4))


def bad(kind):
    probs = np.full((6, 3), 1 / 3)
    labels = np.array([0, 1, 2, 0, 1, 2])
    if kind == "nonfinite nan":
        probs[3, 1] = np.nan
    elif kind == "nonfinite inf":
        probs[4, 0] = np.inf
    elif kind == "range":
        probs[2] = [1.2, -0.1, -0.1]
    elif kind == "sum":
        probs[5] = [0.5, 0.3, 0.3]
    elif kind == "label":
        labels[4] = 3
    elif kind == "negative label":
        labels[1] = -5
    return probs, labels


@pytest.mark.parametrize("engine", ["numba", "torch"])
@pytest.mark.parametrize(
    "kind,message",
    [
        ("nonfinite nan", r"`probs` contains NaN or inf at position 3"),
        ("nonfinite inf", r"`probs` contains NaN or inf at position 4"),
        ("range", r"`probs` has a value outside \[0, 1\] at position 2"),
        ("sum", r"`probs` rows must sum to 1 \(tolerance 0.001\); the row at position 5 sums to 1.1"),
        ("label", r"`labels` must lie in \[0, 3\) or equal ignore_index=-100; got 3 at position 4"),
        ("negative label", r"`labels` must lie in \[0, 3\) or equal ignore_index=-100; got -5 at position 1"),
    ],
)
def test_bad_rows_are_reported_at_their_first_position(engine, kind, message):
    probs, labels = bad(kind)
    with use_backend(engine), pytest.raises(ValueError, match=message):
        calibkit.calibration_report(probs, labels)


@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_rows_within_the_tolerance_and_ignored_rows_are_accepted(engine):
    probs = np.array([[0.5, 0.5004], [0.2, 0.7995], [2.0, -1.0], [1.0, 0.0]])
    labels = np.array([0, 1, -100, 1])
    rows, binary = ref.rows_of(probs, labels)
    with use_backend(engine):
        got = calibkit.calibration_report(probs, labels, n_bins=2)
    assert got["n"] == 3
    assert close(got["ece"], ref.ece(ref.top_pairs(rows, binary), 2))
    assert close(got["brier"], ref.brier(rows, binary))
    with use_backend(engine), pytest.raises(ValueError, match="position 1"):
        calibkit.calibration_report(np.array([[0.5, 0.5], [0.2, 0.7985]]), np.array([0, 1]))
    with use_backend(engine), pytest.raises(ValueError, match="position"):
        calibkit.calibration_report(np.array([0.5, 1.5]), np.array([0, 1]))
    with use_backend(engine), pytest.raises(ValueError, match="position"):
        calibkit.calibration_report(np.array([0.5, 0.5]), np.array([0, 2]))
    with use_backend(engine), pytest.raises(ValueError, match="position"):
        calibkit.calibration_report(np.array([0.5, 0.5]), np.array([0, -1]), ignore_index=-7)


def test_bin_of_a_probability_is_right_closed_with_zero_in_the_first():
    probs = np.array([0.0, 1e-300, 0.1, 0.1 + 1e-12, 0.25, 0.3, 0.5, 0.7, 0.75, 0.99, 1.0])
    for n_bins in (1, 3, 4, 10):
        out = np.empty(probs.size, dtype=np.int64)
        kbins._equal_width_bins(probs, out, probs.size, n_bins)
        np.testing.assert_array_equal(out, [ref.bin_of(p, n_bins) for p in probs])


def plain_bucket(p):
    # the top 16 bits of the float64 pattern, offset; 0 below 2**-64, never past the last bucket
    bits = int(np.float64(p).view(np.int64))
    return min(max((bits >> 48) - ACE_OFFSET, 0), ACE_BUCKETS - 1)


def test_ace_buckets_follow_the_float_pattern_and_invert():
    probs = np.array([0.0, 2.0**-80, 2.0**-64, 2.0**-63, 1e-10, 0.01, 0.3, 0.5, 0.51, 0.999, 1.0])
    bits = probs.view(np.int64)
    expected = [plain_bucket(p) for p in probs]
    out = np.empty(probs.size, dtype=np.int64)
    kbins._ace_buckets(bits, out, probs.size)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(kbins.ace_buckets_of_patterns(bits), expected)
    lower, upper = kbins.ace_bucket_bounds(ACE_BUCKETS)
    lo_bits, hi_bits = kbins.ace_bucket_patterns(np.array(expected))
    for p, b, lo, hi in zip(probs, expected, lo_bits, hi_bits):
        assert lower[b] <= p <= upper[b]
        assert lo <= np.float64(p).view(np.int64) <= hi
        assert plain_bucket(np.int64(lo).view(np.float64)) == b == plain_bucket(np.int64(hi).view(np.float64))
    assert lower[0] == 0.0 and upper[-1] == 1.0
    assert lower[1] == 2.0**-64 and np.all(lower[1:] == upper[:-1])
    assert ACE_BUCKETS == plain_bucket(1.0) + 1


def plain_l2(rows, n_bins, debias):
    """Top-label L2 calibration error (debiased: Kumar et al. 2019), one sample at a time."""
    members = [[] for _ in range(n_bins)]
    for conf, correct in ref.top_pairs(rows, False):
        members[ref.bin_of(conf, n_bins)].append((conf, correct))
    total = 0.0
    for inside in members:
        n = len(inside)
        if n == 0 or (debias and n < 2):
            continue
        conf = sum(c for c, _ in inside) / n
        acc = sum(a for _, a in inside) / n
        term = (acc - conf) ** 2 - (acc * (1 - acc) / (n - 1) if debias else 0.0)
        total += n / len(rows) * term
    return math.sqrt(max(total, 0.0))


@pytest.mark.parametrize("seed", range(3))
def test_l2_and_debiased_l2_match_plain_loops(seed):
    probs, labels = make_data(seed, "multiclass", 60, 3, sharpness=1.0 + seed)
    rows, _ = ref.rows_of(probs, labels)
    for n_bins in (2, 5, 8):
        assert close(calibkit.ece_l2(probs, labels, n_bins=n_bins), plain_l2(rows, n_bins, False))
        assert close(calibkit.ece_l2_debiased(probs, labels, n_bins=n_bins), plain_l2(rows, n_bins, True))
    # a calibrated-looking set where the bias correction exceeds the squared gaps: 0, not NaN
    flat = np.array([[0.5, 0.5]] * 4 + [[0.25, 0.75]] * 4)
    assert calibkit.ece_l2_debiased(flat, np.array([0, 1, 0, 1, 1, 1, 1, 0]), n_bins=2) == 0.0


def test_streaming_ace_lies_within_its_bound_of_the_exact_ace():
    from calibkit.metrics.accumulator import CalibrationAccumulator

    probs, labels = make_data(8, "multiclass", 80, 3, sharpness=1.5)
    rows, _ = ref.rows_of(probs, labels)
    exact = ref.ace(rows, 3, 4)
    acc = CalibrationAccumulator(metrics=["ace"], ace_ranges=4)
    for start in range(0, 80, 25):
        acc.update(probs[start : start + 25], labels[start : start + 25])
    got = acc.compute()
    assert 0.0 < got["ace_error_bound"] < 1.0
    assert abs(got["ace"] - exact) <= got["ace_error_bound"] + 1e-12
    assert close(calibkit.calibration_report(probs, labels, ace_ranges=4)["ace"], exact)


def test_setting_checks_accept_their_bounds_and_refuse_just_past_them():
    from calibkit.metrics import validation as v

    assert v.check_positive_int(1, "n") == 1 and v.check_positive_int(np.int64(7), "n", 7) == 7
    for bad_value, maximum in ((0, None), (8, 7), (True, None), (2.0, None)):
        with pytest.raises(ValueError, match="`n` must be an integer"):
            v.check_positive_int(bad_value, "n", maximum)
    assert v.check_bins(v.MAX_BINS, "n_bins") == v.MAX_BINS
    with pytest.raises(ValueError, match="n_bins"):
        v.check_bins(v.MAX_BINS + 1, "n_bins")
    assert v.check_non_negative(0, "theta") == 0.0 and v.check_non_negative(2.5, "theta") == 2.5
    for bad_value in (-1e-9, np.inf, np.nan, "1", False):
        with pytest.raises(ValueError, match="`theta` must be a number >= 0"):
            v.check_non_negative(bad_value, "theta")
    assert v.check_eps(1e-12) == 1e-12
    for bad_value in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match=r"`eps` must be a number in \(0, 1\)"):
            v.check_eps(bad_value)
    limit = np.iinfo(np.int64)
    assert v.check_ignore_index(limit.min) == limit.min and v.check_ignore_index(limit.max) == limit.max
    for bad_value in (limit.max + 1, limit.min - 1):
        with pytest.raises(ValueError, match="fit in int64"):
            v.check_ignore_index(bad_value)
    with pytest.raises(ValueError, match="must be an integer"):
        v.check_ignore_index(np.True_)
    assert v.check_bool(np.False_, "flag") is False
    with pytest.raises(ValueError, match="True or False"):
        v.check_bool(1, "flag")
    assert v.check_choice("b", "rule", ("a", "b")) == "b"
    for bad_value in ("c", None):
        with pytest.raises(ValueError, match="must be one of"):
            v.check_choice(bad_value, "rule", ("a", "b"))
    assert v.check_num_threads(None) is None and v.check_num_threads(3) == 3
    with pytest.raises(ValueError, match="num_threads"):
        v.check_num_threads(0)


@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_a_bad_first_row_is_reported_at_position_0(engine):
    probs = np.array([[0.7, 0.7], [0.5, 0.5]])
    with use_backend(engine), pytest.raises(ValueError, match="the row at position 0 sums to 1.4"):
        calibkit.calibration_report(probs, np.array([0, 1]))
    with use_backend(engine), pytest.raises(ValueError, match="got 2 at position 0"):
        calibkit.calibration_report(np.array([[0.5, 0.5], [0.5, 0.5]]), np.array([2, 1]))


@pytest.mark.parametrize("as_tensor", [False, True])
def test_float_labels_must_be_integers_that_fit_in_int64(as_tensor):
    import torch

    probs = np.full((3, 2), 0.5)

    def labels(values):
        return torch.tensor(values, dtype=torch.float64) if as_tensor else np.array(values, dtype=np.float64)

    expected = ref.ece(ref.top_pairs(ref.rows_of(probs, [0, 1, 1])[0], False), 2)
    assert close(calibkit.ece(probs, labels([0.0, 1.0, 1.0]), n_bins=2), expected)
    for values in ([0.0, 2.0**63, 1.0], [0.0, 1.0, -(2.0**64)]):
        with pytest.raises(ValueError, match="fit in int64"):
            calibkit.ece(probs, labels(values), n_bins=2)
    for values in ([0.0, 0.5, 1.0], [0.0, 1.0, np.nan]):
        with pytest.raises(ValueError, match="`labels` must be integers"):
            calibkit.ece(probs, labels(values), n_bins=2)
    assert close(calibkit.ece(probs, labels([0.0, -(2.0**63), 1.0]), n_bins=2, ignore_index=-(2**63)), 0.0)


@pytest.mark.parametrize("engine", ["numba", "torch"])
@pytest.mark.parametrize("n_bins", [1, 3, 7])
def test_fce_of_the_authors_matches_their_loop(engine, n_bins):
    probs, labels = make_data(9, "multiclass", 50, 3, sharpness=1.5)
    pairs = ref.top_pairs(ref.rows_of(probs, labels)[0], False)
    with use_backend(engine):
        got = calibkit.fce(probs, labels, fce_bins=n_bins, fce_variant="authors")
    assert close(got, ref.fce_authors(pairs, n_bins))


@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_tiny_probabilities_fall_in_the_first_ace_bucket(engine):
    tiny = [0.0, 2.0**-80, 2.0**-65, 2.0**-64, 1e-12]
    rows = [[1.0 - t - 0.25, 0.25, t] for t in tiny] + [[t, 0.3, 0.7 - t] for t in tiny]
    probs = np.array(rows)
    labels = np.array([2, 0, 2, 1, 0, 2, 0, 2, 1, 2])
    with use_backend(engine):
        check_report(probs, labels, 3, False, 4)


@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_values_just_above_a_bin_edge_count_as_on_it_within_2_to_the_minus_40(engine):
    # p * 2 = 1 + d: on the edge 1/2 (first bin) for d <= ~2**-40, in the second bin above it
    probs1 = np.array([0.5 * (1 + 0.75 * 2.0**-40), 0.5 * (1 + 1.5 * 2.0**-40), 0.5, 0.25, 0.75, 1.0])
    labels = np.array([1, 0, 1, 1, 0, 1])
    out = np.empty(probs1.size, dtype=np.int64)
    kbins._equal_width_bins(probs1, out, probs1.size, 2)
    np.testing.assert_array_equal(out, [0, 1, 0, 0, 1, 1])
    with use_backend(engine):
        check_report(probs1, labels, 2, False, 2)


@pytest.mark.parametrize("engine", ["numba", "torch"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shift", [-60.0, 60.0])
def test_long_logit_rows_far_from_zero_match_plain_loops(engine, dtype, shift):
    z, labels = make_data(10, "multiclass", 20, 17, True)
    z = (z + shift).astype(dtype)  # every logit of a row negative, or every one positive
    with use_backend(engine):
        check_report(z, labels, 17, True, 4)
        check_report(np.ascontiguousarray(z[:, :4]), labels % 4, 4, True, 4)


@pytest.mark.parametrize("engine", ["numba", "torch"])
@pytest.mark.parametrize("k", [3, 17])
@pytest.mark.parametrize(
    "bad_entry,message",
    [(-0.5, "outside"), (1.5, "outside"), (np.nan, "NaN or inf"), (np.inf, "NaN or inf")],
    ids=["negative", "above one", "nonfinite nan", "nonfinite inf"],
)
def test_top_label_pass_refuses_bad_probabilities(engine, k, bad_entry, message):
    # ece alone takes the lean top-label kernel: it checks every entry as the full pass does
    probs = np.full((5, k), 1.0 / k)
    if bad_entry > 1:
        probs[3] = 0.0  # a value above 1 and nothing negative: outside [0, 1] is said before the row sum
    probs[3, 1] = bad_entry
    if bad_entry < 0:
        probs[3, 2] += 1.0 / k - bad_entry  # the row still sums to 1
    with use_backend(engine), pytest.raises(ValueError, match=f"{message}.* position 3"):
        calibkit.ece(probs, np.zeros(5, dtype=int))


@pytest.mark.parametrize("engine", ["numba", "torch"])
@pytest.mark.parametrize("sce_bins", [3, 40])
def test_class_wise_error_of_long_rows_alone_and_with_many_bins_matches_plain_loops(engine, sce_bins):
    probs, labels = make_data(11, "multiclass", 30, 18, False, sharpness=3.0)
    rows, _ = ref.rows_of(probs, labels)
    with use_backend(engine):
        assert close(calibkit.sce(probs, labels, sce_bins=sce_bins), ref.sce(rows, 18, sce_bins))
        report = calibkit.calibration_report(probs, labels, sce_bins=sce_bins, ace_ranges=3)
    assert close(report["sce"], ref.sce(rows, 18, sce_bins))
    assert close(report["ace"], ref.ace(rows, 18, 3))


@pytest.mark.parametrize("num_threads", [1, 3, 4])
def test_report_split_over_several_row_ranges_matches_plain_loops(num_threads):
    # the exact-ACE gather writes each range's samples after the previous ranges' (three or more parts)
    probs, labels = make_data(12, "multiclass", 60, 18, False, sharpness=3.0)
    rows, _ = ref.rows_of(probs, labels)
    got = calibkit.calibration_report(probs, labels, ace_ranges=5, sce_bins=7, num_threads=num_threads)
    assert close(got["ace"], ref.ace(rows, 18, 5)) and got["ace_error_bound"] == 0.0
    assert close(got["sce"], ref.sce(rows, 18, 7))
