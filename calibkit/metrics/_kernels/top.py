"""The top-label pass on short rows: a vector loop across a block of rows, then the scatter.

ECE, MCE, RBECE, ESCE, class-wise ECE and overconfidence need of a row only its top label, that
label's probability and the true label. For rows of fewer than 16 classes a row is too short to
vectorise, so the rows are: the class count is a compile-time constant (one compiled kernel per
K up to 8, :data:`SHORT_TOP_KERNELS`), the loop over a row unrolls, and the first loop runs across
:data:`TOP_BLOCK` rows in SIMD lanes (checks, top label, confidence, bin). The second loop adds
each row into the histograms, two stores a row and bin count: the row count and the count of
correct ones packed in one int64 (exact, so their order is free), the confidence in float64 in
row order within each lane, as :func:`.accumulate._accumulate` adds it: the sums are the same
to the bit. 10M x 4 float32 on one thread: 78 ms before, 34 ms with this split.

Two details decide whether LLVM vectorises the first loop: the input is read through a flat
view (``x[i, k]`` goes through the array's runtime strides, which the vectoriser gives up on)
and the row offset is known to be non-negative (numba wraps a negative index, a branch per
load otherwise).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from calibkit._numba.cache import CACHE
from calibkit._numba.fastmath import exp_strict
from calibkit.metrics._kernels.constants import (
    EDGE_SHRINK,
    ERR_LABEL,
    ERR_NONFINITE,
    LANES,
    MODE_LOGITS,
    MODE_PROBS,
    ROW_SUM_TOLERANCE,
    S_CORRECT,
    S_N,
    S_WRONG,
    S_WRONG_CONF,
)
from calibkit.metrics._kernels.rows import _probs_row_error

TOP_BLOCK = 256
"""Rows of one block: its per-row buffers (about 10 kB) stay in L1 between the two loops."""

_FLUSH_ROWS = 1 << 30
"""The packed counts (row count in the low 32 bits, correct ones above) are moved into the
float64 table at least this often, before either half could overflow."""

_LOW = np.int64(0xFFFFFFFF)


@nb.njit(cache=CACHE, inline="always")
def _short_rows(mode, keep_rows, xf, labels, b0, nr, K, ignore_index, conf, klass, packed, wrong, P, ys):
    """The loop over rows ``[b0, b0 + nr)`` of a flat input: each row's confidence ``conf``, the
    class of its histogram row ``klass`` (the true label; ``K``, a scratch row, for masked and
    bad rows), ``packed`` (``1 + correct * 2**32``, 0 for those) and ``wrong`` (its confidence
    when wrong, else 0); with ``keep_rows`` (a compile-time constant; rows of probabilities
    only: logit rows keep theirs in :func:`.short._rows_logits`) also the probabilities ``P``
    (row r at ``r * K``) as :func:`.rows._fill_block` builds them and a valid label ``ys`` (0
    for masked and bad rows). Returns how many unmasked rows are bad (label outside [0, K), or
    values that fail the checks of :func:`.rows._probs_row` / :func:`.rows._short_logit_rows`).
    Top label and confidence as theirs, to the bit."""
    b0 = max(b0, 0)  # a known non-negative offset: no wrap-around branch per load
    flagged = 0
    for r in range(nr):
        o = (b0 + r) * K
        top = np.float64(xf[o])
        pred = 0
        bad = False
        total = 0.0
        for k in range(K):
            v = np.float64(xf[o + k])
            if mode == MODE_PROBS:
                bad |= (v < 0.0) | (v > 1.0) | (v != v)
                total += v
                if keep_rows:
                    P[r * K + k] = v
            else:
                bad |= (v - v) != 0.0  # NaN or inf
            above = v > top
            top = v if above else top
            pred = k if above else pred
        if mode == MODE_PROBS:
            c = top
            bad |= abs(total - 1.0) > ROW_SUM_TOLERANCE
        else:  # 1 / sum_k exp(z_k - max): the sum in order, as the full pass takes it
            top = 0.0 if bad else top
            total = 0.0
            for k in range(K):
                total += exp_strict(np.float64(xf[o + k]) - top)
            c = 1.0 / total
        y = np.int64(labels[b0 + r])
        flagged += _row_outputs(keep_rows, r, y, K, ignore_index, bad, pred, c, conf, klass, ys, packed, wrong)
    return flagged


@nb.njit(cache=CACHE, inline="always")
def _row_outputs(keep_rows, r, y, K, ignore_index, bad, pred, c, conf, klass, ys, packed, wrong):
    """Row ``r``'s outputs of :func:`_short_rows` from its label ``y``, whether its values
    failed the checks, its top label and confidence ``c`` (``ys`` with ``keep_rows`` only);
    returns 1 for a bad unmasked row."""
    keep = y != ignore_index
    bad_row = keep & ((np.uint64(y) >= np.uint64(K)) | bad)
    ok = keep & ~bad_row
    c = c if ok else 0.0  # a masked row may hold NaN: never binned, never summed
    correct = np.int64(pred == y)
    conf[r] = c
    klass[r] = y if ok else K
    if keep_rows:
        ys[r] = y if ok else 0
    packed[r] = (1 + (correct << 32)) if ok else 0
    wrong[r] = (1.0 - correct) * c
    return np.int64(bad_row)


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _short_probs_rows(xf, labels, b0, nr, K, ignore_index, conf, klass, packed, wrong):
    return _short_rows(MODE_PROBS, False, xf, labels, b0, nr, K, ignore_index, conf, klass, packed, wrong, conf, klass)


# Compiled apart, not inlined into the kernel: there, among its other arrays, LLVM did not
# vectorise the loop with the exp (6x slower measured at K = 4).
@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _short_logits_rows(xf, labels, b0, nr, K, ignore_index, conf, klass, packed, wrong):
    return _short_rows(MODE_LOGITS, False, xf, labels, b0, nr, K, ignore_index, conf, klass, packed, wrong, conf, klass)


@nb.njit(cache=CACHE)
def _record_first_error(mode, x, labels, b0, b1, K, ignore_index, errors):
    """Find the first bad unmasked row of ``[b0, b1)`` and record it as the full pass would."""
    for i in range(b0, b1):
        y = np.int64(labels[i])
        if y == ignore_index:
            continue
        if y < 0 or y >= K:
            errors[ERR_LABEL] = i
            return
        total = 0.0
        bad = 0
        for k in range(K):
            v = np.float64(x[i, k])
            if mode == MODE_PROBS:
                bad += 0 if (v >= 0.0 and v <= 1.0) else 1
                total += v
            else:
                bad += 0 if math.isfinite(v) else 1
        if mode == MODE_PROBS and (bad > 0 or abs(total - 1.0) > ROW_SUM_TOLERANCE):
            errors[_probs_row_error(x, i, K, bad)] = i
            return
        if mode == MODE_LOGITS and bad > 0:
            errors[ERR_NONFINITE] = i
            return


@nb.njit(cache=CACHE, inline="always")
def _caller_cell(a, inner, k1, width):
    """Where entry ``a`` of a flat (..., K + 1, bins) table of the kernel's own goes in the
    caller's flat (..., K, bins, C) table (times ``width`` = C), or -1 for the scratch class."""
    cls = (a // inner) % k1
    if cls == k1 - 1:
        return -1
    return (((a // (inner * k1)) * (k1 - 1) + cls) * inner + a % inner) * width


@nb.njit(cache=CACHE, inline="always")
def _flush_packed(counts, out, col_count, col_other):
    """Add the packed counts of ``counts`` (..., K + 1, bins), the scratch class dropped, into
    columns ``col_count`` (low half) and ``col_other`` (high half) of ``out`` (..., K, bins, C),
    and clear them."""
    flat = counts.reshape(counts.size)
    out_flat = out.reshape(out.size)
    for a in range(flat.size):
        o = _caller_cell(a, counts.shape[-1], counts.shape[-2], out.shape[-1])
        if o >= 0:
            out_flat[o + col_count] += np.float64(flat[a] & _LOW)
            out_flat[o + col_other] += np.float64(flat[a] >> 32)
        flat[a] = 0


@nb.njit(cache=CACHE, inline="always")
def _add_sums(sums, out, col):
    """Add the float sums of ``sums`` (..., K + 1, bins), the scratch class dropped, into column
    ``col`` of ``out`` (..., K, bins, C)."""
    flat = sums.reshape(sums.size)
    out_flat = out.reshape(out.size)
    for a in range(flat.size):
        o = _caller_cell(a, sums.shape[-1], sums.shape[-2], out.shape[-1])
        if o >= 0:
            out_flat[o + col] += flat[a]


@nb.njit(cache=CACHE, inline="always")
def _flush_counts(counts, top, scalars):
    """Move the packed counts of the (LANES, S, K + 1, bins) top table into ``top`` (count and
    correct columns) and n, correct and wrong (from the first bin count) into ``scalars``."""
    n = 0
    correct = 0
    for lane in range(counts.shape[0]):
        for k in range(counts.shape[2] - 1):
            for b in range(counts.shape[3]):
                n += counts[lane, 0, k, b] & _LOW
                correct += counts[lane, 0, k, b] >> 32
    _flush_packed(counts, top, 0, 2)
    scalars[S_N] += np.float64(n)
    scalars[S_CORRECT] += np.float64(correct)
    scalars[S_WRONG] += np.float64(n - correct)


@nb.njit(cache=CACHE, inline="always")
def _accumulate_top_short(mode, args, K):
    """The top-label statistics of rows ``[args.start, args.stop)`` of ``K < 16`` classes (a
    compile-time constant) into ``args.top`` and ``args.scalars`` (:class:`.accumulate.AccumulateArgs`)."""
    x, labels, ignore_index = args.x, args.labels, args.ignore_index
    top_bins, top, scalars, errors = args.top_bins, args.top, args.scalars, args.errors
    start, stop = max(args.start, 0), args.stop
    xf = x.reshape(x.size)
    n_specs = top_bins.shape[0]
    n_bins = top.shape[3]
    # class K is a scratch row for masked and bad rows: the scatter has no branch
    counts = np.zeros((LANES, n_specs, K + 1, n_bins), dtype=np.int64)
    sums = np.zeros((LANES, n_specs, K + 1, n_bins))
    counts_flat = counts.reshape(counts.size)
    sums_flat = sums.reshape(sums.size)
    conf = np.empty(TOP_BLOCK)
    klass = np.empty(TOP_BLOCK, dtype=np.int64)
    packed = np.empty(TOP_BLOCK, dtype=np.int64)
    wrong = np.empty(TOP_BLOCK)
    cell = np.empty(n_specs * TOP_BLOCK, dtype=np.int64)
    s_wrong_conf = 0.0
    since_flush = 0
    for b0 in range(start, stop, TOP_BLOCK):
        nr = min(TOP_BLOCK, stop - b0)
        rows = _short_probs_rows if mode == MODE_PROBS else _short_logits_rows
        if rows(xf, labels, b0, nr, K, ignore_index, conf, klass, packed, wrong) > 0:
            _record_first_error(mode, x, labels, b0, b0 + nr, K, ignore_index, errors)
            return
        for s in range(n_specs):  # flat cell of each row, per bin count: a vector loop
            m = top_bins[s]
            for r in range(nr):
                b = min(max(np.int64(math.ceil((conf[r] * m) * EDGE_SHRINK)) - 1, 0), m - 1)  # bins._bin_index
                lane = (b0 + r) & (LANES - 1)
                cell[s * TOP_BLOCK + r] = ((lane * n_specs + s) * (K + 1) + klass[r]) * n_bins + b
        if n_specs == 1:
            for r in range(nr):
                c = cell[r]
                counts_flat[c] += packed[r]
                sums_flat[c] += conf[r]
                s_wrong_conf += wrong[r]
        else:
            for r in range(nr):
                for s in range(n_specs):
                    c = cell[s * TOP_BLOCK + r]
                    counts_flat[c] += packed[r]
                    sums_flat[c] += conf[r]
                s_wrong_conf += wrong[r]
        since_flush += nr
        if since_flush >= _FLUSH_ROWS:
            _flush_counts(counts, top, scalars)
            since_flush = 0
    _flush_counts(counts, top, scalars)
    _add_sums(sums, top, 1)
    scalars[S_WRONG_CONF] += s_wrong_conf


@nb.njit(cache=CACHE, nogil=True)
def _top_short_probs(args, classes):
    _accumulate_top_short(MODE_PROBS, args, len(classes))


@nb.njit(cache=CACHE, nogil=True)
def _top_short_logits(args, classes):
    _accumulate_top_short(MODE_LOGITS, args, len(classes))


@nb.njit(cache=CACHE, nogil=True)
def _top_any_probs(args):
    _accumulate_top_short(MODE_PROBS, args, args.num_classes)


@nb.njit(cache=CACHE, nogil=True)
def _top_any_logits(args):
    _accumulate_top_short(MODE_LOGITS, args, args.num_classes)


SHORT_TOP_KERNELS = {MODE_PROBS: (_top_short_probs, _top_any_probs), MODE_LOGITS: (_top_short_logits, _top_any_logits)}
"""``SHORT_TOP_KERNELS[mode]``: the top-label pass on rows of K < 16 classes, as a pair: the
kernel compiled per K, called ``(args, (0,) * K)`` for K <= :data:`.constants.UNROLLED_ROW`
(``classes``, a tuple of K zeros, carries K in its type, a compile-time constant; a literal
integer argument would be re-typed on every call), and the one that reads K at run time,
called ``(args)``."""
