"""Bootstrap confidence intervals for every metric, from additive statistics.

The statistics of a data set are the sum of the statistics of its parts, so a bootstrap
replicate needs no new pass over the data: split the rows into ``G`` random blocks, compute
each block's statistics once (one pass over the data in total), draw Poisson(1) weights per
block and replicate (the Poisson bootstrap), and a replicate's statistics are the weighted sum
of the blocks' (one matrix product for all replicates). Each replicate's metrics are then the
same formulas as :func:`calibkit.calibration_report` on those sums.

With ``G`` equal to the number of rows this is the Poisson bootstrap of single samples; with
fewer blocks (large data, or many classes, to bound memory) it resamples random groups of
rows, which are i.i.d. units too. Token input ``(N, L, K)`` is resampled by sequence: the tokens
of a sentence are not independent (one confident mistake repeats along it), and resampling
tokens gave intervals several times too narrow; a block is then one or more whole sequences.
ACE intervals use the histogram ACE of the accumulator (its error bound is in
``ace_error_bound``), since quantiles move with every replicate.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from calibkit.metrics import _kernels as kernels
from calibkit.metrics.engines import fill_statistics
from calibkit.metrics.multilabel import (
    LABEL_SUMMARIES,
    NO_DECISION,
    at_label,
    check_multilabel,
    label_metric_names,
    report_from_label_statistics,
)
from calibkit.metrics.registry import metric, metric_names, plan, report_from_statistics
from calibkit.metrics.rejection import MAX_REJECTION, check_rejection_settings, rank_rows, rejection_from_weights
from calibkit.metrics.report import NO_SAMPLE
from calibkit.metrics.sampling import (  # MAX_REPLICATES: kept importable from here
    MAX_REPLICATES,  # noqa: F401
    SAMPLING_UNSET,
    SamplingSettings,
    resolve_sampling,
    sampling_keywords,
)
from calibkit.metrics.settings import DEFAULTS, UNSET, CalibrationSettings, renamed, resolve_settings, settings_keywords
from calibkit.metrics.statistics import ADDITIVE_FIELDS, CalibrationStatistics, SumsPlan, top_slots
from calibkit.metrics.validation import PreparedInput, check_positive_int, prepare_for

__all__ = ["bootstrap_intervals", "rejection_intervals"]

_BLOCK_MEMORY = 256 * 2**20  # bytes of per-block statistics held at once
_REPLICATE_CHUNK = 64
_REJECTION_ENTRIES = 1 << 22  # answer weights of the rejection replicates held at once


def bootstrap_intervals(
    probs: Any,
    labels: Any,
    *,
    bootstrap: int = SAMPLING_UNSET.bootstrap,
    level: float = SAMPLING_UNSET.level,
    seed: int = SAMPLING_UNSET.seed,
    max_blocks: int = 4000,
    metrics: tuple[str, ...] | None = None,
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
    settings: CalibrationSettings | None = None,
    sampling: SamplingSettings | None = None,
    n_boot: int | None = None,
    confidence: float | None = None,
) -> dict[str, Any]:
    """Compute percentile bootstrap intervals of every metric (and of each class's ECE).

    Parameters
    ----------
    probs, labels, metrics, from_logits, multilabel, next_token, ignore_index
        As in :func:`calibkit.calibration_report` (``next_token``: causal-LM logits ``(N, T, V)``,
        resampled by sequence like token input).
    bootstrap : int, default 1000
        Bootstrap replicates (at least 1, at most ``MAX_REPLICATES``).
    level : float, default 0.95
        Two-sided level of the percentile intervals.
    seed : int, default 0
        Seed of the block permutation and of the Poisson weights.
    max_blocks : int, default 4000
        Upper bound on the resampled blocks (rows are single blocks when there are fewer).
        Token input ``(N, L, K)`` is resampled by sequence: a block holds whole sequences (a
        sequence is its own block when there are at most ``max_blocks``).
    n_bins, ace_ranges, sce_bins, rbece_bins, theta, fce_bins, esce_bins, eps, fce_variant, coverage, settings
        As in :func:`calibkit.calibration_report` (``fce_variant="authors"``: FCE as the
        fuzzy-binning authors' code computes it, see :func:`calibkit.fce`).
    sampling : SamplingSettings, optional
        ``bootstrap``, ``level`` and ``seed`` as one object (:class:`calibkit.metrics.sampling.SamplingSettings`),
        instead of the keywords.
    n_boot, confidence : optional
        Deprecated names of ``bootstrap`` and ``level`` (a ``FutureWarning``).

    Returns
    -------
    dict
        ``{"intervals": {metric: (low, high)}, "subset_ece": (low_per_class, high_per_class),
        "n_boot", "n_blocks", "confidence"}`` (``n_blocks``: the resampled units, rows or for
        token input sequences, or groups of them). With ``multilabel=True``: ``"intervals"`` holds
        ``{"macro": {metric: (low, high)}, "weighted": ..., "micro": ...}`` and the class-wise
        summaries over labels (``"cece": (low, high)``, ...), ``"per_label"`` ``{metric: (low,
        high)}`` of arrays ``(K,)``; rows are resampled, every label of a row together.

    Raises
    ------
    ValueError
        On bad input or settings, or when no sample remains after masking.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> p = rng.dirichlet(np.ones(3), 2000)
    >>> y = (p.cumsum(1) > rng.random((2000, 1))).argmax(1)  # calibrated
    >>> ci = bootstrap_intervals(p, y, bootstrap=200)
    >>> low, high = ci["intervals"]["esce"]
    >>> bool(low < 0 < high)
    True
    """
    bootstrap = renamed("n_boot", n_boot, "bootstrap", bootstrap, "bootstrap_intervals()")
    level = renamed("confidence", confidence, "level", level, "bootstrap_intervals()")
    sampling = resolve_sampling(sampling, **sampling_keywords(locals()))
    n_boot, confidence, seed = sampling.require("bootstrap"), sampling.level, sampling.seed
    max_blocks = check_positive_int(max_blocks, "max_blocks")
    keywords = settings_keywords(locals())
    settings = resolve_settings(settings, **keywords)
    if settings.multilabel:
        return _multilabel_intervals(probs, labels, metrics, settings, n_boot, confidence, max_blocks, seed)
    wanted = metric_names(metrics, settings, streaming=True)
    prep = prepare_for(probs, labels, settings)
    rng = np.random.default_rng(seed)
    stacked, probe = _block_statistics(prep, plan(wanted, settings), settings.ignore_index, max_blocks, rng)
    blocks = stacked["scalars"].shape[0]
    scalars = [m for m in wanted if m == "accuracy" or not metric(m).per_class]
    scalars += [] if "accuracy" in scalars else ["accuracy"]
    values, per_class = _replicates(stacked, probe, wanted, scalars, settings, n_boot, rng)
    tail = 100 * (1 - confidence) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # all-NaN columns (e.g. RBECE with no bin above theta)
        intervals = {m: tuple(float(v) for v in np.nanpercentile(values[m], [tail, 100 - tail])) for m in scalars}
        intervals["accuracy"] = intervals.pop("accuracy")  # last, as in every report
        sides = np.nanpercentile(per_class, [tail, 100 - tail], axis=0) if "subset_ece" in wanted else ()
    out = {"intervals": intervals, "n_boot": n_boot, "n_blocks": blocks, "confidence": confidence}
    if "subset_ece" in wanted:
        out["subset_ece"] = tuple(probe.by_label(side, np.nan) for side in sides)
    return out


def _block_statistics(
    prep: PreparedInput, sums: SumsPlan, ignore_index: int, max_blocks: int, rng: np.random.Generator
) -> tuple[dict[str, np.ndarray], CalibrationStatistics]:
    """Cut the rows into random blocks (as many as memory allows) and stack each block's sums.

    Returns the stacked fields, ``(blocks, ...)`` each, and empty statistics of the same shape.
    """
    rows = prep.values.shape[0]
    # the unit of resampling: a row, or for token input (N, L, K) a sequence of L rows
    unit = prep.original_shape[1] if len(prep.original_shape) == 3 else 1
    units = rows // unit if unit else 0
    binary = prep.mode >= kernels.MODE_BINARY_PROBS
    classes = None if binary else top_slots(prep.labels, prep.num_classes, ignore_index)[0]
    probe = CalibrationStatistics.zeros(
        prep.num_classes, binary, sums.top_bins, sums.fuzzy_bins, sums.classwise_bins, sums.groups, classes
    )
    if probe.classwise_classes is not None:  # a vocabulary's class-wise rows: at most K, most often fewer
        probe.classwise = np.zeros((prep.num_classes, sums.classwise_bins, 3))
    block_bytes = sum(getattr(probe, name).nbytes for name in ADDITIVE_FIELDS)
    blocks = max(1, min(units, max_blocks, _BLOCK_MEMORY // block_bytes))
    if blocks < units:  # random blocks: permute the units once (a copy), then cut
        order = (rng.permutation(units)[:, None] * unit + np.arange(unit)).reshape(-1)
        prep = PreparedInput(prep.values[order], prep.labels[order], prep.mode, prep.num_classes, prep.original_shape)
    edges = np.linspace(0, units, blocks + 1).astype(np.int64) * unit
    parts = fill_statistics(
        prep,
        sums,
        ignore_index=ignore_index,
        ranges=[(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])],
        keep_parts=True,
    ).parts
    if sum(p.n for p in parts) == 0:  # as calibration_report: no interval of nothing
        raise ValueError(NO_SAMPLE.format(ignore_index))
    probe.classwise_classes = parts[0].classwise_classes  # the blocks share their rows (on_same_rows)
    return {name: np.stack([getattr(p, name) for p in parts]) for name in ADDITIVE_FIELDS}, probe


def _replicates(
    stacked: dict[str, np.ndarray],
    probe: CalibrationStatistics,
    wanted: tuple[str, ...],
    scalars: list[str],
    settings: CalibrationSettings,
    n_boot: int,
    rng: np.random.Generator,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every replicate's metrics: Poisson(1) weights per block, the weighted sums, the formulas.

    Returns each scalar metric's ``n_boot`` values and, when ``subset_ece`` is wanted, the per-class
    ECE of each replicate (NaN where a replicate drew no sample) for the classes of
    ``probe.table_classes`` (over a vocabulary, those with a label: ``n_boot x V`` would not fit).
    """
    blocks = stacked["scalars"].shape[0]
    values = {m: np.full(n_boot, np.nan) for m in scalars}
    columns = probe.table_classes if "subset_ece" in wanted else np.empty(0, dtype=np.int64)
    per_class = np.full((n_boot, len(columns)), np.nan)
    for start in range(0, n_boot, _REPLICATE_CHUNK):
        # drawn chunk by chunk: n_boot x blocks weights at once would be 3 GB at 1e5 x 4000
        chunk = rng.poisson(1.0, size=(min(_REPLICATE_CHUNK, n_boot - start), blocks)).astype(np.float64)
        summed = {name: np.tensordot(chunk, f, axes=(1, 0)) for name, f in stacked.items()}
        for j in range(chunk.shape[0]):  # formulas on small tables; the data is not read again
            stats = CalibrationStatistics(
                num_classes=probe.num_classes,
                binary=probe.binary,
                top_bins=probe.top_bins,
                has=probe.has,
                top_classes=probe.top_classes,
                classwise_classes=probe.classwise_classes,
                **{name: summed[name][j] for name in ADDITIVE_FIELDS},
            )
            if stats.scalars[0] == 0:
                continue
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                report = report_from_statistics(stats, wanted, settings)
            for m in scalars:
                if m in report:
                    values[m][start + j] = report[m]
            if "subset_ece" in report:
                per_class[start + j] = report["subset_ece"][columns]
    return values, per_class


def _multilabel_intervals(
    probs: Any,
    labels: Any,
    metrics: Any,
    settings: CalibrationSettings,
    n_boot: int,
    confidence: float,
    max_blocks: int,
    seed: int,
) -> dict[str, Any]:
    """Bootstrap of the multi-label report: the same row blocks and Poisson weights for every label."""
    values, targets = check_multilabel(probs, labels, settings.ignore_index)
    names = label_metric_names(metrics)
    single = settings.replace(multilabel=False)
    sums = plan(tuple(dict.fromkeys(names + ("ece",))), single)
    rng = np.random.default_rng(seed)
    rows, k = values.shape
    probe = CalibrationStatistics.zeros(2, True, sums.top_bins, sums.fuzzy_bins, sums.classwise_bins, sums.groups)
    per_block = k * sum(getattr(probe, name).nbytes for name in ADDITIVE_FIELDS)
    blocks = max(1, min(rows, max_blocks, _BLOCK_MEMORY // per_block))
    if blocks < rows:  # random blocks: permute the rows once, then cut
        order = rng.permutation(rows)
        values, targets = values[order], targets[order]
    edges = np.linspace(0, rows, blocks + 1).astype(np.int64)
    ranges = [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]
    stacked = []
    for j in range(k):  # a loop over labels: each label's block sums in one pass
        with at_label(j):  # a bad value is placed at (row, label)
            prep = prepare_for(values[:, j], targets[:, j], single)
            parts = fill_statistics(prep, sums, ignore_index=single.ignore_index, ranges=ranges, keep_parts=True).parts
        stacked.append({name: np.stack([getattr(p, name) for p in parts]) for name in ADDITIVE_FIELDS})
    if sum(s["scalars"][:, 0].sum() for s in stacked) == 0:
        raise ValueError(NO_DECISION.format(settings.ignore_index))
    draws: list[dict[str, Any]] = []
    for start in range(0, n_boot, _REPLICATE_CHUNK):
        chunk = rng.poisson(1.0, size=(min(_REPLICATE_CHUNK, n_boot - start), blocks)).astype(np.float64)
        summed = [{name: np.tensordot(chunk, f, axes=(1, 0)) for name, f in s.items()} for s in stacked]
        for r in range(chunk.shape[0]):  # formulas on small tables; the data is not read again
            label_stats = [
                CalibrationStatistics(
                    num_classes=2,
                    binary=True,
                    top_bins=probe.top_bins,
                    has=probe.has,
                    **{name: s[name][r] for name in ADDITIVE_FIELDS},
                )  # fmt: skip
                for s in summed
            ]
            if sum(s.n for s in label_stats) == 0:
                continue
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                draws.append(report_from_label_statistics(label_stats, names, single))
    tail = 100 * (1 - confidence) / 2
    if not draws:  # no replicate drew a decision (a handful of rows): NaN intervals, as the single-label bootstrap
        nan, k = (float("nan"), float("nan")), values.shape[1]
        intervals = {avg: dict.fromkeys(names, nan) for avg in ("macro", "weighted", "micro")}
        intervals.update(dict.fromkeys(LABEL_SUMMARIES, nan))
        per_label = {m: (np.full(k, np.nan), np.full(k, np.nan)) for m in names}
        return {"intervals": intervals, "per_label": per_label, "n_boot": n_boot, "n_blocks": blocks,
                "confidence": confidence}  # fmt: skip

    def interval(samples: list[Any]) -> Any:
        low, high = np.nanpercentile(np.asarray(samples, dtype=np.float64), [tail, 100 - tail], axis=0)
        return (float(low), float(high)) if np.ndim(low) == 0 else (low, high)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # all-NaN columns (a label with no decision drawn)
        intervals: dict[str, Any] = {
            avg: {m: interval([d[avg][m] for d in draws]) for m in names} for avg in ("macro", "weighted", "micro")
        }
        summaries = [key for key, v in draws[0].items() if isinstance(v, float)]  # cece, msece, ... over labels
        intervals.update({key: interval([d[key] for d in draws]) for key in summaries})
        per_label = {m: interval([d["per_label"][m] for d in draws]) for m in names}
    return {"intervals": intervals, "per_label": per_label, "n_boot": n_boot, "n_blocks": blocks,
            "confidence": confidence}  # fmt: skip


def rejection_intervals(
    confidence: Any,
    quality: Any,
    *,
    bootstrap: int = SAMPLING_UNSET.bootstrap,
    level: float = SAMPLING_UNSET.level,
    seed: int = SAMPLING_UNSET.seed,
    threshold: float = SAMPLING_UNSET.threshold,
    max_rejection: float = MAX_REJECTION,
    coverage: float = DEFAULTS.coverage,
    risk: float = DEFAULTS.abstention_alpha,
    sampling: SamplingSettings | None = None,
) -> dict[str, Any]:
    """Compute percentile bootstrap intervals of the rejection metrics, resampling answers (questions).

    Each replicate weighs every answer by a Poisson(1) draw (the Poisson bootstrap, as
    :func:`bootstrap_intervals`), seeded by ``seed``; the answers are sorted once and a replicate's
    metrics are sums in that order (:func:`calibkit.metrics.rejection.rejection_from_weights`).

    Parameters
    ----------
    confidence, quality : array-like of shape (n,)
        As :func:`calibkit.metrics.rejection.rejection_metrics`: one answer a question.
    bootstrap : int, default 1000
        Replicates (at least 1).
    level : float, default 0.95
        Two-sided level of the percentile intervals.
    seed : int, default 0
    threshold : float, default 0.5
        A quality below this is a wrong answer (ROC AUC, average precision).
    max_rejection, coverage, risk : float
        As :func:`calibkit.metrics.rejection.rejection_metrics` (0.5, 0.8, 0.1).
    sampling : SamplingSettings, optional
        ``bootstrap``, ``level``, ``seed`` and ``threshold`` as one object, instead of the keywords.

    Returns
    -------
    dict
        ``{"intervals": {metric: (low, high)}, "n_boot", "confidence"}``; an interval is NaN where
        no replicate defines its metric (a replicate that draws no wrong answer has no ROC AUC).

    Raises
    ------
    ValueError
        On bad input or settings, naming the argument.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> c = rng.random(500)
    >>> right = (rng.random(500) < c).astype(float)
    >>> low, high = rejection_intervals(c, right, bootstrap=200)["intervals"]["roc_auc"]
    >>> bool(0.5 < low < high < 1)
    True
    """
    sampling = resolve_sampling(sampling, **sampling_keywords(locals()))
    n_boot, confidence_level = sampling.require("bootstrap"), sampling.level
    max_rejection, coverage, risk = check_rejection_settings(max_rejection, coverage, risk)
    rows = rank_rows(confidence, quality, sampling.threshold)
    rng = np.random.default_rng(sampling.seed)
    chunk_size = max(1, min(_REPLICATE_CHUNK, _REJECTION_ENTRIES // len(rows)))
    draws: dict[str, list[np.ndarray]] = {}
    for start in range(0, n_boot, chunk_size):  # a loop over chunks of replicates; each is vectorised
        weights = rng.poisson(1.0, size=(min(chunk_size, n_boot - start), len(rows))).astype(np.float64)
        values = rejection_from_weights(rows, weights, max_rejection=max_rejection, coverage=coverage, risk=risk)
        for name, v in values.items():
            draws.setdefault(name, []).append(v)
    tail = 100 * (1 - confidence_level) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # all-NaN: a metric no replicate defines
        intervals = {
            m: tuple(float(b) for b in np.nanpercentile(np.concatenate(v), [tail, 100 - tail]))
            for m, v in draws.items()
        }
    return {"intervals": intervals, "n_boot": n_boot, "confidence": confidence_level}
