"""Compiled single-pass kernels that turn predictions into additive sufficient statistics.

Everything here works on one contiguous range of rows and only ever *adds* into arrays the
caller owns, so ranges can run on several threads (the kernels release the GIL) and the
results of batches, threads and processes are combined by plain addition. All sums are
float64 whatever the input dtype: float32 accumulators drift (torchmetrics is off by 6e-3
at 10M rows), float64 ones stay exact to ~1e-12.

No metric formula lives here: the kernels only bin and sum. ``calibkit.metrics.statistics``
turns the sums into metrics.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np
from numba import types
from numba.core.extending import overload

from calibkit._fastmath import (
    EXP_MIN,
    MIN_NORMAL,
    bits_of_float,
    exp_in_range_strict,
    exp_into,
    exp_strict,
    float_from_bits,
    log_into,
)
from calibkit._numba_cache import CACHE

# How a row of the input becomes a probability vector.
MODE_PROBS = 0  # (N, K) probabilities
MODE_LOGITS = 1  # (N, K) logits -> softmax
MODE_BINARY_PROBS = 2  # (N, 1) probability of class 1 -> [1 - p, p]
MODE_BINARY_LOGITS = 3  # (N, 1) logit of class 1 -> sigmoid

# Error codes, in the order of the ``errors`` array (first offending row of each kind).
ERR_NONFINITE = 0
ERR_RANGE = 1
ERR_ROW_SUM = 2
ERR_LABEL = 3
N_ERRORS = 4

# Columns of the ``scalars`` array.
S_N, S_CORRECT, S_BRIER, S_NLL, S_ECD, S_WRONG_CONF, S_WRONG = range(7)
N_SCALARS = 7

ROW_SUM_TOLERANCE = 1e-3

LONG_ROW = 16
"""Rows of at least this many classes go through per-row vector loops (maximum and top label,
softmax, class-wise first bin); shorter ones a block at a time or in scalar code, where a
vector loop over 4 entries only adds its setup (measured 20% slower at K = 4)."""

# ACE histogram: a probability's bucket is the top 16 bits of its float64 pattern (11 exponent
# bits and 4 mantissa bits: 16 buckets an octave, relative width <= 1/16), so the buckets follow
# the data down to tiny probabilities, where equal-mass ranges of a class column mostly fall.
# Everything below 2**-64 shares bucket 0; 1.0 is the last bucket.
ACE_MIN_EXPONENT = 1023 - 64
ACE_OFFSET = (ACE_MIN_EXPONENT << 4) - 1
ACE_BUCKETS = (1023 << 4) - ACE_OFFSET + 1


@nb.njit(cache=CACHE, inline="always")
def _bin_index(p, n_bins):
    # Right-closed equal-width bins ((m-1)/M, m/M]; 0 goes to the first bin (SPEC.md).
    b = int(math.ceil(p * n_bins)) - 1
    if b < 0:
        return 0
    if b >= n_bins:
        return n_bins - 1
    return b


@nb.njit(cache=CACHE, inline="always")
def _ace_bucket(bits):
    key = (bits >> 48) - ACE_OFFSET
    if key < 0:
        return 0
    return key


# Checking and converting a block of probability rows. Reassociating a row's sum changes it by
# ~1e-16 relative (it is only compared with 1 at tolerance 1e-3) and lets a K = 66 row be
# summed 4 lanes at a time instead of paying one add latency per entry. A separate function,
# so that the flag does not reach the histogram sums.
_REDUCE = {"reassoc", "nsz"}


def _spare_key_bits(x):
    """Mask of the low bits that are zero in every float64 converted from ``x``'s dtype
    (29 for float32), as a compile-time constant."""


@overload(_spare_key_bits, inline="always")
def _spare_key_bits_overload(x):
    spare = (1 << 29) - 1 if x.dtype == types.float32 else 0
    return lambda x: spare


@nb.njit(cache=CACHE, inline="always")
def _key_with_index(key, k, spare):
    """An order key (:func:`_ordered_key`, or the raw pattern of a value >= 0, which is the
    same) with the reversed index ``k`` in its spare low bits, if the dtype leaves any: the
    maximum over a row is then the first argmax, found in the vector loop that takes the
    maximum (a search for it afterwards cost 0.3-0.8 ns an entry)."""
    return ((key & ~spare) | (spare - k)) if spare > 0 else key


@nb.njit(cache=CACHE, inline="always")
def _first_argmax(x, i, K, best, spare):
    """(top label, maximum) of row ``i`` from the maximum ``best`` of its
    :func:`_key_with_index` keys; without spare bits (float64), the first index of the maximum
    by a vector loop."""
    if spare > 0:
        key = (best & ~spare) | (spare if best < 0 else 0)  # the value's own key again
        return spare - (best & spare), _ordered_key_value(key)
    top = _ordered_key_value(best)
    pred = K
    for k in range(K):
        pred = min(pred, k if np.float64(x[i, k]) == top else K)
    return pred, top


@nb.njit(cache=CACHE, nogil=True, fastmath=_REDUCE)
def _probs_block(x, b0, nr, K, P, sums, top, preds):
    """Rows ``[b0, b0 + nr)`` of probabilities into float64 ``P``, their sums into ``sums``
    and their maxima into ``top``; return how many rows need a closer look (a value outside
    [0, 1] or NaN, or a sum off by more than the tolerance).

    The maximum is taken on the int64 patterns of the values: for p >= 0 they order as the
    values do, and an integer maximum vectorises where a float one (NaN rules) does not.
    ``top`` and the top label ``preds`` are exact for every row that passes the check."""
    spare = _spare_key_bits(x)
    suspect = 0
    for r in range(nr):
        total = 0.0
        bad = 0
        best = np.int64(0)
        for k in range(K):
            v = np.float64(x[b0 + r, k])
            bad += 0 if (v >= 0.0 and v <= 1.0) else 1
            P[r * K + k] = v
            total += v
            best = max(best, _key_with_index(bits_of_float(v), k, spare))
        sums[r] = total
        preds[r], top[r] = _first_argmax(x, b0 + r, K, best, spare)
        suspect += 1 if (bad > 0 or abs(total - 1.0) > ROW_SUM_TOLERANCE) else 0
    return suspect


@nb.njit(cache=CACHE, nogil=True)
def _probs_block_short(x, b0, nr, K, P, sums):
    """:func:`_probs_block` for short rows (K < 16), kept scalar: a vectorised loop of 4 entries
    only adds its setup and remainder code (measured 20% slower at K = 4)."""
    suspect = 0
    for r in range(nr):
        total = 0.0
        bad = 0
        for k in range(K):
            v = np.float64(x[b0 + r, k])
            bad += 0 if (v >= 0.0 and v <= 1.0) else 1
            P[r * K + k] = v
            total += v
        sums[r] = total
        suspect += 1 if (bad > 0 or abs(total - 1.0) > ROW_SUM_TOLERANCE) else 0
    return suspect


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _equal_width_bins(P, out, n, n_bins):
    for j in range(n):
        out[j] = min(max(np.int64(math.ceil(P[j] * n_bins)) - 1, 0), n_bins - 1)


@nb.njit(cache=CACHE, nogil=True)
def _first_bin_sums(P, labels, b0, nr, K, ignore_index, n_bins, count, total):
    """Per class, the count and the sum of the values of rows ``[b0, b0 + nr)`` that fall in
    the first equal-width bin (``p * n_bins <= 1``, the very test of :func:`_bin_index`),
    skipping masked rows. In a long row almost every value is that small (95% below 1/15 in
    the benchmark's 2M x 66 rows), so adding them here, in a vector loop, leaves only the few
    others to the scattered class-wise updates (full pass, one thread, same-process A/B:
    about 6% less time from probabilities, 11% from logits)."""
    for r in range(nr):
        if labels[b0 + r] == ignore_index:
            continue
        o = r * K
        for k in range(K):
            low = P[o + k] * n_bins <= 1.0
            count[k] += 1.0 if low else 0.0
            total[k] += P[o + k] if low else 0.0


@nb.njit(cache=CACHE, nogil=True)
def _ace_buckets(bits, out, n):
    for j in range(n):
        out[j] = max((bits[j] >> 48) - ACE_OFFSET, 0)


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _normalise_rows(P, sums, inverse, nr, K):
    """``P[r] *= inverse[r] = 1 / sums[r]``: the probability of the top label, whose exp is
    exp(0) = 1, is ``inverse[r]`` itself. A multiply, not a divide per entry (within 1 ulp of
    e / sum(e), and a vector divide costs 2 cycles an entry here)."""
    for r in range(nr):
        o = r * K
        scale = 1.0 / sums[r]
        inverse[r] = scale
        for k in range(K):
            P[o + k] = P[o + k] * scale


@nb.njit(cache=CACHE, nogil=True, fastmath=_REDUCE)
def _square_and_entropy(P, L, nr, K, square, entropy):
    """Per row of a block of long rows: ``sum_k p_k^2`` and ``sum_k p_k log p_k`` (``L =
    log(max(p, eps))``, so p = 0 adds 0), 4 lanes at a time; in order, each sum would wait on
    its add latency at every entry. One call a block: a call per row costs more than it saves."""
    for r in range(nr):
        o = r * K
        sq = 0.0
        ent = 0.0
        for k in range(K):
            sq += P[o + k] * P[o + k]
            ent += P[o + k] * L[o + k]
        square[r] = sq
        entropy[r] = ent


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _short_logit_rows(x, labels, b0, nr, K, ignore_index, Z, E, preds, tops, sums):
    """Short logit rows ``[b0, b0 + nr)`` (K < 16): per row the top label ``preds[r]`` (first
    argmax) and maximum ``tops[r]``; then the exps of the whole block in one flat vector loop,
    ``E[r * K + k] = exp(x[i, k] - top)``, and their row sums ``sums[r]`` (in order). Returns
    the first row with a NaN or inf that is not masked (-1 if none); masked padding may hold
    anything (its maximum is taken as 0). Shared by both kernels, so that they agree to the bit."""
    for r in range(nr):
        i = b0 + r
        o = r * K
        top = np.float64(x[i, 0])
        pred = 0
        bad = 0
        for k in range(K):
            v = np.float64(x[i, k])
            bad += 0 if math.isfinite(v) else 1
            if v > top:
                top = v
                pred = k
        if bad > 0:
            if labels[i] != ignore_index:
                return i
            top = 0.0
        preds[r] = pred
        tops[r] = top
        for k in range(K):
            Z[o + k] = np.float64(x[i, k]) - top
    exp_into(Z, E, nr * K)
    for r in range(nr):
        o = r * K
        total = 0.0
        for k in range(K):
            total += E[o + k]
        sums[r] = total
    return -1


BLOCK_ENTRIES = 2048
"""Rows are turned into probabilities a block of about this many entries at a time (three
float64 buffers of 16 kB, cache resident), so that exp and log run as flat SIMD loops even
when rows are short (K = 4)."""


@nb.njit(cache=CACHE, inline="always")
def _fill_block(mode, x, labels, b0, b1, K, ignore_index, eps, P, Z, L, rows, want_logs):
    """Probabilities of rows ``[b0, b1)`` into ``P`` (flat, row r at ``r * K``); return the
    first row whose values are bad (-1 if none) and the error code.

    Rows whose label is ``ignore_index`` are never checked (their padding may be anything).
    ``want_logs``: also ``L = log(max(P, eps))``, from the log-softmax for logits (one log per
    row, not per entry). ``rows`` = (row_log, row_conf, row_pred, row_top), buffers of one
    entry a row: for probabilities with K >= 16, ``row_conf`` and ``row_pred`` get each row's
    maximum and top label (from the vectorised check loop; a search loop for float64); for logits, ``row_pred`` and
    ``row_conf`` get the top label (the first argmax of z) and its probability. ``Z``,
    ``row_log`` and ``row_top`` are scratch.
    """
    row_log, row_conf, row_pred, row_top = rows
    nr = b1 - b0
    if mode == MODE_PROBS:
        n = nr * K
        suspect = (
            _probs_block(x, b0, nr, K, P, row_log, row_conf, row_pred)
            if K >= LONG_ROW
            else _probs_block_short(x, b0, nr, K, P, row_log)
        )
        if suspect > 0:
            for r in range(nr):
                i = b0 + r
                o = r * K
                if labels[i] == ignore_index:
                    continue
                bad = False
                for k in range(K):
                    bad |= not (P[o + k] >= 0.0 and P[o + k] <= 1.0)
                if bad:
                    for k in range(K):
                        if not math.isfinite(P[o + k]):
                            return i, ERR_NONFINITE
                    return i, ERR_RANGE
                if abs(row_log[r] - 1.0) > ROW_SUM_TOLERANCE:
                    return i, ERR_ROW_SUM
        if want_logs:
            log_into(P, L, n, eps)
    elif mode == MODE_LOGITS:
        if K >= LONG_ROW:  # vector loops per row: max and top label, then exp and sum
            _softmax_rows(x, b0, nr, K, P, row_top, row_log, row_conf, row_pred)  # row_conf: bad flags
            for r in range(nr):
                if row_conf[r] > 0 and labels[b0 + r] != ignore_index:
                    return b0 + r, ERR_NONFINITE  # masked padding may hold anything: never read
        else:  # short rows: the exps of the whole block in one flat loop
            bad_row = _short_logit_rows(x, labels, b0, nr, K, ignore_index, Z, P, row_pred, row_top, row_log)
            if bad_row >= 0:
                return bad_row, ERR_NONFINITE
        _normalise_rows(P, row_log, row_conf, nr, K)
        if want_logs:
            # log p_k = z_k - max - log(sum e): one log per row.
            log_into(row_log, row_log, nr, MIN_NORMAL)
            log_eps = math.log(eps)
            for r in range(nr):
                o = r * K
                for k in range(K):
                    L[o + k] = max((np.float64(x[b0 + r, k]) - row_top[r]) - row_log[r], log_eps)
    elif mode == MODE_BINARY_PROBS:
        for r in range(nr):
            i = b0 + r
            v = np.float64(x[i, 0])
            if not (v >= 0.0 and v <= 1.0) and labels[i] != ignore_index:
                return i, (ERR_NONFINITE if not math.isfinite(v) else ERR_RANGE)
            P[2 * r] = 1.0 - v
            P[2 * r + 1] = v
        if want_logs:
            log_into(P, L, 2 * nr, eps)
    else:
        for r in range(nr):
            i = b0 + r
            v = np.float64(x[i, 0])
            if not math.isfinite(v):
                if labels[i] != ignore_index:
                    return i, ERR_NONFINITE
                v = 0.0
            # Both tails computed without cancellation.
            if v >= 0.0:
                e = math.exp(-v)
                P[2 * r + 1] = 1.0 / (1.0 + e)
                P[2 * r] = e / (1.0 + e)
            else:
                e = math.exp(v)
                P[2 * r + 1] = e / (1.0 + e)
                P[2 * r] = 1.0 / (1.0 + e)
        if want_logs:
            log_into(P, L, 2 * nr, eps)
    return -1, -1


LANES = 4
"""Copies of every histogram, row ``i`` adding into copy ``i % LANES``: consecutive rows that
hit the same bin would otherwise wait on each other's store (a 2-3x slowdown measured here)."""


@nb.njit(cache=CACHE, inline="always")
def _round3(x):
    """``round(x, 3)`` as Python rounds a float: to the nearest multiple of 0.001 of the exact
    binary value of ``x``, half to even only on exact ties (``fce(variant="authors")``).

    ``rint(x * 1000)`` alone errs when the product rounds onto a half-integer (``0.5825`` is a
    little above 0.5825 but ``0.5825 * 1000 == 582.5``): the product's exact rounding error,
    Dekker's two-product with ``1000`` needing no split, says which side the exact value is on.
    """
    p = x * 1000.0
    r = np.rint(p)
    if abs(p - r) == 0.5:
        c = 134217729.0 * x  # 2**27 + 1: splits x into two 26-bit halves
        hi = c - (c - x)
        err = (hi * 1000.0 - p) + (x - hi) * 1000.0  # x * 1000 - p, exactly
        if err > 0.0:
            r = p + 0.5
        elif err < 0.0:
            r = p - 0.5
    return r / 1000.0


@nb.njit(cache=CACHE)
def _authors_corners(n_bins):
    """The fuzzy-binning authors' trapezoid corners ``a, b, c, d`` of each of ``n_bins`` bins,
    with their arithmetic (``fuzzy_binning`` in bihani-g/fce ``paper_demo/calibration_metrics.py``):
    ticks ``i * (1 / M)`` and a last tick of exactly 1.0, so that memberships match theirs bit
    for bit (the paper variant's formula differs from theirs in the last bits)."""
    part = 1.0 / n_bins
    corners = np.empty((n_bins, 4))
    for m in range(n_bins):
        t0 = m * part
        t1 = 1.0 if m == n_bins - 1 else (m + 1) * part
        mid = (t0 + t1) / 2
        b = (t0 + mid) / 2
        c = (mid + t1) / 2
        corners[m, 0] = 2 * t0 - b
        corners[m, 1] = b
        corners[m, 2] = c
        corners[m, 3] = 2 * t1 - c
    return corners


@nb.njit(cache=CACHE, inline="always")
def _authors_membership(x, a, b, c, d):
    """``skfuzzy.trapmf(x, [a, b, c, d])`` for one float64 value, branch for branch (its ramps
    are open intervals; exactly ``b`` or ``c`` is 1)."""
    if x <= b:
        if a < x < b:
            return (x - a) / (b - a)
        return 1.0 if x == b else 0.0
    if x >= c:
        if c < x < d:
            return (d - x) / (d - c)
        return 1.0 if x == c else 0.0
    return 1.0


@nb.njit(cache=CACHE, inline="always")
def _add_sample(table, lane, k, b, p):
    """A value ``p`` of class ``k`` into cell ``b`` of a (lanes, K, bins, 3) histogram: count and sum."""
    table[lane, k, b, 0] += 1.0
    table[lane, k, b, 1] += p


@nb.njit(cache=CACHE, inline="always")
def _accumulate(mode, args):
    """Add the statistics of rows ``[start, stop)`` into the output arrays.

    ``args`` = (x, labels, start, stop, ignore_index, num_classes, eps, top_bins, top, fuzzy,
    classwise, ace, scalars, errors, do_rows, do_classwise, do_ace, do_fuzzy, row_softmax), a
    tuple so that the four per-mode entry points below stay one line each.

    Every histogram has a leading axis of ``LANES`` copies, summed by the caller.
    top       (LANES, S, K, Mmax, 4): per bin count of ``top_bins[s]``, split by true label:
              count, sum confidence, sum correct, sum ECD term (``do_rows`` only).
              Binary input bins the positive-class probability with outcome ``y == 1``.
    fuzzy     (LANES, Mf, 6): FCE membership, membership * correct, membership * confidence;
              then, for the authors' variant, the same with their membership (their corners,
              :func:`_authors_membership`) rounded as their ``round(mu, 3)`` (:func:`_round3`), and
              rounded membership * correct * confidence (correct ones only).
    classwise (LANES, K, Mc, 3): per class column and equal-width bin: count, sum p, sum 1[y = k].
    ace       (LANES, K, ACE_BUCKETS, 3): the same on the fine float-pattern buckets.
    scalars   (N_SCALARS,): n, correct, Brier, NLL, ECD sums, confidence and count of errors.
    row_softmax (N, 2) or (0, 2): for long logit rows, each row's maximum logit and inverse
              softmax sum, so that :func:`_gather_ace` rebuilds the probabilities with one exp
              and one multiply an entry (the very operations of this pass) instead of a
              whole softmax. Empty: not kept.
    errors    (N_ERRORS,): first offending row of each kind, -1 if none. The kernel stops at
              the first bad row: the caller raises.
    """
    (x, labels, start, stop, ignore_index, num_classes, eps, top_bins, top, fuzzy, classwise, ace, scalars, errors) = (
        args[:14]
    )
    do_rows, do_classwise, do_ace, do_fuzzy, row_softmax = args[14:]
    K = num_classes
    binary = mode >= MODE_BINARY_PROBS
    keep_softmax = mode == MODE_LOGITS and K >= LONG_ROW and row_softmax.shape[0] > 0
    rows_per_block = max(1, BLOCK_ENTRIES // K)
    P = np.empty(rows_per_block * K, dtype=np.float64)
    Z = np.empty_like(P)
    L = np.empty_like(P)
    row_log = np.empty(rows_per_block, dtype=np.float64)
    row_conf = np.empty(rows_per_block, dtype=np.float64)  # top probabilities (see _fill_block)
    row_pred = np.empty(rows_per_block, dtype=np.int64)
    row_top = np.empty(rows_per_block, dtype=np.float64)
    row_square = np.empty(rows_per_block, dtype=np.float64)
    row_entropy = np.empty(rows_per_block, dtype=np.float64)
    bits = P.view(np.int64)
    index = np.empty(rows_per_block * K, dtype=np.int64)  # per-entry class-wise bin
    buckets = np.empty(rows_per_block * K if do_ace else 0, dtype=np.int64)  # per-entry ACE bucket
    cw_lanes = classwise.shape[0] - 1  # 1 or LANES copies: a mask for the row number
    # long rows: the class-wise first bin is summed apart, in a vector loop (_first_bin_sums)
    sparse_cw = do_classwise and K >= LONG_ROW
    first_count = np.zeros(K if sparse_cw else 0)
    first_sum = np.zeros(K if sparse_cw else 0)
    ace_lanes = ace.shape[0] - 1
    n_specs = top_bins.shape[0]
    n_fuzzy = fuzzy.shape[1]
    authors_corners = _authors_corners(n_fuzzy)  # n_fuzzy >= 1: a (1, 6) table when FCE is not wanted
    n_cw = classwise.shape[2]
    s_n = 0.0
    s_correct = 0.0
    s_brier = 0.0
    s_nll = 0.0
    s_ecd = 0.0
    s_wrong_conf = 0.0
    s_wrong = 0.0
    failed = False
    for b0 in range(start, stop, rows_per_block):
        b1 = min(b0 + rows_per_block, stop)
        bad_row, bad_kind = _fill_block(
            mode, x, labels, b0, b1, K, ignore_index, eps, P, Z, L, (row_log, row_conf, row_pred, row_top), do_rows
        )
        n_entries = (b1 - b0) * K
        if keep_softmax:
            for r in range(b1 - b0):
                row_softmax[b0 + r, 0] = row_top[r]
                row_softmax[b0 + r, 1] = row_conf[r]  # 1 / sum: see _normalise_rows
        if bad_row < 0 and do_rows and K >= LONG_ROW:
            _square_and_entropy(P, L, b1 - b0, K, row_square, row_entropy)
        if sparse_cw:
            if bad_row < 0:
                _first_bin_sums(P, labels, b0, b1 - b0, K, ignore_index, n_cw, first_count, first_sum)
        elif do_classwise:
            # Even in a block with a bad row: the rows before it are scattered with these bins
            # (clamped to [0, M), whatever the block holds); skipped, they were uninitialised
            # memory and sce() on a row with inf wrote out of bounds (a segfault).
            _equal_width_bins(P, index, n_entries, n_cw)
        for i in range(b0, b1):
            y = np.int64(labels[i])
            if y == ignore_index:
                continue
            if y < 0 or y >= K:
                errors[ERR_LABEL] = i
                failed = True
                break
            if i == bad_row:
                errors[bad_kind] = i
                failed = True
                break
            o = (i - b0) * K
            lane = i & (LANES - 1)
            pred = 0
            if mode == MODE_LOGITS:
                pred = row_pred[i - b0]
                conf = row_conf[i - b0]
            elif mode == MODE_PROBS and K >= LONG_ROW:
                pred = row_pred[i - b0]
                conf = row_conf[i - b0]
            else:
                conf = P[o]
                for k in range(1, K):
                    if P[o + k] > conf:
                        conf = P[o + k]
                        pred = k
            correct = 1.0 if pred == y else 0.0
            s_n += 1.0
            s_correct += correct
            s_wrong_conf += (1.0 - correct) * conf
            s_wrong += 1.0 - correct
            if binary:
                c_top = P[o + 1]
                a_top = 1.0 if y == 1 else 0.0
            else:
                c_top = conf
                a_top = correct
            ecd_i = 0.0
            if do_rows:
                brier_i = 0.0
                if K >= LONG_ROW:
                    brier_i = row_square[i - b0]
                    ecd_i = row_entropy[i - b0]
                else:
                    for k in range(K):
                        p = P[o + k]
                        brier_i += p * p
                        ecd_i += p * L[o + k]
                brier_i += 1.0 - 2.0 * P[o + y]  # sum_k (p_k - 1[k=y])^2 = sum p^2 - 2 p_y + 1
                log_py = L[o + y]
                ecd_i -= log_py
                if binary:
                    brier_i *= 0.5  # SPEC: binary 1-D Brier is mean (p - y)^2
                s_brier += brier_i
                s_nll -= log_py
                s_ecd += ecd_i
            for s in range(n_specs):
                b = _bin_index(c_top, top_bins[s])
                top[lane, s, y, b, 0] += 1.0
                top[lane, s, y, b, 1] += c_top
                top[lane, s, y, b, 2] += a_top
                top[lane, s, y, b, 3] += ecd_i
            if do_fuzzy:
                # Trapezoid memberships: at most two bins are non-zero (SPEC.md, FCE).
                w = 1.0 / n_fuzzy
                lo = int(math.floor(c_top * n_fuzzy - 1.25))
                for m in range(max(lo, 0), min(lo + 4, n_fuzzy)):
                    t0 = m * w
                    t1 = (m + 1) * w
                    mu = min((c_top - (t0 - 0.25 * w)) / (0.5 * w), 1.0, ((t1 + 0.25 * w) - c_top) / (0.5 * w))
                    if mu > 0.0:
                        fuzzy[lane, m, 0] += mu
                        fuzzy[lane, m, 1] += mu * a_top
                        fuzzy[lane, m, 2] += mu * c_top
                    # fce(fce_variant="authors"): their membership, with their corners, rounded as
                    # their round(mu, 3); confidence summed over the correct predictions only.
                    ac = authors_corners[m]
                    mu_r = _round3(_authors_membership(c_top, ac[0], ac[1], ac[2], ac[3]))
                    if mu_r > 0.0:
                        fuzzy[lane, m, 3] += mu_r
                        fuzzy[lane, m, 4] += mu_r * a_top
                        fuzzy[lane, m, 5] += mu_r * a_top * c_top
            if do_classwise and not do_ace:
                cw = i & cw_lanes
                if sparse_cw:
                    for k in range(K):
                        p = P[o + k]
                        if p * n_cw > 1.0:
                            b = _bin_index(p, n_cw)
                            _add_sample(classwise, cw, k, b, p)
                    classwise[cw, y, _bin_index(P[o + y], n_cw), 2] += 1.0
                else:
                    for k in range(K):
                        b = index[o + k]
                        _add_sample(classwise, cw, k, b, P[o + k])
                    classwise[cw, y, index[o + y], 2] += 1.0
        if failed:
            break
        if do_ace:  # the class-wise and ACE histograms in one loop over the entries
            _ace_buckets(bits, buckets, n_entries)
            for i in range(b0, b1):
                y = np.int64(labels[i])
                if y == ignore_index:
                    continue
                o = (i - b0) * K
                lane = i & ace_lanes
                if sparse_cw:
                    cw = i & cw_lanes
                    for k in range(K):
                        p = P[o + k]
                        j = buckets[o + k]
                        _add_sample(ace, lane, k, j, p)
                        if p * n_cw > 1.0:
                            b = _bin_index(p, n_cw)
                            _add_sample(classwise, cw, k, b, p)
                    classwise[cw, y, _bin_index(P[o + y], n_cw), 2] += 1.0
                elif do_classwise:
                    cw = i & cw_lanes
                    for k in range(K):
                        p = P[o + k]
                        j = buckets[o + k]
                        _add_sample(ace, lane, k, j, p)
                        b = index[o + k]
                        _add_sample(classwise, cw, k, b, p)
                    classwise[cw, y, index[o + y], 2] += 1.0
                else:
                    for k in range(K):
                        j = buckets[o + k]
                        _add_sample(ace, lane, k, j, P[o + k])
                ace[lane, y, buckets[o + y], 2] += 1.0
    for k in range(first_count.shape[0]):
        classwise[0, k, 0, 0] += first_count[k]
        classwise[0, k, 0, 1] += first_sum[k]
    scalars[S_N] += s_n
    scalars[S_CORRECT] += s_correct
    scalars[S_BRIER] += s_brier
    scalars[S_NLL] += s_nll
    scalars[S_ECD] += s_ecd
    scalars[S_WRONG_CONF] += s_wrong_conf
    scalars[S_WRONG] += s_wrong


@nb.njit(cache=CACHE, inline="always")
def _packed_sample(p, outcome):
    """A probability and its outcome in one int64: the pattern of ``p >= 0`` (``+ 0.0`` clears
    the sign of -0.0) with the outcome in the sign bit. Half the memory and stores of two
    float64 arrays (a cut-bucket pass at 2M x 66 copies 7.7M samples)."""
    return bits_of_float(p + 0.0) | (_SIGN_BIT if outcome else np.int64(0))


_SIGN_BIT = np.int64(-(2**63))
_MAGNITUDE = np.int64(2**63 - 1)


@nb.njit(cache=CACHE, inline="always")
def _gather_row(E, keys, o, K, y, slot_of, bitmap, n_words, write_at, out):
    """Copy the values ``E[o : o + K]`` of a row (true label ``y``) whose bucket ``keys[o + k]``
    is a cut one, as :func:`_packed_sample`. The bitmap (8 kB at K = 66, in L1) answers the
    common "no" without touching ``slot_of``. One call a row: inlined per entry, the array
    arguments cost 15x more here."""
    for k in range(K):
        key = keys[o + k]
        if (bitmap[k * n_words + (key >> 6)] >> np.uint64(key & 63)) & np.uint64(1):
            slot = slot_of[k, key]
            j = write_at[slot]
            out[j] = _packed_sample(E[o + k], k == y)
            write_at[slot] = j + 1


@nb.njit(cache=CACHE, inline="always")
def _gather_ace(mode, args):
    """Copy the values and outcomes (packed, :func:`_packed_sample`) of rows ``[start, stop)``
    that fall in a boundary bucket.

    ``args`` = (x, labels, start, stop, ignore_index, num_classes, slot_of, write_at, out,
    row_softmax); ``row_softmax`` as filled by :func:`_accumulate` for long logit rows, or empty.

    ``slot_of[k, bucket]`` is the slot of a bucket that holds an equal-mass range boundary, or
    -1; ``write_at[slot]`` is where this range's next value of that slot goes (advanced here).
    The rows were validated by :func:`_accumulate` already, so they are not checked again, and
    probabilities are rebuilt exactly as it built them (same functions, same order), so every
    value lands in the bucket it was counted in.
    """
    x, labels, start, stop, ignore_index, num_classes, slot_of, write_at, out, row_softmax = args
    K = num_classes
    n_buckets = slot_of.shape[1]
    n_words = (n_buckets + 63) // 64
    bitmap = np.zeros(K * n_words, dtype=np.uint64)
    for k in range(K):
        for j in range(n_buckets):
            if slot_of[k, j] >= 0:
                bitmap[k * n_words + (j >> 6)] |= np.uint64(1) << np.uint64(j & 63)
    # Row by row, read in place: probabilities, and long logit rows whose maximum and inverse
    # softmax sum the first pass kept (exp(z - max) times the inverse sum, as _softmax_rows and
    # _normalise_rows computed them; the clamped exp has the same bits where both apply).
    kept_softmax = mode == MODE_LOGITS and K >= LONG_ROW and row_softmax.shape[0] > 0
    if mode == MODE_PROBS or kept_softmax:
        E = np.empty(K, dtype=np.float64)
        keys = np.empty(K, dtype=np.int64)
        for i in range(start, stop):
            y = np.int64(labels[i])
            if y == ignore_index:
                continue
            if mode == MODE_PROBS:  # (a compile-time constant)
                for k in range(K):  # vector loops: the buckets before the branchy one
                    E[k] = np.float64(x[i, k])
                    keys[k] = _ace_bucket(bits_of_float(E[k]))
            else:
                top = row_softmax[i, 0]
                inverse = row_softmax[i, 1]
                for k in range(K):
                    E[k] = exp_strict(np.float64(x[i, k]) - top) * inverse
                    keys[k] = _ace_bucket(bits_of_float(E[k]))
            _gather_row(E, keys, 0, K, y, slot_of, bitmap, n_words, write_at, out)
        return
    rows_per_block = max(1, BLOCK_ENTRIES // K)
    P = np.empty(rows_per_block * K, dtype=np.float64)
    Z = np.empty_like(P)
    row_log = np.empty(rows_per_block, dtype=np.float64)
    row_conf = np.empty_like(row_log)
    row_top = np.empty_like(row_log)
    row_pred = np.empty(rows_per_block, dtype=np.int64)
    bits = P.view(np.int64)
    index = np.empty(rows_per_block * K, dtype=np.int64)
    for b0 in range(start, stop, rows_per_block):
        b1 = min(b0 + rows_per_block, stop)
        rows = (row_log, row_conf, row_pred, row_top)
        _fill_block(mode, x, labels, b0, b1, K, ignore_index, 1e-12, P, Z, Z, rows, False)
        _ace_buckets(bits, index, (b1 - b0) * K)
        for i in range(b0, b1):
            y = np.int64(labels[i])
            if y == ignore_index:
                continue
            _gather_row(P, index, (i - b0) * K, K, y, slot_of, bitmap, n_words, write_at, out)


# --------------------------------------------------------------------------------------------
# Top-label statistics alone (ECE, MCE, RBECE, ESCE, class-wise ECE, overconfidence): no
# per-entry probability is kept, so rows of probabilities are read straight from the input,
# and logit rows only go through the exp a block at a time. Same binning and the same top
# label as :func:`_accumulate` (first index of the maximum; for logits the first argmax of z,
# whose probability is 1 / sum_k exp(z_k - max)).


@nb.njit(cache=CACHE, nogil=True, fastmath=_REDUCE)
def _probs_row(x, i, K):
    """Sum, number of values outside [0, 1] (or NaN), top label and maximum of row ``i``, in
    one vector loop (the maximum on :func:`_key_with_index`, as in :func:`_probs_block`)."""
    spare = _spare_key_bits(x)
    total = 0.0
    bad = 0
    best = np.int64(0)
    for k in range(K):
        v = np.float64(x[i, k])
        bad += 0 if (v >= 0.0 and v <= 1.0) else 1
        total += v
        best = max(best, _key_with_index(bits_of_float(v), k, spare))
    pred, top = _first_argmax(x, i, K, best, spare)
    return total, bad, pred, top


@nb.njit(cache=CACHE, inline="always")
def _ordered_key(v):
    """An int64 that orders as the float ``v`` does (sign-magnitude to two's complement):
    an integer maximum vectorises where a float one does not (a scalar ``maxsd`` chain, 4x
    slower measured on logit rows of 66)."""
    bits = bits_of_float(v)
    return bits ^ ((bits >> 63) & 0x7FFFFFFFFFFFFFFF)


_KEY_MINUS_INF = -9218868437227405313  # _ordered_key(-inf)


@nb.njit(cache=CACHE, inline="always")
def _ordered_key_value(key):
    """The float whose :func:`_ordered_key` is ``key`` (the map is its own inverse)."""
    return float_from_bits(key ^ ((key >> 63) & 0x7FFFFFFFFFFFFFFF))


@nb.njit(cache=CACHE, inline="always")
def _fixed_point_scale(K):
    """2**s for summing K values in [0, 1] as int64 multiples of 2**-s: (K + 1) * 2**s <= 2**62
    (s = 55 at K = 66), so no sum can overflow."""
    s = 62
    while (np.int64(1) << (62 - s)) < K + 1:
        s -= 1
    return np.float64(np.int64(1) << s)


FIXED_POINT_ONE_WORD = 256
"""Up to this many classes a row sums in one int64 word (error at most K * 2**-s, s >= 53:
at most 2**-45, as good as a float sum's worst case); above, a second word holds 32 more bits
of each term, as the unit 2**-s grows with K and would lose the mass of small terms."""


@nb.njit(cache=CACHE, inline="always")
def _exp_row_sum(x, i, K, top, E, o, scale, in_range):
    """``E[o + k] = exp(x[i, k] - top)`` and their sum, in fixed point (see
    :func:`_softmax_rows`); ``in_range``: no term below ``EXP_MIN``, so the exp needs no
    clamp. The branches are outside the loops, one vector loop each."""
    if K <= FIXED_POINT_ONE_WORD:
        units = np.int64(0)
        if in_range:
            for k in range(K):
                e = exp_in_range_strict(np.float64(x[i, k]) - top)
                E[o + k] = e
                units += np.int64(e * scale + 0.5)  # nearest, but a tie at [2**52, 2**53) rounds to even
        else:
            for k in range(K):
                e = exp_strict(np.float64(x[i, k]) - top)
                E[o + k] = e
                units += np.int64(e * scale + 0.5)
        return np.float64(units) / scale
    # two words: the whole units (truncated), then 32 more bits of the (exact) remainder
    if in_range:
        for k in range(K):
            E[o + k] = exp_in_range_strict(np.float64(x[i, k]) - top)
    else:
        for k in range(K):
            E[o + k] = exp_strict(np.float64(x[i, k]) - top)
    units = np.int64(0)
    fraction = np.int64(0)
    for k in range(K):  # E[o + k] over range(K): a loop over range(o, o + K) did not vectorise (16x slower)
        v = E[o + k] * scale
        whole = np.int64(v)
        units += whole
        fraction += np.int64((v - np.float64(whole)) * 4294967296.0)
    return (np.float64(units) + np.float64(fraction) * 2.0**-32) / scale


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _softmax_rows(x, b0, nr, K, E, tops, sums, bads, preds):
    """Long logit rows ``[b0, b0 + nr)``, vector loops each: the maximum ``tops[r]`` (on
    :func:`_ordered_key`, with the least key, so that NaN and inf are caught there) and, in the
    same loop for float32 input (a second one for float64), the first ``k`` with ``x[i, k] ==
    top``, ``preds[r]`` (the top label); then ``E[r * K + k] = exp(x[i, k] - top)`` with their
    sum ``sums[r]``; 1 in ``bads[r]`` if the row holds a NaN or inf (else 0). Every kernel
    builds long-row softmaxes here, one call a block.

    The sum is taken in fixed point (int64 multiples of 2**-s, s = 55 at K = 66; error at most
    K * 2**-s, 2e-15 at K = 66, on a sum >= 1; two words above
    :data:`FIXED_POINT_ONE_WORD` classes): integer adds vectorise in any order with the same
    result. A reassociated float sum is as fast but not reproducible: LLVM vectorises it per
    call site, and the top-label kernel, the full pass and the exact-ACE gather (which must
    rebuild the very same probabilities) differed in the last bit."""
    scale = _fixed_point_scale(K)
    spare = _spare_key_bits(x)
    for r in range(nr):
        i = b0 + r
        o = r * K
        best = np.int64(-(2**63))
        least = np.int64(2**63 - 1)
        for k in range(K):
            key = _ordered_key(np.float64(x[i, k]) + 0.0)  # + 0.0: -0.0 ties with 0.0
            best = max(best, _key_with_index(key, k, spare))
            least = min(least, key)
        pred, top = _first_argmax(x, i, K, best, spare)  # meaningless with a NaN: ``bads`` says so
        in_range = _ordered_key_value(least) - top >= EXP_MIN  # the common case: no term to flush
        sums[r] = _exp_row_sum(x, i, K, top, E, o, scale, in_range)
        tops[r] = top
        # NaN and +-inf order beyond every finite key (-NaN below -inf, +NaN above +inf)
        bads[r] = 0 if (least > _KEY_MINUS_INF and top < np.inf) else 1
        preds[r] = pred


@nb.njit(cache=CACHE, inline="always")
def _top_of_probs_row(x, i, K, long_rows):
    """(top label, its probability, row sum, number of values outside [0, 1] or NaN) of a row
    of probabilities (``long_rows``: K >= 16, a compile-time constant). Logit rows go by
    blocks, through :func:`_top_logits_block`."""
    if long_rows:
        total, bad, pred, conf = _probs_row(x, i, K)
        return pred, conf, total, bad
    conf = np.float64(x[i, 0])
    pred = 0
    total = 0.0
    bad = 0
    for k in range(K):
        v = np.float64(x[i, k])
        bad += 0 if (v >= 0.0 and v <= 1.0) else 1
        total += v
        if v > conf:
            conf = v
            pred = k
    return pred, conf, total, bad


@nb.njit(cache=CACHE)
def _probs_row_error(x, i, K, bad):
    """The error code of a row that failed the check of :func:`_top_of_probs_row`."""
    if bad == 0:
        return ERR_ROW_SUM
    for k in range(K):
        if not math.isfinite(x[i, k]):
            return ERR_NONFINITE
    return ERR_RANGE


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _top_logits_block(x, labels, b0, b1, K, ignore_index, Z, E, preds, confs, tops, bads):
    """Top labels and probabilities of the logit rows ``[b0, b1)``: long rows through
    :func:`_softmax_rows`, short ones through :func:`_short_logit_rows`, as the full pass builds
    them. Returns the first unmasked row with a NaN or inf (-1 if none); a bad label on an
    earlier row is still reported first, by the caller's row loop."""
    nr = b1 - b0
    if K >= LONG_ROW:
        _softmax_rows(x, b0, nr, K, E, tops, confs, bads, preds)
        for r in range(nr):
            if bads[r] > 0 and labels[b0 + r] != ignore_index:
                return b0 + r
            confs[r] = 1.0 / confs[r]
        return -1
    bad_row = _short_logit_rows(x, labels, b0, nr, K, ignore_index, Z, E, preds, tops, confs)
    if bad_row < 0:
        for r in range(nr):
            confs[r] = 1.0 / confs[r]
    return bad_row


@nb.njit(cache=CACHE, inline="always")
def _accumulate_top(mode, long_rows, args, fixed_k):
    """:func:`_accumulate` with no optional group: only ``top`` and ``scalars`` are filled.
    ``long_rows`` (K >= 16) is a compile-time constant, as the mode is: with both paths in one
    loop, the code of the long rows slowed the short ones by 20-40% (K = 4, measured).
    ``fixed_k``: the class count as a compile-time constant (0: read it from ``args``)."""
    (x, labels, start, stop, ignore_index, num_classes, eps, top_bins, top, fuzzy, classwise, ace, scalars, errors) = (
        args[:14]
    )
    K = num_classes if fixed_k == 0 else fixed_k
    n_specs = top_bins.shape[0]
    blocked = mode == MODE_LOGITS
    rows_per_block = max(1, BLOCK_ENTRIES // K) if blocked else stop - start
    size = rows_per_block if blocked else 0
    Z = np.empty(size * K, dtype=np.float64)
    E = np.empty_like(Z)
    preds = np.empty(size, dtype=np.int64)
    confs = np.empty(size, dtype=np.float64)
    tops = np.empty(size, dtype=np.float64)
    bads = np.empty(size, dtype=np.float64)
    s_n = 0.0
    s_correct = 0.0
    s_wrong_conf = 0.0
    for b0 in range(start, stop, max(rows_per_block, 1)):
        b1 = min(b0 + rows_per_block, stop)
        bad_row = -1
        if blocked:
            bad_row = _top_logits_block(x, labels, b0, b1, K, ignore_index, Z, E, preds, confs, tops, bads)
        failed = False
        for i in range(b0, b1):
            y = np.int64(labels[i])
            if y == ignore_index:
                continue
            if np.uint64(y) >= np.uint64(K):  # y < 0 or y >= K, one compare
                errors[ERR_LABEL] = i
                failed = True
                break
            if blocked:
                if i == bad_row:
                    errors[ERR_NONFINITE] = i
                    failed = True
                    break
                pred = preds[i - b0]
                conf = confs[i - b0]
            else:
                pred, conf, total, bad = _top_of_probs_row(x, i, K, long_rows)
                if bad > 0 or abs(total - 1.0) > ROW_SUM_TOLERANCE:
                    errors[_probs_row_error(x, i, K, bad)] = i
                    failed = True
                    break
            correct = 1.0 if pred == y else 0.0
            s_n += 1.0
            s_correct += correct
            s_wrong_conf += (1.0 - correct) * conf
            lane = i & (LANES - 1)
            if n_specs == 1:  # the common case, worth its own code (25% faster at K = 4)
                b = _bin_index(conf, top_bins[0])
                top[lane, 0, y, b, 0] += 1.0
                top[lane, 0, y, b, 1] += conf
                top[lane, 0, y, b, 2] += correct
            else:
                for s in range(n_specs):
                    b = _bin_index(conf, top_bins[s])
                    top[lane, s, y, b, 0] += 1.0
                    top[lane, s, y, b, 1] += conf
                    top[lane, s, y, b, 2] += correct
        if failed:
            break
    scalars[S_N] += s_n
    scalars[S_CORRECT] += s_correct
    scalars[S_WRONG_CONF] += s_wrong_conf
    scalars[S_WRONG] += s_n - s_correct


@nb.njit(cache=CACHE, nogil=True)
def _accumulate_top_probs(args):
    _accumulate_top(MODE_PROBS, False, args, 0)


@nb.njit(cache=CACHE, nogil=True)
def _accumulate_top_long_probs(args):
    _accumulate_top(MODE_PROBS, True, args, 0)


@nb.njit(cache=CACHE, nogil=True)
def _accumulate_top_logits(args):
    _accumulate_top(MODE_LOGITS, False, args, 0)


@nb.njit(cache=CACHE, nogil=True)
def _accumulate_top_long_logits(args):
    _accumulate_top(MODE_LOGITS, True, args, 0)


SMALL_ROW = 8
"""Rows of probabilities of at most this many classes have a top-label kernel compiled for
their class count (:func:`accumulate_top_small_probs`)."""


@nb.njit(cache=CACHE, nogil=True)
def accumulate_top_small_probs(args, classes):
    """:func:`_accumulate_top` on probability rows of K <= :data:`SMALL_ROW` classes, compiled
    once per K, so that the loop over a row is unrolled: 1.2x faster at K = 4 (same-process
    A/B), where the loop's own work rivals the row's. ``classes`` is a tuple of K zeros: its
    length is part of its type, hence a compile-time constant (a literal integer argument
    would be re-typed on every call, 0.45 s measured)."""
    _accumulate_top(MODE_PROBS, False, args, len(classes))


ACCUMULATE_TOP = {
    (MODE_PROBS, False): _accumulate_top_probs,
    (MODE_PROBS, True): _accumulate_top_long_probs,
    (MODE_LOGITS, False): _accumulate_top_logits,
    (MODE_LOGITS, True): _accumulate_top_long_logits,
}
"""``ACCUMULATE_TOP[mode, K >= 16](...)``: :func:`_accumulate` for calls with no optional group."""


# One compiled entry point per input mode: with the mode a compile-time constant the row
# filling loses its branches (1.7x faster measured here than one kernel taking the mode).
@nb.njit(cache=CACHE, nogil=True)
def _accumulate_probs(args):
    _accumulate(MODE_PROBS, args)


@nb.njit(cache=CACHE, nogil=True)
def _accumulate_logits(args):
    _accumulate(MODE_LOGITS, args)


@nb.njit(cache=CACHE, nogil=True)
def _accumulate_binary_probs(args):
    _accumulate(MODE_BINARY_PROBS, args)


@nb.njit(cache=CACHE, nogil=True)
def _accumulate_binary_logits(args):
    _accumulate(MODE_BINARY_LOGITS, args)


@nb.njit(cache=CACHE, nogil=True)
def _gather_probs(args):
    _gather_ace(MODE_PROBS, args)


@nb.njit(cache=CACHE, nogil=True)
def _gather_logits(args):
    _gather_ace(MODE_LOGITS, args)


@nb.njit(cache=CACHE, nogil=True)
def _gather_binary_probs(args):
    _gather_ace(MODE_BINARY_PROBS, args)


@nb.njit(cache=CACHE, nogil=True)
def _gather_binary_logits(args):
    _gather_ace(MODE_BINARY_LOGITS, args)


ACCUMULATE = {
    MODE_PROBS: _accumulate_probs,
    MODE_LOGITS: _accumulate_logits,
    MODE_BINARY_PROBS: _accumulate_binary_probs,
    MODE_BINARY_LOGITS: _accumulate_binary_logits,
}
"""``ACCUMULATE[mode](...)`` adds rows into statistics; see :func:`_accumulate`."""

GATHER_ACE = {
    MODE_PROBS: _gather_probs,
    MODE_LOGITS: _gather_logits,
    MODE_BINARY_PROBS: _gather_binary_probs,
    MODE_BINARY_LOGITS: _gather_binary_logits,
}
"""``GATHER_ACE[mode](...)`` copies out the samples of boundary buckets; see :func:`_gather_ace`."""


@nb.njit(cache=CACHE)
def _prefix_of_sorted(values, outcomes, need):
    """Sums of the ``need`` smallest ``values`` and of their outcomes, tied values sharing
    their group's mean outcome, so that where the cut splits a tie the result does not
    depend on the order of the samples (ACE stays permutation invariant)."""
    order = np.argsort(values, kind="mergesort")
    n = values.shape[0]
    sum_p = 0.0
    sum_o = 0.0
    g = 0
    while g < need:
        h = g
        total = 0.0
        while h < n and values[order[h]] == values[order[g]]:
            total += outcomes[order[h]]
            h += 1
        take = min(h, need) - g
        sum_p += take * values[order[g]]
        sum_o += take * (total / (h - g))
        g = h
    return sum_p, sum_o


RADIX_BITS = 12
"""A cut ACE bucket is resolved by one more histogram on up to this many further bits of its
values' float patterns; only the sub-bucket holding the range boundary is sorted."""


@nb.njit(cache=CACHE, nogil=True)
def resolve_points(samples, slot_start, slot_count, point_slot, point_rank, out_p, out_o):
    """Exact sums of p and outcome over the ``point_rank[q]`` smallest values of slot
    ``point_slot[q]`` (``samples[slot_start[s] : slot_start[s] + slot_count[s]]``, packed by
    :func:`_packed_sample`), per point.

    Sorting whole cut buckets (1/16 octave, up to 1e5 samples each) cost more than the pass
    over the data; instead each slot gets a histogram on the next bits of its values' float
    patterns (monotone in the value for p >= 0), whole sub-buckets below the boundary are
    added from it, and only the members of the one sub-bucket the boundary cuts are sorted.
    Tied values share a float pattern, hence a sub-bucket, so ties keep the semantics of
    :func:`_prefix_of_sorted`.
    """
    order = np.argsort(point_slot, kind="mergesort")
    n_sub_max = 1 << RADIX_BITS
    counts = np.zeros(n_sub_max + 1, dtype=np.int64)
    sums_p = np.zeros(n_sub_max + 1)
    sums_o = np.zeros(n_sub_max + 1)
    keys = np.empty(0, dtype=np.int64)
    current = -1
    lo = 0
    hi = 0
    shift = 0
    for q in order:
        s = point_slot[q]
        a = slot_start[s]
        n = slot_count[s]
        if s != current:
            current = s
            if keys.shape[0] < n:
                keys = np.empty(n, dtype=np.int64)
            lo = samples[a] & _MAGNITUDE  # the pattern of p (>= +0.0): monotone in p
            hi = lo
            for t in range(n):
                b = samples[a + t] & _MAGNITUDE
                keys[t] = b
                lo = min(lo, b)
                hi = max(hi, b)
            # about two sub-buckets a sample: clearing and summing 4096 of them for every small
            # slot cost 5 ms of a 13 ms report on 2000 rows
            limit = n_sub_max
            while limit > 16 and limit > 2 * n:
                limit >>= 1
            shift = 0
            while ((hi - lo) >> shift) >= limit:
                shift += 1
            n_sub = ((hi - lo) >> shift) + 1
            counts[: n_sub + 1] = 0
            sums_p[: n_sub + 1] = 0.0
            sums_o[: n_sub + 1] = 0.0
            for t in range(n):
                j = (keys[t] - lo) >> shift
                keys[t] = j
                counts[j + 1] += 1
                sums_p[j + 1] += float_from_bits(samples[a + t] & _MAGNITUDE)
                sums_o[j + 1] += 1.0 if samples[a + t] < 0 else 0.0
            for j in range(n_sub):  # running sums: entry j = everything in sub-buckets < j
                counts[j + 1] += counts[j]
                sums_p[j + 1] += sums_p[j]
                sums_o[j + 1] += sums_o[j]
        r = point_rank[q]
        j = np.searchsorted(counts[: ((hi - lo) >> shift) + 2], r) - 1  # counts[j] < r <= counts[j + 1]
        if counts[j + 1] == r:  # the boundary falls between sub-buckets: no sort needed
            out_p[q] = sums_p[j + 1]
            out_o[q] = sums_o[j + 1]
            continue
        m = counts[j + 1] - counts[j]
        sub_p = np.empty(m)
        sub_o = np.empty(m)
        c = 0
        for t in range(n):
            if keys[t] == j:
                sub_p[c] = float_from_bits(samples[a + t] & _MAGNITUDE)
                sub_o[c] = 1.0 if samples[a + t] < 0 else 0.0
                c += 1
        part_p, part_o = _prefix_of_sorted(sub_p, sub_o, r - counts[j])
        out_p[q] = sums_p[j] + part_p
        out_o[q] = sums_o[j] + part_o


@nb.njit(cache=CACHE, nogil=True)
def classwise_of_samples(samples, slot_start, slot_count, slot_class, slots, n_bins, out):
    """Add the samples of ``slots`` (packed by :func:`_packed_sample`, slot ``s`` of class
    ``slot_class[s]``) into a (K, n_bins, 3) class-wise table: count, sum p, sum outcome, in
    the equal-width bins of :func:`_bin_index`."""
    for s in slots:
        k = slot_class[s]
        for t in range(slot_start[s], slot_start[s] + slot_count[s]):
            v = samples[t]
            p = float_from_bits(v & _MAGNITUDE)
            b = _bin_index(p, n_bins)
            out[k, b, 0] += 1.0
            out[k, b, 1] += p
            if v < 0:
                out[k, b, 2] += 1.0
