"""The papers' comparison: every calibrator fitted on validation logits, every metric on test.

:func:`compare_calibrators` returns a :class:`Comparison` (methods x metrics, per-class ECE,
optional bootstrap intervals, the per-bin statistics the plots need). Both renderings read it:
:mod:`calibkit.verdicts.reporting` (tables, JSON, figures, the HTML page) and
:mod:`calibkit.verdicts.resplits`
(the same comparison on re-splits, with intervals and verdicts); neither is imported here.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calibkit.calibrators import make_calibrator
from calibkit.calibrators import registry as calibrator_registry
from calibkit.calibrators.base import softmax_rows
from calibkit.metrics import calibration_report, smooth_reliability
from calibkit.metrics import registry as metric_registry
from calibkit.metrics.accumulator import CalibrationAccumulator
from calibkit.metrics.bootstrap import bootstrap_intervals
from calibkit.metrics.sampling import OFF, SAMPLING_DEFAULTS
from calibkit.metrics.settings import DEFAULTS, CalibrationSettings
from calibkit.metrics.statistics import CalibrationStatistics
from calibkit.plots import RegionPlot, ReliabilityDiagram
from calibkit.verdicts.sequences import into_sequences, labelled_rows

__all__ = ["METHODS", "Comparison", "compare_calibrators"]

METHODS = (calibrator_registry.UNCALIBRATED, *calibrator_registry.NAMES)
METHOD_LABELS = calibrator_registry.LABELS
TABLE_METRICS = metric_registry.TABLE_METRICS
HIGHER_IS_BETTER = tuple(m for m in TABLE_METRICS if metric_registry.higher_is_better(m))
SIGNED = tuple(m for m in TABLE_METRICS if metric_registry.signed(m))  # 0 is calibrated
REPORTED = (*metric_registry.METRICS, *(m for m in TABLE_METRICS if m in metric_registry.HELD))
"""What the comparison asks of each method's test rows: the report, and the table's metrics that need the rows."""
CONFORMAL_SCORES = ("lac", "aps")
"""The conformity scores of the comparison's conformal sets (RAPS needs its own two settings)."""
CONFORMAL_LEVEL = 0.9
"""The confidence level of the comparison's conformal sets."""


@dataclass
class Comparison:
    """Methods x metrics on the test set, and what the plots and the calibrated model need.

    Parameters
    ----------
    rows : dict of str to dict of str to float
        Method -> metric -> value on the test set (``TABLE_METRICS``).
    per_class : dict of str to ndarray of shape (K,)
        Method -> each class's ECE on the test set.
    statistics : dict of str to CalibrationStatistics
        Method -> the per-bin sums the figures are drawn from.
    calibrators : dict of str to Calibrator
        Method -> the calibrator fitted on the validation set.
    class_names : list of str
        One name per class.
    best : str
        The calibrated method with the best ``select`` value ("uncalibrated" if none was fitted).
    select : str
        The metric ``best`` is chosen by.
    n_bins, rbece_bins, theta
        The settings of the reliability diagrams and of RBECE.
    n_val, n_test : int
        Labelled predictions of the validation and test sets.
    errors : dict of str to str, optional
        Method -> why it could not be fitted.
    intervals : dict of str to dict of str to (float, float), optional
        Method -> metric -> bootstrap interval (with ``bootstrap > 0``).
    class_intervals : dict of str to (ndarray, ndarray), optional
        Method -> bootstrap intervals of each class's ECE.
    sets : dict of str to dict of str to dict of str to float, optional
        Method -> conformity score (``CONFORMAL_SCORES``) -> ``coverage`` and ``set_size`` on
        the test set of split-conformal sets at ``CONFORMAL_LEVEL`` after the method
        (``conformal_cells``): whether a calibrator before conformal prediction shrinks the sets.
    smooth : dict of str to dict, optional
        Method -> its smooth reliability curve on the test set (:func:`calibkit.smooth_reliability`:
        ``grid``, ``accuracy``, ``density``, ``smece``, ``bandwidth``), drawn beside the binned diagram.
    """

    rows: dict[str, dict[str, float]]
    per_class: dict[str, np.ndarray]
    statistics: dict[str, CalibrationStatistics]
    calibrators: dict[str, Any]
    class_names: list[str]
    best: str
    select: str
    n_bins: int
    rbece_bins: int
    theta: float
    n_val: int
    n_test: int
    errors: dict[str, str] = field(default_factory=dict)
    intervals: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)
    class_intervals: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    sets: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    smooth: dict[str, dict[str, Any]] = field(default_factory=dict)


def macro_f1(probs: np.ndarray, labels: np.ndarray) -> float:
    """Compute the macro F1 of the argmax over the classes that occur in the labels or the predictions.

    Parameters
    ----------
    probs : ndarray of shape (N, K)
        Probabilities (or logits: only the argmax counts).
    labels : ndarray of int, shape (N,)
        True classes.

    Returns
    -------
    float
    """
    k = probs.shape[-1]
    predicted = probs.argmax(axis=-1)
    tp = np.bincount(labels[predicted == labels], minlength=k)
    support = np.bincount(labels, minlength=k) + np.bincount(predicted, minlength=k)
    seen = support > 0
    return float(np.mean(2 * tp[seen] / support[seen]))


def compare_calibrators(
    val_logits: Any,
    val_labels: Any,
    test_logits: Any,
    test_labels: Any,
    *,
    methods: tuple[str, ...] = METHODS,
    class_names: list[str] | None = None,
    ignore_index: int = DEFAULTS.ignore_index,
    select: str = "cece",
    n_bins: int = DEFAULTS.n_bins,
    rbece_bins: int = DEFAULTS.rbece_bins,
    theta: float = DEFAULTS.theta,
    fce_variant: str = DEFAULTS.fce_variant,
    bootstrap: int = OFF,
    seed: int = SAMPLING_DEFAULTS.seed,
    sets: bool = True,
    smooth: bool = True,
) -> Comparison:
    """Fit every calibrator on validation logits and evaluate every metric on test logits.

    A method that cannot be fitted (e.g. the RD-TS paper rule with T < 0.01) is reported in
    ``errors`` and left out of the table.

    Parameters
    ----------
    val_logits, val_labels : array-like
        Validation logits ``(N, K)`` or ``(N, L, K)`` and labels; the calibrators are fitted on them.
    test_logits, test_labels : array-like
        Test logits and labels, with the same classes; every metric is computed on them.
    methods : tuple of str, default METHODS
        ``"uncalibrated"`` and calibrator names of :data:`METHODS`.
    class_names : list of str, optional
        One name per class (default: the class indices).
    ignore_index : int, default -100
        Label of the positions to skip.
    select : str, default "cece"
        The metric of ``TABLE_METRICS`` ``best`` is chosen by: the calibrated method with
        the lowest value on test (highest for accuracy-like metrics, closest to 0 for signed ones).
    n_bins, rbece_bins, theta
        As in :func:`calibkit.calibration_report`.
    fce_variant : {"paper", "authors"}, default "paper"
        As in :func:`calibkit.fce` (``"authors"``: their published code's FCE).
    bootstrap : int, default 0
        With ``bootstrap > 0``, that many replicates of percentile 95% intervals (Poisson
        bootstrap, :func:`calibkit.metrics.bootstrap.bootstrap_intervals`) for every cell.
    seed : int, default 0
        Seed of the bootstrap and of the conformal sets' halving of the validation rows.
    sets : bool, default True
        Also measure split-conformal sets after each method (``conformal_cells``; ``sets``).
    smooth : bool, default True
        Also compute each method's smooth reliability curve on the test rows (``smooth``).

    Returns
    -------
    Comparison

    Raises
    ------
    ValueError
        On mismatched shapes or class counts, unknown methods or metrics, or bad settings.
    """
    z_val, y_val, _, _ = labelled_rows(val_logits, val_labels, ignore_index)
    z_test, y_test, _, _ = labelled_rows(test_logits, test_labels, ignore_index)
    places = np.asarray(test_labels) != ignore_index  # (N, L) for tokens: the bootstrap moves sentences
    if z_val.shape[1] != z_test.shape[1]:
        raise ValueError(f"validation logits have {z_val.shape[1]} classes, test logits {z_test.shape[1]}")
    k = z_test.shape[1]
    names = list(class_names) if class_names else [str(i) for i in range(k)]
    if len(names) != k:
        raise ValueError(f"`class_names` has {len(names)} names for {k} classes")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"`methods` has unknown names {unknown}; known: {list(METHODS)}")
    if select not in TABLE_METRICS:
        raise ValueError(f"`select` must be one of {list(TABLE_METRICS)}, got {select!r}")
    settings = CalibrationSettings(n_bins=n_bins, rbece_bins=rbece_bins, theta=theta, fce_variant=fce_variant)
    out = Comparison({}, {}, {}, {}, names, "uncalibrated", select, n_bins, rbece_bins, theta, len(y_val), len(y_test))
    for method in methods:
        if method == "uncalibrated":
            probs = softmax_rows(z_test)
        else:
            try:
                calibrator = make_calibrator(method).fit(z_val, y_val)
            except ValueError as exc:
                out.errors[method] = str(exc)
                continue
            out.calibrators[method] = calibrator
            probs = calibrator.predict_proba(z_test)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # absent classes, empty regions: visible as NaN in the table
            report = calibration_report(probs, y_test, settings=settings, metrics=REPORTED)
            plot_stats = CalibrationAccumulator(
                (ReliabilityDiagram.metric, RegionPlot.metric), settings=settings
            ).update(probs, y_test)
        out.rows[method] = {
            "macro_f1": macro_f1(probs, y_test),
            **{m: float(report[m]) for m in TABLE_METRICS if m in report},
        }
        out.per_class[method] = np.asarray(report["subset_ece"], dtype=np.float64)
        out.statistics[method] = plot_stats.statistics
        if sets:
            out.sets[method] = conformal_cells(method, z_val, y_val, z_test, y_test, seed)
        if smooth:
            out.smooth[method] = smooth_reliability(probs, y_test)
        if bootstrap:
            resampled = into_sequences(probs, y_test, places) if places.ndim == 2 else (probs, y_test)
            ci = bootstrap_intervals(*resampled, bootstrap=bootstrap, seed=seed, settings=settings)
            out.intervals[method] = ci["intervals"]
            out.class_intervals[method] = ci["subset_ece"]
    calibrated = [m for m in out.rows if m != "uncalibrated"]
    if calibrated:
        sign = -1 if select in HIGHER_IS_BETTER else 1
        score = {m: sign * (abs(out.rows[m][select]) if select in SIGNED else out.rows[m][select]) for m in calibrated}
        out.best = min(calibrated, key=lambda m: math.inf if math.isnan(score[m]) else score[m])
    return out


def conformal_cells(
    method: str,
    z_val: np.ndarray,
    y_val: np.ndarray,
    z_test: np.ndarray,
    y_test: np.ndarray,
    seed: int = SAMPLING_DEFAULTS.seed,
) -> dict[str, dict[str, Any]]:
    """Split-conformal sets after a calibrator: their coverage and mean size on the test rows.

    The validation rows are halved (``seed``): the calibrator is fitted on one half and the sets'
    quantile on the other, which the calibrator has not seen. Fitted on the same rows, a
    calibrator of many parameters (isotonic regression, histogram binning) would fit their noise
    and its sets would cover less than the level promises.

    Parameters
    ----------
    method : str
        ``"uncalibrated"`` (the softmax) or a calibrator's name.
    z_val, y_val : ndarray
        Validation logits ``(N, K)`` and labels (labelled rows only).
    z_test, y_test : ndarray
        Test logits and labels.
    seed : int, default 0

    Returns
    -------
    dict
        Score of ``CONFORMAL_SCORES`` -> ``coverage`` and ``set_size``
        (:func:`calibkit.metrics.coverage`, :func:`calibkit.metrics.set_size`) at
        ``CONFORMAL_LEVEL``; NaN, with the reason under ``why``, where the calibrator or the
        sets cannot be fitted (too few rows for the level).
    """
    from calibkit.calibrators.conformal import SplitConformal
    from calibkit.metrics.conformal import coverage, set_size

    half = np.random.default_rng(seed).permutation(len(y_val)) < len(y_val) // 2
    try:
        if method == "uncalibrated":
            cal, test = softmax_rows(z_val[~half]), softmax_rows(z_test)
        else:
            calibrator = make_calibrator(method).fit(z_val[half], y_val[half])
            cal, test = calibrator.predict_proba(z_val[~half]), calibrator.predict_proba(z_test)
    except ValueError as exc:
        return {s: {"coverage": math.nan, "set_size": math.nan, "why": str(exc)} for s in CONFORMAL_SCORES}
    out: dict[str, dict[str, Any]] = {}
    for score in CONFORMAL_SCORES:
        predictor = SplitConformal(score=score, confidence_level=CONFORMAL_LEVEL, inputs="probs")
        try:
            sets = predictor.fit(cal, y_val[~half]).predict_sets(test)
        except ValueError as exc:
            out[score] = {"coverage": math.nan, "set_size": math.nan, "why": str(exc)}
            continue
        out[score] = {"coverage": float(coverage(sets, y_test)), "set_size": float(set_size(sets))}
    return out
