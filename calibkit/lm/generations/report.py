"""Calibration of generated answers: each confidence source judged against correctness, per task and pooled.

A source's confidence is the probability it gives the answer of being right, so it is scored in
calibkit's 1-D binary convention with class 1 = right (SPEC.md): ECE and ACE of the confidence
against correctness, Brier and NLL of it, and how well it ranks answers (AURC and the accuracy of
the most confident 80%, ``calibkit.metrics.ranking``), with the rejection metrics the uncertainty
benchmarks publish (PRR, PRR@50%, ROC AUC, PR AUC, AUGRC, risk at coverage, coverage at risk:
``calibkit.metrics.rejection``) against the answers' ``correct`` score as given (continuous where
the data has a score, 0/1 otherwise). Answers without a confidence from a source (a verbalized one
the text does not state) are left out of that source's numbers, and the share of them is reported.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from calibkit.io.jsonable import json_ready
from calibkit.lm.generations.abstention import abstention_summary
from calibkit.lm.generations.data import Generations
from calibkit.lm.generations.recalibrate import SCORE_MAPS, apply_score_map, fit_score_map
from calibkit.lm.sources import source_kind
from calibkit.metrics.bootstrap import bootstrap_intervals, rejection_intervals
from calibkit.metrics.decomposition import binary_decomposition
from calibkit.metrics.functional.core import calibration_report
from calibkit.metrics.ranking import selective_from_rows
from calibkit.metrics.registry import CONFIDENCE_METRICS, ON_REQUEST, REJECTION_METRICS
from calibkit.metrics.rejection import rejection_metrics
from calibkit.metrics.sampling import OFF, SAMPLING_DEFAULTS, SAMPLING_UNSET, SamplingSettings, resolve_sampling
from calibkit.metrics.settings import DEFAULTS, resolve_settings
from calibkit.verdicts.claims import verdict_from_shares

SOURCE_METRICS = CONFIDENCE_METRICS
"""What each source is judged by from the calibration sums (``calibration_report``, 1-D binary)."""

RANKING = ON_REQUEST
"""How well each source ranks answers (AURC, selective accuracy; from the rows: exact)."""

REJECTION = tuple(m for m in REJECTION_METRICS if m not in RANKING)
"""The rejection metrics each source adds beside AURC (``calibkit.metrics.rejection``): against the
``correct`` score as given, where AURC and the selective accuracy read right/wrong."""

COVERAGE = DEFAULTS.coverage
"""The share of answers, the most confident, of the selective accuracy (the settings' ``coverage``)."""

DECOMPOSED = ("miscalibration", "discrimination")
"""The Brier score's CORP parts reported per source (``calibkit.score_decomposition``): what
recalibrating would remove, and what the confidence knows beyond the base rate."""


def source_metrics(
    confidence: np.ndarray,
    right: np.ndarray,
    *,
    n_bins: int = DEFAULTS.n_bins,
    bootstrap: int = OFF,
    seed: int = SAMPLING_DEFAULTS.seed,
    quality: np.ndarray | None = None,
    threshold: float = SAMPLING_DEFAULTS.threshold,
) -> dict[str, Any]:
    """Judge one confidence source on some answers.

    Parameters
    ----------
    confidence : ndarray of shape (n,)
        In [0, 1], NaN where the source gave none.
    right : ndarray of shape (n,)
        1 for a right answer, 0 for a wrong one.
    n_bins : int, default 15
        Bins of ECE.
    bootstrap : int, default 0
        Replicates of 95% intervals, resampling answers (a question has one answer).
    seed : int, default 0
    quality : ndarray of shape (n,), optional
        Each answer's quality in [0, 1] (its ``correct`` score, or ROUGE-L against the gold) for the
        rejection metrics (default: ``right``).
    threshold : float, default 0.5
        A quality below this is a wrong answer (the rejection metrics' ROC AUC and PR AUC).

    Returns
    -------
    dict
        ``answers`` (with a confidence), ``without`` (the share without one), ``accuracy`` of those
        answered, ECE, ACE, Brier, NLL, AURC, the selective accuracy, ``mean_confidence``, the
        Brier score's ``miscalibration`` and ``discrimination`` (CORP), the rejection metrics
        (``REJECTION``: PRR, PRR@50%, ROC AUC, PR AUC, AUGRC, risk at coverage, coverage at
        risk; None where undefined) and, with ``bootstrap``, ``intervals`` (the calibration metrics'
        and the rejection metrics', resampling answers). The metrics are None when no answer has a
        confidence.
    """
    has = ~np.isnan(confidence)
    out: dict[str, Any] = {"answers": int(has.sum()), "without": float(1 - has.mean()) if has.size else 0.0}
    if not has.any():
        names = ("accuracy", *SOURCE_METRICS, *RANKING, "mean_confidence", *DECOMPOSED, *REJECTION)
        return {**out, **dict.fromkeys(names)}
    p, y = confidence[has], right[has].astype(np.int64)
    q = y.astype(np.float64) if quality is None else np.asarray(quality, dtype=np.float64)[has]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one class only (every answer right): ACE's empty side is NaN
        report = calibration_report(p, y, metrics=list(SOURCE_METRICS), n_bins=n_bins)
    ranks = selective_from_rows(p, 1.0 - y, COVERAGE)
    out.update(accuracy=float(y.mean()), mean_confidence=float(p.mean()))
    out.update({m: json_ready(report[m]) for m in SOURCE_METRICS})
    out.update({m: ranks[m][0] for m in RANKING})
    parts = binary_decomposition(p, y, "brier")  # how much of the Brier score recalibrating would remove
    out.update({m: parts[m] for m in DECOMPOSED})
    rejection = rejection_metrics(p, q, coverage=COVERAGE, threshold=threshold)
    out.update({m: json_ready(rejection[m]) for m in REJECTION})
    if bootstrap:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ci = bootstrap_intervals(p, y, metrics=SOURCE_METRICS, bootstrap=bootstrap, seed=seed, n_bins=n_bins)
            ranked = rejection_intervals(p, q, bootstrap=bootstrap, seed=seed, threshold=threshold, coverage=COVERAGE)
        out["intervals"] = {m: json_ready(list(ci["intervals"][m])) for m in SOURCE_METRICS}
        # with a 0/1 quality, the rejection AURC is the right/wrong one: its interval too
        shown = (*REJECTION, "aurc") if np.array_equal(q, y) else REJECTION
        out["intervals"].update({m: json_ready(list(ranked["intervals"][m])) for m in shown})
    return out


def generations_report(
    data: Generations,
    *,
    sources: list[str] | None = None,
    threshold: float = SAMPLING_UNSET.threshold,
    n_bins: int = DEFAULTS.n_bins,
    bootstrap: int = OFF,
    seed: int = SAMPLING_UNSET.seed,
    abstention_alpha: float = DEFAULTS.abstention_alpha,
    abstention_delta: float = DEFAULTS.abstention_delta,
    sampling: SamplingSettings | None = None,
) -> dict[str, Any]:
    """Judge every confidence source of some generated answers, per task and pooled.

    Parameters
    ----------
    data : Generations
        From :func:`~calibkit.lm.generations.read_generations` (and any source added since).
    sources : list of str, optional
        The sources to judge (default: all of ``data.confidence``).
    threshold : float, default 0.5
        A ``correct`` score at least this high is a right answer (0/1 correctness is unchanged by
        any threshold in (0, 1]).
    n_bins : int, default 15
    bootstrap : int, default 0
        Replicates of 95% intervals of each source's metrics (pooled).
    seed : int, default 0
    abstention_alpha, abstention_delta : float, default 0.1
        Each source's abstention threshold (Learn then Test): the selective error allowed, and the
        probability allowed that it is exceeded.
    sampling : SamplingSettings, optional
        ``threshold``, ``bootstrap`` and ``seed`` as one object
        (:class:`calibkit.metrics.sampling.SamplingSettings`), instead of the keywords.

    Returns
    -------
    dict
        ``pooled`` and ``tasks`` (task -> the same): ``questions``, ``accuracy`` and ``sources``
        (source -> :func:`source_metrics`, with ``abstention``: the threshold, from
        ``calibkit.lm.generations.abstention.abstention_summary``); ``kinds`` (source -> kind), ``threshold``, and
        ``best``: the source of lowest pooled ECE (``calibration``), of lowest AURC (``ranking``)
        and of highest PRR against the ``correct`` score (``rejection``; None where PRR is undefined).

    Raises
    ------
    ValueError
        On an unknown source, a threshold outside (0, 1], an abstention level outside (0, 1), or no
        source at all.
    """
    names = _checked_sources(data, sources)
    sampling = resolve_sampling(sampling, threshold=threshold, bootstrap=bootstrap, seed=seed)
    threshold, bootstrap, seed = sampling.threshold, sampling.bootstrap, sampling.seed
    checked = resolve_settings(abstention_alpha=abstention_alpha, abstention_delta=abstention_delta)
    levels = {"abstention_alpha": checked.abstention_alpha, "abstention_delta": checked.abstention_delta}
    right = (data.correct >= threshold).astype(np.float64)

    def judged(s: str, rows: np.ndarray, intervals: int) -> dict[str, Any]:
        p, y = data.confidence[s][rows], right[rows]
        metrics = source_metrics(
            p, y, n_bins=n_bins, bootstrap=intervals, seed=seed, quality=data.correct[rows], threshold=threshold
        )
        return {**metrics, "abstention": abstention_summary(p, y, **levels)}

    def group(rows: np.ndarray, intervals: int) -> dict[str, Any]:
        return {
            "questions": int(rows.sum()),
            "accuracy": float(right[rows].mean()),
            "sources": {s: judged(s, rows, intervals) for s in names},
        }

    pooled = group(np.ones(len(data), dtype=bool), bootstrap)
    tasks = {t: group(data.task == t, 0) for t in sorted(set(data.task.tolist()))}
    scored = {s: v for s, v in pooled["sources"].items() if v["ece"] is not None}
    prr = {s: v["prr"] for s, v in scored.items() if v["prr"] is not None}
    best = {
        "calibration": min(scored, key=lambda s: scored[s]["ece"]) if scored else None,
        "ranking": min(scored, key=lambda s: scored[s]["aurc"]) if scored else None,
        "rejection": max(prr, key=prr.get) if prr else None,
    }
    return {
        "pooled": pooled,
        "tasks": tasks,
        "kinds": {s: data.kinds.get(s, source_kind(s)) for s in names},
        "threshold": threshold,
        "best": best,
    }


def recalibration_resplits(
    data: Generations,
    *,
    sources: list[str] | None = None,
    methods: tuple[str, ...] = SCORE_MAPS,
    resplits: int = SAMPLING_UNSET.resplits,
    threshold: float = SAMPLING_UNSET.threshold,
    n_bins: int = DEFAULTS.n_bins,
    seed: int = SAMPLING_UNSET.seed,
    sampling: SamplingSettings | None = None,
) -> dict[str, Any]:
    """Fit each recalibration of each source on half of the questions and judge it on the other half.

    Parameters
    ----------
    data : Generations
    sources : list of str, optional
        Default: every source.
    methods : tuple of str, default ("platt", "isotonic", "histogram")
    resplits : int, default 20
        Random halvings of the questions (every source's answers split alike).
    threshold, n_bins, seed, sampling
        As :func:`generations_report` (``sampling``: ``resplits``, ``threshold`` and ``seed``).

    Returns
    -------
    dict
        ``values``: source -> method (``raw`` and each map) -> metric -> ``R`` held-out values
        (metrics: ECE, ACE, Brier, NLL, AURC); ``verdicts``: a list of ``{"claim", "verdict",
        "better", "worse"}``: each recalibration against its raw source on ECE, and the best
        recalibrated source against every other raw source.

    Raises
    ------
    ValueError
        On an unknown source or map, ``resplits`` not an integer in [1, 10000], or a threshold
        outside (0, 1].
    """
    names = _checked_sources(data, sources)
    sampling = resolve_sampling(sampling, resplits=resplits, threshold=threshold, seed=seed)
    resplits, threshold, seed = sampling.require("resplits"), sampling.threshold, sampling.seed
    unknown = [m for m in methods if m not in SCORE_MAPS]
    if unknown:
        raise ValueError(f"`methods` has unknown names {unknown}; known: {list(SCORE_MAPS)}")
    right = (data.correct >= threshold).astype(np.float64)
    metrics = (*SOURCE_METRICS, RANKING[0])
    rng = np.random.default_rng(seed)
    values = {s: {m: {k: np.full(resplits, np.nan) for k in metrics} for m in ("raw", *methods)} for s in names}
    for r in range(resplits):  # a loop over re-splits; each fit and metric inside is vectorised
        fit = np.zeros(len(data), dtype=bool)
        fit[rng.permutation(len(data))[: len(data) // 2]] = True
        for s in names:
            p = data.confidence[s]
            has = ~np.isnan(p)
            train, held = fit & has, ~fit & has
            if not train.any() or not held.any():
                continue
            mapped = {"raw": p[held]}
            for method in methods:
                mapped[method] = apply_score_map(fit_score_map(method, p[train], right[train]), p[held])
            for method, q in mapped.items():
                judged = source_metrics(q, right[held], n_bins=n_bins)
                for k in metrics:
                    values[s][method][k][r] = np.nan if judged[k] is None else judged[k]
    return {"values": values, "verdicts": _verdicts(values, names, methods), "resplits": resplits}


def _checked_sources(data: Generations, sources: list[str] | None) -> list[str]:
    """Return the sources asked for (default: all), each one the data has; at least one."""
    names = data.source_names(sources)
    if not names:
        raise ValueError(
            "the generations have no confidence source: add a numeric column, a verbalized confidence "
            "(`verbalized_confidence`), or a model's (`whitebox_confidence`)"
        )
    return names


def _verdicts(values: dict, names: list[str], methods: tuple[str, ...]) -> list[dict[str, Any]]:
    """Recalibration against raw on ECE, per source; the best recalibrated source against every raw one."""
    out = []

    def claim(text: str, a: np.ndarray, b: np.ndarray) -> None:
        both = ~np.isnan(a) & ~np.isnan(b)
        better = float(np.mean(a[both] < b[both])) if both.any() else float("nan")
        worse = float(np.mean(a[both] > b[both])) if both.any() else float("nan")
        out.append({"claim": text, "verdict": verdict_from_shares(better, worse), "better": better, "worse": worse})

    for s in names:
        for m in methods:
            claim(f"{m}-recalibrated {s} lowers ECE below raw {s}", values[s][m]["ece"], values[s]["raw"]["ece"])
    means = {
        (s, m): np.nanmean(values[s][m]["ece"])
        for s in names
        for m in methods
        if not np.isnan(values[s][m]["ece"]).all()
    }
    if means:
        s, m = min(means, key=means.get)
        for other in names:
            if other != s:
                a, b = values[s][m]["ece"], values[other]["raw"]["ece"]
                claim(f"{m}-recalibrated {s} beats raw {other} on ECE", a, b)
    return out
