"""Abstention with a guarantee for generated answers: the Learn-then-Test threshold of each confidence source.

"Answer only when the source's confidence is at least ``t``": the threshold is found by
:func:`calibkit.metrics.abstention.abstention_threshold` (Learn then Test, Angelopoulos et al.
2021) so that the error rate among the answers given is at most ``abstention_alpha`` with
probability at least ``1 - abstention_delta``, per task and pooled (:func:`abstention_summary`,
called by :func:`~calibkit.lm.generations.generations_report`), and checked on held-out questions
over re-splits (:func:`abstention_resplits`): fitted on half of the questions, its selective error
measured on the other half.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibkit.lm.generations.data import Generations
from calibkit.metrics.abstention import abstention_threshold, binomial_upper_tail, selective_error_at
from calibkit.metrics.sampling import SAMPLING_UNSET, SamplingSettings, resolve_sampling
from calibkit.metrics.settings import DEFAULTS, resolve_settings


def abstention_summary(
    confidence: np.ndarray,
    right: np.ndarray,
    *,
    abstention_alpha: float = DEFAULTS.abstention_alpha,
    abstention_delta: float = DEFAULTS.abstention_delta,
) -> dict[str, Any]:
    """Find one source's Learn-then-Test threshold on some answers (those without a confidence left out).

    Parameters
    ----------
    confidence : ndarray of shape (n,)
        In [0, 1], NaN where the source gave none.
    right : ndarray of shape (n,)
        1 for a right answer, 0 for a wrong one.
    abstention_alpha : float, default 0.1
        The selective error allowed.
    abstention_delta : float, default 0.1
        The probability allowed that it is exceeded.

    Returns
    -------
    dict
        ``threshold`` (None when none passes), ``answered`` (the share of the answers with a
        confidence that the threshold answers), ``n_answered``, ``selective_error`` (among them,
        on these answers), ``p_value``, ``alpha``, ``delta``, ``answers`` (with a confidence) and
        ``sentence`` (``abstention_sentence``).
    """
    levels = resolve_settings(abstention_alpha=abstention_alpha, abstention_delta=abstention_delta)
    alpha, delta = levels.abstention_alpha, levels.abstention_delta
    has = ~np.isnan(confidence)
    out: dict[str, Any] = {"alpha": alpha, "delta": delta, "answers": int(has.sum())}
    if not has.any():
        out.update(threshold=None, answered=0.0, n_answered=0, selective_error=None, p_value=None)
    else:
        found = abstention_threshold(confidence[has], right[has], abstention_alpha=alpha, abstention_delta=delta)
        out.update({k: found[k] for k in ("threshold", "answered", "n_answered", "selective_error", "p_value")})
    return {**out, "sentence": abstention_sentence(out)}


def _percent(value: float) -> str:
    return f"{100 * value:.3g}%"


def abstention_sentence(entry: dict[str, Any]) -> str:
    """Say a threshold in words: "answer above 0.62: 71% answered, error <= 10% with 90% confidence".

    Parameters
    ----------
    entry : dict
        From :func:`abstention_summary`.

    Returns
    -------
    str
        Where no threshold passes, says so (never a number): "no threshold: ...".
    """
    guarantee = f"error <= {_percent(entry['alpha'])} with {_percent(1 - entry['delta'])} confidence"
    if entry["answers"] == 0:
        return f"no threshold: no answer has a confidence ({guarantee} cannot be shown)"
    if entry["threshold"] is None:
        return f"no threshold: no confidence threshold shows {guarantee} on these {entry['answers']} answers"
    return f"answer above {entry['threshold']:.4g}: {entry['answered']:.0%} answered, {guarantee}"


def abstention_resplits(
    data: Generations,
    *,
    sources: list[str] | None = None,
    resplits: int = SAMPLING_UNSET.resplits,
    threshold: float = SAMPLING_UNSET.threshold,
    abstention_alpha: float = DEFAULTS.abstention_alpha,
    abstention_delta: float = DEFAULTS.abstention_delta,
    seed: int = SAMPLING_UNSET.seed,
    sampling: SamplingSettings | None = None,
) -> dict[str, Any]:
    """Fit each source's threshold on half of the questions (pooled) and measure its selective error on the other half.

    Parameters
    ----------
    data : Generations
    sources : list of str, optional
        Default: every source.
    resplits : int, default 20
        Random halvings of the questions (every source's answers split alike).
    threshold : float, default 0.5
        A ``correct`` score at least this high is a right answer.
    abstention_alpha, abstention_delta : float, default 0.1
        As :func:`abstention_summary`.
    seed : int, default 0
    sampling : SamplingSettings, optional
        ``resplits``, ``threshold`` and ``seed`` as one object
        (:class:`calibkit.metrics.sampling.SamplingSettings`), instead of the keywords.

    Returns
    -------
    dict
        ``resplits``, ``alpha``, ``delta`` and ``sources``: source -> ``thresholds`` (one a
        re-split, NaN where none passed on the fitting half), ``held_error`` (the selective
        error on the held half; NaN where no threshold, or where the threshold answers no held
        question), ``held_answered`` (the share of the held half answered), ``fitted`` (re-splits
        with a threshold), ``holds`` (the share of those whose held error is at most ``alpha``;
        a threshold that answers no held question makes no error), ``verdict``: ``holds``
        when that share is at least ``1 - delta``, ``does not hold`` below it, ``no threshold``
        when no re-split found one; and ``significantly_above``, the share of those re-splits
        whose held error is significantly above ``alpha`` (one-sided binomial test at level
        ``delta``: ``k`` wrong of ``n`` answered is above when ``P(Binomial(n, alpha) >= k) <=
        delta``, the upper tail from ``k`` itself), with ``above`` per re-split. The held half's
        own sampling noise makes the first share strict: a threshold whose true error is just
        under ``alpha`` (which Learn then Test aims at when data are plenty) shows an error above
        ``alpha`` on about half of the held halves; the second share separates that noise from
        a guarantee that fails.

    Raises
    ------
    ValueError
        On an unknown source, ``resplits`` not an integer in [1, 10000], ``threshold`` outside
        (0, 1], or a bad level.
    """
    names = data.source_names(sources)
    if not names:
        raise ValueError(f"`sources` must name confidence sources of the data {sorted(data.confidence)}, got {names}")
    sampling = resolve_sampling(sampling, resplits=resplits, threshold=threshold, seed=seed)
    resplits, threshold, seed = sampling.require("resplits"), sampling.threshold, sampling.seed
    levels = resolve_settings(abstention_alpha=abstention_alpha, abstention_delta=abstention_delta)
    alpha, delta = levels.abstention_alpha, levels.abstention_delta
    right = (data.correct >= threshold).astype(np.int64)
    rng = np.random.default_rng(seed)
    fields = ("thresholds", "held_error", "held_answered", "above")
    values = {s: {f: np.full(resplits, np.nan) for f in fields} for s in names}
    for r in range(resplits):  # a loop over re-splits; the threshold's search inside is vectorised
        fit = np.zeros(len(data), dtype=bool)
        fit[rng.permutation(len(data))[: len(data) // 2]] = True
        for s in names:
            p = data.confidence[s]
            has = ~np.isnan(p)
            train, held = fit & has, ~fit & has
            if not train.any() or not held.any():
                continue
            found = abstention_threshold(p[train], right[train], abstention_alpha=alpha, abstention_delta=delta)
            if found["threshold"] is None:
                continue
            error, answered = selective_error_at(p[held], right[held], found["threshold"])
            values[s]["thresholds"][r] = found["threshold"]
            values[s]["held_error"][r] = np.nan if error is None else error
            values[s]["held_answered"][r] = answered / int(held.sum())
            if answered:  # the held half's own noise: is its error significantly above alpha? P(X >= wrong)
                wrong = round(error * answered)
                values[s]["above"][r] = binomial_upper_tail(wrong, answered, alpha)[()] <= delta
    out = {}
    for s, v in values.items():
        fitted = ~np.isnan(v["thresholds"])
        kept = v["held_error"][fitted]
        holds = float(np.mean(np.isnan(kept) | (kept <= alpha))) if fitted.any() else None
        above = float(np.nansum(v["above"][fitted]) / fitted.sum()) if fitted.any() else None
        verdict = "no threshold" if holds is None else "holds" if holds >= 1 - delta else "does not hold"
        out[s] = {**v, "fitted": int(fitted.sum()), "holds": holds, "significantly_above": above, "verdict": verdict}
    return {"resplits": resplits, "alpha": alpha, "delta": delta, "sources": out}


def abstention_lines(report: dict[str, Any], resplit: dict[str, Any] | None = None) -> list[str]:
    """Render each source's threshold, pooled and per task, and its held-out check, as Markdown lines.

    Parameters
    ----------
    report : dict
        From :func:`~calibkit.lm.generations.generations_report`.
    resplit : dict, optional
        From :func:`abstention_resplits`.

    Returns
    -------
    list of str
    """
    groups = [("pooled", report["pooled"])] + ([*report["tasks"].items()] if len(report["tasks"]) > 1 else [])
    lines = []
    for task, group in groups:
        for source, row in group["sources"].items():
            lines.append(f"- {source}, {task}: {row['abstention']['sentence']}")
    for source, row in (resplit or {}).get("sources", {}).items():
        if row["holds"] is None:
            lines.append(f"- {source}, held out: no threshold on any fitting half of {resplit['resplits']} re-splits")
            continue
        share = f"{row['holds']:.0%} of the {row['fitted']} re-splits with a threshold"
        answered = np.nanmean(row["held_answered"])
        given = ~np.isnan(row["held_error"])  # NaN: the threshold answered no held question
        error = f"error {np.mean(row['held_error'][given]):.1%}" if given.any() else "no held question answered"
        lines.append(
            f"- {source}, held out: error <= {_percent(resplit['alpha'])} on the other half in {share} "
            f"(needs >= {_percent(1 - resplit['delta'])}): {row['verdict']}; significantly above it in "
            f"{row['significantly_above']:.0%}; on average {answered:.0%} answered, {error}"
        )
    return lines
