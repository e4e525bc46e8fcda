"""The full pass: per-bin sums of every metric group, and its lean top-label variant."""

from __future__ import annotations

import math
from typing import NamedTuple

import numba as nb
import numpy as np

from calibkit._numba.cache import CACHE
from calibkit.metrics._kernels.bins import _ace_buckets, _bin_index, _equal_width_bins
from calibkit.metrics._kernels.constants import (
    BLOCK_ENTRIES,
    EDGE_SHRINK,
    ERR_LABEL,
    ERR_NONFINITE,
    LANES,
    LONG_ROW,
    MODE_BINARY_LOGITS,
    MODE_BINARY_PROBS,
    MODE_LOGITS,
    MODE_PROBS,
    ROW_SUM_TOLERANCE,
    S_BRIER,
    S_CORRECT,
    S_ECD,
    S_N,
    S_NLL,
    S_WRONG,
    S_WRONG_CONF,
)
from calibkit.metrics._kernels.rows import (
    _fill_block,
    _probs_row,
    _probs_row_error,
    _square_and_entropy,
    _top_logits_block,
)


@nb.njit(cache=CACHE, nogil=True)
def _first_bin_sums(P, labels, b0, nr, K, ignore_index, n_bins, count, total):
    """Per class, the count and the sum of the values of rows ``[b0, b0 + nr)`` that fall in
    the first equal-width bin (``(p * n_bins) * EDGE_SHRINK <= 1``, the very test of :func:`.bins._bin_index`),
    skipping masked rows. In a long row almost every value is that small (95% below 1/15 in
    the benchmark's 2M x 66 rows), so adding them here, in a vector loop, leaves only the few
    others to the scattered class-wise updates (full pass, one thread, same-process A/B:
    about 6% less time from probabilities, 11% from logits)."""
    for r in range(nr):
        if labels[b0 + r] == ignore_index:
            continue
        o = r * K
        for k in range(K):
            low = (P[o + k] * n_bins) * EDGE_SHRINK <= 1.0
            count[k] += 1.0 if low else 0.0
            total[k] += P[o + k] if low else 0.0


@nb.njit(cache=CACHE, inline="always")
def _round3(x):
    """``round(x, 3)`` as Python rounds a float: to the nearest multiple of 0.001 of the exact
    binary value of ``x``, half to even only on exact ties (``fce(variant="authors")``).

    ``rint(x * 1000)`` alone errs when the product rounds onto a half-integer (``0.5825`` is a
    little above 0.5825 but ``0.5825 * 1000 == 582.5``): the product's exact rounding error,
    Dekker's two-product with ``1000`` needing no split, says which side the exact value is on.
    Selects, not branches, so that the short rows' vector loop (``.short._fuzzy_windows``) takes
    it as it is (``x`` is a membership in [0, 1]: the split cannot overflow).
    """
    p = x * 1000.0
    r = np.rint(p)
    h = 134217729.0 * x  # 2**27 + 1: splits x into two 26-bit halves
    hi = h - (h - x)
    err = (hi * 1000.0 - p) + (x - hi) * 1000.0  # x * 1000 - p, exactly
    tie = abs(p - r) == 0.5
    r = (p + 0.5) if tie & (err > 0.0) else ((p - 0.5) if tie & (err < 0.0) else r)
    return r / 1000.0


@nb.njit(cache=CACHE, inline="always")
def _authors_bin(m, n_bins):
    """The trapezoid corners ``a, b, c, d`` of the fuzzy-binning authors' bin ``m`` of ``n_bins``,
    with their arithmetic (``fuzzy_binning`` in bihani-g/fce ``paper_demo/calibration_metrics.py``):
    ticks ``i * (1 / M)`` and a last tick of exactly 1.0, so that memberships match theirs bit
    for bit (the paper variant's formula differs from theirs in the last bits)."""
    part = 1.0 / n_bins
    t0 = m * part
    t1 = 1.0 if m == n_bins - 1 else (m + 1) * part
    mid = (t0 + t1) / 2
    b = (t0 + mid) / 2
    c = (mid + t1) / 2
    return 2 * t0 - b, b, c, 2 * t1 - c


@nb.njit(cache=CACHE)
def _authors_corners(n_bins):
    """The corners of every one of the authors' ``n_bins`` bins (:func:`_authors_bin`), a (M, 4) table."""
    corners = np.empty((n_bins, 4))
    for m in range(n_bins):
        corners[m, 0], corners[m, 1], corners[m, 2], corners[m, 3] = _authors_bin(m, n_bins)
    return corners


@nb.njit(cache=CACHE, inline="always")
def _authors_membership(x, a, b, c, d):
    """``skfuzzy.trapmf(x, [a, b, c, d])`` for one float64 value, its branches as selects (its
    ramps are open intervals; exactly ``b`` or ``c`` is 1), one division for the ramp ``x`` is on."""
    up = x <= b
    ramp = ((a < x) & (x < b)) if up else ((c < x) & (x < d))
    edge = (x == b) if up else (x == c)
    mu = ((x - a) / (b - a) if up else (d - x) / (d - c)) if ramp else (1.0 if edge else 0.0)
    return mu if up | (x >= c) else 1.0


@nb.njit(cache=CACHE, inline="always")
def _add_fuzzy(fuzzy, lane, c_top, a_top, n_fuzzy, corners):
    """A row's trapezoid memberships (confidence ``c_top``, outcome ``a_top``) into copy
    ``lane`` of the fuzzy table (:class:`AccumulateArgs`): at most two bins are non-zero
    (SPEC.md, FCE); only non-zero memberships are added."""
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
        # fce(fce_variant="authors"): their membership, with their corners, rounded as their
        # round(mu, 3); confidence summed over the correct predictions only.
        ac = corners[m]
        mu_r = _round3(_authors_membership(c_top, ac[0], ac[1], ac[2], ac[3]))
        if mu_r > 0.0:
            fuzzy[lane, m, 3] += mu_r
            fuzzy[lane, m, 4] += mu_r * a_top
            fuzzy[lane, m, 5] += mu_r * a_top * c_top


@nb.njit(cache=CACHE, inline="always")
def _add_sample(table, lane, k, b, p):
    """A value ``p`` of class ``k`` into cell ``b`` of a (lanes, K, bins, 3) histogram: count and sum."""
    table[lane, k, b, 0] += 1.0
    table[lane, k, b, 1] += p


@nb.njit(cache=CACHE, inline="always")
def _column_row(class_slot, slot_class, slots_used, k):
    """Over a vocabulary, the row of class ``k`` in the compact class-wise table, given on first use."""
    if class_slot.shape[0] == 0:
        return k
    r = class_slot[k]
    if r < 0:
        r = slots_used[0]
        class_slot[k] = r
        slot_class[r] = k
        slots_used[0] = r + 1
    return r


class AccumulateArgs(NamedTuple):
    """The arguments of :func:`_accumulate` (``ACCUMULATE[mode]``) and :func:`_accumulate_top`
    (``ACCUMULATE_TOP[mode, long]``, :func:`accumulate_top_small_probs`), one named tuple so
    that the per-mode entry points stay one line each. Built by keyword; the kernels read the
    fields by name.

    Every histogram has a leading axis of ``LANES`` copies, summed by the caller.
    top       (LANES, S, K, Mmax, 4): per bin count of ``top_bins[s]``, split by true label:
              count, sum confidence, sum correct, sum ECD term (``do_rows`` only).
              Binary input bins the positive-class probability with outcome ``y == 1``, and
              the top label of ``[1 - p, p]`` in S more tables (LANES, 2 S, 2, Mmax, 4).
    fuzzy     (LANES, Mf, 6): FCE membership, membership * correct, membership * confidence;
              then, for the authors' variant, the same with their membership (their corners,
              :func:`_authors_membership`) rounded as their ``round(mu, 3)`` (:func:`_round3`), and
              rounded membership * correct * confidence (correct ones only).
    classwise (LANES, K, Mc, 3): per class column and equal-width bin: count, sum p, sum 1[y = k].
    ace       (LANES, K, ACE_BUCKETS, 3): the same on the fine float-pattern buckets.
    scalars   (N_SCALARS,): n, correct, Brier, NLL, ECD sums, confidence and count of errors.
    row_softmax (N, 2) or (0, 2): for long logit rows, each row's maximum logit and inverse
              softmax sum, so that :func:`.ace._gather_ace` rebuilds the probabilities with one exp
              and one multiply an entry (the very operations of this pass) instead of a
              whole softmax. Empty: not kept.
    errors    (N_ERRORS,): first offending row of each kind, -1 if none. The kernel stops at
              the first bad row: the caller raises.
    top_slots (N,) or (0,): each row's row of a compact ``top`` (over a vocabulary: a row per
              label that occurs, ``statistics.top_slots``); empty: ``top`` has a row per class.
    class_slot (K,) or (0,): over a vocabulary, each class's row of ``classwise`` (-1 until a
              value above its first bin or its label arrives, :func:`_column_row`), with
              ``slot_class`` (K,) the class of each row and ``slots_used`` (1,) the rows taken;
              the first bin's count and sum of every class then go to ``column_first`` (K, 2),
              and the table's first bin holds only the labels. Empty: a row per class.
    """

    x: np.ndarray  # (N, K) probabilities or logits, (N, 1) for binary input; float32 or float64
    labels: np.ndarray  # (N,) true classes, ``ignore_index`` where masked
    start: int  # the rows [start, stop) to add
    stop: int
    ignore_index: int
    num_classes: int  # K (2 for binary input)
    eps: float  # logs clip probabilities at eps
    top_bins: np.ndarray  # (S,) int64: the bin counts of the top-label tables
    top: np.ndarray
    fuzzy: np.ndarray
    classwise: np.ndarray
    ace: np.ndarray
    scalars: np.ndarray
    errors: np.ndarray
    do_rows: bool  # the optional groups (the top-label kernel reads none of them)
    do_classwise: bool
    do_ace: bool
    do_fuzzy: bool
    row_softmax: np.ndarray
    top_slots: np.ndarray
    class_slot: np.ndarray
    slot_class: np.ndarray
    slots_used: np.ndarray
    column_first: np.ndarray


@nb.njit(cache=CACHE, inline="always")
def _accumulate(mode, args):
    """Add the statistics of rows ``[args.start, args.stop)`` into the output arrays of
    ``args`` (an :class:`AccumulateArgs`, which describes them).
    """
    x, labels, start, stop, ignore_index, eps = args.x, args.labels, args.start, args.stop, args.ignore_index, args.eps
    top_bins, top, fuzzy, classwise, ace = args.top_bins, args.top, args.fuzzy, args.classwise, args.ace
    scalars, errors, row_softmax, top_slots = args.scalars, args.errors, args.row_softmax, args.top_slots
    class_slot, slot_class, slots_used = args.class_slot, args.slot_class, args.slots_used
    compact = top_slots.shape[0] > 0
    do_rows, do_classwise, do_ace, do_fuzzy = args.do_rows, args.do_classwise, args.do_ace, args.do_fuzzy
    K = args.num_classes
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
            t = top_slots[i] if compact else y
            for s in range(n_specs):
                b = _bin_index(c_top, top_bins[s])
                top[lane, s, t, b, 0] += 1.0
                top[lane, s, t, b, 1] += c_top
                top[lane, s, t, b, 2] += a_top
                top[lane, s, t, b, 3] += ecd_i
            if binary:  # and the top label's tables, after those of the class-1 probability
                for s in range(n_specs):
                    b = _bin_index(conf, top_bins[s])
                    top[lane, n_specs + s, y, b, 0] += 1.0
                    top[lane, n_specs + s, y, b, 1] += conf
                    top[lane, n_specs + s, y, b, 2] += correct
                    top[lane, n_specs + s, y, b, 3] += ecd_i
            if do_fuzzy:
                _add_fuzzy(fuzzy, lane, c_top, a_top, n_fuzzy, authors_corners)
            if do_classwise and not do_ace:
                cw = i & cw_lanes
                if sparse_cw:
                    for k in range(K):
                        p = P[o + k]
                        if (p * n_cw) * EDGE_SHRINK > 1.0:
                            b = _bin_index(p, n_cw)
                            _add_sample(classwise, cw, _column_row(class_slot, slot_class, slots_used, k), b, p)
                    r = _column_row(class_slot, slot_class, slots_used, y)
                    classwise[cw, r, _bin_index(P[o + y], n_cw), 2] += 1.0
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
                        if (p * n_cw) * EDGE_SHRINK > 1.0:
                            b = _bin_index(p, n_cw)
                            _add_sample(classwise, cw, _column_row(class_slot, slot_class, slots_used, k), b, p)
                    r = _column_row(class_slot, slot_class, slots_used, y)
                    classwise[cw, r, _bin_index(P[o + y], n_cw), 2] += 1.0
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
    if sparse_cw and class_slot.shape[0] > 0:  # a vocabulary: every column's first bin, dense
        column_first = args.column_first
        for k in range(K):
            column_first[k, 0] += first_count[k]
            column_first[k, 1] += first_sum[k]
    else:
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


# --------------------------------------------------------------------------------------------
# Top-label statistics alone (ECE, MCE, RBECE, ESCE, class-wise ECE, overconfidence) on long
# rows (K >= 16; short ones go through .top): no per-entry probability is kept, so rows of
# probabilities are read straight from the input, and logit rows only go through the exp a
# block at a time. Same binning and the same top label as :func:`_accumulate` (first index of
# the maximum; for logits the first argmax of z, whose probability is 1 / sum_k exp(z_k - max)).


@nb.njit(cache=CACHE, inline="always")
def _accumulate_top(mode, args):
    """:func:`_accumulate` with no optional group, on rows of 16 classes or more: only ``top``
    and ``scalars`` are filled."""
    x, labels, start, stop, ignore_index = args.x, args.labels, args.start, args.stop, args.ignore_index
    top_bins, top, scalars, errors = args.top_bins, args.top, args.scalars, args.errors
    top_slots = args.top_slots
    compact = top_slots.shape[0] > 0
    K = args.num_classes
    n_specs = top_bins.shape[0]
    blocked = mode == MODE_LOGITS
    rows_per_block = max(1, BLOCK_ENTRIES // K) if blocked else stop - start
    size = rows_per_block if blocked else 0
    E = np.empty(size * K, dtype=np.float64)
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
            bad_row = _top_logits_block(x, labels, b0, b1, K, ignore_index, E, preds, confs, tops, bads)
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
                total, bad, pred, conf = _probs_row(x, i, K)
                if bad > 0 or abs(total - 1.0) > ROW_SUM_TOLERANCE:
                    errors[_probs_row_error(x, i, K, bad)] = i
                    failed = True
                    break
            correct = 1.0 if pred == y else 0.0
            s_n += 1.0
            s_correct += correct
            s_wrong_conf += (1.0 - correct) * conf
            lane = i & (LANES - 1)
            t = top_slots[i] if compact else y
            for s in range(n_specs):
                b = _bin_index(conf, top_bins[s])
                top[lane, s, t, b, 0] += 1.0
                top[lane, s, t, b, 1] += conf
                top[lane, s, t, b, 2] += correct
        if failed:
            break
    scalars[S_N] += s_n
    scalars[S_CORRECT] += s_correct
    scalars[S_WRONG_CONF] += s_wrong_conf
    scalars[S_WRONG] += s_n - s_correct


@nb.njit(cache=CACHE, nogil=True)
def _accumulate_top_long_probs(args):
    _accumulate_top(MODE_PROBS, args)


@nb.njit(cache=CACHE, nogil=True)
def _accumulate_top_long_logits(args):
    _accumulate_top(MODE_LOGITS, args)


ACCUMULATE_TOP = {MODE_PROBS: _accumulate_top_long_probs, MODE_LOGITS: _accumulate_top_long_logits}
"""``ACCUMULATE_TOP[mode](...)``: :func:`_accumulate` for calls with no optional group, on rows
of 16 classes or more (:data:`.top.SHORT_TOP_KERNELS` takes the shorter ones)."""


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


ACCUMULATE = {
    MODE_PROBS: _accumulate_probs,
    MODE_LOGITS: _accumulate_logits,
    MODE_BINARY_PROBS: _accumulate_binary_probs,
    MODE_BINARY_LOGITS: _accumulate_binary_logits,
}
"""``ACCUMULATE[mode](...)`` adds rows into statistics; see :func:`_accumulate`."""
