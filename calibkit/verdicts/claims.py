"""Every claim of the seed papers, one entry each, and the verdict machinery that reads them.

A :class:`Claim` says what a paper states (paraphrased, with its section), how a calibrator
comparison over re-splits tests it, and what the test needs; :func:`verdicts` turns
:data:`CATALOGUE` and a :class:`~calibkit.verdicts.resplits.Resplits` into one verdict per claim:

- ``holds``: the claimed direction in at least 95 % of the re-splits (paired);
- ``does not hold``: the opposite direction in at least 95 %;
- ``inconclusive``: neither;
- ``cannot be tested here``: a precondition fails (too few re-splits with a value, too few RBECE
  bins above ``theta``, a method that could not be fitted), with the reason;
- ``not testable with this data``: the claim needs the authors' data or another kind of model.

Adding a claim is one entry of :data:`CATALOGUE` (and, for a new kind of measurement, one
column that :func:`calibkit.verdicts.resplits.resplit_comparison` records per re-split).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CATALOGUE", "HOLD_SHARE", "MIN_COUNTED_BINS", "MIN_RESPLITS", "Claim", "verdicts", "what_this_means"]

HOLD_SHARE = 0.95
"""A direction found in at least this share of the re-splits decides the verdict."""
MIN_RESPLITS = 10
"""A verdict rests on at least this many re-splits with a value (or on all, when fewer were asked)."""
MIN_COUNTED_BINS = 5
"""An RBECE claim needs at least this many bins holding more than ``theta`` samples, on every re-split."""

CLASSWISE = "Obadinma et al. 2021 (class-wise)"
REGION = "Dawkins & Nejadgholi 2022 (region-balanced)"
FUZZY = "Bihani & Rayz 2023 (fuzzy binning)"
ENTROPIC = "Sumler et al. 2025 (entropic)"
GUO = "Guo et al. 2017 (temperature scaling)"
TUTORIAL = "Galdran & Riera i Marin (calibration tutorial)"


@dataclass(frozen=True)
class Claim:
    """One claim of a paper, and how a comparison over re-splits tests it.

    Parameters
    ----------
    claim : str
        The claim as the report states it (a paraphrase of the paper's sentence).
    paper : str
        Paper and section.
    test : {"paired", "lowest", "larger", "worst_class", "keeps_accuracy", "measurement", "untestable"}
        ``paired``: ``method`` better than ``reference`` on ``metric``; ``lowest``: ``method``
        has the lowest ``metric`` of every fitted method (a tie with the best other method counts
        as lowest: the method shares the lowest value); ``larger``: ``method``'s ``metric`` above
        its ``versus_metric`` on the same re-split; ``worst_class``: ``method``'s worst class's
        ECE below ``reference``'s, or (no ``reference``) above ``method``'s overall ECE;
        ``keeps_accuracy``: ``method``'s
        accuracy is not lower than the uncalibrated model's; ``measurement``: the re-split column
        ``measurement`` is positive (the claimed direction) or negative (the opposite);
        ``untestable``: listed with ``reason``.
    method, reference, metric, versus_metric, measurement : str, optional
    needs_counted_bins : bool, default False
        RBECE on both sides must count at least :data:`MIN_COUNTED_BINS` bins on every re-split.
    reason : str, optional
        Why an untestable claim cannot be tested with a model's own data.
    expects : {"better", "worse"}, default "better"
        ``paired``: the paper says ``method`` is better than ``reference``, or worse.
    """

    claim: str
    paper: str
    test: str
    method: str | None = None
    reference: str | None = None
    metric: str | None = None
    versus_metric: str | None = None
    measurement: str | None = None
    needs_counted_bins: bool = False
    reason: str | None = None
    expects: str = "better"


CATALOGUE: tuple[Claim, ...] = (
    Claim("WTS gives a lower CECE than TS", f"{CLASSWISE}, §5", "paired", "wts", "ts", "cece"),
    Claim(
        "WTS gives a lower ECE variance across classes than TS",
        f"{CLASSWISE}, §5",
        "paired",
        "wts",
        "ts",
        "ece_variance",
    ),  # fmt: skip
    Claim(
        "WTS is better calibrated than the uncalibrated model on the overall metrics (ECE)",
        f"{CLASSWISE}, §5",
        "paired",
        "wts",
        "uncalibrated",
        "ece",
    ),  # fmt: skip
    Claim(
        "WTS is better calibrated than the uncalibrated model on the overall metrics (NLL)",
        f"{CLASSWISE}, §5",
        "paired",
        "wts",
        "uncalibrated",
        "nll",
    ),  # fmt: skip
    Claim(
        "RD-TS gives a lower RBECE than TS",
        f"{REGION}, §5",
        "paired",
        "rd-ts",
        "ts",
        "rbece",
        needs_counted_bins=True,
    ),  # fmt: skip
    Claim(
        "RD-TS gives a lower RBECE than the uncalibrated model",
        f"{REGION}, §5",
        "paired",
        "rd-ts",
        "uncalibrated",
        "rbece",
        needs_counted_bins=True,
    ),  # fmt: skip
    Claim(
        "RD-TS gives the lowest RBECE of all the calibrators compared",
        f"{REGION}, Table 2",
        "lowest",
        "rd-ts",
        metric="rbece",
        needs_counted_bins=True,
    ),  # fmt: skip
    Claim(
        "RBECE is larger than ECE on this data (it exposes miscalibration that ECE averages away)",
        f"{REGION}, §3",
        "larger",
        "uncalibrated",
        metric="rbece",
        versus_metric="ece",
        needs_counted_bins=True,
    ),  # fmt: skip
    Claim(
        "ECE varies more with the bin count than FCE (Δ = mean over M in 2..7 minus mean over 8..15)",
        f"{FUZZY}, Table 4.2",
        "measurement",
        measurement="ece_minus_fce_bin_sensitivity",
    ),  # fmt: skip
    Claim(
        "ECD is positive for an over-confident model and negative for an under-confident one (the TS-calibrated "
        "logits sharpened by 2 and flattened by 2)",
        f"{ENTROPIC}, §3",
        "measurement",
        measurement="ecd_sign",
    ),  # fmt: skip
    Claim(
        "ECD penalises over-confidence more than the mirrored under-confidence (|ECD| at T*/2 above |ECD| at 2T*)",
        f"{ENTROPIC}, §3",
        "measurement",
        measurement="ecd_over_minus_under",
    ),  # fmt: skip
    Claim(
        "WTS lowers the ECE of the worst-calibrated class against TS (at the majority classes' cost)",
        f"{CLASSWISE}, §4.4",
        "worst_class",
        "wts",
        "ts",
    ),  # fmt: skip
    Claim(
        "the worst-calibrated class's ECE is larger than the overall ECE (the overall figure hides it)",
        f"{CLASSWISE}, abstract and Table 1",
        "worst_class",
        "uncalibrated",
    ),  # fmt: skip
    Claim(
        "CECE is at least MSECE (a contraharmonic mean)",
        f"{CLASSWISE}, §3.2",
        "larger",
        "uncalibrated",
        metric="cece",
        versus_metric="msece",
    ),  # fmt: skip
    Claim(
        "TS gives a lower ECE than the uncalibrated model", f"{CLASSWISE}, §4.4", "paired", "ts", "uncalibrated", "ece"
    ),
    Claim(
        "TS gives a lower ACE than the uncalibrated model", f"{CLASSWISE}, §4.4", "paired", "ts", "uncalibrated", "ace"
    ),
    Claim(
        "TS gives a lower SCE than the uncalibrated model", f"{CLASSWISE}, §4.4", "paired", "ts", "uncalibrated", "sce"
    ),
    Claim(
        "isotonic regression gives a lower ECE than the uncalibrated model",
        f"{CLASSWISE}, §4.4",
        "paired",
        "ir",
        "uncalibrated",
        "ece",
    ),  # fmt: skip
    Claim(
        "histogram binning has a higher ECE than the uncalibrated model",
        f"{CLASSWISE}, §4.4",
        "paired",
        "hb",
        "uncalibrated",
        "ece",
        expects="worse",
    ),  # fmt: skip
    Claim(
        "histogram binning gives a lower SCE than the uncalibrated model",
        f"{CLASSWISE}, §4.4",
        "paired",
        "hb",
        "uncalibrated",
        "sce",
    ),  # fmt: skip
    Claim("RD-TS gives a lower ECE than TS in most settings", f"{REGION}, §4.4", "paired", "rd-ts", "ts", "ece"),
    Claim("TS gives a lower ECE than vector scaling", f"{REGION}, §5 (after Guo et al.)", "paired", "ts", "vs", "ece"),
    Claim("TS gives a lower ECE than matrix scaling", f"{REGION}, §5 (after Guo et al.)", "paired", "ts", "ms", "ece"),
    Claim(
        "FCE is larger (more conservative) than ECE",
        f"{FUZZY}, §4.2",
        "larger",
        "uncalibrated",
        metric="fce",
        versus_metric="ece",
    ),  # fmt: skip
    Claim(
        "a predictor of the class frequencies is calibrated but useless: its ECE is no larger than the model's, its "
        "Brier score (a proper scoring rule) is larger",
        f"{TUTORIAL}, proper scoring rules",
        "measurement",
        measurement="useless_but_calibrated",
    ),  # fmt: skip
    Claim("TS keeps the accuracy of the uncalibrated model", f"{GUO}, §4.2", "keeps_accuracy", "ts"),
    Claim("WTS keeps the accuracy of the uncalibrated model", f"{CLASSWISE}, Table 3", "keeps_accuracy", "wts"),
    Claim("RD-TS keeps the accuracy of the uncalibrated model", f"{REGION}, §4", "keeps_accuracy", "rd-ts"),
    Claim(
        "CECE ranks calibrators by their worst-calibrated class where ECE does not (COVID-19 hate speech)",
        f"{CLASSWISE}, §5",
        "untestable",
        reason="stated on the authors' COVID-19 hate-speech data and models, which are not available here",
    ),  # fmt: skip
    Claim(
        "standard TS is worst in the high-confidence regions that dominate token classification",
        f"{REGION}, §5",
        "untestable",
        reason="needs per-region errors before and after TS on the authors' NER data; calibkit's region plot shows "
        "this model's regions, a verdict on the paper's data cannot be drawn from it",
    ),  # fmt: skip
    Claim(
        "ensembling several diverse models reduces over-confidence",
        f"{TUTORIAL}, §3",
        "untestable",
        reason="needs several trained models; a comparison calibrates one model's logits",
    ),  # fmt: skip
    Claim(
        "FCE tracks calibration better than ECE in low-resource fine-tuning",
        f"{FUZZY}, §5",
        "untestable",
        reason="needs models fine-tuned on many training-set sizes; a comparison holds one model",
    ),  # fmt: skip
)
"""Every claim, in report order."""


def verdict_from_shares(better: float, worse: float) -> str:
    """Decide a verdict from the shares of re-splits in the claimed direction and in the opposite one.

    Parameters
    ----------
    better, worse : float
        Shares in [0, 1] (NaN when nothing was compared).

    Returns
    -------
    str
        ``holds``, ``does not hold`` or ``inconclusive`` (:data:`HOLD_SHARE`).
    """
    if math.isnan(better):
        return "inconclusive"
    if better >= HOLD_SHARE:
        return "holds"
    if worse >= HOLD_SHARE:
        return "does not hold"
    return "inconclusive"


def _label(method: str) -> str:
    from calibkit.calibrators.registry import LABELS

    return LABELS.get(method, method)


def _worst_class(resplits: Any, method: str) -> np.ndarray:
    """Each re-split's largest per-class ECE of ``method`` (NaN where it has none)."""
    per_class = resplits.per_class[method]
    has = np.isfinite(per_class).any(axis=1)
    return np.where(has, np.nanmax(np.where(np.isfinite(per_class), per_class, -np.inf), axis=1), np.nan)


def _precondition(claim: Claim, resplits: Any) -> str | None:
    """Return why ``claim`` cannot be tested on these re-splits, or None."""
    methods = [m for m in (claim.method, claim.reference) if m]
    if claim.test == "keeps_accuracy":
        methods.append("uncalibrated")
    if claim.test == "lowest":
        methods = list(dict.fromkeys([claim.method, *resplits.methods]))
    missing = [m for m in methods if m not in resplits.methods]
    if missing:
        return f"{', '.join(_label(m) for m in missing)} not compared"
    if claim.test == "lowest" and len(resplits.methods) < 2:
        return "no other method compared"
    if resplits.resplits < 3:
        return f"only {resplits.resplits} re-splits asked for (a verdict needs at least 3)"
    if claim.needs_counted_bins:
        for m in methods:
            counted = resplits.measurements.get(f"rbece_counted_bins:{m}")
            if counted is None:
                continue
            fewest = int(np.nanmin(counted)) if np.isfinite(counted).any() else 0
            if fewest < MIN_COUNTED_BINS:
                return (
                    f"{_label(m)}: only {fewest} RBECE bin(s) hold more than theta samples on some re-split "
                    f"(a verdict needs {MIN_COUNTED_BINS}): the evaluation part is too small for a region claim"
                )
    return None


def _shares(claim: Claim, resplits: Any) -> tuple[float, float, int, str]:
    """Return the share of re-splits in the claimed direction, in the opposite one, how many, and a sentence."""
    if claim.test == "paired":
        p = resplits.paired(claim.method, claim.reference, claim.metric)
        a, b = resplits.summary(claim.method, claim.metric), resplits.summary(claim.reference, claim.metric)
        numbers = (
            f"{claim.metric}: {_label(claim.method)} {a['mean']:.4f} ± {a['std']:.4f} vs {_label(claim.reference)} "
            f"{b['mean']:.4f} ± {b['std']:.4f}; better in {p['better']:.0%} of {p['n']} re-splits, difference "
            f"{p['difference']:+.4f} [{p['low']:+.4f}, {p['high']:+.4f}]"
        )
        if claim.expects == "worse":  # the paper says this method is worse here
            return p["worse"], p["better"], p["n"], numbers
        return p["better"], p["worse"], p["n"], numbers
    if claim.test == "worst_class":
        mine = _worst_class(resplits, claim.method)
        other = _worst_class(resplits, claim.reference) if claim.reference else resplits.column(claim.method, "ece")
        both = ~(np.isnan(mine) | np.isnan(other))
        n = int(both.sum())
        if claim.reference:  # lower than the reference's worst class
            better = float(np.mean(mine[both] < other[both])) if n else math.nan
            worse = float(np.mean(mine[both] > other[both])) if n else math.nan
            what = f"{_label(claim.reference)}'s {np.mean(other[both]) if n else math.nan:.4f}"
        else:  # above the overall ECE
            better = float(np.mean(mine[both] > other[both])) if n else math.nan
            worse = float(np.mean(mine[both] < other[both])) if n else math.nan
            what = f"the overall ECE {np.mean(other[both]) if n else math.nan:.4f}"
        numbers = (
            f"{_label(claim.method)}'s worst class's ECE {np.mean(mine[both]) if n else math.nan:.4f} vs {what}; "
            f"in the claimed direction in {better:.0%} of {n} re-splits"
        )
        return better, worse, n, numbers
    if claim.test == "keeps_accuracy":
        p = resplits.paired(claim.method, "uncalibrated", "accuracy")
        kept = 1.0 - p["worse"] if p["n"] else math.nan  # equal (the argmax is kept) or higher
        numbers = (
            f"accuracy change {p['difference']:+.4f} [{p['low']:+.4f}, {p['high']:+.4f}]; not lower in {kept:.0%} of "
            f"{p['n']} re-splits"
        )
        return kept, p["worse"], p["n"], numbers
    if claim.test == "larger":
        a, b = resplits.column(claim.method, claim.metric), resplits.column(claim.method, claim.versus_metric)
        both = ~(np.isnan(a) | np.isnan(b))
        n = int(both.sum())
        larger = float(np.mean(a[both] > b[both])) if n else math.nan
        smaller = float(np.mean(a[both] < b[both])) if n else math.nan
        means = (float(np.mean(a[both])), float(np.mean(b[both]))) if n else (math.nan, math.nan)
        numbers = (
            f"{_label(claim.method)} {claim.metric} {means[0]:.4f} vs {claim.versus_metric} {means[1]:.4f}; larger "
            f"in {larger:.0%} of {n} re-splits"
        )
        return larger, smaller, n, numbers
    if claim.test == "lowest":
        mine = resplits.column(claim.method, claim.metric)
        others = np.stack([resplits.column(m, claim.metric) for m in resplits.methods if m != claim.method], axis=1)
        valid = ~np.isnan(mine) & ~np.isnan(others).all(axis=1)
        best_other = np.nanmin(np.where(valid[:, None], others, np.inf), axis=1)
        lowest = mine[valid] <= best_other[valid]
        n = int(valid.sum())
        share = float(lowest.mean()) if n else math.nan
        numbers = f"{_label(claim.method)} has the lowest {claim.metric} in {share:.0%} of {n} re-splits"
        return share, (1.0 - share) if n else math.nan, n, numbers
    values = resplits.measurements.get(claim.measurement, np.full(resplits.resplits, np.nan))
    values = values[~np.isnan(values)]
    n = int(values.size)
    better = float(np.mean(values > 0)) if n else math.nan
    worse = float(np.mean(values < 0)) if n else math.nan
    mean = float(values.mean()) if n else math.nan
    numbers = f"{claim.measurement} {mean:+.4f} on average; in the claimed direction in {better:.0%} of {n} re-splits"
    return better, worse, n, numbers


def verdicts(resplits: Any, catalogue: tuple[Claim, ...] = CATALOGUE) -> list[dict[str, Any]]:
    """Give every claim of ``catalogue`` a verdict on these re-splits (see the module docstring).

    Parameters
    ----------
    resplits : Resplits
        From :func:`calibkit.verdicts.resplits.resplit_comparison`.
    catalogue : tuple of Claim, default CATALOGUE

    Returns
    -------
    list of dict
        Per claim, in catalogue order: ``claim``, ``paper``, ``metric``, ``verdict``, ``share``
        (of re-splits in the claimed direction, None where not tested), ``resplits`` (how many
        the verdict rests on) and ``numbers`` (the figures, or the reason it is not tested).
    """
    out = []
    for claim in catalogue:
        entry = {"claim": claim.claim, "paper": claim.paper, "metric": claim.metric or claim.measurement}
        if claim.test == "untestable":
            out.append({**entry, "verdict": "not testable with this data", "share": None, "resplits": 0,
                        "numbers": claim.reason})  # fmt: skip
            continue
        why = _precondition(claim, resplits)
        if why is None:
            better, worse, n, numbers = _shares(claim, resplits)
            needed = min(resplits.resplits, MIN_RESPLITS)
            if n < needed:
                why = f"values on only {n} of {resplits.resplits} re-splits (a verdict needs {needed})"
                not_fitted = [m for m in (claim.method, claim.reference) if m in resplits.errors]
                why += "".join(f"; {_label(m)}: {resplits.error_messages.get(m, '')}" for m in not_fitted)
        if why is not None:
            out.append({**entry, "verdict": "cannot be tested here", "share": None, "resplits": 0, "numbers": why})
            continue
        out.append(
            {**entry, "verdict": verdict_from_shares(better, worse), "share": better, "resplits": n, "numbers": numbers}
        )
    return out


def what_this_means(resplits: Any, claims: list[dict[str, Any]]) -> str:
    """Write, from the table and the verdicts, which calibrator to pick for which goal and the trade-off measured.

    Parameters
    ----------
    resplits : Resplits
    claims : list of dict
        From :func:`verdicts`.

    Returns
    -------
    str
        One paragraph; every figure is read from ``resplits``.
    """
    fitted = [m for m in resplits.methods if resplits.summary(m, "ece")["n"] >= min(resplits.resplits, MIN_RESPLITS)]
    if not fitted:
        return "No method has values on enough re-splits to recommend one."

    def mean(m: str, metric: str) -> float:
        return resplits.summary(m, metric)["mean"]

    def worst_class(m: str) -> float:
        values = _worst_class(resplits, m)
        return float(np.nanmean(values)) if np.isfinite(values).any() else math.nan

    def pick(score) -> str:
        return min(fitted, key=lambda m: math.inf if math.isnan(score(m)) else score(m))

    overall, worst, region = pick(lambda m: mean(m, "ece")), pick(worst_class), pick(lambda m: mean(m, "rbece"))
    regions = (
        f"; for the regions of certainty, {_label(region)} (RBECE {mean(region, 'rbece'):.4f})"
        if not math.isnan(mean(region, "rbece"))
        else "; RBECE counts no bin here, so no pick for the regions of certainty"
    )
    parts = [
        f"For overall calibration pick {_label(overall)} (mean ECE {mean(overall, 'ece'):.4f} over the re-splits); "
        f"for the worst-calibrated class, {_label(worst)} (its worst class's ECE {worst_class(worst):.4f}){regions}."
    ]
    if worst != overall:
        gain = worst_class(overall) - worst_class(worst)
        cost = mean(worst, "ece") - mean(overall, "ece")
        parts.append(
            f"The trade-off: {_label(worst)} lowers the worst class's ECE by {gain:.4f} against {_label(overall)} "
            f"but changes the overall ECE by {cost:+.4f}."
        )
    against = [c for c in claims if c["verdict"] == "does not hold"]
    if against:
        parts.append("Claims that do not hold on this model: " + "; ".join(c["claim"] for c in against) + ".")
    return " ".join(parts)
