"""A reward model's preferences judged per subset and pooled, RewardBench's sections, the fit on re-splits.

Every number is :func:`calibkit.metrics.preferences.preference_metrics`' (the top-label reading
of each pair; ties wrong, counted; SPEC.md "Preference calibration"). Which calibrations apply to
a reward model's margins, and why (the guide, "Reward models"):

- the pairwise temperature (:func:`calibkit.calibrators.preference.fit_preference_temperature`):
  ``sigmoid(m / T)``, one number, the ranking kept, and the one a reward model can carry (its
  reward divided by ``T``);
- Platt scaling ``sigmoid(a m + b)`` on pairs read as "chosen wins" is the temperature once its
  intercept is 0, and it must be: every label is 1, so a free ``b`` grows without bound, and
  ``b != 0`` makes ``p(a over b) + p(b over a) != 1``. It adds nothing, so it is not offered;
- isotonic regression (and histogram binning) of the top-label confidence ``sigmoid(|m| / T)``
  against whether the preferred answer is right (``calibkit.lm.generations.recalibrate``): a
  monotone map of the confidence, judged here beside the temperature; it maps pairs, not
  rewards, so no reward model can carry it, and a tie may map to other than 0.5.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from calibkit.calibrators.preference import fit_preference_temperature
from calibkit.lm.generations.recalibrate import apply_score_map, fit_score_map
from calibkit.lm.preferences.data import Preferences
from calibkit.lm.preferences.rewardbench import is_rewardbench, rewardbench_sections
from calibkit.metrics.functional.core import calibration_report
from calibkit.metrics.preferences import preference_metrics, top_label_reading
from calibkit.metrics.ranking import selective_from_rows
from calibkit.metrics.registry import PREFERENCE_METRICS
from calibkit.metrics.sampling import OFF, SAMPLING_UNSET, SamplingSettings, resolve_sampling
from calibkit.metrics.settings import UNSET, resolve_settings
from calibkit.verdicts.claims import verdict_from_shares

CALIBRATIONS = ("temperature", "isotonic", "histogram")
"""The calibrations of a reward model's preferences the re-splits judge, beside ``raw`` (T = 1)."""

JUDGED = PREFERENCE_METRICS[1:5]
"""The held-out numbers of each calibration on each re-split."""

SHOWN_DROPPED = 20
"""Dropped pairs a report states one by one (the count is always there)."""


def preference_report(
    prefs: Preferences,
    *,
    temperature: float = 1.0,
    n_bins: int = UNSET.n_bins,
    subsets: list[str] | None = None,
    bootstrap: int = OFF,
    level: float = SAMPLING_UNSET.level,
    seed: int = SAMPLING_UNSET.seed,
    sampling: SamplingSettings | None = None,
) -> dict[str, Any]:
    """Judge a reward model's preference probabilities per subset and pooled.

    Parameters
    ----------
    prefs : Preferences
        From :func:`calibkit.lm.preferences.read_preferences` (or built in memory).
    temperature : float, default 1.0
        The margins are divided by it (1: the model as trained; a fitted ``T`` to see it applied).
    n_bins : int, default 15
        Bins of ECE and of the reliability diagrams.
    subsets : list of str, optional
        The subsets to report (default: all); the pooled numbers are over these.
    bootstrap : int, default 0
        Replicates of the pooled numbers' intervals (pairs resampled).
    level : float, default 0.95
    seed : int, default 0
    sampling : SamplingSettings, optional
        ``bootstrap``, ``level`` and ``seed`` as one object.

    Returns
    -------
    dict
        ``pairs``, ``ties``, ``dropped`` (pairs the reader left out) and ``dropped_pairs`` (where
        and why, the first ``SHOWN_DROPPED`` (20)), ``temperature``, ``pooled`` and ``subsets``
        (subset -> :func:`calibkit.preference_metrics`; intervals pooled
        only), ``sections`` (:func:`calibkit.lm.preferences.rewardbench_sections`
        of the subsets' accuracies, or None) and ``sections_note`` (why there are none).

    Raises
    ------
    ValueError
        On a subset asked for that has no pair (naming it and the subsets there are), bad margins
        (NaN, infinite: the pair's origin named), or a bad setting.
    """
    sampling = resolve_sampling(sampling, bootstrap=bootstrap, level=level, seed=seed)
    n_bins = resolve_settings(n_bins=n_bins).n_bins
    margins = _checked_margins(prefs)
    rows, names = _subset_rows(prefs, subsets)
    lengths = {}
    if prefs.length_chosen is not None and prefs.length_rejected is not None:
        lengths = {"length_chosen": prefs.length_chosen, "length_rejected": prefs.length_rejected}

    def judged(keep: np.ndarray | None, intervals: SamplingSettings | None) -> dict[str, Any]:
        part = {k: v if keep is None else v[keep] for k, v in lengths.items()}
        m = margins if keep is None else margins[keep]
        return preference_metrics(m, temperature=temperature, n_bins=n_bins, sampling=intervals, **part)

    pooled = judged(rows["pooled"], sampling)
    per_subset = {s: judged(rows[s], sampling.replace(bootstrap=0)) for s in names} if len(names) > 1 else {}
    if len(names) == 1:
        per_subset = {names[0]: {k: v for k, v in pooled.items() if k != "intervals"}}
    out = {
        "pairs": pooled["pairs"],
        "ties": pooled["ties"],
        "dropped": len(prefs.dropped),
        "dropped_pairs": prefs.dropped[:SHOWN_DROPPED],
        "temperature": pooled["temperature"],
        "pooled": pooled,
        "subsets": per_subset,
        "sections": None,
        "sections_note": "",
    }
    if is_rewardbench(names):
        out["sections"] = rewardbench_sections({s: r["accuracy"] for s, r in per_subset.items()})
    else:
        out["sections_note"] = "no RewardBench sections: not every subset is one of RewardBench's"
    return out


def _checked_margins(prefs: Preferences) -> np.ndarray:
    """Return the margins, a bad one refused with where its pair was read (the metrics would name its index only)."""
    margins = prefs.margins
    bad = np.flatnonzero(~np.isfinite(margins))
    if bad.size:
        i = int(bad[0])
        where = prefs.origin[i] if i < len(prefs.origin) else f"pair {i} (id {prefs.ids[i]!r})"
        raise ValueError(f"`prefs`: {where}: the margin is {margins[i]} (a reward NaN or infinite)")
    if margins.size == 0:
        raise ValueError("`prefs`: no preference pair")
    return margins


def _subset_rows(prefs: Preferences, subsets: list[str] | None) -> tuple[dict[str, np.ndarray | None], list[str]]:
    """Each subset's rows (None: every row), and the pooled rows; a subset asked for with no pair is refused."""
    subset = np.asarray(prefs.subset, dtype=object)
    one = subset.size > 0 and bool((subset == subset[0]).all())  # the common case, without sorting strings
    present = [str(subset[0])] if one else sorted(set(subset.tolist()))
    if subsets is not None:
        empty = [s for s in subsets if s not in present]
        if empty or not subsets:
            raise ValueError(f"`subsets`: {empty or subsets!r} has no pair (the subsets: {present})")
    names = present if subsets is None else list(subsets)
    if one and names == present:
        return {"pooled": None, names[0]: None}, names
    rows: dict[str, np.ndarray | None] = {s: subset == s for s in names}
    rows["pooled"] = None if names == present else np.logical_or.reduce([rows[s] for s in names])
    return rows, names


def preference_resplits(
    prefs: Preferences,
    *,
    methods: tuple[str, ...] = CALIBRATIONS,
    resplits: int = SAMPLING_UNSET.resplits,
    n_bins: int = UNSET.n_bins,
    seed: int = SAMPLING_UNSET.seed,
    sampling: SamplingSettings | None = None,
) -> dict[str, Any]:
    """Fit each calibration on a random half of the pairs and judge it on the other half, over re-splits.

    Parameters
    ----------
    prefs : Preferences
    methods : tuple of str, default ("temperature", "isotonic", "histogram")
        Of ``CALIBRATIONS``; each judged against ``raw`` (T = 1) on the same held half.
    resplits : int, default 20
        Random halvings of the pairs (pooled over the subsets).
    n_bins : int, default 15
    seed : int, default 0
    sampling : SamplingSettings, optional
        ``resplits`` and ``seed`` as one object.

    Returns
    -------
    dict
        ``values``: method (``raw`` first) -> metric (``JUDGED``) -> ``R`` held-out values
        (NaN where a re-split fitted nothing: no pair of its half ranked wrong); ``temperatures``:
        the ``R`` fitted temperatures; ``unfitted``: the re-splits without a temperature;
        ``verdicts``: ``{"claim", "verdict", "better", "worse", "compared"}`` for each calibration
        against raw on ECE (and the temperature on NLL); ``resplits``.

    Raises
    ------
    ValueError
        On an unknown method, ``resplits`` not in [1, 10000], fewer than 2 pairs, or bad margins.
    """
    sampling = resolve_sampling(sampling, resplits=resplits, seed=seed)
    resplits, seed = sampling.require("resplits"), sampling.seed
    n_bins = resolve_settings(n_bins=n_bins).n_bins
    unknown = [m for m in methods if m not in CALIBRATIONS]
    if unknown:
        raise ValueError(f"`methods` has unknown names {unknown}; known: {list(CALIBRATIONS)}")
    margins = _checked_margins(prefs)
    if margins.size < 2:
        raise ValueError(f"`prefs`: {margins.size} pair: re-splits need 2 pairs or more")
    rng = np.random.default_rng(seed)
    values = {m: {k: np.full(resplits, np.nan) for k in JUDGED} for m in ("raw", *methods)}
    temperatures = np.full(resplits, np.nan)
    for r in range(resplits):  # a loop over re-splits; each fit and metric inside is vectorised
        fit = np.zeros(margins.size, dtype=bool)
        fit[rng.permutation(margins.size)[: margins.size // 2]] = True
        held = _held_out(margins[fit], margins[~fit], methods, n_bins)
        temperatures[r] = held.pop("T")
        for method, judged in held.items():
            for k in JUDGED:
                values[method][k][r] = judged[k]
    return {
        "values": values,
        "temperatures": temperatures,
        "unfitted": int(np.isnan(temperatures).sum()),
        "verdicts": _verdicts(values, methods),
        "resplits": resplits,
    }


def _held_out(train: np.ndarray, held: np.ndarray, methods: tuple[str, ...], n_bins: int) -> dict[str, Any]:
    """Fit each method on ``train``'s margins; each one's numbers on ``held`` (NaN where nothing was fitted)."""
    out: dict[str, Any] = {"raw": preference_metrics(held, n_bins=n_bins), "T": np.nan}
    try:
        out["T"] = fit_preference_temperature(train)
    except ValueError:  # no pair of the half ranked wrong: no temperature (the re-split is counted as unfitted)
        pass
    if "temperature" in methods:
        fitted = not np.isnan(out["T"])
        nothing = dict.fromkeys(JUDGED, np.nan)
        out["temperature"] = preference_metrics(held, temperature=out["T"], n_bins=n_bins) if fitted else nothing
    conf, right = top_label_reading(train)
    held_conf, held_right = top_label_reading(held)
    for method in (m for m in methods if m != "temperature"):
        q = apply_score_map(fit_score_map(method, conf, right), held_conf)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # one outcome only in a small half
            report = calibration_report(q, held_right.astype(np.int64), metrics=list(JUDGED[:3]), n_bins=n_bins)
        out[method] = {**report, "aurc": selective_from_rows(q, 1.0 - held_right, 1.0)["aurc"][0]}
    return out


def _verdicts(values: dict[str, dict[str, np.ndarray]], methods: tuple[str, ...]) -> list[dict[str, Any]]:
    claims = [(m, "ece", f"{_name(m)} lowers ECE below T = 1") for m in methods]
    if "temperature" in methods:
        claims.append(("temperature", "nll", "the temperature lowers NLL below T = 1"))
    out = []
    for method, metric, text in claims:
        a, b = values[method][metric], values["raw"][metric]
        both = ~np.isnan(a) & ~np.isnan(b)
        better = float(np.mean(a[both] < b[both])) if both.any() else float("nan")
        worse = float(np.mean(a[both] > b[both])) if both.any() else float("nan")
        out.append({
            "claim": text, "verdict": verdict_from_shares(better, worse), "better": better, "worse": worse,
            "compared": int(both.sum()), "method": method, "metric": metric,
        })  # fmt: skip
    return out


def _name(method: str) -> str:
    return {"temperature": "the temperature", "isotonic": "isotonic regression of the confidence"}.get(
        method, "histogram binning of the confidence"
    )
