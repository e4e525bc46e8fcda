"""The streaming door: :class:`CalibrationAccumulator` adds the sums of batches, threads and processes.

Memory stays O(bins x classes) whatever the number of samples; the sums of CUDA batches stay on
the device until :meth:`CalibrationAccumulator.compute`. Every metric comes from the registry
(:func:`calibkit.metrics.registry.report_from_statistics`); none is re-derived here.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Iterable
from typing import Any

import numpy as np

from calibkit.metrics.backends import on_device
from calibkit.metrics.engines import fill_statistics
from calibkit.metrics.multilabel import (
    NO_DECISION,
    check_multilabel,
    label_metric_names,
    label_statistics,
    report_from_label_statistics,
)
from calibkit.metrics.registry import metric_names, plan, report_from_statistics
from calibkit.metrics.report import NO_SAMPLE
from calibkit.metrics.settings import UNSET, CalibrationSettings, resolve_settings, settings_keywords
from calibkit.metrics.statistics import ADDITIVE_FIELDS, CalibrationStatistics
from calibkit.metrics.validation import InputError, check_num_threads, prepare_for


class CalibrationAccumulator:
    """Streaming calibration metrics in memory O(bins x classes), whatever the number of samples.

    ``update(probs, labels)`` adds a batch, ``merge(other)`` adds another accumulator (another
    process or shard), ``compute()`` returns every metric of :data:`calibkit.METRICS` plus
    ``accuracy``, ``n`` and ``num_classes``. Results equal one pass over all the data, except ACE,
    which needs the order of the confidences over all of it: here it splits the fine buckets cut
    by a range boundary in proportion, and ``compute()`` also returns ``ace_error_bound``, a
    guaranteed bound on ``|ACE_stream - ACE_exact|`` (see
    ``ace_from_points()``); further passes over the same data
    (``ExactACE``) make it exact.

    Parameters
    ----------
    metrics : iterable of str, optional
        The metrics to compute (default: all). Fewer metrics skip the costlier sums.
    settings : CalibrationSettings, optional
        All settings at once; or give them as keywords (not both).
    from_logits, ignore_index
        As below (``from_logits=None`` is False).
    multilabel : bool, optional
        Multi-label batches (default False): ``(N, K)`` label probabilities (logits: a sigmoid
        each) with multi-hot ``(N, K)`` labels; the sums are kept per label, and ``compute()``
        returns :func:`calibkit.multilabel_report`'s dict (ACE per label within its bound, which
        ``"ace_error_bound"`` gives).
    next_token : bool, optional
        Causal-LM batches (default False): logits ``(N, T, V)`` scored at position ``t`` against
        ``labels[:, t + 1]``, as the model's own loss shifts them (labels unshifted).
    n_bins, ace_ranges, sce_bins, rbece_bins, theta, fce_bins, esce_bins, eps, fce_variant, coverage
        The fields of :class:`~calibkit.metrics.settings.CalibrationSettings` (SPEC.md's defaults;
        ``from_logits=None`` is False). One given with ``settings`` is a ``ValueError`` naming both.
    num_threads : int, optional
        Threads of each update's pass (default: the CPUs available).

    Examples
    --------
    >>> import numpy as np
    >>> acc = CalibrationAccumulator(metrics=["ece", "cece"])
    >>> probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]])
    >>> _ = acc.update(probs[:2], [0, 1]).update(probs[2:], [1, 1])
    >>> round(acc.compute()["ece"], 4)
    0.3
    """

    def __init__(
        self,
        metrics: Iterable[str] | None = None,
        *,
        settings: CalibrationSettings | None = None,
        from_logits: bool | None = None,
        multilabel: bool | None = None,
        next_token: bool | None = None,
        ignore_index: int = UNSET.ignore_index,
        n_bins: int = UNSET.n_bins,
        ace_ranges: int = UNSET.ace_ranges,
        sce_bins: int = UNSET.sce_bins,
        rbece_bins: int = UNSET.rbece_bins,
        theta: float = UNSET.theta,
        fce_bins: int = UNSET.fce_bins,
        esce_bins: int = UNSET.esce_bins,
        eps: float = UNSET.eps,
        num_threads: int | None = None,
        fce_variant: str = UNSET.fce_variant,
        coverage: float = UNSET.coverage,
    ) -> None:
        given = settings_keywords(locals())
        self.settings = resolve_settings(settings, **given)
        self.metrics = (
            label_metric_names(metrics)
            if self.settings.multilabel
            else metric_names(metrics, self.settings, streaming=True)
        )
        self.num_threads = check_num_threads(num_threads)
        self.plan = plan(self.metrics, self.settings)
        # update() may be called from several threads: the kernel runs outside the lock, only
        # adding its sums into the state takes it (an unguarded `a = a + b` lost updates).
        self._lock = threading.Lock()
        self.statistics: CalibrationStatistics | list[CalibrationStatistics] | None = None
        self._batches = 0  # updates so far, to name the batch of a bad value

    # One attribute per setting, as before the settings object (read-only).
    from_logits = property(lambda self: self.settings.from_logits)
    ignore_index = property(lambda self: self.settings.ignore_index)
    next_token = property(lambda self: self.settings.next_token)
    n_bins = property(lambda self: self.settings.n_bins)
    ace_ranges = property(lambda self: self.settings.ace_ranges)
    sce_bins = property(lambda self: self.settings.sce_bins)
    rbece_bins = property(lambda self: self.settings.rbece_bins)
    theta = property(lambda self: self.settings.theta)
    fce_bins = property(lambda self: self.settings.fce_bins)
    fce_variant = property(lambda self: self.settings.fce_variant)
    esce_bins = property(lambda self: self.settings.esce_bins)
    eps = property(lambda self: self.settings.eps)

    def __getstate__(self) -> dict[str, Any]:  # a lock does not pickle (evaluate, multiprocessing)
        """Return the state to pickle, without the lock (evaluate and multiprocessing pickle accumulators)."""
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a pickled state, with a new lock."""
        state.setdefault("_batches", 0)  # pickled by a calibkit that did not count batches
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def add_statistics(self, stats: CalibrationStatistics | list[CalibrationStatistics]) -> CalibrationAccumulator:
        """Add statistics filled with this accumulator's metrics and settings.

        Parameters
        ----------
        stats : CalibrationStatistics, or list of them (one per label) with ``multilabel``
            From :func:`~calibkit.compute_statistics` (or another accumulator) with the same metrics and
            settings.

        Returns
        -------
        CalibrationAccumulator
            ``self``, for chaining.

        Raises
        ------
        ValueError
            When ``stats`` is not statistics, or has other classes than the earlier batches.
        """
        if self.settings.multilabel:
            return self._add_labels(stats)
        if not isinstance(stats, CalibrationStatistics):
            raise ValueError(f"`stats` must be a CalibrationStatistics, got {type(stats).__name__}")
        with self._lock:
            if self.statistics is None:
                self.statistics = stats
            else:
                if stats.num_classes != self.statistics.num_classes or stats.binary != self.statistics.binary:
                    raise ValueError(
                        f"`probs` has {stats.num_classes} classes (binary={stats.binary}) but earlier batches had "
                        f"{self.statistics.num_classes} (binary={self.statistics.binary})"
                    )
                self.statistics = self.statistics + stats
        return self

    def _add_labels(self, stats: Any) -> CalibrationAccumulator:
        """:meth:`add_statistics` of multi-label sums: one statistics per label, added label by label."""
        if not isinstance(stats, list) or not all(isinstance(s, CalibrationStatistics) for s in stats):
            raise ValueError(
                f"`stats` must be a list of CalibrationStatistics (one per label), got {type(stats).__name__}"
            )
        with self._lock:
            if self.statistics is None:
                self.statistics = list(stats)
            elif len(stats) != len(self.statistics):
                raise ValueError(f"`probs` has {len(stats)} labels but earlier batches had {len(self.statistics)}")
            else:
                self.statistics = [a + b for a, b in zip(self.statistics, stats)]
        return self

    def update(self, probs: Any, labels: Any) -> CalibrationAccumulator:
        """Add a batch of predictions.

        Parameters
        ----------
        probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
            Probabilities, or logits when the accumulator was built with ``from_logits=True``.
        labels : array-like of int, shape (N,) or (N, L)
            True classes, ``ignore_index`` for the positions to skip.

        Returns
        -------
        CalibrationAccumulator
            ``self``, for chaining.

        Raises
        ------
        ValueError
            On bad input (as :func:`calibkit.calibration_report`), or a class count that differs
            from the earlier batches.
        """
        if self.settings.multilabel:
            values, targets = check_multilabel(probs, labels, self.ignore_index)
            return self.add_statistics(label_statistics(values, targets, self.metrics, self.settings, self.num_threads))
        with self._lock:
            batch, self._batches = self._batches, self._batches + 1
        prep = prepare_for(probs, labels, self.settings)
        earlier = self.statistics
        # Before the pass: a vocabulary that changed would otherwise read as bad labels.
        if earlier is not None and earlier.num_classes != prep.num_classes:
            raise ValueError(
                f"`probs` of batch {batch} (counting from 0) has {prep.num_classes} classes but earlier batches "
                f"had {earlier.num_classes}"
            )
        try:
            filled = fill_statistics(
                prep,
                self.plan,
                ignore_index=self.ignore_index,
                num_threads=self.num_threads,
                keep_on_device=on_device(prep.values),  # the sums of CUDA batches stay there until compute()
            )
        except InputError as exc:  # which batch, besides where in it
            raise InputError(exc.head, exc.index, exc.position, exc.tail, batch=batch) from None
        if self.settings.next_token and filled.statistics.n == 0:
            raise ValueError(
                f"batch {batch} (counting from 0) has no token to score: with next_token=True the logits at "
                f"position t are scored against `labels[:, t + 1]`, and every one of those is "
                f"ignore_index={self.ignore_index} (give `labels` unshifted: the input ids, with "
                f"ignore_index on padding and prompt)"
            )
        return self.add_statistics(filled.statistics)

    def all_reduce(self, group: Any = None) -> CalibrationAccumulator:
        """Sum the statistics of every process of a ``torch.distributed`` group into each of them.

        One ``all_reduce`` of the O(bins x classes) sums: a multi-GPU evaluation never gathers
        its logits. Every process must have seen at least one batch (the sums' shapes come from
        the data) and call this, with the same metrics and settings.

        Parameters
        ----------
        group : torch.distributed.ProcessGroup, optional
            Default: the whole world.

        Returns
        -------
        CalibrationAccumulator
            ``self``, for chaining.

        Raises
        ------
        ValueError
            When this process has no batch yet.
        """
        import torch
        import torch.distributed as dist

        with self._lock:
            stats = self.statistics
        if stats is None:
            raise ValueError("all_reduce: this process has no batch yet; update() every process before reducing")
        parts = stats if isinstance(stats, list) else [stats]  # multi-label: one statistics per label
        scalars = parts[0].scalars
        device = scalars.device if isinstance(scalars, torch.Tensor) else torch.device("cpu")
        if dist.get_backend(group) == "nccl" and device.type != "cuda":
            device = torch.device("cuda", torch.cuda.current_device())
        if parts[0].top_classes is not None:  # a vocabulary's tables: the rows any process has
            seen = [None] * dist.get_world_size(group)
            rows = types.SimpleNamespace(top_classes=parts[0].top_classes, classwise_classes=parts[0].classwise_classes)
            dist.all_gather_object(seen, rows, group=group)
            parts = [parts[0].with_rows(*seen)]
        parts = [p.to_torch(device) for p in parts]
        fields = [(p, name) for p in parts for name in ADDITIVE_FIELDS]
        flat = torch.cat([getattr(p, name).reshape(-1) for p, name in fields])  # one collective, not one a field
        dist.all_reduce(flat, group=group)
        offset = 0
        for p, name in fields:
            value = getattr(p, name)
            setattr(p, name, flat[offset : offset + value.numel()].reshape(value.shape))
            offset += value.numel()
        with self._lock:
            self.statistics = parts if isinstance(stats, list) else parts[0]
        return self

    def merge(self, other: CalibrationAccumulator) -> CalibrationAccumulator:
        """Add the statistics of another accumulator built with the same metrics and settings.

        Parameters
        ----------
        other : CalibrationAccumulator
            Another process's or shard's accumulator; it is not changed.

        Returns
        -------
        CalibrationAccumulator
            ``self``, for chaining.

        Raises
        ------
        ValueError
            When ``other`` is this accumulator or was built with other metrics or settings.
        """
        if not isinstance(other, CalibrationAccumulator):
            raise ValueError(f"`other` must be a CalibrationAccumulator, got {type(other).__name__}")
        if other is self:
            raise ValueError("`other` is this accumulator: merging it into itself would count its data twice")
        mismatch = ["metrics"] if self.metrics != other.metrics else []
        mine, theirs = self.settings.as_dict(), other.settings.as_dict()
        mismatch += [name for name in mine if mine[name] != theirs[name]]
        if mismatch:
            raise ValueError(f"`other` was built with different settings: {mismatch}")
        snapshot = other.statistics  # replaced, never changed in place, by add_statistics: a consistent read
        if snapshot is not None:
            self.add_statistics(snapshot)
        return self

    def reset(self) -> None:
        """Forget every batch."""
        with self._lock:
            self.statistics = None
            self._batches = 0

    def compute(self, *, ace_partials: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, Any]:
        """Every requested metric from the accumulated sums (see :func:`calibkit.calibration_report`).

        Parameters
        ----------
        ace_partials : tuple of ndarray, optional
            The exact sums where a range boundary cuts an ACE bucket, from
            ``calibkit.metrics.exact_ace.ExactACE.partials()`` (further passes over the same
            data); ACE is then exact and ``ace_error_bound`` 0.

        Returns
        -------
        dict
            As :func:`calibkit.calibration_report`; with ``multilabel``, as
            :func:`calibkit.multilabel_report`.
        """
        stats = self.statistics
        if isinstance(stats, list):
            if sum(s.n for s in stats) == 0:
                raise ValueError(NO_DECISION.format(self.ignore_index))
            return report_from_label_statistics([s.to_numpy() for s in stats], self.metrics, self.settings)
        if stats is None or stats.n == 0:
            raise ValueError(NO_SAMPLE.format(self.ignore_index))
        return report_from_statistics(stats.to_numpy(), self.metrics, self.settings, ace_partials=ace_partials)
