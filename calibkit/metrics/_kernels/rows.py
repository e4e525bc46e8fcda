"""Rows of the input into probabilities: checked, converted or softmaxed, a block at a time.

Every kernel builds probabilities here, with the same functions in the same order, so that
they agree to the bit (the exact-ACE gather must rebuild the very values the full pass counted).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np
from numba import types
from numba.core.extending import overload

from calibkit._numba.cache import CACHE
from calibkit._numba.fastmath import (
    EXP_MIN,
    MIN_NORMAL,
    bits_of_float,
    exp_in_range_strict,
    exp_into,
    exp_strict,
    float_from_bits,
    log_into,
)
from calibkit.metrics._kernels.constants import (
    ERR_NONFINITE,
    ERR_RANGE,
    ERR_ROW_SUM,
    LONG_ROW,
    MODE_BINARY_PROBS,
    MODE_LOGITS,
    MODE_PROBS,
    ROW_SUM_TOLERANCE,
)

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


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _square_and_entropy(P, L, nr, K, square, entropy):
    """Per row of a block of long rows: ``sum_k p_k^2`` and ``sum_k p_k log p_k`` (``L =
    log(max(p, eps))``, so p = 0 adds 0), each in class order, as short rows sum them. Four rows
    at a time, so that eight chains of adds overlap instead of each waiting on its add latency
    at every entry (one call a block: a call per row costs more than it saves).

    Not reassociated: a reassociated sum, 4 lanes at a time, was 24 ms faster at 2M x 66, but
    LLVM vectorised it differently in a process that compiled the kernel and in one that loaded
    it from the cache, and the ECD of the same float32 logits differed in the last bit."""
    r = 0
    while r + 4 <= nr:
        o = r * K
        s0 = s1 = s2 = s3 = 0.0
        e0 = e1 = e2 = e3 = 0.0
        for k in range(K):
            j = o + k
            a0 = P[j]
            a1 = P[j + K]
            a2 = P[j + 2 * K]
            a3 = P[j + 3 * K]
            s0 += a0 * a0
            s1 += a1 * a1
            s2 += a2 * a2
            s3 += a3 * a3
            e0 += a0 * L[j]
            e1 += a1 * L[j + K]
            e2 += a2 * L[j + 2 * K]
            e3 += a3 * L[j + 3 * K]
        square[r], square[r + 1], square[r + 2], square[r + 3] = s0, s1, s2, s3
        entropy[r], entropy[r + 1], entropy[r + 2], entropy[r + 3] = e0, e1, e2, e3
        r += 4
    for t in range(r, nr):
        o = t * K
        sq = 0.0
        ent = 0.0
        for k in range(K):
            sq += P[o + k] * P[o + k]
            ent += P[o + k] * L[o + k]
        square[t] = sq
        entropy[t] = ent


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


# For the top-label kernel of long rows (accumulate._accumulate_top), which keeps no per-entry
# probability: a row of probabilities is checked and its top label found in one loop, logit rows
# are softmaxed a block at a time.


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


@nb.njit(cache=CACHE)
def _probs_row_error(x, i, K, bad):
    """The error code of a row that failed the check of :func:`_probs_row` (``bad`` values outside [0, 1] or NaN)."""
    if bad == 0:
        return ERR_ROW_SUM
    for k in range(K):
        if not math.isfinite(x[i, k]):
            return ERR_NONFINITE
    return ERR_RANGE


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _top_logits_block(x, labels, b0, b1, K, ignore_index, E, preds, confs, tops, bads):
    """Top labels and probabilities of the long logit rows ``[b0, b1)`` (K >= 16), through
    :func:`_softmax_rows`, as the full pass builds them. Returns the first unmasked row with a
    NaN or inf (-1 if none); a bad label on an earlier row is still reported first, by the
    caller's row loop."""
    nr = b1 - b0
    _softmax_rows(x, b0, nr, K, E, tops, confs, bads, preds)
    for r in range(nr):
        if bads[r] > 0 and labels[b0 + r] != ignore_index:
            return b0 + r
        confs[r] = 1.0 / confs[r]
    return -1
