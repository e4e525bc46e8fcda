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

# ACE histogram: a probability's bucket is the top 16 bits of its float64 pattern (11 exponent
# bits and 4 mantissa bits: 16 buckets an octave, relative width <= 1/16), so the buckets follow
# the data down to tiny probabilities, where equal-mass ranges of a class column mostly fall.
# Everything below 2**-64 shares bucket 0; 1.0 is the last bucket.
ACE_MIN_EXPONENT = 1023 - 64
ACE_OFFSET = (ACE_MIN_EXPONENT << 4) - 1
ACE_BUCKETS = (1023 << 4) - ACE_OFFSET + 1


@nb.njit(cache=True, inline="always")
def _bin_index(p, n_bins):
    # Right-closed equal-width bins ((m-1)/M, m/M]; 0 goes to the first bin (SPEC.md).
    b = int(math.ceil(p * n_bins)) - 1
    if b < 0:
        return 0
    if b >= n_bins:
        return n_bins - 1
    return b


@nb.njit(cache=True, inline="always")
def _ace_bucket(bits):
    key = (bits >> 48) - ACE_OFFSET
    if key < 0:
        return 0
    return key


@nb.njit(cache=True, inline="always")
def _fill_row(x, i, mode, num_classes, row):
    """Write row ``i`` as float64 probabilities into ``row``; return an error code or -1."""
    if mode == MODE_PROBS:
        total = 0.0
        bad = False
        for k in range(num_classes):
            v = np.float64(x[i, k])
            bad |= not (v >= 0.0 and v <= 1.0)  # also catches NaN and inf
            row[k] = v
            total += v
        if bad:
            for k in range(num_classes):
                if not math.isfinite(row[k]):
                    return ERR_NONFINITE
            return ERR_RANGE
        if abs(total - 1.0) > ROW_SUM_TOLERANCE:
            return ERR_ROW_SUM
    elif mode == MODE_LOGITS:
        top = -np.inf
        bad = False
        for k in range(num_classes):
            v = np.float64(x[i, k])
            bad |= not math.isfinite(v)
            row[k] = v
            top = max(top, v)
        if bad:
            return ERR_NONFINITE
        total = 0.0
        for k in range(num_classes):
            e = math.exp(row[k] - top)
            row[k] = e
            total += e
        inv = 1.0 / total
        for k in range(num_classes):
            row[k] *= inv
    elif mode == MODE_BINARY_PROBS:
        v = np.float64(x[i, 0])
        if not (v >= 0.0 and v <= 1.0):
            return ERR_NONFINITE if not math.isfinite(v) else ERR_RANGE
        row[0] = 1.0 - v
        row[1] = v
    else:
        v = np.float64(x[i, 0])
        if not math.isfinite(v):
            return ERR_NONFINITE
        # Both tails computed without cancellation.
        if v >= 0.0:
            e = math.exp(-v)
            row[1] = 1.0 / (1.0 + e)
            row[0] = e / (1.0 + e)
        else:
            e = math.exp(v)
            row[1] = e / (1.0 + e)
            row[0] = 1.0 / (1.0 + e)
    return -1


LANES = 4
"""Copies of every histogram, row ``i`` adding into copy ``i % LANES``: consecutive rows that
hit the same bin would otherwise wait on each other's store (a 2-3x slowdown measured here)."""


@nb.njit(cache=True, inline="always")
def _accumulate(mode, args):
    """Add the statistics of rows ``[start, stop)`` into the output arrays.

    ``args`` = (x, labels, start, stop, ignore_index, num_classes, eps, top_bins, top, fuzzy,
    classwise, ace, scalars, errors, do_rows, do_classwise, do_ace, do_fuzzy), a tuple so that
    the four per-mode entry points below stay one line each.

    Every histogram has a leading axis of ``LANES`` copies, summed by the caller.
    top       (LANES, S, K, Mmax, 4): per bin count of ``top_bins[s]``, split by true label:
              count, sum confidence, sum correct, sum ECD term (``do_rows`` only).
              Binary input bins the positive-class probability with outcome ``y == 1``.
    fuzzy     (LANES, Mf, 3): FCE membership, membership * correct, membership * confidence.
    classwise (LANES, K, Mc, 3): per class column and equal-width bin: count, sum p, sum 1[y = k].
    ace       (LANES, K, ACE_BUCKETS, 3): the same on the fine float-pattern buckets.
    scalars   (N_SCALARS,): n, correct, Brier, NLL, ECD sums, confidence and count of errors.
    errors    (N_ERRORS,): first offending row of each kind, -1 if none. The kernel stops at
              the first bad row: the caller raises.
    """
    (x, labels, start, stop, ignore_index, num_classes, eps, top_bins, top, fuzzy, classwise, ace, scalars, errors) = (
        args[:14]
    )
    do_rows, do_classwise, do_ace, do_fuzzy = args[14:]
    K = num_classes
    binary = mode >= MODE_BINARY_PROBS
    row = np.empty(K, dtype=np.float64)
    bits = row.view(np.int64)
    n_specs = top_bins.shape[0]
    n_fuzzy = fuzzy.shape[1]
    n_cw = classwise.shape[2]
    s_n = 0.0
    s_correct = 0.0
    s_brier = 0.0
    s_nll = 0.0
    s_ecd = 0.0
    s_wrong_conf = 0.0
    s_wrong = 0.0
    for i in range(start, stop):
        y = np.int64(labels[i])
        if y == ignore_index:
            continue
        if y < 0 or y >= K:
            errors[ERR_LABEL] = i
            break
        err = _fill_row(x, i, mode, K, row)
        if err >= 0:
            errors[err] = i
            break
        lane = i & (LANES - 1)
        pred = 0
        conf = row[0]
        for k in range(1, K):
            if row[k] > conf:
                conf = row[k]
                pred = k
        correct = 1.0 if pred == y else 0.0
        s_n += 1.0
        s_correct += correct
        s_wrong_conf += (1.0 - correct) * conf
        s_wrong += 1.0 - correct
        if binary:
            c_top = row[1]
            a_top = 1.0 if y == 1 else 0.0
        else:
            c_top = conf
            a_top = correct
        ecd_i = 0.0
        if do_rows:
            brier_i = 0.0
            for k in range(K):
                p = row[k]
                brier_i += p * p
                if p > 0.0:
                    ecd_i += p * math.log(max(p, eps))
            brier_i += 1.0 - 2.0 * row[y]  # sum_k (p_k - 1[k=y])^2 = sum p^2 - 2 p_y + 1
            log_py = math.log(max(row[y], eps))
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
        if do_classwise:
            for k in range(K):
                p = row[k]
                b = _bin_index(p, n_cw)
                classwise[lane, k, b, 0] += 1.0
                classwise[lane, k, b, 1] += p
            classwise[lane, y, _bin_index(row[y], n_cw), 2] += 1.0
        if do_ace:
            for k in range(K):
                j = _ace_bucket(bits[k])
                ace[lane, k, j, 0] += 1.0
                ace[lane, k, j, 1] += row[k]
            ace[lane, y, _ace_bucket(bits[y]), 2] += 1.0
    scalars[S_N] += s_n
    scalars[S_CORRECT] += s_correct
    scalars[S_BRIER] += s_brier
    scalars[S_NLL] += s_nll
    scalars[S_ECD] += s_ecd
    scalars[S_WRONG_CONF] += s_wrong_conf
    scalars[S_WRONG] += s_wrong


@nb.njit(cache=True, inline="always")
def _gather_ace(mode, args):
    """Copy the values (and outcomes) of rows ``[start, stop)`` that fall in a boundary bucket.

    ``args`` = (x, labels, start, stop, ignore_index, num_classes, slot_of, write_at, out_p, out_o).

    ``slot_of[k, bucket]`` is the slot of a bucket that holds an equal-mass range boundary, or
    -1; ``write_at[slot]`` is where this range's next value of that slot goes (advanced here).
    The rows were validated by :func:`accumulate` already.
    """
    x, labels, start, stop, ignore_index, num_classes, slot_of, write_at, out_p, out_o = args
    K = num_classes
    row = np.empty(K, dtype=np.float64)
    bits = row.view(np.int64)
    for i in range(start, stop):
        y = np.int64(labels[i])
        if y == ignore_index:
            continue
        _fill_row(x, i, mode, K, row)
        for k in range(K):
            slot = slot_of[k, _ace_bucket(bits[k])]
            if slot >= 0:
                j = write_at[slot]
                out_p[j] = row[k]
                out_o[j] = 1.0 if k == y else 0.0
                write_at[slot] = j + 1


# One compiled entry point per input mode: with the mode a compile-time constant the row
# filling loses its branches (1.7x faster measured here than one kernel taking the mode).
@nb.njit(cache=True, nogil=True)
def _accumulate_probs(args):
    _accumulate(MODE_PROBS, args)


@nb.njit(cache=True, nogil=True)
def _accumulate_logits(args):
    _accumulate(MODE_LOGITS, args)


@nb.njit(cache=True, nogil=True)
def _accumulate_binary_probs(args):
    _accumulate(MODE_BINARY_PROBS, args)


@nb.njit(cache=True, nogil=True)
def _accumulate_binary_logits(args):
    _accumulate(MODE_BINARY_LOGITS, args)


@nb.njit(cache=True, nogil=True)
def _gather_probs(args):
    _gather_ace(MODE_PROBS, args)


@nb.njit(cache=True, nogil=True)
def _gather_logits(args):
    _gather_ace(MODE_LOGITS, args)


@nb.njit(cache=True, nogil=True)
def _gather_binary_probs(args):
    _gather_ace(MODE_BINARY_PROBS, args)


@nb.njit(cache=True, nogil=True)
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


@nb.njit(cache=True, nogil=True)
def resolve_slots(values, outcomes, slot_start, slot_count):
    """Sort each slot's values and turn them into within-slot running sums, in place.

    Tied values share their group's mean outcome, so where a range boundary cuts a tie the
    result does not depend on the order of the samples (ACE stays permutation invariant).
    """
    for s in range(slot_start.shape[0]):
        a = slot_start[s]
        n = slot_count[s]
        seg_p = values[a : a + n]
        seg_o = outcomes[a : a + n]
        order = np.argsort(seg_p, kind="mergesort")
        p_sorted = seg_p[order]
        o_sorted = seg_o[order]
        g = 0
        while g < n:
            h = g
            total = 0.0
            while h < n and p_sorted[h] == p_sorted[g]:
                total += o_sorted[h]
                h += 1
            mean = total / (h - g)
            for t in range(g, h):
                o_sorted[t] = mean
            g = h
        run_p = 0.0
        run_o = 0.0
        for t in range(n):
            run_p += p_sorted[t]
            run_o += o_sorted[t]
            seg_p[t] = run_p
            seg_o[t] = run_o
