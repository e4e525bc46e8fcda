"""calibkit's metrics as a ``torchmetrics.Metric``, for Lightning: the accumulator's sums as its states.

``torchmetrics.classification.CalibrationError`` keeps every row's confidence and correctness and
gathers them all across processes; :class:`CalibrationMetrics` keeps the per-bin sums of
:class:`calibkit.CalibrationAccumulator` (one float64 state, ``dist_reduce_fx="sum"``), so a
distributed sync moves O(bins x classes) numbers whatever the number of rows, and ``compute()``
returns every metric of :func:`calibkit.calibration_report` from them (computed by the registry,
never re-derived here).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import numpy as np
import torch
from torchmetrics import Metric

from calibkit.metrics.accumulator import CalibrationAccumulator
from calibkit.metrics.registry import metric, metric_names
from calibkit.metrics.settings import UNSET, CalibrationSettings, resolve_settings, settings_keywords
from calibkit.metrics.statistics import ADDITIVE_FIELDS, CalibrationStatistics

__all__ = ["CalibrationMetrics"]

VOCABULARY = (
    "`probs` has {} classes: from 2,048 classes on calibkit keeps table rows for the labels that occur "
    "only, which differ between processes and cannot be one summed state; reduce a "
    "calibkit.CalibrationAccumulator with its all_reduce() instead"
)


def _parts(stats: Any) -> list[CalibrationStatistics]:
    """Return the statistics of a batch as a list (one per label with ``multilabel``, else one)."""
    return list(stats) if isinstance(stats, list) else [stats]


def _zeros_like(stats: CalibrationStatistics) -> CalibrationStatistics:
    """Statistics of the same layout as ``stats`` with every sum zero, of the same kind (numpy or torch)."""
    zeros = {
        name: torch.zeros_like(value) if isinstance(value, torch.Tensor) else np.zeros_like(value)
        for name in ADDITIVE_FIELDS
        for value in (getattr(stats, name),)
    }
    return dataclasses.replace(stats, **zeros)


def _as_tensors(report: dict[str, Any]) -> dict[str, Any]:
    """Return ``report`` with every number and array a float64 tensor (nested dicts: multi-label averages)."""
    return {
        key: _as_tensors(value) if isinstance(value, dict) else torch.as_tensor(np.asarray(value, dtype=np.float64))
        for key, value in report.items()
    }


class CalibrationMetrics(Metric):
    """calibkit's calibration metrics as a ``torchmetrics.Metric``, synced as per-bin sums.

    The states are the sufficient statistics of :class:`calibkit.CalibrationAccumulator`
    (``calibkit.metrics.statistics.CalibrationStatistics``): per-bin counts and sums that add
    across batches and processes, flattened into one float64 tensor registered with
    ``dist_reduce_fx="sum"``. A DDP sync therefore moves O(bins x classes) numbers (a few
    kilobytes without ACE's fine buckets, about 25 KB a class with them), where
    ``torchmetrics``' ``CalibrationError`` gathers every row. ``compute()`` returns what
    :func:`calibkit.calibration_report` returns on the concatenated data of every batch and
    process, as float64 tensors (so that Lightning logs them without rounding), except ACE, which
    streams within ``ace_error_bound`` (as the accumulator's).

    Every process must have seen at least one batch before a sync (Lightning's distributed sampler
    gives each one its share): the sums' shapes come from the data.

    Parameters
    ----------
    metrics : iterable of str, optional
        The metrics to compute. Default: those of :data:`calibkit.METRICS` with one value (what
        ``self.log_dict`` takes), without ``subset_ece`` (an array, one value per class: asked for
        by name, it is a tensor of one value per class). The metrics that need every row (smECE,
        the score decomposition) are refused with a ``ValueError``, as at every streaming door.
    settings : CalibrationSettings, optional
        All settings at once; or give them as keywords (not both).
    from_logits : bool, optional
        The inputs are logits (softmax, or a sigmoid for 1-D binary input); None is False.
    multilabel : bool, optional
        Multi-label batches (see :class:`calibkit.CalibrationAccumulator`); None is False.
    next_token : bool, optional
        Causal-LM batches, logits ``(N, T, V)`` scored against ``labels[:, t + 1]``; None is False.
        A vocabulary of 2,048 classes or more is refused (see ``Raises``).
    ignore_index : int, default -100
        Label of the positions to skip (token classification's padding).
    n_bins : int, default 15
        See :class:`~calibkit.metrics.settings.CalibrationSettings`.
    ace_ranges : int, default 15
        See :class:`~calibkit.metrics.settings.CalibrationSettings`.
    sce_bins : int, default 15
        See :class:`~calibkit.metrics.settings.CalibrationSettings`.
    rbece_bins : int, default 20
        See :class:`~calibkit.metrics.settings.CalibrationSettings`.
    theta : float, default 40
        See :class:`~calibkit.metrics.settings.CalibrationSettings`.
    fce_bins : int, default 15
        See :class:`~calibkit.metrics.settings.CalibrationSettings`.
    esce_bins : int, default 10
        See :class:`~calibkit.metrics.settings.CalibrationSettings`.
    eps : float, default 1e-12
        See :class:`~calibkit.metrics.settings.CalibrationSettings`.
    fce_variant : str, default "paper"
        See :class:`~calibkit.metrics.settings.CalibrationSettings`.
    coverage : float, default 0.8
        See :class:`~calibkit.metrics.settings.CalibrationSettings`.
    num_threads : int, optional
        Threads of each update's pass (default: the CPUs available).
    **kwargs
        ``torchmetrics.Metric``'s own (``sync_on_compute``, ``process_group``, ...).

    Raises
    ------
    ValueError
        Naming the argument: a setting out of range, a keyword given with ``settings``, an unknown
        or a held metric (``metrics``); at ``update``, bad input, a class count that changes
        between batches, or a vocabulary of 2,048 classes or more (reduce a
        :class:`calibkit.CalibrationAccumulator` with its ``all_reduce`` there).

    Examples
    --------
    >>> import torch
    >>> metric = CalibrationMetrics(metrics=["ece", "brier"], n_bins=10)
    >>> metric.update(torch.tensor([[0.9, 0.1], [0.2, 0.8]], dtype=torch.float64), torch.tensor([0, 1]))
    >>> metric.update(torch.tensor([[0.6, 0.4], [0.3, 0.7]], dtype=torch.float64), torch.tensor([1, 1]))
    >>> round(float(metric.compute()["ece"]), 4)
    0.3

    In a ``LightningModule``: ``self.calibration.update(logits, labels)`` in ``validation_step``,
    then ``self.log_dict(self.calibration.compute())`` and ``self.calibration.reset()`` in
    ``on_validation_epoch_end``.
    """

    is_differentiable = False
    higher_is_better = False
    full_state_update = False
    sums: torch.Tensor

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
        fce_variant: str = UNSET.fce_variant,
        coverage: float = UNSET.coverage,
        num_threads: int | None = None,
        **kwargs: Any,
    ) -> None:
        given = settings_keywords(locals())
        super().__init__(**kwargs)
        resolved = resolve_settings(settings, **given)
        if metrics is None and not resolved.multilabel:  # one value each: what self.log_dict takes
            metrics = [m for m in metric_names(None, resolved, streaming=True) if not metric(m).per_class]
        # The accumulator checks the metrics and the input and turns a batch into its sums: one
        # door's checks, not a copy of them.
        self._accumulator = CalibrationAccumulator(metrics, settings=resolved, num_threads=num_threads)
        self.settings = resolved
        self.metrics = self._accumulator.metrics
        # The layout of the flat sums, from the first batch; kept by reset() (forward() resets between
        # the global and the batch state, which must keep one layout).
        self._template: list[CalibrationStatistics] | None = None
        self.add_state("sums", default=torch.zeros(0, dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, probs: Any, labels: Any) -> None:
        """Add a batch: its sums are added to the state.

        Parameters
        ----------
        probs : torch.Tensor or array-like of shape (N,), (N, K) or (N, L, K)
            Probabilities, or logits with ``from_logits=True`` (``(N, T, V)`` with ``next_token``).
        labels : torch.Tensor or array-like of int, shape (N,) or (N, L)
            True classes, ``ignore_index`` for the positions to skip.

        Raises
        ------
        ValueError
            On bad input (as :func:`calibkit.calibration_report`), a class count that differs from
            the earlier batches, or a vocabulary of 2,048 classes or more.
        """
        acc = self._accumulator
        # Zero sums of the earlier batches' layout: the accumulator compares the class count with
        # them and adds this batch's sums to zeros, so what it holds after is this batch alone.
        acc.statistics = None if self._template is None else self._template_of(self._template)
        acc.update(probs.detach() if isinstance(probs, torch.Tensor) else probs, labels)
        parts = _parts(acc.statistics)
        acc.statistics = None
        if parts[0].top_classes is not None:
            raise ValueError(VOCABULARY.format(parts[0].num_classes))
        on = [part.to_torch(self.sums.device) for part in parts]
        flat = torch.cat([getattr(part, name).reshape(-1) for part in on for name in ADDITIVE_FIELDS])
        if self._template is None:
            self._template = [_zeros_like(part.to_numpy()) for part in parts]
        self.sums = flat if self.sums.numel() == 0 else self.sums + flat

    def _template_of(self, template: list[CalibrationStatistics]) -> Any:
        """Return the zero statistics the accumulator starts a batch from (a list with ``multilabel``)."""
        return list(template) if self.settings.multilabel else template[0]

    def compute(self) -> dict[str, torch.Tensor]:
        """Every metric from the (synced) sums, as :func:`calibkit.calibration_report` on all the data.

        Returns
        -------
        dict of str to torch.Tensor
            The report's keys (with ``accuracy``, ``n``, ``num_classes`` and, with ACE,
            ``ace_error_bound``), each a float64 tensor on the CPU: 0-d for a scalar, one value per
            class for ``subset_ece``; with ``multilabel``, :func:`calibkit.multilabel_report`'s keys
            (its ``per_label``, ``macro``, ``weighted`` and ``micro`` dicts of tensors: log one of
            them, ``self.log_dict(report["macro"])``).

        Raises
        ------
        ValueError
            When no batch was added (or every label was ``ignore_index``).
        """
        if self.sums.numel() == 0:
            raise ValueError("no batch since the metric was built or reset: update() before compute()")
        if self._template is None:
            raise ValueError(
                "this process saw no batch, so the synced sums cannot be read: update() every process before compute()"
            )
        flat = self.sums.detach().cpu().numpy()
        parts, offset = [], 0
        for template in self._template:
            filled = {}
            for name in ADDITIVE_FIELDS:
                size = getattr(template, name).size
                filled[name] = flat[offset : offset + size].reshape(getattr(template, name).shape)
                offset += size
            parts.append(dataclasses.replace(template, **filled))
        acc = CalibrationAccumulator(self.metrics, settings=self.settings, num_threads=self._accumulator.num_threads)
        acc.statistics = parts if self.settings.multilabel else parts[0]
        report = acc.compute()
        return _as_tensors(report)

    def merge_state(self, incoming_state: dict[str, Any] | Metric) -> None:
        """Add another metric's sums (another process's or shard's), as ``torchmetrics.Metric.merge_state``.

        Parameters
        ----------
        incoming_state : CalibrationMetrics or dict
            A metric built with the same metrics and settings, or its ``metric_state``.
        """
        if isinstance(incoming_state, CalibrationMetrics) and self._template is None:
            self._template = incoming_state._template  # the layout of its sums, for a metric with none yet
        super().merge_state(incoming_state)

    def _reduce_states(self, incoming_state: dict[str, Any]) -> None:
        """Add another state (``forward``, ``merge_state``): an empty one (no batch yet) adds nothing.

        torchmetrics adds the tensors; the empty default of a state whose shape comes from the data
        would not broadcast against the sums.
        """
        self._computed = None  # torchmetrics' merge_state keeps a cached compute() of the sums before it
        incoming = incoming_state["sums"]
        if incoming.numel() == 0:
            return
        if self.sums.numel() == 0:
            self.sums = incoming.to(self.sums.device).clone()
            return
        super()._reduce_states(incoming_state)
