"""The judge against people, and the pass rate corrected, per task and pooled.

On the labelled slice (the judged samples people labelled, :func:`calibkit.lm.judges.match_labels`):

- agreement, Cohen's kappa, the judge's true and false positive rates, with seeded bootstrap
  intervals (:func:`calibkit.metrics.judges.judge_agreement`); a score (verdict or label in
  [0, 1]) counts as a pass at ``threshold`` and above;
- where the judge gives a confidence (its probability that the answer passes): its ECE, ESCE,
  Brier and NLL against the human label in calibkit's 1-D binary convention (class 1 = pass,
  through :func:`calibkit.calibration_report`, intervals by :func:`calibkit.metrics.bootstrap.bootstrap_intervals`),
  the reliability bins, and the recalibration maps (isotonic, Platt: ``calibkit.lm.generations.recalibrate``)
  cross-fitted: each sample's recalibrated confidence comes from the map fitted on the other folds.

The pass rate, each with its interval at ``level`` (:func:`pass_rates`): the judge's naive rate
over every judged sample; the human-only mean of the slice; PPI++ (labelled slice and the judge's
verdicts on the rest); Rogan-Gladen (0/1 verdicts: the judge's rates on the slice, its rate ``q`` on
the rest, as ``judgy`` splits them). An estimator that cannot be computed says why (``refused``)
and the others stand.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from calibkit.lm.generations.recalibrate import apply_score_map, fit_score_map
from calibkit.lm.judges.data import HumanLabels, Judged
from calibkit.lm.judges.readers import is_binary, match_labels
from calibkit.metrics.bootstrap import bootstrap_intervals
from calibkit.metrics.functional.core import calibration_report, reliability_bins
from calibkit.metrics.judges import (
    classical_mean,
    judge_agreement,
    ppi_mean,
    ppi_mean_difference,
    rogan_gladen,
)
from calibkit.metrics.registry import JUDGE_METRICS
from calibkit.metrics.sampling import SAMPLING_UNSET, SamplingSettings, resolve_sampling
from calibkit.metrics.settings import DEFAULTS

CALIBRATION = JUDGE_METRICS
"""The judge's confidence against the human label: the metrics reported (1-D binary, class 1 = pass)."""

MAPS = ("isotonic", "platt")
"""The cross-fitted recalibrations of the judge's confidence."""

FOLDS = 5
"""Folds of the cross-fitting (fewer when there are fewer labelled samples with a confidence)."""

MIN_RECALIBRATION = 10
"""Labelled samples with a confidence (both classes present) below which no map is fitted."""

RATES = ("naive", "human", "ppi", "rogan_gladen")
"""The pass rates of :func:`pass_rates`, in the order of every output."""

RG_REPLICATES = 2000
"""Bootstrap replicates of Rogan-Gladen's interval when ``bootstrap`` is 0 (its interval needs them)."""


def _refused(reason: str) -> dict[str, str]:
    return {"refused": reason}


def pass_rates(
    verdicts: np.ndarray,
    labelled: np.ndarray,
    labels: np.ndarray,
    *,
    binary: bool,
    bootstrap: int = SAMPLING_UNSET.bootstrap,
    level: float = SAMPLING_UNSET.level,
    seed: int = SAMPLING_UNSET.seed,
) -> dict[str, Any]:
    """Estimate the pass rate four ways: the judge's naive rate, people's, PPI++ and Rogan-Gladen.

    Parameters
    ----------
    verdicts : ndarray of shape (N,)
        The judge's verdict on every sample.
    labelled : ndarray of int, shape (n,)
        The samples people labelled (indices into ``verdicts``).
    labels : ndarray of shape (n,)
        Their human labels.
    binary : bool
        Verdicts and labels are 0/1: Rogan-Gladen applies (not to scores).
    bootstrap : int, default 1000
        Replicates of Rogan-Gladen's interval (0: :data:`RG_REPLICATES`).
    level : float, default 0.95
    seed : int, default 0

    Returns
    -------
    dict
        ``naive``, ``human``, ``ppi``, ``rogan_gladen``: each ``estimate``, ``ci_lower``,
        ``ci_upper`` (and the estimator's own numbers: ``lam``; ``tpr``, ``tnr``, ``q``), or
        ``{"refused": reason}``.
    """
    rest = np.ones(verdicts.size, dtype=bool)
    rest[labelled] = False
    f, u = verdicts[labelled], verdicts[rest]
    out: dict[str, Any] = {"naive": classical_mean(verdicts, level=level)}
    if labels.size < 2:
        reason = f"{labels.size} label{'s' * (labels.size != 1)}: at least 2 are needed for an interval"
        return {**out, **dict.fromkeys(RATES[1:], _refused(reason))}
    out["human"] = classical_mean(labels, level=level)
    if not u.size:
        every = "every judged sample has a label: people's own rate is the answer"
        return {**out, "ppi": _refused(every), "rogan_gladen": _refused(every)}
    out["ppi"] = ppi_mean(labels, f, u, level=level)
    if not binary:
        out["rogan_gladen"] = _refused("Rogan-Gladen needs 0/1 verdicts and labels (scores given: see PPI++)")
        return out
    try:
        out["rogan_gladen"] = rogan_gladen(labels, f, u, bootstrap=bootstrap or RG_REPLICATES, level=level, seed=seed)
    except ValueError as exc:
        out["rogan_gladen"] = _refused(str(exc))
    return out


def judge_calibration(
    confidence: np.ndarray,
    passed: np.ndarray,
    *,
    n_bins: int = DEFAULTS.n_bins,
    bootstrap: int = SAMPLING_UNSET.bootstrap,
    level: float = SAMPLING_UNSET.level,
    seed: int = SAMPLING_UNSET.seed,
) -> dict[str, Any]:
    """Judge the judge's confidence against people's pass/fail: ECE, ESCE, Brier, NLL, reliability.

    Parameters
    ----------
    confidence : ndarray of shape (n,)
        The judge's probability that the answer passes, NaN where it gave none.
    passed : ndarray of shape (n,)
        1 where people passed the answer, 0 where they failed it.
    n_bins : int, default 15
    bootstrap : int, default 1000
        Replicates of the metrics' intervals (0: none).
    level : float, default 0.95
    seed : int, default 0

    Returns
    -------
    dict
        ``samples`` (with a confidence), ``mean_confidence``, the metrics of :data:`CALIBRATION`,
        ``bins`` (the reliability bins: ``count``, ``confidence``, ``accuracy`` per bin), with
        ``bootstrap`` ``intervals``; or ``{"refused": reason}`` when no labelled sample has a
        confidence.
    """
    has = ~np.isnan(confidence)
    if not has.any():
        return _refused("the judge gave no confidence on the labelled samples")
    p, y = confidence[has], passed[has].astype(np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one class only: a metric's empty side is NaN
        report = calibration_report(p, y, metrics=list(CALIBRATION), n_bins=n_bins)
        bins = reliability_bins(p, y, n_bins=n_bins)
    out: dict[str, Any] = {"samples": int(has.sum()), "mean_confidence": float(p.mean())}
    out.update({m: float(report[m]) for m in CALIBRATION})
    out["bins"] = {k: bins[k].tolist() for k in ("edges", "count", "confidence", "accuracy")}
    if bootstrap:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ci = bootstrap_intervals(
                p, y, metrics=CALIBRATION, bootstrap=bootstrap, level=level, seed=seed, n_bins=n_bins
            )
        out["intervals"] = {m: [float(v) for v in ci["intervals"][m]] for m in CALIBRATION}
    return out


def cross_fitted_recalibration(
    confidence: np.ndarray,
    passed: np.ndarray,
    *,
    methods: tuple[str, ...] = MAPS,
    folds: int = FOLDS,
    n_bins: int = DEFAULTS.n_bins,
    seed: int = SAMPLING_UNSET.seed,
) -> dict[str, Any]:
    """Recalibrate the judge's confidence to people's labels, each sample judged by a map fitted without it.

    The labelled samples with a confidence are split into ``folds`` random folds (seeded); each
    fold's confidences are mapped by the map fitted on the other folds, and the metrics of
    :data:`CALIBRATION` are computed on these out-of-fold confidences, beside the raw ones on the
    same samples. The map fitted on every labelled sample is returned too, to apply to new ones.

    Parameters
    ----------
    confidence : ndarray of shape (n,)
        NaN where the judge gave none (left out).
    passed : ndarray of shape (n,)
        People's 0/1 pass.
    methods : tuple of str, default ("isotonic", "platt")
        Maps of :func:`calibkit.lm.generations.recalibrate.fit_score_map`.
    folds : int, default 5
        At most one sample a fold.
    n_bins : int, default 15
    seed : int, default 0

    Returns
    -------
    dict
        ``folds``, ``samples``, ``raw`` (metrics), and per method its cross-fitted ``metrics`` and
        the ``map`` fitted on all (JSON-ready); or ``{"refused": reason}`` under
        :data:`MIN_RECALIBRATION` samples or with one class only.
    """
    has = ~np.isnan(confidence)
    p, y = confidence[has], passed[has].astype(np.float64)
    if p.size < MIN_RECALIBRATION or y.min() == y.max():
        return _refused(
            f"{p.size} labelled samples with a confidence ({int(y.sum())} passed): a cross-fitted map needs "
            f"{MIN_RECALIBRATION} or more, with passes and fails"
        )
    k = min(folds, p.size)
    fold = np.random.default_rng(seed).permutation(p.size) % k

    def scored(q: np.ndarray) -> dict[str, float]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = calibration_report(q, y.astype(np.int64), metrics=list(CALIBRATION), n_bins=n_bins)
        return {m: float(report[m]) for m in CALIBRATION}

    out: dict[str, Any] = {"folds": k, "samples": int(p.size), "raw": scored(p)}
    with np.errstate(over="ignore"):  # Platt on separable classes: a steep map, exp overflows to 0 or 1
        for method in methods:
            out[method] = _cross_fitted(method, p, y, fold, k, scored)
    return out


def _cross_fitted(method: str, p: np.ndarray, y: np.ndarray, fold: np.ndarray, k: int, scored: Any) -> dict[str, Any]:
    """One map's out-of-fold confidences scored, and the map fitted on every sample."""
    held = np.empty_like(p)
    for f in range(k):  # a loop over folds; each fit and map is vectorised
        train = fold != f
        if y[train].min() == y[train].max():  # one class left to fit on: the identity
            held[~train] = p[~train]
            continue
        held[~train] = apply_score_map(fit_score_map(method, p[train], y[train]), p[~train])
    fitted = fit_score_map(method, p, y)
    return {"metrics": scored(held), "map": {key: _plain(v) for key, v in fitted.items()}}


def _plain(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else value


def _group(
    judged: Judged, rows: np.ndarray, at: np.ndarray, labels: HumanLabels, keep: np.ndarray, options: dict[str, Any]
) -> dict[str, Any]:
    """Judge one group of samples (a task, or all): ``rows`` of ``judged``, ``keep`` of the labels."""
    threshold, binary = options["threshold"], options["binary"]
    sampling = {k: options[k] for k in ("bootstrap", "level", "seed")}
    verdicts = judged.verdict[rows]
    position = np.full(len(judged), -1)
    position[np.flatnonzero(rows)] = np.arange(int(rows.sum()))
    labelled, label = position[at[keep]], labels.label[keep]
    out: dict[str, Any] = {"samples": int(rows.sum()), "labelled": int(keep.sum())}
    out["rates"] = pass_rates(verdicts, labelled, label, binary=binary, **sampling)
    if not keep.any():
        out["against_people"] = _refused("no label in this group")
        return out
    judge_pass = (verdicts[labelled] >= threshold).astype(np.float64)
    human_pass = (label >= threshold).astype(np.float64)
    out["against_people"] = judge_agreement(judge_pass, human_pass, **sampling)
    confidence = judged.confidence[rows][labelled]
    out["calibration"] = judge_calibration(confidence, human_pass, n_bins=options["n_bins"], **sampling)
    if "refused" not in out["calibration"]:
        out["recalibration"] = cross_fitted_recalibration(
            confidence, human_pass, folds=options["folds"], n_bins=options["n_bins"], seed=options["seed"]
        )
    return out


def judge_report(
    judged: Judged,
    labels: HumanLabels,
    *,
    threshold: float = SAMPLING_UNSET.threshold,
    n_bins: int = DEFAULTS.n_bins,
    bootstrap: int = SAMPLING_UNSET.bootstrap,
    level: float = SAMPLING_UNSET.level,
    seed: int = SAMPLING_UNSET.seed,
    folds: int = FOLDS,
    sampling: SamplingSettings | None = None,
) -> dict[str, Any]:
    """Check a judge against people and correct its pass rate, pooled and per task.

    Parameters
    ----------
    judged : Judged
        Every judged sample (:func:`calibkit.lm.judges.read_judged`).
    labels : HumanLabels
        People's labels of some of them (:func:`calibkit.lm.judges.read_labels`).
    threshold : float, default 0.5
        A score (verdict or label in [0, 1]) at least this high is a pass, for the agreement
        and the confidence's calibration (0/1 verdicts are unchanged by any threshold in (0, 1]).
    n_bins : int, default 15
    bootstrap : int, default 1000
        Replicates of the agreement's and the calibration's intervals (0: none) and of
        Rogan-Gladen's (0: ``RG_REPLICATES``, 2,000).
    level : float, default 0.95
    seed : int, default 0
    folds : int, default 5
        Folds of the cross-fitted recalibration.
    sampling : SamplingSettings, optional
        ``threshold``, ``bootstrap``, ``level`` and ``seed`` as one object, instead of the keywords.

    Returns
    -------
    dict
        ``samples``, ``labelled``, ``binary`` (verdicts and labels 0/1), ``threshold``, ``level``,
        ``pooled`` and ``tasks`` (task -> the same): ``samples``, ``labelled``, ``rates``
        (``calibkit.lm.judges.report.pass_rates``), ``against_people``
        (:func:`calibkit.metrics.judges.judge_agreement`),
        ``calibration`` (``calibkit.lm.judges.report.judge_calibration``) and ``recalibration``
        (``calibkit.lm.judges.report.cross_fitted_recalibration``) where the judge gives a confidence.

    Raises
    ------
    ValueError
        With no label at all, a label whose id matches no judged sample or off the verdicts'
        scale (:func:`calibkit.lm.judges.match_labels`), or a bad setting.
    """
    sampling = resolve_sampling(sampling, threshold=threshold, bootstrap=bootstrap, level=level, seed=seed)
    if len(labels) == 0:
        raise ValueError("`labels`: no label: the judge cannot be checked against people without some")
    at = match_labels(judged, labels)
    binary = is_binary(judged.verdict) and is_binary(labels.label)
    options = {**sampling.as_dict(), "binary": binary, "n_bins": n_bins, "folds": folds}
    everything = np.ones(len(judged), dtype=bool)
    pooled = _group(judged, everything, at, labels, np.ones(len(labels), dtype=bool), options)
    tasks = {}
    for task in sorted(set(judged.task.tolist())):  # a loop over tasks
        rows = judged.task == task
        tasks[task] = _group(judged, rows, at, labels, rows[at], options)
    return {
        "samples": len(judged),
        "labelled": len(labels),
        "binary": binary,
        "threshold": sampling.threshold,
        "level": sampling.level,
        "pooled": pooled,
        "tasks": tasks,
    }


def compare_runs(
    first: tuple[Judged, HumanLabels], second: tuple[Judged, HumanLabels], *, level: float = SAMPLING_UNSET.level
) -> dict[str, Any]:
    """Compare two models' pass rates on the same judge: PPI++ of the difference, with its interval.

    Paired (:func:`calibkit.metrics.judges.ppi_mean_difference` with ``paired=True``) when both
    runs hold the same sample ids and people labelled the same ones in both: the per-question
    differences, their correlation counted. Otherwise independent: each run's PPI++, standard
    errors added in quadrature (valid for runs on different questions, or labels drawn apart).

    Parameters
    ----------
    first, second : tuple of (Judged, HumanLabels)
    level : float, default 0.95

    Returns
    -------
    dict
        ``estimate`` (first minus second), ``ci_lower``, ``ci_upper``, ``se``, ``lam``,
        ``construction`` (``"paired"`` or ``"independent"``), ``labelled`` (per run).
    """
    runs = []
    for judged, labels in (first, second):
        at = match_labels(judged, labels)
        rest = np.ones(len(judged), dtype=bool)
        rest[at] = False
        runs.append((judged, labels, at, rest))
    (ja, la, at_a, rest_a), (jb, lb, at_b, rest_b) = runs
    same_ids = len(ja) == len(jb) and np.array_equal(np.sort(ja.ids.astype(str)), np.sort(jb.ids.astype(str)))
    paired = same_ids and np.array_equal(np.sort(la.ids.astype(str)), np.sort(lb.ids.astype(str)))
    a = (la.label, ja.verdict[at_a], ja.verdict[rest_a])
    if paired:  # line the second run up on the first, by id
        b_rows = _positions(jb.ids, ja.ids)
        b_labels = _positions(lb.ids, la.ids)
        b = (lb.label[b_labels], jb.verdict[at_b[b_labels]], jb.verdict[b_rows][rest_a])
        out = ppi_mean_difference(a, b, paired=True, level=level)
    else:
        b = (lb.label, jb.verdict[at_b], jb.verdict[rest_b])
        out = ppi_mean_difference(a, b, level=level)
    return {**out, "labelled": [len(la), len(lb)]}


def _positions(ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Where each of ``wanted`` is in ``ids`` (every one is there, each once)."""
    keys = ids.astype(str)
    order = np.argsort(keys, kind="stable")
    return order[np.searchsorted(keys[order], wanted.astype(str))]


def answer_sentence(report: dict[str, Any]) -> str:
    """Write the report's one-sentence answer: the judge's rate, people's (corrected), the judge's lean, its ECE.

    Parameters
    ----------
    report : dict
        From :func:`judge_report`.

    Returns
    -------
    str
        E.g. "The judge passes 71% [69%, 73%] of 2,000 answers; people pass 63% [58%, 68%] (PPI++
        with 40 labels): the judge is lenient, ECE 0.18."
    """
    pooled = report["pooled"]
    rates = pooled["rates"]
    naive = rates["naive"]
    text = f"The judge passes {_pct(naive)} of {pooled['samples']:,} answers"
    people = rates["ppi"] if "refused" not in rates["ppi"] else rates["human"]
    if "refused" in people:
        return f"{text}; people's rate cannot be told: {people['refused']}."
    how = "PPI++" if people is rates["ppi"] else "people's labels alone"
    text += f"; people pass {_pct(people)} ({how} with {pooled['labelled']:,} labels)"
    if people["ci_upper"] < naive["estimate"]:
        lean = "the judge is lenient"
    elif people["ci_lower"] > naive["estimate"]:
        lean = "the judge is strict"
    else:
        lean = "the judge's rate is within people's interval"
    calibration = pooled.get("calibration", {})
    ece = f", ECE {calibration['ece']:.2f}" if "ece" in calibration else ""
    return f"{text}: {lean}{ece}."


def _pct(rate: dict[str, Any]) -> str:
    return f"{rate['estimate']:.0%} [{rate['ci_lower']:.0%}, {rate['ci_upper']:.0%}]"
