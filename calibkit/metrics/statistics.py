"""Sufficient statistics of calibration: per-bin sums that add across batches, threads and processes.

An engine (``calibkit.metrics.engines``) fills a :class:`CalibrationStatistics` in one pass
over the predictions; every metric of SPEC.md is then a small numpy function of those sums
(:mod:`calibkit.metrics.formulas`), so asking for all metrics costs one pass, and a 100M-token
evaluation never holds its predictions (:class:`~calibkit.metrics.accumulator.CalibrationAccumulator`).
:class:`SumsPlan` says which sums a pass fills; which metric needs which sums is
:mod:`calibkit.metrics.registry`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from calibkit.metrics import _kernels as kernels
from calibkit.metrics.ranking import SELECTIVE_BUCKETS

FUZZY_COLUMNS = 6  # see CalibrationStatistics.fuzzy


ADDITIVE_FIELDS = ("top", "fuzzy", "classwise", "ace", "selective", "scalars", "column_first")
"""The fields of :class:`CalibrationStatistics` that are sums (added, reduced and resampled)."""


@dataclass
class CalibrationStatistics:
    """Additive per-bin sums; ``a + b`` is the statistics of both data sets.

    Build one with :meth:`zeros` and fill it with ``calibkit.metrics.engines.fill_statistics()``
    (or take it from a :class:`~calibkit.metrics.accumulator.CalibrationAccumulator`); the fields
    are the sums.

    Parameters
    ----------
    num_classes : int
        ``K``, the number of classes (2 for 1-D binary input).
    binary : bool
        The input was 1-D binary (the class-1 probability).
    top_bins : tuple of int
        The bin counts of ``top`` (one entry per distinct bin count asked for).
    top : ndarray (S, K, M, 4), (2 S, 2, M, 4) for 1-D binary input
        Top-label equal-width bins, split by true label: count, sum of confidence, sum of
        correct, sum of per-sample ECD. Binary 1-D input bins the class-1 probability with
        outcome ``y == 1`` instead (SPEC.md), and then also keeps, in the last S tables, those
        of the top label of ``[1 - p, p]``, which the class-wise family reads
        (:meth:`top_table`). Over a vocabulary (``top_classes`` given) the second axis has a
        row per label that occurs instead of one per class.
    fuzzy : ndarray (M_f, 6)
        FCE fuzzy bins: total membership, membership-weighted correct and confidence; then the
        authors' variant's sums: total membership rounded to 3 decimals, rounded-membership-weighted
        correct, and rounded-membership-weighted confidence of the correct predictions only.
    classwise : ndarray (K, M_c, 3)
        Per class column, equal-width bins of ``p_k``: count, sum ``p_k``, sum ``1[y = k]``.
        Over a vocabulary, a row per class of ``classwise_classes`` only, and the first bin's
        count and sum of every class in ``column_first`` instead (the table's first bin then
        holds the labels only).
    ace : ndarray (K, B, 3)
        The same sums on fine buckets (16 an octave of the float64 pattern) for ACE.
    selective : ndarray (B, 2)
        Count and errors on fine buckets of ``1 - confidence`` (top label) for AURC and the
        selective accuracy (``calibkit.metrics.ranking``); ``(0, 2)`` when not filled.
    scalars : ndarray (7,)
        n, correct, Brier, NLL and ECD sums, confidence sum and count of wrong predictions.
    has : frozenset of str, default frozenset()
        Which optional groups of sums were filled (``rows``, ``classwise``, ``ace``, ``fuzzy``,
        ``selective``).
    top_classes : ndarray of int64, optional
        The sorted class ids of the rows of ``top`` when it is compact (at least
        ``kernels.COMPACT_CLASSES`` classes: the labels that occur); None when it has a row per
        class. Adding two compact statistics takes the union of their classes.
    classwise_classes : ndarray of int64, optional
        Over a vocabulary, the sorted class ids of the rows of ``classwise``: the columns with a
        value above their first bin or a label (the others have nothing but a first bin). None:
        a row per class.
    column_first : ndarray (K, 2) or (0, 2)
        Over a vocabulary with ``classwise``: every class column's first-bin count and sum.
    """

    num_classes: int
    binary: bool
    top_bins: tuple[int, ...]
    top: np.ndarray
    fuzzy: np.ndarray
    classwise: np.ndarray
    ace: np.ndarray
    scalars: np.ndarray
    has: frozenset = field(default_factory=frozenset)  # which optional groups were filled
    selective: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    top_classes: np.ndarray | None = None
    classwise_classes: np.ndarray | None = None
    column_first: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))

    @classmethod
    def zeros(
        cls,
        num_classes: int,
        binary: bool,
        top_bins: Iterable[int],
        fuzzy_bins: int,
        classwise_bins: int,
        has: Iterable[str],
        top_classes: np.ndarray | None = None,
    ) -> CalibrationStatistics:
        """Create empty statistics of the given shape, ready to be filled by a pass.

        Parameters
        ----------
        num_classes : int
            ``K``.
        binary : bool
            The input is 1-D binary.
        top_bins : iterable of int
            Bin counts of the top-label tables (duplicates dropped; none gives one table of 1 bin).
        fuzzy_bins : int
            Fuzzy bins of FCE (used when ``"fuzzy"`` is in ``has``).
        classwise_bins : int
            Bins per class column of SCE (used when ``"classwise"`` is in ``has``).
        has : iterable of str
            The optional groups to allocate: ``rows``, ``classwise``, ``ace``, ``fuzzy``, ``selective``.
        top_classes : ndarray of int64, optional
            The classes of a compact ``top`` (see ``top_slots()``); default: a row per class.

        Returns
        -------
        CalibrationStatistics
            All sums zero.
        """
        top_bins = tuple(sorted(set(int(b) for b in top_bins))) or (1,)
        has = frozenset(has)
        k = num_classes
        tables = (2 if binary else 1) * len(top_bins)
        rows = k if top_classes is None else len(top_classes)  # of the label-split table
        columns = "classwise" in has
        compact = top_classes is not None and columns  # a vocabulary's class-wise layout
        return cls(
            num_classes=k,
            binary=binary,
            top_bins=top_bins,
            top=np.zeros((tables, rows, max(top_bins), 4)),
            fuzzy=np.zeros((fuzzy_bins if "fuzzy" in has else 1, FUZZY_COLUMNS)),
            classwise=np.zeros((k if columns and not compact else 0, classwise_bins, 3)),
            ace=np.zeros((k if "ace" in has else 0, kernels.ACE_BUCKETS if "ace" in has else 0, 3)),
            scalars=np.zeros(kernels.N_SCALARS),
            has=has,
            selective=np.zeros((SELECTIVE_BUCKETS if "selective" in has else 0, 2)),
            top_classes=top_classes,
            classwise_classes=np.zeros(0, dtype=np.int64) if compact else None,
            column_first=np.zeros((k if compact else 0, 2)),
        )

    def _check_compatible(self, other: CalibrationStatistics) -> None:
        mine = (self.num_classes, self.binary, self.top_bins, self.fuzzy.shape, self.classwise.shape[1:], self.has)
        theirs = (
            other.num_classes,
            other.binary,
            other.top_bins,
            other.fuzzy.shape,
            other.classwise.shape[1:],
            other.has,
        )
        if mine != theirs:
            raise ValueError(
                f"`other` statistics are not compatible (classes, binary, bins, groups): {theirs} vs {mine}"
            )

    def __add__(self, other: CalibrationStatistics) -> CalibrationStatistics:
        """Add the sums of two compatible statistics (same classes, bins and groups).

        Parameters
        ----------
        other : CalibrationStatistics
            Statistics filled with the same metrics and settings.

        Returns
        -------
        CalibrationStatistics
            A new object; neither operand changes.

        Raises
        ------
        ValueError
            When ``other`` differs in classes, binary input, bins or groups.
        """
        self._check_compatible(other)
        out = CalibrationStatistics(**{f.name: getattr(self, f.name) for f in fields(self)})
        if isinstance(self.scalars, np.ndarray) != isinstance(other.scalars, np.ndarray):
            other = other.to_numpy() if isinstance(self.scalars, np.ndarray) else other.to_torch(self.scalars.device)
        if self.top_classes is not None:  # a vocabulary's tables: the union of their rows
            out, other = out.with_rows(self, other), other.with_rows(self, other)
        for name in ADDITIVE_FIELDS:
            setattr(out, name, getattr(out, name) + getattr(other, name))
        return out

    def to_numpy(self) -> CalibrationStatistics:
        """Return these statistics with numpy sums (a copy from the device for tensor sums).

        The torch engine keeps a streaming accumulator's sums on the input's device until
        ``compute()``; the metrics are then numpy functions of the host copy.

        Returns
        -------
        CalibrationStatistics
            ``self`` when the sums are numpy arrays already.
        """
        if isinstance(self.scalars, np.ndarray):
            return self
        out = CalibrationStatistics(**{f.name: getattr(self, f.name) for f in fields(self)})
        for name in ADDITIVE_FIELDS:
            setattr(out, name, getattr(self, name).detach().cpu().numpy())
        return out

    def to_torch(self, device: Any = None) -> CalibrationStatistics:
        """Return these statistics with float64 torch tensors on ``device`` (``torch.distributed`` reduces them).

        Parameters
        ----------
        device : torch.device or str, optional
            Where the sums go (default: where they are, the CPU for numpy sums).

        Returns
        -------
        CalibrationStatistics
        """
        import torch

        out = CalibrationStatistics(**{f.name: getattr(self, f.name) for f in fields(self)})
        for name in ADDITIVE_FIELDS:
            value = getattr(self, name)
            value = value if isinstance(value, torch.Tensor) else torch.from_numpy(np.asarray(value))
            setattr(out, name, value.to(device=device if device is not None else value.device, dtype=torch.float64))
        return out

    @property
    def table_classes(self) -> np.ndarray:
        """The class id of each row of ``top`` (every class, or a compact table's ``top_classes``)."""
        return np.arange(self.num_classes) if self.top_classes is None else self.top_classes

    def with_rows(self, *others: CalibrationStatistics) -> CalibrationStatistics:
        """Return these statistics with compact tables over the union of their rows and ``others``'.

        A row a table lacks is zero: a class absent from the label-split table had no label, and
        one absent from the class-wise table nothing above its first bin (which ``column_first``
        holds), so adding after the union is exact.

        Parameters
        ----------
        *others : CalibrationStatistics
            Compact statistics of the same classes and settings.

        Returns
        -------
        CalibrationStatistics
            ``self`` when its rows are the union already; otherwise a copy with zero rows added.
        """
        out = CalibrationStatistics(**{f.name: getattr(self, f.name) for f in fields(self)})
        for table, ids in (("top", "top_classes"), ("classwise", "classwise_classes")):
            mine = getattr(self, ids)
            if mine is None:
                continue
            union = functools.reduce(np.union1d, [getattr(o, ids) for o in others], mine).astype(np.int64)
            if len(union) == len(mine):
                continue
            rows = np.searchsorted(union, mine)
            axis = 1 if table == "top" else 0
            value = getattr(self, table)
            setattr(out, table, _spread_rows(value.swapaxes(0, axis), rows, len(union)).swapaxes(0, axis))
            setattr(out, ids, union)
        return out

    def by_label(self, values: np.ndarray, fill: float) -> np.ndarray:
        """Spread per-row values of ``top`` (one per class of ``table_classes``) over all ``K`` classes.

        Parameters
        ----------
        values : ndarray of shape (rows of top,)
            A value per row of the label-split table.
        fill : float
            The value of the classes with no row (no label).

        Returns
        -------
        ndarray of shape (K,)
        """
        if self.top_classes is None:
            return values
        out = np.full(self.num_classes, fill, dtype=np.result_type(values, np.float64))
        out[self.top_classes] = values
        return out

    def top_table(self, n_bins: int, top_label: bool = False) -> np.ndarray:
        """Return the top-label sums for a bin count that was accumulated.

        Parameters
        ----------
        n_bins : int
            One of ``top_bins``.
        top_label : bool, default False
            For 1-D binary input, the table of the top label of ``[1 - p, p]`` (the class-wise
            family's, SPEC.md) instead of the class-1 probability's. Other input has one table.

        Returns
        -------
        ndarray of shape (K, n_bins, 4)
            Per true class and bin: count, sum of confidence, sum of correct, sum of ECD; over a
            vocabulary a row per class of ``top_classes`` only (see :attr:`table_classes`).
        """
        s = self.top_bins.index(n_bins)
        if top_label and self.binary:
            s += len(self.top_bins)
        return self.top[s, :, :n_bins]

    @property
    def n(self) -> int:
        """Samples counted (after masking)."""
        return int(self.scalars[kernels.S_N])

    def label_counts(self) -> np.ndarray:
        """Return the samples of each true class (the class-wise family's table, counted over its bins).

        Returns
        -------
        ndarray of shape (K,)
        """
        return self.by_label(self.top_table(self.top_bins[0], top_label=True)[:, :, 0].sum(axis=1), 0.0)


@dataclass(frozen=True)
class SumsPlan:
    """Which sums a pass must fill for some metrics and settings (see ``plan()``).

    Parameters
    ----------
    top_bins : tuple of int
        Bin counts of the top-label tables.
    groups : frozenset of str
        The optional groups of :data:`SUMS` besides ``top``.
    fuzzy_bins : int
        Fuzzy bins of FCE.
    classwise_bins : int
        Bins per class column of SCE.
    eps : float
        Clip of the logs.
    """

    top_bins: tuple[int, ...]
    groups: frozenset[str]
    fuzzy_bins: int
    classwise_bins: int
    eps: float


def _spread_rows(table: Any, rows: np.ndarray, count: int) -> Any:
    """Return ``count`` zero rows (numpy or torch, as ``table``) holding ``table``'s rows at ``rows``."""
    if isinstance(table, np.ndarray):
        out = np.zeros((count, *table.shape[1:]))
        out[rows] = table
        return out
    import torch  # a streaming accumulator's sums on the device

    out = table.new_zeros((count, *table.shape[1:]))
    out[torch.as_tensor(rows, device=table.device)] = table
    return out


def compact_columns(classwise: Any) -> tuple[Any, np.ndarray, Any]:
    """Return a dense class-wise table in a vocabulary's layout (``classwise_classes``, ``column_first``).

    Parameters
    ----------
    classwise : ndarray or tensor of shape (K, M, 3)
        A row per class.

    Returns
    -------
    table : ndarray or tensor of shape (K', M, 3)
        The rows of the columns with a value above their first bin or a label, first bins
        holding the labels only.
    classes : ndarray of int64, shape (K',)
        Their class ids.
    column_first : ndarray or tensor of shape (K, 2)
        Every column's first-bin count and sum.
    """
    active = (classwise[:, 1:, 0].sum(axis=1) > 0) | (classwise[:, :, 2].sum(axis=1) > 0)
    if isinstance(classwise, np.ndarray):
        classes = np.flatnonzero(active).astype(np.int64)
    else:
        classes = active.nonzero().reshape(-1).cpu().numpy().astype(np.int64)
    table = classwise[active].clone() if not isinstance(classwise, np.ndarray) else classwise[active]
    first = classwise[:, 0, :2] * 1.0  # a copy
    table[:, 0, :2] = 0.0
    return table, classes, first


def top_slots(labels: np.ndarray, num_classes: int, ignore_index: int) -> tuple[np.ndarray | None, np.ndarray]:
    """Return the classes of a compact top-label table for a pass and each row's row in it.

    Below ``kernels.COMPACT_CLASSES`` classes the table has a row per class: ``(None, empty)``,
    and the kernels index it by the label. Over a vocabulary, a row per label that occurs
    (sorted), so that the table grows with the tokens, not with the vocabulary.

    Parameters
    ----------
    labels : ndarray of shape (N,)
        The pass's labels (``ignore_index`` on skipped rows).
    num_classes : int
        ``K``.
    ignore_index : int
        The label of skipped rows.

    Returns
    -------
    tuple of (ndarray or None, ndarray of int64)
        The classes (``top_classes``) and a row index per label (0 on skipped rows; an
        out-of-range label gets a row too, so that the kernel reports it, not an index error).
    """
    if num_classes < kernels.COMPACT_CLASSES:
        return None, np.empty(0, dtype=np.int64)
    kept = labels[labels != ignore_index]
    classes = np.unique(kept).astype(np.int64)
    slots = np.searchsorted(classes, labels).astype(np.int64)
    return classes, np.minimum(slots, max(len(classes) - 1, 0))


def ace_points(ace: np.ndarray, n_ranges: int) -> dict[str, np.ndarray]:
    """Locate the ``R + 1`` equal-mass range boundaries of each class column in the ACE buckets.

    Ranges follow ``np.array_split``: ``N % R`` ranges of ``N // R + 1`` samples, then ``N // R``.

    Parameters
    ----------
    ace : ndarray of shape (K, B, 3)
        :attr:`CalibrationStatistics.ace`.
    n_ranges : int
        ``R``, the equal-mass ranges per class.

    Returns
    -------
    dict of str to ndarray
        Per class and boundary: ``ranks`` (the rank), ``bucket`` (the bucket that holds it),
        ``inside`` (how many of that bucket's samples lie before it) and ``before`` (the sums of
        all whole buckets before it).
    """
    counts = ace[:, :, 0]
    n = int(round(counts[0].sum())) if counts.size else 0
    r = np.arange(n_ranges + 1)
    ranks = r * (n // n_ranges) + np.minimum(r, n % n_ranges)
    cum = np.concatenate([np.zeros((ace.shape[0], 1, 3)), np.cumsum(ace, axis=1)], axis=1)
    # bucket j holds ranks [cum[j], cum[j+1]); a boundary on a bucket edge needs no split.
    bucket = np.empty((ace.shape[0], ranks.size), dtype=np.int64)
    for k in range(ace.shape[0]):  # one searchsorted per class, not per sample
        bucket[k] = np.searchsorted(cum[k, :, 0], ranks, side="right") - 1
    bucket = np.minimum(bucket, ace.shape[1] - 1)
    before = np.take_along_axis(cum, bucket[:, :, None], axis=1)
    inside = ranks[None, :] - before[:, :, 0]
    return {"ranks": ranks, "bucket": bucket, "inside": inside, "before": before}


MAX_CLASS_ROWS = 20
"""Beyond this many classes (a vocabulary), tables and figures show the classes of largest support only."""


def largest_classes(support: np.ndarray, limit: int = MAX_CLASS_ROWS) -> list[int]:
    """Return the classes a table shows: all of them, or beyond ``limit`` the ``limit`` of largest support.

    Parameters
    ----------
    support : ndarray of shape (K,)
        Samples of each class (:meth:`CalibrationStatistics.label_counts`).
    limit : int, default MAX_CLASS_ROWS
        The most rows.

    Returns
    -------
    list of int
        Every class in order up to ``limit`` classes; else by support, largest first (ties by class).

    Examples
    --------
    >>> largest_classes(np.array([5, 0, 9, 9]), limit=2)
    [2, 3]
    """
    if len(support) <= limit:
        return list(range(len(support)))
    order = np.lexsort((np.arange(len(support)), -np.asarray(support)))  # support down, then class up
    return [int(c) for c in order[:limit]]


def on_same_rows(parts: list[CalibrationStatistics]) -> list[CalibrationStatistics]:
    """Return ``parts`` with their vocabulary tables over the same rows (the bootstrap stacks them).

    Parameters
    ----------
    parts : list of CalibrationStatistics
        The statistics of a pass's row ranges.

    Returns
    -------
    list of CalibrationStatistics
        ``parts`` itself below ``kernels.COMPACT_CLASSES`` classes.
    """
    if len(parts) < 2 or parts[0].top_classes is None:
        return parts
    return [part.with_rows(*parts) for part in parts]


def sum_statistics(parts: list[CalibrationStatistics]) -> CalibrationStatistics:
    """Add the statistics of row ranges in order (``parts[0] + parts[1] + ...``).

    Parameters
    ----------
    parts : list of CalibrationStatistics
        At least one.

    Returns
    -------
    CalibrationStatistics
    """
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total
