"""The full pass on short rows (K < 16, probabilities or logits), a block of rows at a time.

:func:`.accumulate._accumulate` walks a row at a time and, per row, computes and adds into
every histogram in turn: on rows of 4 classes its code was scalar throughout (about 80 ns a row
for a whole report). Here each block goes through loops of one job each (:data:`SHORT_KERNELS`):

1. rows into probabilities, with the checks, top label and confidence (compiled apart:
   :func:`.top._short_rows`, shared with the top-label pass, for probabilities; logit rows
   take their exps in one flat loop over the block, :func:`.rows._short_logit_rows`);
2. logs, Brier and ECD terms, bins, ACE buckets and fuzzy memberships (two bins a variant,
   :func:`_fuzzy_windows`), each a flat loop;
3. the scatter into the histograms: counts, which are integers, packed two to an int64 (order
   free), and the float sums in row order within each lane, as :func:`.accumulate._accumulate`
   adds them, so that every sum is the same to the bit (the golden set checks it).

The tables are the kernel's own, with one scratch class row (masked and bad rows go there, so
the scatter has no branch), added into the caller's at the end.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from calibkit._numba.cache import CACHE
from calibkit._numba.fastmath import MIN_NORMAL, bits_of_float, log_into
from calibkit.metrics._kernels.accumulate import (
    _add_fuzzy,
    _authors_bin,
    _authors_corners,
    _authors_membership,
    _round3,
)
from calibkit.metrics._kernels.constants import (
    ACE_OFFSET,
    BLOCK_ENTRIES,
    EDGE_SHRINK,
    LANES,
    MODE_LOGITS,
    MODE_PROBS,
    S_BRIER,
    S_ECD,
    S_NLL,
    S_WRONG_CONF,
)
from calibkit.metrics._kernels.rows import _normalise_rows, _short_logit_rows
from calibkit.metrics._kernels.top import (
    _FLUSH_ROWS,
    _add_sums,
    _flush_counts,
    _flush_packed,
    _record_first_error,
    _row_outputs,
    _short_rows,
)


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _rows_probs(xf, labels, b0, nr, K, ignore_index, P, conf, klass, ys, packed, wrong):
    return _short_rows(MODE_PROBS, True, xf, labels, b0, nr, K, ignore_index, conf, klass, packed, wrong, P, ys)


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _rows_logits(x, labels, b0, nr, K, ignore_index, P, conf, klass, ys, packed, wrong, row_top, row_sum, Z, preds):
    """:func:`.top._short_rows` for logit rows, keeping the rows: maximum, top label and the
    exps of the block in one flat vector loop by :func:`.rows._short_logit_rows` (the long-row
    kernel's builder of short rows; in the loop over a row's K, a run-time count, the exps ran
    scalar), then the normalised rows and the outputs. Returns 1 at a bad unmasked row (the
    caller finds it and its kind), else how many rows have a label outside [0, K)."""
    if _short_logit_rows(x, labels, b0, nr, K, ignore_index, Z, P, preds, row_top, row_sum) >= 0:
        return 1
    _normalise_rows(P, row_sum, conf, nr, K)  # conf[r] = 1 / sum: the top label's probability
    flagged = 0
    for r in range(nr):
        y = np.int64(labels[b0 + r])
        flagged += _row_outputs(True, r, y, K, ignore_index, False, preds[r], conf[r], conf, klass, ys, packed, wrong)
    return flagged


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _logit_logs(xf, b0, nr, K, row_top, row_log, log_eps, L):
    """``L = max((z - max) - log(sum), log eps)``, one log a row (as :func:`.rows._fill_block`)."""
    b0 = max(b0, 0)
    for r in range(nr):
        o = (b0 + r) * K
        for k in range(K):
            L[r * K + k] = max((np.float64(xf[o + k]) - row_top[r]) - row_log[r], log_eps)


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _row_terms(P, L, nr, K, klass, ys, brier, ecd, log_py):
    """Per row: Brier ``sum p^2 + 1 - 2 p_y``, ECD ``sum p log p - log p_y`` and ``log p_y``, the
    sums in order as :func:`.accumulate._accumulate` takes them on short rows; 0 for rows of the
    scratch class."""
    for r in range(nr):
        sq = 0.0
        ent = 0.0
        py = 0.0
        ly = 0.0
        y = ys[r]
        for k in range(K):
            p = P[r * K + k]
            sq += p * p
            ent += p * L[r * K + k]
            py = p if k == y else py
            ly = L[r * K + k] if k == y else ly
        ok = klass[r] < K
        brier[r] = (sq + (1.0 - 2.0 * py)) if ok else 0.0
        ecd[r] = (ent - ly) if ok else 0.0
        log_py[r] = ly if ok else 0.0


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _top_cells(conf, klass, b0, nr, K, top_bins, n_bins, cell, stride):
    """The flat cell of each row in the (LANES, S, K + 1, Mmax) top tables, per bin count."""
    n_specs = top_bins.shape[0]
    for s in range(n_specs):
        m = top_bins[s]
        for r in range(nr):
            b = min(max(np.int64(math.ceil((conf[r] * m) * EDGE_SHRINK)) - 1, 0), m - 1)  # bins._bin_index
            lane = (b0 + r) & (LANES - 1)
            cell[s * stride + r] = ((lane * n_specs + s) * (K + 1) + klass[r]) * n_bins + b


@nb.njit(cache=CACHE, inline="always")
def _paper_gap(c, m, n_fuzzy, w):
    """How far inside bin ``m``'s support ``c`` lies, ``min(c - (t0 - w/4), (t1 + w/4) - c)``:
    :func:`.accumulate._add_fuzzy`'s membership is ``min(gap / (w/2), 1)``, non-zero where the
    gap is positive (a correctly rounded division keeps the order, so the minimum of the two
    quotients is the quotient of the minimum: one division in place of two). -1 outside the bins."""
    t0 = m * w
    t1 = (m + 1) * w
    gap = min(c - (t0 - 0.25 * w), (t1 + 0.25 * w) - c)
    return gap if (m >= 0) & (m < n_fuzzy) else -1.0


@nb.njit(cache=CACHE, inline="always")
def _authors_mu(c, m, n_fuzzy):
    """The authors' rounded membership of ``c`` in bin ``m`` (0 outside the bins), as
    :func:`.accumulate._add_fuzzy` takes it, from the same functions (all selects)."""
    a, b, cc, d = _authors_bin(m, n_fuzzy)
    mu = _round3(_authors_membership(c, a, b, cc, d))
    return mu if (m >= 0) & (m < n_fuzzy) else 0.0


@nb.njit(cache=CACHE, inline="always")
def _window(first, u, v, n_fuzzy):
    """Bins ``first`` and ``first + 1`` with values ``u``, ``v`` as a window of two bins inside
    ``[0, n_fuzzy)``: moved right at bin -1 (``u`` is then 0), left at the last bin (``v`` 0)."""
    if first < 0:
        return 0, v, 0.0
    if first >= n_fuzzy - 1:
        return n_fuzzy - 2, 0.0, u
    return first, u, v


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _fuzzy_windows(conf, klass, b0, nr, K, n_fuzzy, cell_p, cell_a, u_p, v_p, u_a, v_a):
    """Per row, the two adjacent bins that hold its non-zero memberships in each FCE variant
    (``cell_p``, the paper's, and ``cell_a``, the authors': flat offsets in the (LANES, Mf, 6)
    table) and its memberships there (``u_p``, ``v_p``; ``u_a``, ``v_a``), in a loop across rows
    (one array a stream: offsets into one array, at a stride known only at run time, kept LLVM
    from vectorising it, 4x slower): the memberships of
    :func:`.accumulate._add_fuzzy`, the same values, with selects in place of its branches.
    Adding the zeros it skips leaves every sum the same to the bit (sums of non-negative values
    plus +0). A value is non-zero in at most two adjacent bins (supports 1.5 bins wide): the
    paper's memberships are the first two non-zero of its 4 candidates ``lo .. lo + 3``; the
    authors' are those of ``lo + 1`` and ``lo + 2``, as theirs are rounded to 0.001 and ``lo``
    and ``lo + 3`` are within ulps of their support's ends or outside (the tests try the edges)."""
    w = 1.0 / n_fuzzy
    half = 0.5 * w
    for r in range(nr):
        ok = klass[r] < K
        c = conf[r] if ok else 0.0
        lo = np.int64(math.floor(c * n_fuzzy - 1.25))
        base = ((b0 + r) & (LANES - 1)) * n_fuzzy * 6
        g0 = _paper_gap(c, lo, n_fuzzy, w)
        g1 = _paper_gap(c, lo + 1, n_fuzzy, w)
        g2 = _paper_gap(c, lo + 2, n_fuzzy, w)
        g3 = _paper_gap(c, lo + 3, n_fuzzy, w)
        first = lo + (0 if g0 > 0.0 else (1 if g1 > 0.0 else (2 if g2 > 0.0 else 3)))
        gu = g0 if g0 > 0.0 else (g1 if g1 > 0.0 else (g2 if g2 > 0.0 else g3))
        gv = g1 if g0 > 0.0 else (g2 if g1 > 0.0 else (g3 if g2 > 0.0 else -1.0))
        u = min(gu / half, 1.0) if gu > 0.0 else 0.0
        v = min(gv / half, 1.0) if gv > 0.0 else 0.0
        m, u, v = _window(first, u, v, n_fuzzy)
        u = u if ok else 0.0
        v = v if ok else 0.0
        cell_p[r] = base + m * 6
        u_p[r], v_p[r] = u, v
        m, u, v = _window(lo + 1, _authors_mu(c, lo + 1, n_fuzzy), _authors_mu(c, lo + 2, n_fuzzy), n_fuzzy)
        u = u if ok else 0.0
        v = v if ok else 0.0
        cell_a[r] = base + m * 6 + 3
        u_a[r], v_a[r] = u, v


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _scatter_fuzzy(nr, conf, packed, cell_p, cell_a, u_p, v_p, u_a, v_a, fuzzy):
    """Each row's two windows of fuzzy memberships (:func:`_fuzzy_windows`) into ``fuzzy``
    (flat): membership, times correct, times confidence (the authors': times correct times
    confidence), as :func:`.accumulate._add_fuzzy` forms them."""
    for r in range(nr):
        c = conf[r]
        a = np.float64(packed[r] >> 32)
        p = cell_p[r]
        q = cell_a[r]
        u = u_p[r]
        v = v_p[r]
        fuzzy[p] += u
        fuzzy[p + 1] += u * a
        fuzzy[p + 2] += u * c
        fuzzy[p + 6] += v
        fuzzy[p + 7] += v * a
        fuzzy[p + 8] += v * c
        u = u_a[r]
        v = v_a[r]
        fuzzy[q] += u
        fuzzy[q + 1] += u * a
        fuzzy[q + 2] += u * a * c
        fuzzy[q + 6] += v
        fuzzy[q + 7] += v * a
        fuzzy[q + 8] += v * a * c


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _fuzzy_rows(conf, klass, packed, b0, nr, K, n_fuzzy, corners, fuzzy):
    """:func:`.accumulate._add_fuzzy` row by row: for a single fuzzy bin, which has no window of two."""
    for r in range(nr):
        if klass[r] < K:
            _add_fuzzy(fuzzy, (b0 + r) & (LANES - 1), conf[r], np.float64(packed[r] >> 32), n_fuzzy, corners)


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _entry_rows(klass, ys, b0, nr, K, packed, table_row):
    """Per entry of a block: ``packed``, ``1 + [k = y] * 2**32`` (the count and outcome of a
    class-wise or ACE cell), and its row in the (LANES, K + 1, ...) tables of entries (class
    ``K``, the scratch one, for masked and bad rows): what :func:`_entry_cells` needs of the
    entry's row, spread to its entries (that loop, reading them by row, ran scalar)."""
    for r in range(nr):
        y = ys[r]
        base = ((b0 + r) & (LANES - 1)) * (K + 1)
        ok = klass[r] < K
        for k in range(K):
            packed[r * K + k] = 1 + (np.int64(k == y) << 32)
            table_row[r * K + k] = base + (k if ok else K)


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _entry_cells(P, table_row, n, n_cw, n_ace, cw_cells, ace_cells):
    """Per entry, its flat cells in the (LANES, K + 1, Mc) class-wise tables (bin as
    :func:`.bins._bin_index`) and the (LANES, K + 1, B) ACE tables (bucket as
    :func:`.bins._ace_bucket`), in one vector loop."""
    for e in range(n):
        p = P[e]
        # masked rows may hold NaN or inf (their cells are the scratch class's): a float-to-int
        # conversion of those is undefined, so they are binned as 0
        q = p if (p >= 0.0) & (p <= 1.0) else 0.0
        b = min(max(np.int64(math.ceil((q * n_cw) * EDGE_SHRINK)) - 1, 0), n_cw - 1)
        bucket = min(max((bits_of_float(p) >> 48) - ACE_OFFSET, 0), n_ace - 1)
        cw_cells[e] = table_row[e] * n_cw + b
        ace_cells[e] = table_row[e] * n_ace + bucket


# The scatters: one simple loop a table, each compiled apart (one loop over every table, inlined
# in the kernel, ran 2-3x slower: the class-wise adds alone 95 ms against 36 at 10M x 4).


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _scatter_top(nr, n_specs, stride, cells, packed, conf, counts, sums):
    """Each row's packed count and confidence into its top cell of every bin count."""
    for r in range(nr):
        for s in range(n_specs):
            c = cells[s * stride + r]
            counts[c] += packed[r]
            sums[c] += conf[r]


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _scatter_top_ecd(nr, n_specs, stride, cells, packed, conf, ecd, counts, sums, ecd_sums):
    """:func:`_scatter_top` and each row's ECD term into the same cells, in one loop (the
    three tables share the cell index)."""
    for r in range(nr):
        for s in range(n_specs):
            c = cells[s * stride + r]
            counts[c] += packed[r]
            sums[c] += conf[r]
            ecd_sums[c] += ecd[r]


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _scatter_entries(n, cells, packed, P, counts, sums):
    """Each entry's packed count and probability into its class-wise or ACE cell."""
    for e in range(n):
        c = cells[e]
        counts[c] += packed[e]
        sums[c] += P[e]


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _row_sums(nr, wrong, brier, log_py, ecd, do_rows, sums):
    """The scalar sums, in row order: confidence of the wrong, and with ``do_rows`` Brier, NLL,
    ECD (four chains of adds in one loop, which overlap: four loops ran 2.5x longer)."""
    s_wrong_conf, s_brier, s_nll, s_ecd = sums
    if do_rows:
        for r in range(nr):
            s_wrong_conf += wrong[r]
            s_brier += brier[r]
            s_nll -= log_py[r]
            s_ecd += ecd[r]
    else:
        for r in range(nr):
            s_wrong_conf += wrong[r]
    return s_wrong_conf, s_brier, s_nll, s_ecd


@nb.njit(cache=CACHE, inline="always")
def _accumulate_short(mode, args, K):
    """:func:`.accumulate._accumulate` on rows of ``K < 16`` classes: the same sums, to the bit,
    a block at a time (the module's docstring)."""
    x, labels, ignore_index, eps = args.x, args.labels, args.ignore_index, args.eps
    top_bins, top, fuzzy, classwise, ace, scalars = (
        args.top_bins,
        args.top,
        args.fuzzy,
        args.classwise,
        args.ace,
        args.scalars,
    )
    do_rows, do_cw, do_ace, do_fuzzy = args.do_rows, args.do_classwise, args.do_ace, args.do_fuzzy
    start, stop = max(args.start, 0), args.stop
    xf = x.reshape(x.size)
    n_specs, n_bins, n_fuzzy, n_cw, n_ace = (
        top_bins.shape[0],
        top.shape[3],
        fuzzy.shape[1],
        classwise.shape[2],
        ace.shape[2],
    )
    R = max(1, BLOCK_ENTRIES // K)
    top_counts = np.zeros((LANES, n_specs, K + 1, n_bins), dtype=np.int64)
    top_conf = np.zeros((LANES, n_specs, K + 1, n_bins))
    top_ecd = np.zeros((LANES, n_specs, K + 1, n_bins) if do_rows else (1, 1, 2, 1))
    corners = _authors_corners(n_fuzzy)
    cw_counts = np.zeros((LANES, K + 1, n_cw) if do_cw else (1, 2, 1), dtype=np.int64)
    cw_sums = np.zeros(cw_counts.shape)
    ace_counts = np.zeros((LANES, K + 1, n_ace) if do_ace else (1, 2, 1), dtype=np.int64)
    ace_sums = np.zeros(ace_counts.shape)
    top_counts_flat, top_conf_flat, top_ecd_flat = top_counts.reshape(-1), top_conf.reshape(-1), top_ecd.reshape(-1)
    cw_counts_flat, cw_sums_flat = cw_counts.reshape(-1), cw_sums.reshape(-1)
    ace_counts_flat, ace_sums_flat = ace_counts.reshape(-1), ace_sums.reshape(-1)
    P, L = np.empty(R * K), np.empty(R * K)
    conf, wrong, row_top, row_sum, row_log = np.empty(R), np.empty(R), np.empty(R), np.empty(R), np.empty(R)
    brier, ecd, log_py = np.zeros(R), np.zeros(R), np.zeros(R)
    klass, ys, packed = np.empty(R, dtype=np.int64), np.empty(R, dtype=np.int64), np.empty(R, dtype=np.int64)
    top_cell = np.empty(n_specs * R, dtype=np.int64)
    fz_p, fz_a = np.empty(R, dtype=np.int64), np.empty(R, dtype=np.int64)
    fz_up, fz_vp, fz_ua, fz_va = np.empty(R), np.empty(R), np.empty(R), np.empty(R)
    fuzzy_flat = fuzzy.reshape(fuzzy.size)
    entry_packed = np.empty(R * K, dtype=np.int64)
    table_row = np.empty(R * K, dtype=np.int64)
    cw_cell, ace_cell = np.zeros(R * K, dtype=np.int64), np.zeros(R * K, dtype=np.int64)
    sums = (0.0, 0.0, 0.0, 0.0)
    log_eps = math.log(eps)
    Z, preds = np.empty(R * K if mode == MODE_LOGITS else 0), np.empty(R, dtype=np.int64)
    since_flush = 0
    for b0 in range(start, stop, R):
        nr = min(R, stop - b0)
        if mode == MODE_PROBS:
            flagged = _rows_probs(xf, labels, b0, nr, K, ignore_index, P, conf, klass, ys, packed, wrong)
        else:
            flagged = _rows_logits(
                x, labels, b0, nr, K, ignore_index, P, conf, klass, ys, packed, wrong, row_top, row_sum, Z, preds
            )
        if flagged > 0:
            _record_first_error(mode, x, labels, b0, b0 + nr, K, ignore_index, args.errors)
            return
        if do_rows:
            if mode == MODE_PROBS:
                log_into(P, L, nr * K, eps)
            else:
                log_into(row_sum, row_log, nr, MIN_NORMAL)
                _logit_logs(xf, b0, nr, K, row_top, row_log, log_eps, L)
            _row_terms(P, L, nr, K, klass, ys, brier, ecd, log_py)
        _top_cells(conf, klass, b0, nr, K, top_bins, n_bins, top_cell, R)
        if do_fuzzy and n_fuzzy >= 2:
            _fuzzy_windows(conf, klass, b0, nr, K, n_fuzzy, fz_p, fz_a, fz_up, fz_vp, fz_ua, fz_va)
            _scatter_fuzzy(nr, conf, packed, fz_p, fz_a, fz_up, fz_vp, fz_ua, fz_va, fuzzy_flat)
        elif do_fuzzy:
            _fuzzy_rows(conf, klass, packed, b0, nr, K, n_fuzzy, corners, fuzzy)
        if do_cw or do_ace:
            _entry_rows(klass, ys, b0, nr, K, entry_packed, table_row)
            _entry_cells(P, table_row, nr * K, n_cw, n_ace, cw_cell, ace_cell)
        if do_rows:
            _scatter_top_ecd(nr, n_specs, R, top_cell, packed, conf, ecd, top_counts_flat, top_conf_flat, top_ecd_flat)
        else:
            _scatter_top(nr, n_specs, R, top_cell, packed, conf, top_counts_flat, top_conf_flat)
        sums = _row_sums(nr, wrong, brier, log_py, ecd, do_rows, sums)
        if do_cw:
            _scatter_entries(nr * K, cw_cell, entry_packed, P, cw_counts_flat, cw_sums_flat)
        if do_ace:
            _scatter_entries(nr * K, ace_cell, entry_packed, P, ace_counts_flat, ace_sums_flat)
        since_flush += nr
        if since_flush >= _FLUSH_ROWS:
            _flush_all(top_counts, cw_counts, ace_counts, top, classwise, ace, scalars, do_cw, do_ace)
            since_flush = 0
    _flush_all(top_counts, cw_counts, ace_counts, top, classwise, ace, scalars, do_cw, do_ace)
    _add_sums(top_conf, top, 1)
    if do_rows:
        _add_sums(top_ecd, top, 3)
    if do_cw:
        _add_sums(cw_sums, classwise, 1)
    if do_ace:
        _add_sums(ace_sums, ace, 1)
    scalars[S_WRONG_CONF] += sums[0]
    scalars[S_BRIER] += sums[1]
    scalars[S_NLL] += sums[2]
    scalars[S_ECD] += sums[3]


@nb.njit(cache=CACHE, inline="always")
def _flush_all(top_counts, cw_counts, ace_counts, top, classwise, ace, scalars, do_cw, do_ace):
    """Move every packed count into the caller's tables (and n, correct, wrong into ``scalars``)."""
    _flush_counts(top_counts, top, scalars)
    if do_cw:
        _flush_packed(cw_counts, classwise, 0, 2)
    if do_ace:
        _flush_packed(ace_counts, ace, 0, 2)


@nb.njit(cache=CACHE, nogil=True)
def _any_probs(args):
    _accumulate_short(MODE_PROBS, args, args.num_classes)


@nb.njit(cache=CACHE, nogil=True)
def _any_logits(args):
    _accumulate_short(MODE_LOGITS, args, args.num_classes)


SHORT_KERNELS = {MODE_PROBS: _any_probs, MODE_LOGITS: _any_logits}
"""``SHORT_KERNELS[mode](args)``: :func:`.accumulate._accumulate` on rows of K < 16 classes.
One compilation for every K: compiled per class count (the loops unrolled and vectorised
across rows) the pass ran 1.2x faster at K = 4 (655 against 813 ms on one thread at 10M x 4),
but each count cost 8 s of compiling, and the cold test suite 5 minutes more."""
