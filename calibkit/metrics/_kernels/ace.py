"""Exact ACE: copy out the samples of the buckets an equal-mass range boundary cuts, and
resolve the boundaries from them."""

from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

from calibkit._numba.cache import CACHE
from calibkit._numba.fastmath import bits_of_float, exp_strict, float_from_bits
from calibkit.metrics._kernels.bins import _ace_bucket, _ace_buckets, _bin_index
from calibkit.metrics._kernels.constants import (
    ACE_OFFSET,
    BLOCK_ENTRIES,
    LONG_ROW,
    MODE_BINARY_LOGITS,
    MODE_BINARY_PROBS,
    MODE_LOGITS,
    MODE_PROBS,
)
from calibkit.metrics._kernels.rows import _fill_block, _normalise_rows, _short_logit_rows


@nb.njit(cache=CACHE, inline="always")
def _packed_sample(p, outcome):
    """A probability and its outcome in one int64: the pattern of ``p >= 0`` (``+ 0.0`` clears
    the sign of -0.0) with the outcome in the sign bit. Half the memory and stores of two
    float64 arrays (a cut-bucket pass at 2M x 66 copies 7.7M samples)."""
    return bits_of_float(p + 0.0) | (_SIGN_BIT if outcome else np.int64(0))


_SIGN_BIT = np.int64(-(2**63))
_MAGNITUDE = np.int64(2**63 - 1)


@nb.njit(cache=CACHE, inline="always")
def _gather_row(E, keys, o, K, y, slot_of, bitmap, n_words, write_at, out, hits):
    """Copy the values ``E[o : o + K]`` of a row (true label ``y``) whose bucket ``keys[o + k]``
    is a cut one, as :func:`_packed_sample`. The bitmap (8 kB at K = 66, in L1) answers the
    common "no" without touching ``slot_of``; the classes it says yes to are listed first
    (``hits``, K + 1 long) without a branch, then copied: a branch per entry, taken for one
    in ten or so, was mispredicted at a cost of 9 ns a copy (2M x 66: 341 -> 300 ms). One call a
    row: inlined per entry, the array arguments cost 15x more here."""
    h = 0
    for k in range(K):
        key = keys[o + k]
        hits[h] = k
        h += np.int64((bitmap[k * n_words + (key >> 6)] >> np.uint64(key & 63)) & np.uint64(1))
    for t in range(h):
        k = hits[t]
        slot = slot_of[k, keys[o + k]]
        j = write_at[slot]
        out[j] = _packed_sample(E[o + k], k == y)
        write_at[slot] = j + 1


class GatherArgs(NamedTuple):
    """The arguments of :func:`_gather_ace` (``GATHER_ACE[mode]``), built by keyword; the
    kernel reads the fields by name."""

    x: np.ndarray  # the input :func:`.accumulate._accumulate` read, whose rows it validated
    labels: np.ndarray
    start: int  # the rows [start, stop) to gather from
    stop: int
    ignore_index: int
    num_classes: int
    slot_of: np.ndarray  # (K, buckets) int32: the slot of a bucket holding a range boundary, or -1
    write_at: np.ndarray  # (slots,) int64: where this range's next value of each slot goes (advanced)
    out: np.ndarray  # int64: the samples, packed by _packed_sample
    row_softmax: np.ndarray  # as filled by .accumulate._accumulate for long logit rows, or (0, 2)


@nb.njit(cache=CACHE, inline="always")
def _gather_ace(mode, args):
    """Copy the values and outcomes (packed, :func:`_packed_sample`) of rows ``[start, stop)``
    that fall in a boundary bucket.

    ``args`` is a :class:`GatherArgs`; ``row_softmax`` as filled by :func:`.accumulate._accumulate`
    for long logit rows, or empty.

    ``slot_of[k, bucket]`` is the slot of a bucket that holds an equal-mass range boundary, or
    -1; ``write_at[slot]`` is where this range's next value of that slot goes (advanced here).
    The rows were validated by :func:`.accumulate._accumulate` already, so they are not checked again, and
    probabilities are rebuilt exactly as it built them (same functions, same order), so every
    value lands in the bucket it was counted in.
    """
    x, labels, start, stop, ignore_index = args.x, args.labels, args.start, args.stop, args.ignore_index
    slot_of, write_at, out, row_softmax = args.slot_of, args.write_at, args.out, args.row_softmax
    K = args.num_classes
    n_buckets = slot_of.shape[1]
    n_words = (n_buckets + 63) // 64
    bitmap = np.zeros(K * n_words, dtype=np.uint64)
    for k in range(K):
        for j in range(n_buckets):
            if slot_of[k, j] >= 0:
                bitmap[k * n_words + (j >> 6)] |= np.uint64(1) << np.uint64(j & 63)
    hits = np.empty(K + 1, dtype=np.int64)
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
            _gather_row(E, keys, 0, K, y, slot_of, bitmap, n_words, write_at, out, hits)
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
            _gather_row(P, index, (i - b0) * K, K, y, slot_of, bitmap, n_words, write_at, out, hits)


@nb.njit(cache=CACHE, inline="always")
def _short_gather_rows(
    mode, x, xf, labels, b0, nr, K, ignore_index, P, slots, slot_flat, n_buckets, Z, scale, tops, preds
):
    """The loops of :func:`_gather_short` over rows ``[b0, b0 + nr)``: each probability into
    ``P`` (built as the first pass built it: the value as given, or ``exp(z - max)`` times the
    inverse of the row's sum, the sum in order, by the first pass's own builder of short logit
    rows, :func:`.rows._short_logit_rows`: the exps in one flat vector loop over the block;
    ``Z``, ``scale``, ``tops`` and ``preds`` its buffers), and the slot of its ACE bucket into
    ``slots`` (-1: none, or a masked row); returns how many values have a slot."""
    b0 = max(b0, 0)
    if mode == MODE_LOGITS:  # the rows were checked by the first pass: no bad unmasked row here
        _short_logit_rows(x, labels, b0, nr, K, ignore_index, Z, P, preds, tops, scale)
        _normalise_rows(P, scale, scale, nr, K)  # the sums, then their inverses
    hits = 0
    for r in range(nr):
        o = (b0 + r) * K
        keep = np.int64(labels[b0 + r]) != ignore_index
        for k in range(K):
            p = P[r * K + k] if mode == MODE_LOGITS else np.float64(xf[o + k])
            key = min(max((bits_of_float(p) >> 48) - ACE_OFFSET, 0), n_buckets - 1)
            slot = slot_flat[k * n_buckets + key] if keep else -1
            P[r * K + k] = p
            slots[r * K + k] = slot
            hits += np.int64(slot >= 0)
    return hits


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _short_gather_probs(x, xf, labels, b0, nr, K, ignore_index, P, slots, slot_flat, n_buckets, Z, scale, tops, preds):
    return _short_gather_rows(
        MODE_PROBS, x, xf, labels, b0, nr, K, ignore_index, P, slots, slot_flat, n_buckets, Z, scale, tops, preds
    )


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _short_gather_logits(x, xf, labels, b0, nr, K, ignore_index, P, slots, slot_flat, n_buckets, Z, scale, tops, preds):
    return _short_gather_rows(
        MODE_LOGITS, x, xf, labels, b0, nr, K, ignore_index, P, slots, slot_flat, n_buckets, Z, scale, tops, preds
    )


@nb.njit(cache=CACHE, inline="always")
def _gather_short(mode, args, K):
    """:func:`_gather_ace` on rows of ``K < 16`` classes: a loop across a block of rows finds the
    values in a bucket to gather (their probabilities and slots), then only those are copied, in
    the same order as the row-by-row pass (the samples of a slot in row order: the exact sums of
    a sub-bucket add them in that order)."""
    x, labels, ignore_index = args.x, args.labels, args.ignore_index
    slot_of, write_at, out = args.slot_of, args.write_at, args.out
    start, stop = max(args.start, 0), args.stop
    xf = x.reshape(x.size)
    n_buckets = slot_of.shape[1]
    slot_flat = slot_of.reshape(slot_of.size)
    rows_per_block = max(1, BLOCK_ENTRIES // K)
    P = np.empty(rows_per_block * K, dtype=np.float64)
    slots = np.empty(rows_per_block * K, dtype=np.int32)
    hits = np.empty(rows_per_block * K + 1, dtype=np.int64)
    Z, scale = np.empty(rows_per_block * K if mode == MODE_LOGITS else 0), np.empty(rows_per_block)
    tops, preds = np.empty(rows_per_block), np.empty(rows_per_block, dtype=np.int64)
    rows = _short_gather_probs if mode == MODE_PROBS else _short_gather_logits
    for b0 in range(start, stop, rows_per_block):
        nr = min(rows_per_block, stop - b0)
        if rows(x, xf, labels, b0, nr, K, ignore_index, P, slots, slot_flat, n_buckets, Z, scale, tops, preds) == 0:
            continue
        h = 0
        for e in range(nr * K):  # the entries to copy, listed without a branch (see _gather_row)
            hits[h] = e
            h += np.int64(slots[e] >= 0)
        for t in range(h):
            e = hits[t]
            r = e // K
            slot = slots[e]
            j = write_at[slot]
            out[j] = _packed_sample(P[e], e - r * K == labels[b0 + r])
            write_at[slot] = j + 1


@nb.njit(cache=CACHE, nogil=True)
def _gather_any_probs(args):
    _gather_short(MODE_PROBS, args, args.num_classes)


@nb.njit(cache=CACHE, nogil=True)
def _gather_any_logits(args):
    _gather_short(MODE_LOGITS, args, args.num_classes)


SHORT_GATHER_ACE = {MODE_PROBS: _gather_any_probs, MODE_LOGITS: _gather_any_logits}
"""``SHORT_GATHER_ACE[mode](args)``: :func:`_gather_ace` on rows of K < 16 classes (one
compilation for every K, as :data:`.short.SHORT_KERNELS`)."""


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
    the equal-width bins of :func:`.bins._bin_index`."""
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
