"""The compiled engine: the numba kernels (``calibkit.metrics._kernels``) run on row ranges in threads.

:func:`statistics_numba` fills the per-bin sums of host arrays in one pass; the exact-ACE
pieces (:func:`gather_bucket_samples`, :func:`exact_ace_partials`) copy only the samples of the
fine ACE buckets that a range boundary cuts, and settle each boundary from them. The torch
engine (``calibkit.metrics.engines.torch_engine``) is its peer; the entry that picks one is
``calibkit.metrics.engines.fill_statistics()``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from calibkit.metrics import _kernels as kernels
from calibkit.metrics._kernels.bins import ace_bucket_bounds
from calibkit.metrics.engines.threads import parallel_map, row_ranges
from calibkit.metrics.statistics import (
    CalibrationStatistics,
    SumsPlan,
    ace_points,
    compact_columns,
    on_same_rows,
    sum_statistics,
    top_slots,
)
from calibkit.metrics.validation import PreparedInput, raise_input_error

_LANED = ("top", "fuzzy", "classwise", "ace")


def _lanes(name: str, num_classes: int) -> int:
    """Return the number of histogram copies for ``name`` (see ``kernels.LANES``).

    A row of many classes already spreads its class-wise and ACE updates over K places, and one
    copy of the (K, 1026, 3) ACE table stays in cache where four did not.
    """
    if name in ("classwise", "ace") and num_classes >= kernels.LONG_ROW:
        return 1
    return kernels.LANES


def short_row_kernel(table: dict, prep: PreparedInput) -> Callable[[tuple], None]:
    """Return the short-row kernel of ``table`` for ``prep``, compiled for its class count if it can be.

    ``table`` is ``kernels.SHORT_TOP_KERNELS``; the kernel per class count serves counts up to
    ``kernels.UNROLLED_ROW``, the one for any count the others.

    Parameters
    ----------
    table : dict
        Input mode -> (kernel per class count, kernel for any count).
    prep : PreparedInput
        The input (rows of fewer than 16 classes).

    Returns
    -------
    callable
        Called with the kernel's argument tuple.
    """
    per_count, any_count = table[prep.mode]
    if prep.num_classes > kernels.UNROLLED_ROW:
        return any_count
    classes = (0,) * prep.num_classes
    return lambda args: per_count(args, classes)


def statistics_numba(
    prep: PreparedInput,
    sums: SumsPlan,
    *,
    ignore_index: int,
    num_threads: int | None = None,
    ranges: list[tuple[int, int]] | None = None,
    row_softmax: np.ndarray | None = None,
    classwise_from_ace: bool = False,
) -> list[CalibrationStatistics]:
    """Run the kernel over ``prep`` in threads: the statistics of each row range.

    Parameters
    ----------
    prep : PreparedInput
        Validated rows and labels in host memory (``calibkit.metrics.validation.prepare()``).
    sums : SumsPlan
        The sums to fill (:func:`calibkit.metrics.registry.plan`).
    ignore_index : int
        Label of the rows to skip.
    num_threads : int, optional
        Threads of the pass (default: the CPUs available).
    ranges : list of tuple of int, optional
        Row ranges covering the input, replacing the per-thread split (the bootstrap's blocks).
    row_softmax : ndarray of shape (N, 2), optional
        Receives each long logit row's maximum and inverse softmax sum, for
        :func:`exact_ace_partials` (see :func:`calibkit.metrics._kernels.accumulate._accumulate`).
    classwise_from_ace : bool, default False
        Leave the ``classwise`` table at zero (the pass skips its sums), for
        :func:`exact_ace_partials` to build it from the ACE buckets (one-shot calls with both).

    Returns
    -------
    list of CalibrationStatistics
        The sums of each range, in order.

    Raises
    ------
    ValueError
        On the first bad value, naming the argument, the position and the offending row.
    """
    groups, top_bins = sums.groups, sums.top_bins
    fuzzy_bins, classwise_bins, eps = sums.fuzzy_bins, sums.classwise_bins, sums.eps
    binary = prep.mode >= kernels.MODE_BINARY_PROBS
    ranges = ranges if ranges is not None else row_ranges(prep.values.shape[0], num_threads)
    # Top-label metrics alone need no per-entry probability: a leaner kernel, 2-5x faster.
    kernel = kernels.ACCUMULATE[prep.mode]
    if prep.num_classes < kernels.LONG_ROW and prep.mode in kernels.SHORT_KERNELS:  # vectorised across rows
        kernel = kernels.SHORT_KERNELS[prep.mode] if groups else short_row_kernel(kernels.SHORT_TOP_KERNELS, prep)
    elif not groups and prep.mode in kernels.ACCUMULATE_TOP:
        kernel = kernels.ACCUMULATE_TOP[prep.mode]

    # over a vocabulary the tables have a row per label, or per column above its first bin (SPEC.md)
    classes, slots = top_slots(prep.labels, prep.num_classes, ignore_index)
    vocabulary_columns = classes is not None and "classwise" in groups and not classwise_from_ace

    def run(start: int, stop: int) -> tuple[CalibrationStatistics, np.ndarray]:
        part = CalibrationStatistics.zeros(
            prep.num_classes, binary, top_bins, fuzzy_bins, classwise_bins, groups, top_classes=classes
        )
        lanes = {name: np.zeros((_lanes(name, prep.num_classes), *getattr(part, name).shape)) for name in _LANED}
        columns = _ColumnRows(prep.num_classes, classwise_bins, vocabulary_columns)
        if vocabulary_columns:  # rows given on first use: np.zeros leaves the untouched ones unmapped
            lanes["classwise"] = columns.table
        errors = np.full(kernels.N_ERRORS, -1, dtype=np.int64)
        kernel(
            kernels.AccumulateArgs(
                x=prep.values,
                labels=prep.labels,
                start=start,
                stop=stop,
                ignore_index=ignore_index,
                num_classes=prep.num_classes,
                eps=eps,
                top_bins=np.asarray(part.top_bins, dtype=np.int64),
                top=lanes["top"],
                fuzzy=lanes["fuzzy"],
                classwise=lanes["classwise"],
                ace=lanes["ace"],
                scalars=part.scalars,
                errors=errors,
                do_rows="rows" in groups,
                do_classwise="classwise" in groups and not classwise_from_ace,
                do_ace="ace" in groups,
                do_fuzzy="fuzzy" in groups,
                row_softmax=row_softmax if row_softmax is not None else np.empty((0, 2)),
                top_slots=slots,
                class_slot=columns.class_slot,
                slot_class=columns.slot_class,
                slots_used=columns.used,
                column_first=part.column_first,
            )
        )
        if vocabulary_columns:
            part.classwise, part.classwise_classes = columns.rows()
            del lanes["classwise"]
        for name, array in lanes.items():
            setattr(part, name, array.sum(axis=0))
        return part, errors

    results = parallel_map(run, ranges)
    for _, errors in results:
        if (errors >= 0).any():
            raise_input_error(prep, errors, ignore_index)
    return on_same_rows([part for part, _ in results])


class _ColumnRows:
    """A range's class-wise table over a vocabulary: rows given to columns on first use (``_column_row``)."""

    def __init__(self, num_classes: int, n_bins: int, compact: bool) -> None:
        size = num_classes if compact else 0
        self.table = np.zeros((1, size, n_bins, 3))
        self.class_slot = np.full(size, -1, dtype=np.int64)
        self.slot_class = np.empty(size, dtype=np.int64)
        self.used = np.zeros(1, dtype=np.int64)

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """Return the rows used, sorted by class, and their classes."""
        used = int(self.used[0])
        order = np.argsort(self.slot_class[:used])
        return self.table[0, :used][order], self.slot_class[:used][order]


CLASSWISE_FROM_ACE_MAX_BINS = 32
"""Class-wise bins are built from the ACE buckets (:func:`exact_ace_partials`) only up to this
many bins. The widest bucket spans 1/32 (the octave [1/2, 1) in 16), so with wider bins each
edge cuts at most one bucket a class; with narrower ones every wider bucket is cut and the
gather copies most values above about 16/M (35% of the entries at M = 1000, 93% at 1e5, where
the class-wise histogram needs only a (K, M, 3) table)."""


def classwise_bins_of_buckets(num_buckets: int, n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Map each ACE bucket to its equal-width class-wise bin, and tell whether a bin edge cuts it.

    Binned by the kernels' own ``_equal_width_bins``, so a whole bucket's sums belong to its bin
    exactly.

    Parameters
    ----------
    num_buckets : int
        ``B``, the ACE buckets per class.
    n_bins : int
        ``M``, the class-wise bins.

    Returns
    -------
    first : ndarray of int64, shape (B,)
        The bin of each bucket's smallest value.
    cut : ndarray of bool, shape (B,)
        Whether a bin edge cuts the bucket (its largest value falls in another bin).
    """
    lower, upper = ace_bucket_bounds(num_buckets)
    largest = np.where(upper > lower, np.nextafter(upper, 0.0), lower)  # upper is the next bucket's
    first = np.empty(num_buckets, dtype=np.int64)
    last = np.empty(num_buckets, dtype=np.int64)
    kernels._equal_width_bins(lower, first, num_buckets, n_bins)
    kernels._equal_width_bins(largest, last, num_buckets, n_bins)
    return first, first != last


def gather_bucket_samples(
    prep: PreparedInput,
    parts: list[CalibrationStatistics],
    keys: np.ndarray,
    *,
    ignore_index: int,
    num_threads: int | None = None,
    row_softmax: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Gather the samples of ACE buckets ``keys`` (rows ``(class, bucket)``, unique) from ``prep``.

    Parameters
    ----------
    prep : PreparedInput
        The same rows as the pass that filled ``parts``.
    parts : list of CalibrationStatistics
        The per-thread statistics of a pass over ``prep`` with the ``ace`` group
        (:func:`statistics_numba`, same ``num_threads``): their bucket counts say
        where each thread writes.
    keys : ndarray of int, shape (S, 2)
        The ``(class, bucket)`` slots to gather, unique.
    ignore_index : int
        Label of the rows to skip.
    num_threads : int, optional
        As for the pass that filled ``parts``.
    row_softmax : ndarray of shape (N, 2), optional
        As filled by :func:`statistics_numba` for long logit rows (the gather then skips their softmax).

    Returns
    -------
    samples : ndarray of int64
        The samples packed as :func:`calibkit.metrics._kernels.ace._packed_sample` (value and outcome
        in one int64); slot ``s`` (``keys[s]``) at ``[slot_start[s], slot_start[s] + slot_count[s])``.
    slot_start, slot_count : ndarray of int64, shape (S,)
        Where each slot's samples start, and how many there are.
    slot_of : ndarray of int32, shape (K, B)
        ``(class, bucket)`` -> slot, or -1.

    Raises
    ------
    RuntimeError
        When a value does not land in the bucket it was counted in (a bug to report).
    """
    n_classes, n_buckets = parts[0].ace.shape[:2]
    slot_of = np.full((n_classes, n_buckets), -1, dtype=np.int32)  # int32: half the cache
    slot_of[keys[:, 0], keys[:, 1]] = np.arange(len(keys))
    per_part = np.stack([p.ace[keys[:, 0], keys[:, 1], 0] for p in parts]).astype(np.int64)  # (T, S)
    slot_count = per_part.sum(axis=0)
    slot_start = np.concatenate([[0], np.cumsum(slot_count)[:-1]]).astype(np.int64)
    write_at = slot_start[None, :] + np.concatenate([np.zeros((1, len(keys)), np.int64), np.cumsum(per_part, 0)[:-1]])
    samples = np.empty(int(slot_count.sum()), dtype=np.int64)  # value and outcome packed (_packed_sample)
    ranges = row_ranges(prep.values.shape[0], num_threads)
    assert len(ranges) == len(parts), "gather must split rows as the accumulation did"
    ends = write_at + per_part

    gather = kernels.GATHER_ACE[prep.mode]
    if prep.mode in kernels.SHORT_GATHER_ACE and prep.num_classes < kernels.LONG_ROW:
        gather = kernels.SHORT_GATHER_ACE[prep.mode]

    def run(t: int) -> bool:
        start, stop = ranges[t]
        cursor = write_at[t].copy()
        gather(
            kernels.GatherArgs(
                x=prep.values,
                labels=prep.labels,
                start=start,
                stop=stop,
                ignore_index=ignore_index,
                num_classes=prep.num_classes,
                slot_of=slot_of,
                write_at=cursor,
                out=samples,
                row_softmax=row_softmax if row_softmax is not None else np.empty((0, 2)),
            )
        )
        return bool(np.array_equal(cursor, ends[t]))

    # every value must land in the bucket it was counted in (the same arithmetic, bit for bit)
    if not all(parallel_map(run, [(t,) for t in range(len(ranges))])):
        raise RuntimeError("calibkit: the exact-ACE pass rebuilt different probabilities; please report this")
    return samples, slot_start, slot_count, slot_of


def exact_ace_partials(
    prep: PreparedInput,
    parts: list[CalibrationStatistics],
    points: dict[str, np.ndarray],
    *,
    ace: np.ndarray,
    ignore_index: int,
    num_threads: int | None = None,
    row_softmax: np.ndarray | None = None,
    classwise_bins: int | None = None,
) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray | None]:
    """Compute the exact within-bucket sums at every range boundary, from a second pass.

    The pass gathers only the samples of the (at most ``R - 1`` per class) buckets that a
    boundary cuts, and resolves each boundary inside its bucket
    (:func:`calibkit.metrics._kernels.ace.resolve_points`).

    With ``classwise_bins`` it also builds the (K, M, 3) class-wise table from the ACE buckets
    (for a pass run with ``classwise_from_ace``): whole buckets add into the bin that holds them,
    and the samples of the buckets a bin edge cuts (gathered too) one by one. At K >= 16 this
    replaces a second scatter of every entry in the first pass, a large share of its time, by
    the gather of the few entries near the M - 1 edges.

    Parameters
    ----------
    prep : PreparedInput
        The rows of the first pass.
    parts : list of CalibrationStatistics
        The first pass's per-thread statistics (``keep_parts=True``).
    points : dict of str to ndarray
        From :func:`ace_points`.
    ace : ndarray of shape (K, B, 3)
        The ACE table of all the parts, summed (the caller has it already).
    ignore_index : int
        Label of the rows to skip.
    num_threads : int, optional
        As for the first pass.
    row_softmax : ndarray of shape (N, 2), optional
        As filled by :func:`statistics_numba` for long logit rows (the pass then skips their softmax).
    classwise_bins : int, optional
        Also build the class-wise table of this many bins.

    Returns
    -------
    partials : tuple of ndarray
        Per class and boundary, the exact sums of p and of the outcome below the boundary in its
        bucket (NaN where no boundary cuts a bucket): the ``partial`` of :func:`ace_from_points`.
    classwise : ndarray of shape (K, classwise_bins, 3) or None
        The class-wise table with ``classwise_bins``, else None.
    """
    inside = points["inside"]
    counts = ace[:, :, 0]
    total = np.take_along_axis(counts, points["bucket"], axis=1)
    cut = (inside > 0) & (inside < total)
    keys = np.stack([np.nonzero(cut)[0], points["bucket"][cut]], axis=1)
    table = None
    if classwise_bins is not None:
        bin_of, edge_cut = classwise_bins_of_buckets(ace.shape[1], classwise_bins)
        table = np.zeros((ace.shape[0], classwise_bins, 3))
        whole = ~edge_cut
        np.add.at(table, (slice(None), bin_of[whole]), ace[:, whole])
        keys = np.concatenate([keys, np.argwhere(edge_cut[None, :] & (counts > 0))])
    keys = np.unique(keys, axis=0)
    part_p = np.full(inside.shape, np.nan)
    part_o = np.full(inside.shape, np.nan)
    if keys.size == 0:
        return (part_p, part_o), table
    samples, slot_start, slot_count, slot_of = gather_bucket_samples(
        prep, parts, keys, ignore_index=ignore_index, num_threads=num_threads, row_softmax=row_softmax
    )
    ranges = row_ranges(prep.values.shape[0], num_threads)
    if table is not None:
        edge_slots = np.nonzero(edge_cut[keys[:, 1]])[0]
        kernels.classwise_of_samples(samples, slot_start, slot_count, keys[:, 0], edge_slots, classwise_bins, table)
    rows, cols = np.nonzero(cut)
    slot = slot_of[rows, points["bucket"][rows, cols]]
    rank = inside[rows, cols].astype(np.int64)
    found_p = np.empty(rows.size)
    found_o = np.empty(rows.size)
    # Points of different slots are independent: split them, sorted by slot, over the threads
    # (a slot whose points straddle two groups is only histogrammed twice).
    groups = np.array_split(np.argsort(slot, kind="stable"), len(ranges))

    def resolve(group: np.ndarray) -> None:
        out_p = np.empty(group.size)
        out_o = np.empty(group.size)
        kernels.resolve_points(samples, slot_start, slot_count, slot[group], rank[group], out_p, out_o)
        found_p[group] = out_p
        found_o[group] = out_o

    parallel_map(resolve, [(g,) for g in groups if g.size])
    part_p[rows, cols] = found_p
    part_o[rows, cols] = found_o
    return (part_p, part_o), table


def exact_statistics_numba(
    prep: PreparedInput, sums: SumsPlan, *, ignore_index: int, ace_ranges: int, num_threads: int | None = None
) -> tuple[list[CalibrationStatistics], CalibrationStatistics, tuple[np.ndarray, np.ndarray] | None]:
    """One pass of the kernels, then ACE's exact boundaries from the samples of the cut buckets.

    On rows of 16 classes or more and up to :data:`CLASSWISE_FROM_ACE_MAX_BINS` class-wise
    bins, the first pass skips the class-wise sums and the second builds them from the ACE
    buckets (and the samples a bin edge cuts); long logit rows keep their maximum and inverse
    softmax sum (16 bytes a row), so the second pass takes one exp an entry, not a softmax.

    Parameters
    ----------
    prep : PreparedInput
        Validated rows and labels in host memory.
    sums : SumsPlan
        The sums to fill; ``ace`` among its groups.
    ignore_index : int
        Label of the rows to skip.
    ace_ranges : int
        ``R``, the equal-mass ranges per class of ACE.
    num_threads : int, optional
        Threads of the passes (default: the CPUs available).

    Returns
    -------
    parts : list of CalibrationStatistics
        The sums of each row range of the first pass (class-wise sums complete in the first).
    total : CalibrationStatistics
        Their sum, added once (the ACE table of every range is large on long rows).
    ace_partials : tuple of ndarray or None
        The exact sums at the cut buckets (``calibkit.metrics.formulas.ace_from_points()``);
        None when no sample remains.
    """
    k = prep.num_classes
    keep = prep.mode == kernels.MODE_LOGITS and k >= kernels.LONG_ROW
    row_softmax = np.empty((prep.values.shape[0], 2)) if keep else None
    derive = "classwise" in sums.groups and k >= kernels.LONG_ROW and sums.classwise_bins <= CLASSWISE_FROM_ACE_MAX_BINS
    parts = statistics_numba(
        prep,
        sums,
        ignore_index=ignore_index,
        num_threads=num_threads,
        row_softmax=row_softmax,
        classwise_from_ace=derive,
    )
    total = sum_statistics(parts)
    if total.n == 0:
        return parts, total, None
    partials, classwise = exact_ace_partials(
        prep,
        parts,
        ace_points(total.ace, ace_ranges),
        ace=total.ace,
        ignore_index=ignore_index,
        num_threads=num_threads,
        row_softmax=row_softmax,
        classwise_bins=sums.classwise_bins if derive else None,
    )
    if derive:
        if total.top_classes is not None:  # a vocabulary's layout
            classwise, rows, first = compact_columns(classwise)
            total.classwise_classes = parts[0].classwise_classes = rows
            total.column_first = parts[0].column_first = first
            for part in parts[1:]:
                part.classwise_classes, part.column_first = rows, np.zeros_like(first)
        total.classwise = parts[0].classwise = classwise
        for part in parts[1:]:
            part.classwise = np.zeros_like(classwise)
    return parts, total, partials
