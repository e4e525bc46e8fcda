"""Exact ACE over data read in several passes: shards on disk, partitions of a Dask cluster.

ACE's equal-mass ranges need the order of every class column's probabilities over the whole data
set. A :class:`~calibkit.metrics.accumulator.CalibrationAccumulator` keeps each column in fine
buckets (16 an octave) and splits a bucket that a range boundary cuts in proportion: close, with
a guaranteed bound, but not exact. The one-shot functions hold the data and resolve every cut
bucket from its samples (``exact_ace_partials()``). Here the data
has to be read again, and a cut bucket may hold a large share of a peaked column, so each further
pass narrows the value range (a *cell*) that holds each boundary:

- while the cells that hold a boundary together hold more than ``max_samples`` values, a pass
  histograms every cell over up to 4,096 sub-ranges of its float64 bit patterns (which order
  non-negative floats), with count, sum of p, sum of outcomes, smallest and largest pattern; the
  sub-range holding the boundary becomes the next cell, and a sub-range whose values are all
  equal is resolved from its sums (tied values share their mean outcome, as in the one-shot
  functions). The pass also keeps, on speculation, the values of the sub-ranges around where each
  boundary would lie if values spread evenly over its cell (``need / count`` of its span); when
  the histogram puts the boundary in a kept sub-range, the pass settles it from those values;
- once they fit, a last pass gathers the cells' values and sorts them.

On ordinary data the first extra pass already gathers or, on more data than the budget,
settles the boundaries from what its histogram kept (2 passes in all); a peaked column, where
the guess misses, adds a pass (3). Memory: ``16 * max_samples`` bytes of gathered values (value
and cell; 64 MB by default), plus about 40 bytes per sub-range of a histogram pass (at most
64 MB), whatever the data size.

Each pass's work on a batch is a :class:`PassContribution`; contributions add (histograms sum,
gathered values concatenate), so batches, shards and workers can be processed anywhere and
combined in any order (:mod:`calibkit.io.dask` does that on a cluster).

Usage (``read_batches`` yields the same data on every call)::

    acc = CalibrationAccumulator(metrics)
    for probs, labels in read_batches():
        acc.update(probs, labels)
    exact = ExactACE(acc)
    while not exact.done:
        for probs, labels in read_batches():
            exact.update(probs, labels)
        exact.end_pass()
    report = acc.compute(ace_partials=exact.partials())
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calibkit.metrics import _kernels as kernels
from calibkit.metrics._kernels.bins import ace_bucket_patterns
from calibkit.metrics.accumulator import CalibrationAccumulator
from calibkit.metrics.backends import use_backend
from calibkit.metrics.engines.numba_engine import gather_bucket_samples, statistics_numba
from calibkit.metrics.settings import DEFAULTS
from calibkit.metrics.statistics import SumsPlan, ace_points
from calibkit.metrics.validation import check_positive_int, prepare

_MAGNITUDE = np.int64(2**63 - 1)
_SUB_BITS = 12
_HISTOGRAM_BYTES = 64 * 2**20
_ENTRY_BYTES = 40  # count, sum p, sum outcome, smallest and largest pattern


def _by_cell(total: PassContribution, n_cells: int) -> list[np.ndarray]:
    """Split a pass's gathered values by cell."""
    order = np.argsort(total.cell, kind="stable")
    samples = total.samples[order]
    starts = np.searchsorted(total.cell[order], np.arange(n_cells + 1))
    return [samples[starts[c] : starts[c + 1]] for c in range(n_cells)]


@dataclass
class PassContribution:
    """One batch's share of a pass: per cell, a histogram or the gathered values.

    Contributions of the same pass add (histograms sum, gathered values concatenate), so
    batches, shards and workers can be combined in any order.

    Parameters
    ----------
    histogram : bool
        A histogram pass (else a gathering pass).
    counts : ndarray of int64, shape (cells, sub-ranges) or (cells, 1)
        Values per sub-range of each cell (gathering pass: per cell).
    sums_p, sums_o : ndarray of shape (cells, sub-ranges)
        Histogram pass: sums of p and of the outcome per sub-range.
    lows, highs : ndarray of int64, shape (cells, sub-ranges)
        Histogram pass: smallest and largest float64 bit pattern per sub-range.
    samples : ndarray of int64
        The values gathered (histogram pass: those of the sub-ranges kept on speculation),
        packed as ``_kernels.ace._packed_sample``.
    cell : ndarray of int64
        The cell of each value.
    cap : ndarray of int64, shape (cells,)
        Histogram pass: the most values kept per cell; beyond, the cell's are dropped.
    dropped : ndarray of bool, shape (cells,)
        Histogram pass: cells whose kept values went over ``cap`` (and were dropped).
    """

    histogram: bool
    counts: np.ndarray
    sums_p: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    sums_o: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    lows: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    highs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    samples: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cell: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cap: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    dropped: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    def _bounded(self) -> PassContribution:
        """Drop the kept values of every cell that holds more than its cap (memory stays bounded)."""
        if not self.histogram or self.cap.size == 0:
            return self
        over = self.dropped | (np.bincount(self.cell, minlength=self.cap.size) > self.cap)
        if over.any():
            keep = ~over[self.cell]
            self.samples, self.cell = self.samples[keep], self.cell[keep]
        self.dropped = over
        return self

    def _add_in_place(self, other: PassContribution) -> None:
        """``self += other`` without new histogram arrays (the pending sum of a pass)."""
        if self.histogram != other.histogram or self.counts.shape != other.counts.shape:
            raise ValueError("contributions of different passes cannot be added")
        np.add(self.counts, other.counts, out=self.counts)
        if self.histogram:
            np.add(self.sums_p, other.sums_p, out=self.sums_p)
            np.add(self.sums_o, other.sums_o, out=self.sums_o)
            np.minimum(self.lows, other.lows, out=self.lows)
            np.maximum(self.highs, other.highs, out=self.highs)
            np.logical_or(self.dropped, other.dropped, out=self.dropped)
        if other.samples.size:
            self.samples = np.concatenate([self.samples, other.samples])
            self.cell = np.concatenate([self.cell, other.cell])
            self._bounded()

    def __add__(self, other: PassContribution) -> PassContribution:
        """Add two contributions of the same pass.

        Parameters
        ----------
        other : PassContribution
            A contribution of the same pass (same kind and cells).

        Returns
        -------
        PassContribution

        Raises
        ------
        ValueError
            When ``other`` belongs to another pass.
        """
        out = PassContribution(
            self.histogram,
            self.counts.copy(),
            self.sums_p.copy(),
            self.sums_o.copy(),
            self.lows.copy(),
            self.highs.copy(),
            samples=self.samples,
            cell=self.cell,
            cap=self.cap,
            dropped=self.dropped.copy(),
        )
        out._add_in_place(other)
        return out


class ExactACE:
    """The extra passes that make a streamed ACE exact (see the module docstring).

    Parameters
    ----------
    accumulator : CalibrationAccumulator
        Updated with all the data (the first pass), with ``"ace"`` among its metrics. Its
        settings (``from_logits``, ``ignore_index``, ``num_threads``) are used for the batches.
    max_samples : int, default 4,000,000
        The most values a pass gathers; beyond, it narrows the cells first.

    Attributes
    ----------
    done : bool
        No pass left: :meth:`partials` is ready.
    passes : int
        Extra passes run so far.
    """

    def __init__(self, accumulator: CalibrationAccumulator, *, max_samples: int = 4_000_000) -> None:
        if not isinstance(accumulator, CalibrationAccumulator):
            raise ValueError(f"`accumulator` must be a CalibrationAccumulator, got {type(accumulator).__name__}")
        if "ace" not in accumulator.metrics:
            raise ValueError("`accumulator` does not compute ACE: nothing to make exact")
        if accumulator.settings.multilabel:  # its statistics are one per label
            raise ValueError(
                "`accumulator` is multi-label: ExactACE makes single-label ACE exact; the multi-label "
                "report gives each label's ACE with its bound (ace_error_bound), and "
                "calibkit.calibration_report(..., multilabel=True) the exact values"
            )
        stats = accumulator.statistics
        if stats is None or stats.n == 0:
            raise ValueError("`accumulator` has no data: update it with every batch first")
        self.max_samples = check_positive_int(max_samples, "max_samples")
        self.from_logits = accumulator.from_logits
        self.ignore_index = accumulator.ignore_index
        self.next_token = accumulator.settings.next_token
        self.num_threads = accumulator.num_threads
        self.num_classes = stats.num_classes
        points = ace_points(stats.ace, accumulator.ace_ranges)
        inside, bucket = points["inside"], points["bucket"]
        total = np.take_along_axis(stats.ace[:, :, 0], bucket, axis=1)
        cut = (inside > 0) & (inside < total)
        self._shape = inside.shape
        self._rows, self._cols = np.nonzero(cut)
        self._bucket = bucket[cut].astype(np.int64)
        self._need = np.rint(inside[cut]).astype(np.int64)  # values of the cell below the boundary
        self._count = np.rint(total[cut]).astype(np.int64)  # values in the cell
        self._lo, self._hi = ace_bucket_patterns(self._bucket)
        self._sum_p = np.zeros(self._need.size)  # exact sums of what lies below the cell
        self._sum_o = np.zeros(self._need.size)
        self._open = np.ones(self._need.size, dtype=bool)
        self.passes = 0
        self._begin_pass()

    # -- a pass ----------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """No pass is left: :meth:`partials` is ready."""
        return not self._open.any()

    def _begin_pass(self) -> None:
        self._pending: PassContribution | None = None
        if self.done:
            return
        open_ = np.flatnonzero(self._open)
        # A cell is (class, bucket, lo, hi); several boundaries may share one.
        keys = np.stack([self._rows[open_], self._bucket[open_], self._lo[open_], self._hi[open_]], axis=1)
        cells, point_cell = np.unique(keys, axis=0, return_inverse=True)
        self._cells = cells
        self._point_cell = np.full(self._need.size, -1, dtype=np.int64)
        self._point_cell[open_] = point_cell.reshape(-1)
        counts = np.zeros(len(cells), dtype=np.int64)
        counts[point_cell.reshape(-1)] = self._count[open_]
        self._cell_count = counts
        self._histogram = int(counts.sum()) > self.max_samples
        if self._histogram:
            per_cell = max(16, _HISTOGRAM_BYTES // (_ENTRY_BYTES * len(cells)))
            bits = min(_SUB_BITS, int(per_cell).bit_length() - 1)
            span = cells[:, 3] - cells[:, 2]
            shift = np.zeros(len(cells), dtype=np.int64)
            for c in range(len(cells)):  # a loop over cells (at most K x R), not samples
                shift[c] = max(0, int(span[c]).bit_length() - bits)
            self._shift = shift
            self._n_sub = 1 << bits
            self._speculate(open_, point_cell.reshape(-1))
        # the (class, bucket) slots a batch gathers from
        self._slots, self._cell_slot = np.unique(cells[:, :2], axis=0, return_inverse=True)
        self._cell_slot = self._cell_slot.reshape(-1)

    def _speculate(self, points: np.ndarray, point_cell: np.ndarray) -> None:
        """Choose the sub-ranges a histogram pass also gathers, so it can settle a boundary itself.

        Where values spread evenly over a cell, the boundary lies near ``need / count`` of its
        span; the pass keeps the values of the sub-ranges around that guess (half the gather
        budget in expectation, the whole budget at most per cell), and a boundary whose
        histogram sub-range was kept is settled from them: 2 passes instead of 3 on smooth data.
        A wrong guess only costs the third pass, as before.
        """
        cells = self._cells
        keep = np.zeros((len(cells), self._n_sub), dtype=bool)
        cap = np.zeros(len(cells), dtype=np.int64)
        budget = self.max_samples / points.size  # values per boundary, at most
        for q, c in zip(points, point_cell, strict=True):  # a loop over boundaries (at most K x R)
            span = int(cells[c, 3] - cells[c, 2])
            used = (span >> int(self._shift[c])) + 1  # sub-ranges the cell spans
            per_sub = self._cell_count[c] / used
            width = int(budget / (2 * per_sub))  # sub-ranges that hold half the budget
            if width < 1:
                continue  # not even the guessed sub-range fits: the histogram alone narrows
            half = (width - 1) // 2
            guess = int(span * (self._need[q] / self._count[q])) >> int(self._shift[c])
            keep[c, max(0, guess - half) : min(used, guess + half + 1)] = True
            cap[c] += int(budget)
        self._keep = keep
        self._cap = cap

    def empty_contribution(self) -> PassContribution:
        """Return the neutral element of this pass's contributions.

        Returns
        -------
        PassContribution
            Zero counts (and empty values) for every cell of the pass.
        """
        n = len(self._cells)
        if self._histogram:
            m = self._n_sub
            return PassContribution(
                True,
                np.zeros((n, m), np.int64),
                np.zeros((n, m)),
                np.zeros((n, m)),
                np.full((n, m), np.iinfo(np.int64).max),
                np.full((n, m), -1, np.int64),
                cap=self._cap,
                dropped=np.zeros(n, dtype=bool),
            )
        return PassContribution(False, np.zeros((n, 1), np.int64))

    def contribution(self, probs: Any, labels: Any) -> PassContribution:
        """Compute this pass's work on one batch (validated as ``CalibrationAccumulator.update`` does).

        Parameters
        ----------
        probs : array-like or torch.Tensor
            The batch's probabilities (or logits, as the first pass read them).
        labels : array-like of int
            The batch's labels.

        Returns
        -------
        PassContribution
            To :meth:`add`, here or after summing with other batches' contributions.

        Raises
        ------
        ValueError
            When no pass is left, or the batch has another class count than the first pass.
        """
        if self.done:
            raise ValueError("no pass is left: ACE is already exact")
        # the gather runs the compiled kernels on host memory: device tensors are copied here
        with use_backend("numba"):
            prep = prepare(
                probs, labels, from_logits=self.from_logits, ignore_index=self.ignore_index, next_token=self.next_token
            )
        out = self.empty_contribution()
        if prep.values.shape[0] == 0:
            return out
        if prep.num_classes != self.num_classes:
            raise ValueError(f"`probs` has {prep.num_classes} classes but the first pass had {self.num_classes}")
        long_logits = prep.mode == kernels.MODE_LOGITS and prep.num_classes >= kernels.LONG_ROW
        row_softmax = np.empty((prep.values.shape[0], 2)) if long_logits else None
        parts = statistics_numba(  # the gather must rebuild the very probabilities these buckets counted
            prep,
            SumsPlan(top_bins=(), groups=frozenset({"ace"}), fuzzy_bins=1, classwise_bins=1, eps=DEFAULTS.eps),
            ignore_index=self.ignore_index,
            num_threads=self.num_threads,
            row_softmax=row_softmax,
        )
        samples, start, count, _ = gather_bucket_samples(
            prep,
            parts,
            self._slots,
            ignore_index=self.ignore_index,
            num_threads=self.num_threads,
            row_softmax=row_softmax,
        )
        kept_samples, kept_cells = [], []
        for c, (_, _, lo, hi) in enumerate(self._cells):  # a loop over cells, vectorised inside
            s = self._cell_slot[c]
            packed = samples[start[s] : start[s] + count[s]]
            bits = packed & _MAGNITUDE
            inside = (bits >= lo) & (bits <= hi)
            if not inside.any():
                continue
            packed, bits = packed[inside], bits[inside]
            if not self._histogram:
                kept_samples.append(packed)
                kept_cells.append(np.full(packed.size, c, dtype=np.int64))
                out.counts[c, 0] += packed.size
                continue
            sub = (bits - lo) >> self._shift[c]
            kept = self._keep[c, sub]
            if kept.any():
                kept_samples.append(packed[kept])
                kept_cells.append(np.full(int(kept.sum()), c, dtype=np.int64))
            m = self._n_sub
            out.counts[c] += np.bincount(sub, minlength=m)
            out.sums_p[c] += np.bincount(sub, weights=bits.view(np.float64), minlength=m)
            out.sums_o[c] += np.bincount(sub, weights=(packed < 0).astype(np.float64), minlength=m)
            np.minimum.at(out.lows[c], sub, bits)
            np.maximum.at(out.highs[c], sub, bits)
        if kept_samples:
            out.samples = np.concatenate(kept_samples)
            out.cell = np.concatenate(kept_cells)
        return out._bounded()

    def add(self, contribution: PassContribution) -> None:
        """Add a batch's (or a sum of batches') contribution to the current pass.

        Parameters
        ----------
        contribution : PassContribution
            From :meth:`contribution` in this pass.
        """
        if self._pending is None:
            self._pending = self.empty_contribution()
        self._pending._add_in_place(contribution)  # no new histogram arrays per batch

    def update(self, probs: Any, labels: Any) -> ExactACE:
        """Run one batch of the current pass: ``add(contribution(probs, labels))``.

        Parameters
        ----------
        probs : array-like or torch.Tensor
            The batch's probabilities (or logits, as the first pass read them).
        labels : array-like of int
            The batch's labels.

        Returns
        -------
        ExactACE
            ``self``, for chaining.
        """
        self.add(self.contribution(probs, labels))
        return self

    def end_pass(self) -> None:
        """Resolve what the pass's data settles, and prepare the next pass (if any).

        Raises
        ------
        ValueError
            When the pass read other data than the first pass (a cell's count differs).
        """
        total = self._pending if self._pending is not None else self.empty_contribution()
        seen = total.counts.sum(axis=1)
        if not np.array_equal(seen, self._cell_count):
            raise ValueError(
                "the data read in this pass differs from the first pass (a cell that held "
                f"{int(self._cell_count[seen != self._cell_count][0])} values now holds "
                f"{int(seen[seen != self._cell_count][0])}): every pass must read the same data"
            )
        if self._histogram:
            self._resolve_histogram(total)
        else:
            self._resolve_gathered(total)
        self.passes += 1
        self._begin_pass()

    def _resolve_histogram(self, total: PassContribution) -> None:
        cum_n = np.concatenate([np.zeros((len(self._cells), 1), np.int64), np.cumsum(total.counts, axis=1)], axis=1)
        cum_p = np.concatenate([np.zeros((len(self._cells), 1)), np.cumsum(total.sums_p, axis=1)], axis=1)
        cum_o = np.concatenate([np.zeros((len(self._cells), 1)), np.cumsum(total.sums_o, axis=1)], axis=1)
        kept = _by_cell(total, len(self._cells))
        for q in np.flatnonzero(self._open):  # a loop over boundaries (at most K x R)
            c = self._point_cell[q]
            need = self._need[q]
            j = int(np.searchsorted(cum_n[c], need, side="left")) - 1  # cum_n[j] < need <= cum_n[j + 1]
            if cum_n[c, j + 1] == need:  # the boundary falls between sub-ranges
                self._settle(q, cum_p[c, j + 1], cum_o[c, j + 1])
            elif total.lows[c, j] == total.highs[c, j]:  # one value, tied: the group's mean outcome
                take = need - cum_n[c, j]
                value = float(np.int64(total.lows[c, j]).view(np.float64))
                mean_o = total.sums_o[c, j] / total.counts[c, j]
                self._settle(q, cum_p[c, j] + take * value, cum_o[c, j] + take * mean_o)
            elif self._keep[c, j] and not total.dropped[c]:  # gathered on speculation: settle
                packed = kept[c]
                packed = packed[((packed & _MAGNITUDE) - self._cells[c, 2]) >> self._shift[c] == j]
                if packed.size != total.counts[c, j]:
                    raise RuntimeError("ExactACE: the values kept for a sub-range do not match its count")
                values = (packed & _MAGNITUDE).view(np.float64)
                part_p, part_o = kernels._prefix_of_sorted(values, (packed < 0).astype(np.float64), need - cum_n[c, j])
                self._settle(q, cum_p[c, j] + part_p, cum_o[c, j] + part_o)
            else:  # narrow: the sub-range's own values are the next cell
                self._sum_p[q] += cum_p[c, j]
                self._sum_o[q] += cum_o[c, j]
                self._need[q] = need - cum_n[c, j]
                self._count[q] = total.counts[c, j]
                self._lo[q] = total.lows[c, j]
                self._hi[q] = total.highs[c, j]

    def _resolve_gathered(self, total: PassContribution) -> None:
        kept = _by_cell(total, len(self._cells))
        for q in np.flatnonzero(self._open):  # a loop over boundaries (at most K x R)
            c = self._point_cell[q]
            packed = kept[c]
            values = (packed & _MAGNITUDE).view(np.float64)
            outcomes = (packed < 0).astype(np.float64)
            part_p, part_o = kernels._prefix_of_sorted(values, outcomes, self._need[q])
            self._settle(q, part_p, part_o)

    def _settle(self, q: int, part_p: float, part_o: float) -> None:
        self._sum_p[q] += part_p
        self._sum_o[q] += part_o
        self._open[q] = False

    def partials(self) -> tuple[np.ndarray, np.ndarray]:
        """Return the exact sums below each range boundary, for ``CalibrationAccumulator.compute``.

        Returns
        -------
        tuple of ndarray
            Per class and range boundary: the exact sums of p and of the outcome over the values of
            the boundary's bucket below it (NaN where no boundary cuts a bucket), for
            :meth:`CalibrationAccumulator.compute`'s ``ace_partials``.

        Raises
        ------
        ValueError
            While passes are left (:attr:`done` is False).
        """
        if not self.done:
            raise ValueError("passes are left: run them (ExactACE.done) before asking for the sums")
        part_p = np.full(self._shape, np.nan)
        part_o = np.full(self._shape, np.nan)
        part_p[self._rows, self._cols] = self._sum_p
        part_o[self._rows, self._cols] = self._sum_o
        return part_p, part_o
