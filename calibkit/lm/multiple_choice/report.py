"""Calibration of multiple-choice answers per task and pooled, and temperature scaling over the choices."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calibkit.lm.multiple_choice.data import ChoiceData, check_score, choice_logits, choice_probabilities
from calibkit.metrics.registry import ON_REQUEST, OVER_CLASSES, TABLE_METRICS, metric_names
from calibkit.metrics.sampling import SAMPLING_DEFAULTS
from calibkit.metrics.settings import DEFAULTS
from calibkit.plots.tables import markdown_table, summary_cell

TOP_LABEL = tuple(m for m in TABLE_METRICS if m not in OVER_CLASSES and m != "macro_f1")
"""The comparison table's metrics of the top label (and accuracy): defined whatever the number of choices."""

SELECTIVE_COVERAGE = DEFAULTS.coverage
"""The coverage of the selective accuracy in each report: the 80% most confident answers."""

POSITION_METRICS = (*OVER_CLASSES, "ace_error_bound")
"""Metrics over classes, here answer positions: given only where a task has a fixed number of choices."""


def unscorable(data: ChoiceData) -> str | None:
    """Say why a set of questions cannot be scored (every question has one choice), or None.

    Parameters
    ----------
    data : ChoiceData

    Returns
    -------
    str or None
    """
    if len(data.gold) and int(np.max(data.n_choices)) < 2:
        return "every question has one choice: the answer is given, there is no confidence to judge"
    return None


def _one_report(data: ChoiceData, score: str, settings: dict[str, Any]) -> dict[str, Any]:
    import calibkit

    probs = choice_probabilities(data, score)
    counts = data.n_choices
    fixed = int(counts.min()) == int(counts.max())
    # HELM's view too: AURC and the accuracy when answering only the most confident questions
    metrics = (*metric_names(settings["metrics"]), *ON_REQUEST)  # a string names one metric
    report = calibkit.calibration_report(
        probs, data.gold, **{**settings, "metrics": tuple(dict.fromkeys(metrics))}, coverage=SELECTIVE_COVERAGE
    )
    out: dict[str, Any] = {"questions": int(len(data.gold)), "choices": sorted({int(c) for c in counts})}
    out["coverage"] = SELECTIVE_COVERAGE
    for key, value in report.items():  # JSON-ready: lists, and None for NaN (a class with no question, ...)
        value = value.tolist() if isinstance(value, np.ndarray) else value
        if isinstance(value, list):
            value = [None if isinstance(v, float) and np.isnan(v) else v for v in value]
        out[key] = None if isinstance(value, float) and np.isnan(value) else value
    if fixed:
        out["positions"] = "answer positions are the classes: " + ", ".join(chr(65 + j) for j in range(int(counts[0])))
    else:
        for key in POSITION_METRICS:
            if key in out:
                out[key] = None
        low, high = int(counts.min()), int(counts.max())
        out["positions"] = f"not defined: questions have {low} to {high} choices (metrics over positions are None)"
    return out


def multiple_choice_report(
    data: ChoiceData,
    *,
    score: str = "loglik",
    n_bins: int = DEFAULTS.n_bins,
    theta: float = DEFAULTS.theta,
    fce_variant: str = DEFAULTS.fce_variant,
    metrics: Any = None,
) -> dict[str, Any]:
    """Calibration of a language model on multiple-choice tasks: every metric per task and pooled.

    Parameters
    ----------
    data : ChoiceData
        From :func:`read_choices`.
    score : {"loglik", "chars", "bytes", "tokens"}, default "loglik"
        The score whose softmax over the choices is the confidence (the harness's ``acc``,
        ``acc_norm``, ``acc_bytes``).
    n_bins, theta, fce_variant, metrics
        As in :func:`calibkit.calibration_report`.

    Returns
    -------
    dict
        ``"score"``; ``"pooled"``: the report over every question; ``"tasks"``: per task, the
        same. Each report holds :func:`calibkit.calibration_report`'s keys (``accuracy`` is the
        harness's accuracy for this score), ``"questions"``, ``"choices"`` (the numbers of choices
        seen), ``"positions"`` (whether metrics over answer positions are defined: None where
        not), ``"aurc"`` and ``"selective_accuracy"`` (:func:`calibkit.aurc`,
        :func:`calibkit.selective_accuracy` on the ``"coverage"``, 80%, most confident answers).
        ``"skipped"``: task -> why it could not be scored (every question has one choice); its
        questions still count in the pooled report.

    Raises
    ------
    ValueError
        On an unknown score or a bad setting, or when no question has two choices.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> ll = -rng.gamma(2.0, 2.0, (200, 4))
    >>> gold = ll.argmax(1) * (rng.random(200) < 0.7)  # right 70 % of the time (or gold 0)
    >>> data = ChoiceData(np.array(["arc"] * 200, dtype=object), np.arange(200).astype(object), ll, gold,
    ...                   None, None, np.array(["f"] * 200, dtype=object))
    >>> r = multiple_choice_report(data)
    >>> r["score"], r["tasks"]["arc"]["questions"], r["pooled"]["positions"][:20]
    ('loglik', 200, 'answer positions are')
    """
    score = check_score(score)
    settings = {"n_bins": n_bins, "theta": theta, "fce_variant": fce_variant, "metrics": metrics}
    why = unscorable(data)
    if why is not None:
        raise ValueError(f"`data`: {why} (in every task)")
    tasks, skipped = {}, {}
    for task in sorted(set(data.task.tolist())):
        part = data.select(data.task == task)
        why = unscorable(part)
        if why is not None:  # skipped with its reason; the other tasks are reported
            skipped[task] = why
            continue
        tasks[task] = _one_report(part, score, settings)
    return {"score": score, "pooled": _one_report(data, score, settings), "tasks": tasks, "skipped": skipped}


TABLE_COLUMNS = ("questions", *TOP_LABEL, "cece", *ON_REQUEST)


def format_choice_table(report: dict[str, Any]) -> str:
    """Render :func:`multiple_choice_report` as a Markdown table: one row per task, then the pooled row.

    Parameters
    ----------
    report : dict

    Returns
    -------
    str
        ``-`` where a value is None (not defined) or NaN (e.g. RBECE with no bin over ``theta``).
    """
    # the columns the report holds (metrics=[...] computes fewer)
    columns = [c for c in TABLE_COLUMNS if c in report["pooled"]]
    rows = []
    for task, r in [*report["tasks"].items(), ("(pooled)", report["pooled"])]:
        choices = (
            "-".join(str(c) for c in (r["choices"][0], r["choices"][-1])) if len(r["choices"]) > 1 else r["choices"][0]
        )
        rows.append([task, str(choices), *(r[c] for c in columns)])
    table = markdown_table(["task", "choices", *columns], rows, missing="-")
    return _with_skipped(table, report.get("skipped", {}), ["1", *["-"] * len(columns)])


TS_METRICS = TOP_LABEL
"""The metrics temperature scaling is judged by over the choices (top-label, Brier, NLL)."""


def choice_temperature_scaling(
    data: ChoiceData,
    *,
    score: str = "loglik",
    resplits: int = SAMPLING_DEFAULTS.resplits,
    n_bins: int = DEFAULTS.n_bins,
    theta: float = DEFAULTS.theta,
    seed: int = SAMPLING_DEFAULTS.seed,
) -> dict[str, Any]:
    """Fit temperature scaling over the choices per task on one half, evaluate on the other, re-split.

    Each task's questions are split in two halves, pooled, and re-split ``resplits`` times
    (:func:`calibkit.verdicts.resplits.resplit_comparison`): TS is fitted on one part and every metric of
    :data:`TS_METRICS` evaluated on the other, before and after, paired.

    Parameters
    ----------
    data : ChoiceData
    score : {"loglik", "chars", "bytes", "tokens"}, default "loglik"
    resplits : int, default 20
    n_bins, theta : int, float
        As in :func:`calibkit.calibration_report`.
    seed : int, default 0

    Returns
    -------
    dict
        Per task: ``"questions"``, ``"temperature"`` (fitted on the whole task, for reference) and
        per metric ``{"uncalibrated": summary, "ts": summary, "paired": ..., "verdict": ...}``:
        summaries are mean, std and the 2.5/97.5 percentiles over the re-splits;
        ``verdict`` says whether TS improves the metric in at least 95% of the re-splits
        (``holds``), worsens it in 95% (``does not hold``), neither (``inconclusive``), or never
        changes it (``unchanged``: accuracy, as TS keeps each question's best choice).
        A task of fewer than 20 questions, or one on which no temperature can be fitted (the
        model answers it at or below chance), is left out with a reason under ``"skipped"``.
    """
    from calibkit.calibrators import TemperatureScaling
    from calibkit.verdicts.claims import verdict_from_shares
    from calibkit.verdicts.resplits import resplit_comparison

    score = check_score(score)
    out: dict[str, Any] = {"score": score, "tasks": {}, "skipped": {}}
    for task in sorted(set(data.task.tolist())):
        part = data.select(data.task == task)
        z, y = choice_logits(part, score), part.gold
        why = unscorable(part)
        if why is not None:
            out["skipped"][task] = why
            continue
        if len(y) < 20:
            out["skipped"][task] = f"{len(y)} questions: too few to fit on one half and evaluate on the other"
            continue
        try:  # a task the model answers at or below chance has no temperature: skip it, not the run
            temperature = float(TemperatureScaling().fit(z, y).temperature_)
        except ValueError as exc:
            out["skipped"][task] = f"no temperature can be fitted on it ({exc})"
            continue
        half = len(y) // 2
        rs = resplit_comparison(
            z[:half], y[:half], z[half:], y[half:], resplits=resplits, methods=("uncalibrated", "ts"),
            n_bins=n_bins, theta=theta, seed=seed,
        )  # fmt: skip
        entry: dict[str, Any] = {"questions": int(len(y))}
        entry["temperature"] = temperature
        for metric in TS_METRICS:
            paired = rs.paired("ts", "uncalibrated", metric)
            unchanged = paired["better"] == 0 and paired["worse"] == 0  # accuracy: TS keeps the argmax
            entry[metric] = {
                "uncalibrated": rs.summary("uncalibrated", metric),
                "ts": rs.summary("ts", metric),
                "paired": paired,
                "verdict": "unchanged" if unchanged else verdict_from_shares(paired["better"], paired["worse"]),
            }
        out["tasks"][task] = entry
    return out


def format_ts_table(result: dict[str, Any]) -> str:
    """Render :func:`choice_temperature_scaling` as Markdown: per task, T and ECE and NLL before and after.

    Parameters
    ----------
    result : dict

    Returns
    -------
    str
        Cells ``mean [2.5%, 97.5%]`` over the re-splits, and whether TS's improvement holds.
    """
    head = ["task", "questions", "T"]
    for metric in ("ece", "nll"):
        head += [f"{metric} before", f"{metric} after TS", f"TS lowers {metric}"]
    rows = []
    for task, e in result["tasks"].items():
        cells = [task, str(e["questions"]), f"{e['temperature']:.3f}"]
        for metric in ("ece", "nll"):
            m = e[metric]
            share = m["paired"]["better"]
            cells += [
                summary_cell(m["uncalibrated"]),
                summary_cell(m["ts"]),
                f"{m['verdict']} ({100 * share:.0f}% of {m['paired']['n']})",
            ]
        rows.append(cells)
    return _with_skipped(markdown_table(head, rows), result["skipped"], ["-"] * (len(head) - 1))


def at_chance(accuracy: float, chance: float, n: int) -> bool:
    """Tell whether an accuracy is within two binomial standard errors of chance.

    A model at chance on a task gives scores that carry no information about the answer: their
    calibration numbers describe noise, and temperature scaling fitted on them only flattens them
    (a huge T, "lowering ECE" towards the uninformative prior).

    Parameters
    ----------
    accuracy : float
    chance : float
        The accuracy of a uniform guess: the mean of ``1 / choices``.
    n : int
        Questions.

    Returns
    -------
    bool

    Examples
    --------
    >>> at_chance(0.26, 0.25, 300), at_chance(0.45, 0.14, 70)
    (True, False)
    """
    return accuracy - chance < 2 * math.sqrt(chance * (1 - chance) / max(n, 1))


def chance_notes(report: dict[str, Any], data: ChoiceData, ts: dict[str, Any] | None = None) -> list[str]:
    """Say which tasks a model answers at chance (:func:`at_chance`), with the temperature fitted there.

    Parameters
    ----------
    report : dict
        From :func:`multiple_choice_report`.
    data : ChoiceData
        Its questions.
    ts : dict, optional
        From :func:`choice_temperature_scaling`.

    Returns
    -------
    list of str
        One line per task at chance.
    """
    notes = []
    for task, row in report["tasks"].items():
        chance = float(np.mean(1.0 / data.n_choices[data.task == task]))
        if not at_chance(row["accuracy"], chance, row["questions"]):
            continue
        fitted = ts["tasks"].get(task) if ts else None  # a task TS skipped says why in its own line
        t = f" (the fitted T, {fitted['temperature']:.4g}, only flattens them)" if fitted else ""
        notes.append(
            f"at chance: {task}'s accuracy {row['accuracy']:.3f} is within two standard errors of chance "
            f"({chance:.3f}, {row['questions']} questions): its scores carry no information{t}"
        )
    return notes


def _with_skipped(table: str, skipped: dict[str, str], cells: list[str]) -> str:
    """End a table with a row of ``cells`` per skipped task, and each task's reason after the table."""
    rows = [f"| {task} | " + " | ".join(cells) + " |" for task in skipped]
    notes = [f"{task}: {why}" for task, why in skipped.items()]  # after the table, which they would cut
    return "\n".join([table, *rows] + ([""] + notes if notes else []))
