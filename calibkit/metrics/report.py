"""The one-shot door: the statistics of a batch, and every metric of it with ACE exact.

:func:`compute_statistics` fills the sums that some metrics need (one pass);
:func:`exact_report` is the path of the functional API and :func:`calibkit.calibration_report`,
which still holds the data and so makes ACE exact with a second pass over the samples of the
cut buckets. Both take a :class:`~calibkit.metrics.settings.CalibrationSettings`, ask the engines'
entry (``calibkit.metrics.engines.fill_statistics()``) for the sums and read the metric registry
(:mod:`calibkit.metrics.registry`); neither re-derives a formula.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from calibkit.metrics.engines import fill_statistics
from calibkit.metrics.registry import metric, metric_names, plan, report_from_statistics
from calibkit.metrics.settings import DEFAULTS, CalibrationSettings
from calibkit.metrics.smooth import smooth_rows
from calibkit.metrics.statistics import CalibrationStatistics
from calibkit.metrics.validation import PreparedInput

NO_SAMPLE = "`labels`: no sample to evaluate (empty input, or every label equals ignore_index={})"
"""The error when masking leaves nothing (``.format(ignore_index)``)."""


def compute_statistics(
    prep: PreparedInput,
    settings: CalibrationSettings = DEFAULTS,
    metrics: Iterable[str] | None = None,
    *,
    num_threads: int | None = None,
) -> CalibrationStatistics:
    """Compute the per-bin sums that ``metrics`` need, over one prepared batch.

    Parameters
    ----------
    prep : PreparedInput
        From ``calibkit.metrics.validation.prepare()`` (validated rows and labels).
    settings : CalibrationSettings
        Bin counts and conventions; ``settings.ignore_index`` masks labels.
    metrics : iterable of str, optional
        Names from :data:`calibkit.METRICS` (default: all); fewer metrics skip costlier sums.
    num_threads : int, optional
        Threads of the pass (default: the CPUs available).

    Returns
    -------
    CalibrationStatistics
        Additive: ``a + b`` is the statistics of both batches.
    """
    sums = plan(metric_names(metrics, settings), settings)
    return fill_statistics(prep, sums, ignore_index=settings.ignore_index, num_threads=num_threads).statistics


def exact_report(
    prep: PreparedInput,
    settings: CalibrationSettings = DEFAULTS,
    metrics: Iterable[str] | None = None,
    *,
    num_threads: int | None = None,
) -> tuple[dict[str, Any], CalibrationStatistics]:
    """Compute every metric of ``metrics`` on one prepared batch, ACE exact, and return the statistics too.

    One pass fills the sums; when ACE is asked for, a second pass copies only the samples of
    the fine buckets that an equal-mass range boundary cuts and sorts them (on rows of 16
    classes or more and up to 32 ``sce_bins``, also those a class-wise bin edge cuts: SCE's bins
    are then built from the ACE buckets instead of a second histogram in the first pass).

    Parameters
    ----------
    prep : PreparedInput
        From ``calibkit.metrics.validation.prepare()``.
    settings : CalibrationSettings
        Bin counts and conventions (SPEC.md's defaults).
    metrics : iterable of str, optional
        Names from :data:`calibkit.METRICS` (default: all, ACE by name only over a vocabulary or
        ``registry.WIDE_CLASSES`` classes or more, SPEC.md).
    num_threads : int, optional
        Threads of the passes (default: the CPUs available).

    Returns
    -------
    report : dict
        As :func:`calibkit.calibration_report`.
    statistics : CalibrationStatistics
        The sums of the first pass (for plots and per-bin tables).

    Raises
    ------
    ValueError
        When no sample remains after masking.
    """
    names = metric_names(metrics, settings, num_classes=prep.num_classes)  # ACE by name only from WIDE_CLASSES on
    sums = plan(names, settings)
    filled = fill_statistics(
        prep,
        sums,
        ignore_index=settings.ignore_index,
        exact_ace_ranges=settings.ace_ranges if "ace" in names else None,
        exact_selective="selective" in sums.groups,  # the rows are here: AURC exact too
        num_threads=num_threads,
    )
    stats = filled.statistics
    if stats.n == 0:
        raise ValueError(NO_SAMPLE.format(settings.ignore_index))
    held = smooth_rows(prep, settings.ignore_index) if any(metric(m).held for m in names) else None
    report = report_from_statistics(
        stats,
        names,
        settings,
        ace_partials=filled.ace_partials,
        selective_rows=filled.selective_rows,
        smooth_rows=held,  # the rows themselves: smECE
    )
    return report, stats
