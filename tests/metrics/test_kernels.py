"""The vectorised exp and log of the kernels are as accurate as libm (1 ulp), so swapping them
in for math.exp/math.log costs no exactness."""

from fractions import Fraction

import numpy as np
import pytest

from calibkit._numba import fastmath
from calibkit.metrics._kernels import rows as kernel_rows


def ulps(got, expected):
    return np.abs(got - expected) / np.spacing(np.abs(expected))


def test_exp_is_within_one_ulp_and_flushes_only_below_the_threshold():
    rng = np.random.default_rng(0)
    x = np.concatenate([-rng.uniform(0, s, 2_000_000) for s in (1e-6, 1, 30, 700)])
    x = np.concatenate([x, [0.0, -0.0, -1e-300, fastmath.EXP_MIN, -0.5 * np.log(2)]])
    out = np.empty_like(x)
    fastmath.exp_into(x, out, x.size)
    assert ulps(out, np.exp(x)).max() <= 1.0
    far = np.array([fastmath.EXP_MIN - 1e-9, -745.0, -1e4, -1e308])
    fastmath.exp_into(far, out, far.size)
    assert np.all(out[: far.size] == 0.0)


def test_log_is_within_one_ulp_including_subnormals_and_the_floor():
    rng = np.random.default_rng(1)
    x = np.concatenate(
        [
            rng.uniform(0, 1, 2_000_000),
            np.exp(-rng.uniform(0, 700, 2_000_000)),
            np.exp(-rng.uniform(0, 1e-6, 1_000_000)),  # near 1: log(1 + f) must not cancel
            [1.0, 0.5, np.sqrt(0.5), 5e-324, 1e-310, 2.2250738585072014e-308],
        ]
    )
    out = np.empty_like(x)
    fastmath.log_into(x, out, x.size, 0.0)
    expected = np.log(x)
    nonzero = expected != 0
    assert ulps(out[nonzero], expected[nonzero]).max() <= 1.0
    assert np.all(out[~nonzero] == 0.0)
    fastmath.log_into(np.array([0.0, 1e-20]), out, 2, 1e-12)
    assert out[0] == out[1] == np.log(1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("num_classes", [16, 66, 1000, 5000])
def test_long_softmax_rows_sum_max_top_label_and_bad_flags(num_classes, dtype):
    # _softmax_rows sums in fixed point and takes the maximum on integer keys: both must give
    # what plain float64 numpy gives (sum to within K * 2**-(s+1) on a sum >= 1), catch every
    # kind of NaN and inf, and take the first index of a tied maximum (-0.0 ties +0.0).
    rng = np.random.default_rng(num_classes)
    n = 40
    # float32 rows find their top label inside the maximum (index in the key's spare bits)
    x = (rng.standard_normal((n, num_classes)) * 4).astype(dtype)
    x[1] = -rng.uniform(0, 1e-3, num_classes)  # all negative
    x[2, :] = 0.0
    x[2, 3] = -0.0
    x[2, 0] = -1.0  # the maximum 0 first at index 1
    x[3, 5] = x[3, 9] = x[3].max() + 1  # tie: index 5
    x[5, :] = -2.0
    x[5, 2] = x[5, 4] = -0.0  # -0.0 ties 0.0: index 2
    x[5, 7] = 0.0
    x[6, -1] = x[6, -2] = x[6].max() + 1  # tie at the end: index K - 2
    x[4, 7] = -1e30  # flushed to an exp of 0, still finite
    specials = {10: np.nan, 11: -np.nan, 12: np.inf, 13: -np.inf}
    for row, value in specials.items():
        x[row, num_classes // 2] = value
    E = np.empty(n * num_classes)
    tops, sums, bads = np.empty(n), np.empty(n), np.empty(n)
    preds = np.empty(n, dtype=np.int64)
    kernel_rows._softmax_rows(x, 0, n, num_classes, E, tops, sums, bads, preds)
    assert [int(b) for b in bads] == [1 if i in specials else 0 for i in range(n)]
    ok = np.array([i not in specials for i in range(n)])
    z = x[ok].astype(np.float64)
    np.testing.assert_array_equal(tops[ok], z.max(axis=1))
    np.testing.assert_array_equal(preds[ok], z.argmax(axis=1))
    assert preds[2] == 1 and preds[3] == 5 and preds[5] == 2 and preds[6] == num_classes - 2
    e = np.exp(z - z.max(axis=1, keepdims=True))
    assert ulps(E.reshape(n, num_classes)[ok], e).max() <= 1.0
    # the exact sum of the kernel's own exps, against fixed point at 2**-s plus the final rounding
    exact = np.array([float(sum(map(Fraction, row))) for row in E.reshape(n, num_classes)[ok]])
    scale = kernel_rows._fixed_point_scale(num_classes)
    assert scale * (num_classes + 1) <= 2.0**62 < 2 * scale * (num_classes + 1)  # no int64 overflow
    assert np.all(np.abs(sums[ok] - exact) <= num_classes / scale + np.spacing(exact))


def test_long_softmax_rows_keep_the_mass_of_many_small_terms():
    # A vocabulary-sized row: one top logit and 255999 terms about 31 below it (each exp about
    # 3e-14). One fixed-point word of unit 2**-44 would round them all to 0 and lose 8e-9 of
    # the sum; the second word keeps it to float64 accuracy.
    num_classes = 256_000
    x = np.full((2, num_classes), -31.0, dtype=np.float32)
    x[:, 7] = 0.0
    x[1, 1000:] = -40.0
    E = np.empty(2 * num_classes)
    tops, sums, bads = np.empty(2), np.empty(2), np.empty(2)
    preds = np.empty(2, dtype=np.int64)
    kernel_rows._softmax_rows(x, 0, 2, num_classes, E, tops, sums, bads, preds)
    exact = [float(sum(map(Fraction, row))) for row in E.reshape(2, num_classes)]
    np.testing.assert_allclose(sums, exact, rtol=4e-16, atol=0)
    assert list(preds) == [7, 7] and not bads.any()


def numpy_ace(probs, labels, n_ranges):
    """Sort-based ACE with tied values sharing their mean outcome (as tests/metrics/reference.py)."""
    gaps = []
    for k in range(probs.shape[1]):
        order = np.argsort(probs[:, k], kind="stable")
        p = probs[order, k]
        o = (labels[order] == k).astype(np.float64)
        _, first, size = np.unique(p, return_index=True, return_counts=True)
        o = np.repeat(np.add.reduceat(o, first) / size, size)
        for chunk_p, chunk_o in zip(np.array_split(p, n_ranges), np.array_split(o, n_ranges)):
            if chunk_p.size:
                gaps.append(abs(chunk_o.mean() - chunk_p.mean()))
    return float(np.mean(gaps))


@pytest.mark.parametrize("decimals", [None, 5, 2])
def test_exact_ace_resolves_dense_buckets_and_ties_cut_by_boundaries(decimals):
    # 40k samples of 3 classes: cut buckets hold thousands of samples (the radix path), and
    # rounding makes large groups of ties that range boundaries cut through.
    import calibkit

    rng = np.random.default_rng(7)
    first = rng.uniform(0.2, 0.8, 40_000)
    if decimals is not None:
        first = np.round(first, decimals)
    second = (1 - first) * rng.uniform(0, 1, first.size)
    probs = np.stack([first, second, 1 - first - second], axis=1)
    probs[:50, 1] = 0.0
    probs[50:100, 1] = -0.0  # the same value as 0.0: ties with it
    probs[:100, 2] = 1 - probs[:100, 0]
    labels = rng.integers(0, 3, first.size)
    for n_ranges in (7, 15, 100):
        expected = numpy_ace(probs, labels, n_ranges)
        assert calibkit.ace(probs, labels, ace_ranges=n_ranges) == pytest.approx(expected, abs=1e-12)
        shuffled = rng.permutation(first.size)
        got = calibkit.ace(probs[shuffled], labels[shuffled], ace_ranges=n_ranges)
        assert got == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("num_classes", [4, 20, 66])
def test_top_label_takes_the_first_of_tied_maxima_for_short_and_long_rows(num_classes):
    # Rows of K >= 16 find their maximum on bit patterns in a vector loop, shorter rows in a
    # scalar one: both must give the first index among tied maxima.
    import calibkit

    rng = np.random.default_rng(3)
    n = 5000
    probs = rng.uniform(0, 1, (n, num_classes))
    first, second = rng.integers(0, num_classes, (2, n))
    second = np.where(second == first, (first + 1) % num_classes, second)
    rows = np.arange(n)
    probs[rows, first] = probs[rows, second] = probs.max(axis=1) + 1.0  # a tied maximum
    probs /= probs.sum(axis=1, keepdims=True)
    probs = probs.astype(np.float32)
    labels = np.where(rng.random(n) < 0.5, np.minimum(first, second), np.maximum(first, second))
    got = calibkit.calibration_report(probs, labels)
    expected = np.mean(np.argmax(probs, axis=1) == labels)  # numpy's argmax: first index too
    assert got["accuracy"] == pytest.approx(expected, abs=1e-15)
    assert 0.4 < expected < 0.6


@pytest.mark.parametrize(
    ("num_classes", "dtype"),
    [(2, np.float64), (3, np.float32), (8, np.float64), (15, np.float32)]
    + [(20, np.float32), (66, np.float32), (20, np.float64)],
)
@pytest.mark.parametrize("from_logits", [False, True])
def test_top_label_kernel_agrees_with_the_full_pass_to_the_bit(num_classes, dtype, from_logits):
    # ``ece`` alone runs the lean top-label kernel, ``calibration_report`` the full one: the same
    # top label, confidence and bins, so equal results, including masked rows full of NaN,
    # tied maxima and logits that tie after rounding. Rows of fewer than 16 classes take the
    # block-vectorised kernel compiled for their class count (one bin count, or several: rbece),
    # longer ones the per-row loops.
    import calibkit

    rng = np.random.default_rng(num_classes)
    n = 3000
    # float32 rows find their top label in the spare bits of the maximum, float64 ones by a search
    logits = (rng.standard_normal((n, num_classes)) * 4).astype(dtype)
    logits[::7, 1] = logits[::7, 0] = logits[::7].max(axis=1)  # tied maxima
    labels = rng.integers(0, num_classes, n)
    labels[::11] = -100
    values = logits
    if not from_logits:
        values = np.exp(logits - logits.max(axis=1, keepdims=True))
        values = (values / values.sum(axis=1, keepdims=True)).astype(dtype)
    values[::11] = np.nan  # masked padding may hold anything
    values[::22, -1] = np.inf
    top_only = ("ece", "mce", "rbece", "esce", "cece", "overconfidence")
    lean = calibkit.calibration_report(values, labels, metrics=top_only, from_logits=from_logits, theta=0)
    full = calibkit.calibration_report(values, labels, from_logits=from_logits, theta=0)
    for name in top_only:
        np.testing.assert_array_equal(lean[name], full[name], err_msg=name)
    assert lean["accuracy"] == full["accuracy"]
    assert calibkit.ece(values, labels, from_logits=from_logits) == full["ece"]  # one bin count
    expected = np.mean(np.argmax(logits[labels != -100], axis=1) == labels[labels != -100])
    assert full["accuracy"] == pytest.approx(expected, abs=1e-15)


def test_the_package_keeps_the_public_names_of_the_single_module():
    # calibkit/metrics/_kernels.py became a package: what statistics, exact_ace, registry,
    # validation and the backends read through `kernels.NAME` must still be there.
    from calibkit.metrics import _kernels as kernels

    names = """ACCUMULATE ACCUMULATE_TOP ACE_BUCKETS ACE_MIN_EXPONENT ACE_OFFSET BLOCK_ENTRIES ERR_LABEL
    ERR_NONFINITE ERR_RANGE ERR_ROW_SUM FIXED_POINT_ONE_WORD GATHER_ACE LANES LONG_ROW MODE_BINARY_LOGITS
    MODE_BINARY_PROBS MODE_LOGITS MODE_PROBS N_ERRORS N_SCALARS RADIX_BITS ROW_SUM_TOLERANCE S_BRIER
    S_CORRECT S_ECD S_N S_NLL S_WRONG S_WRONG_CONF classwise_of_samples
    resolve_points AccumulateArgs GatherArgs""".split()
    assert [n for n in names if not hasattr(kernels, n)] == []
    assert set(kernels.__all__) <= set(dir(kernels))


@pytest.mark.parametrize("from_logits", [False, True])
def test_short_rows_report_the_first_bad_row_of_a_later_block(from_logits):
    # the block-vectorised top-label kernel flags a block, then finds the row as the full pass
    # would: the first bad one in order, its label checked before its values
    import calibkit

    rng = np.random.default_rng(5)
    values = rng.dirichlet(np.ones(4), 1000) if not from_logits else rng.normal(size=(1000, 4))
    labels = rng.integers(0, 4, 1000)
    values[610, 2] = np.nan
    with pytest.raises(ValueError, match=r"`probs.* at position 610\b"):
        calibkit.ece(values, labels, from_logits=from_logits)
    labels[600] = 7
    with pytest.raises(ValueError, match=r"`labels` must lie in \[0, 4\).*got 7 at position 600\b"):
        calibkit.ece(values, labels, from_logits=from_logits)
    labels[600] = -100
    values[600] = np.inf  # masked: never read
    with pytest.raises(ValueError, match=r"`probs.* at position 610\b"):
        calibkit.ece(values, labels, from_logits=from_logits)


@pytest.mark.parametrize("n_fuzzy", [2, 3, 4, 7, 10, 15, 16, 100])
def test_fuzzy_windows_add_what_the_row_by_row_adder_adds_to_the_bit(n_fuzzy):
    # Short rows take their fuzzy memberships in a vector loop (two bins a variant, zeros
    # added where the row-by-row code skips): every sum must be the same, at the ends of every
    # support and plateau (and an ulp or two either side), where a membership is 0, tiny or 1.
    from calibkit.metrics._kernels import short
    from calibkit.metrics._kernels.accumulate import _authors_corners

    rng = np.random.default_rng(n_fuzzy)
    quarters = np.arange(4 * n_fuzzy + 1)
    edges = np.concatenate([quarters / (4 * n_fuzzy), (quarters / 4) * (1 / n_fuzzy), (quarters / 4 + 1.25) / n_fuzzy])
    near = [edges]
    for direction in (2.0, -1.0):
        step = edges
        for _ in range(2):
            step = np.nextafter(step, direction)
            near.append(step)
    # memberships whose product with 1000 may land on a half (the ties of round(mu, 3))
    corners = _authors_corners(n_fuzzy)
    halves = (np.arange(0, 1000, 7) + 0.5) / 1000
    ties = (corners[:, :1] + halves * (corners[:, 1:2] - corners[:, :1])).ravel()
    conf = np.concatenate([*near, ties, rng.random(2000), rng.random(500).astype(np.float32), [0.0, 1.0]])
    conf = conf[(conf >= 0) & (conf <= 1)]
    n, k = conf.size, 4
    klass = rng.integers(0, k + 1, n)  # k: a masked or bad row
    packed = (1 + (rng.integers(0, 2, n) << 32)) * (klass < k)
    conf = np.where(klass < k, conf, 0.0)
    expected, got = np.zeros((4, n_fuzzy, 6)), np.zeros((4, n_fuzzy, 6))
    short._fuzzy_rows(conf, klass, packed, 0, n, k, n_fuzzy, corners, expected)
    buffers = [np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)] + [np.empty(n) for _ in range(4)]
    short._fuzzy_windows(conf, klass, 0, n, k, n_fuzzy, *buffers)
    short._scatter_fuzzy(n, conf, packed, *buffers, got.reshape(-1))
    np.testing.assert_array_equal(got.view(np.int64), expected.view(np.int64))
    assert (expected[..., 3] > 0).sum() > n_fuzzy and (expected[..., 0] > 0).all()
