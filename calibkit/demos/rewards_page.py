"""The reward-model demo's Markdown and HTML page (:mod:`calibkit.demos.rewards`): the answer first, one design."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from calibkit.metrics.preferences import PREFERENCE_HEADLINE
from calibkit.metrics.registry import PREFERENCE_METRICS
from calibkit.plots.tables import markdown_table, summary_cell

SHOWN = (*PREFERENCE_METRICS, "confidence_gap")
"""The preference numbers of the demo's tables (:func:`calibkit.lm.preferences.preference_metrics`' names)."""
HISTORY = PREFERENCE_METRICS[:4]
"""The callback's pooled numbers shown per epoch."""


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def before_after_table(report: dict[str, Any]) -> str:
    """Render the test pairs' numbers as trained and after ``T``, and the training pairs' as trained.

    Parameters
    ----------
    report : dict
        From :func:`calibkit.demos.rewards.run_rewards_demo`.

    Returns
    -------
    str
        A Markdown table.
    """
    t, test = report["temperature"], report["test"]
    rows = [
        [f"test pairs ({test['n']}), as trained (T = 1)", *(test["before"].get(m) for m in SHOWN)],
        [f"test pairs ({test['n']}), T = {t:.3f}", *(test["after"].get(m) for m in SHOWN)],
        [f"training pairs ({report['pairs']['train']}), as trained", *(report["train"].get(m) for m in SHOWN)],
    ]
    return markdown_table(["pairs", *SHOWN], rows)


def resplit_table(resplits: dict[str, Any]) -> str:
    """Render the re-splits: metric x method, ``mean [2.5 %, 97.5 %]``.

    Parameters
    ----------
    resplits : dict
        :func:`calibkit.demos.rewards.judged_resplits`.

    Returns
    -------
    str
    """
    table = resplits["table"]
    methods = list(table)
    rows = [[m, *(summary_cell(table[k][m]) if m in table[k] else "n/a" for k in methods)] for m in table["raw"]]
    labels = {"raw": "as trained (T = 1)", "temperature": "pairwise temperature", "isotonic": "isotonic (confidence)"}
    labels["histogram"] = "histogram binning (confidence)"
    return markdown_table(["metric", *(labels.get(k, k) for k in methods)], rows)


def history_table(history: list[dict[str, float]]) -> str:
    """Render each evaluation: TRL's averages of batch averages beside the callback's numbers pooled over pairs.

    Parameters
    ----------
    history : list of dict
        The log entries with the callback's ``eval_preference_*`` keys.

    Returns
    -------
    str
    """
    head = ["epoch", "TRL eval_accuracy (batch means)", *(f"pooled {m}" for m in HISTORY)]
    rows = [
        [
            f"{e.get('epoch', float('nan')):.0f}",
            e.get("eval_accuracy"),
            *(e.get(f"eval_preference_{m}") for m in HISTORY),
        ]
        for e in history
    ]
    return markdown_table(head, rows)


def length_line(report: dict[str, Any]) -> str:
    """Say the test pairs' length bias (answers' lengths in characters), as ``preference_report`` measures it.

    Parameters
    ----------
    report : dict

    Returns
    -------
    str
        Empty where the report has no length bias.
    """
    bias = report["report"]["pooled"].get("length_bias")
    if not bias:
        return ""
    return (
        f"Length bias (answers' characters, T = 1): accuracy {bias['accuracy_chosen_longer']:.3f} on the "
        f"{bias['chosen_longer']} test pairs whose right answer is the longer, {bias['accuracy_chosen_shorter']:.3f} "
        f"on the {bias['chosen_shorter']} where it is the shorter ({bias['equal_length']} of equal length); "
        f"correlation of the margin and the length difference {bias['correlation']:.3f}."
    )


def reload_line(report: dict[str, Any]) -> str:
    """Say what reloading the calibrated model without calibkit gave.

    Parameters
    ----------
    report : dict

    Returns
    -------
    str
    """
    r = report["reload"]
    ranking = "every pair ranked as before" if r["same_ranking"] else "SOME PAIRS RANKED OTHERWISE"
    return (
        f"Reloaded with `trust_remote_code=True` in a process where calibkit cannot be imported ({r['class']}): "
        f"its rewards of the {r['pairs']} test pairs are the trained model's divided by T = "
        f"{report['temperature']:.4f} (largest difference {r['max_abs_difference']:.1e}); {ranking}."
    )


def answer(report: dict[str, Any]) -> Any:
    """Write the page's sentence: the direction, the test pairs' ECE, what ``T`` does to ECE and NLL over re-splits.

    "The reward model's preferences are under-confident: ECE 0.170 on 86 held-out pairs;
    temperature 4.36 lowers it in 8 of 20 re-splits and lowers the NLL in 19 of 20 re-splits." The
    direction is that of the mean (accuracy against mean confidence); NLL weighs the confidently
    wrong pairs that the mean hides.

    Parameters
    ----------
    report : dict

    Returns
    -------
    Markup
    """
    from calibkit.plots.pages import Markup, direction

    before, after = report["test"]["before"], report["test"]["after"]
    then = f" on {report['test']['n']} held-out pairs; temperature {report['temperature']:.2f}"
    said = []
    for metric in ("ece", "nll"):  # what T does to ECE and to NLL (the Bradley-Terry loss), over the re-splits
        verdict = next(
            (v for v in report["resplits"]["verdicts"] if v["method"] == "temperature" and v["metric"] == metric), None
        )
        name = "it" if metric == "ece" else "the NLL"
        if verdict and verdict["compared"]:
            said.append(f"lowers {name} in {verdict['better_count']} of {verdict['compared']} re-splits")
        else:
            said.append(f"takes {name} to {after[metric]:.3f} on the test pairs")
    then += " " + " and ".join(said)
    way = direction(before["confidence_gap"], ece=before["ece"])  # accuracy minus mean confidence: the sign of ESCE
    way = "of unknown direction" if way == "Calibration" else way[0].lower() + way[1:]
    head = f"The reward model's preferences are {way}"
    text = f"ECE {before['ece']:.3f}{then}"
    return Markup(f"<b>{html.escape(head)}</b>: {html.escape(text, quote=False)}.")


def markdown(report: dict[str, Any]) -> str:
    """Render the demo's report as Markdown.

    Parameters
    ----------
    report : dict
        From :func:`calibkit.demos.rewards.run_rewards_demo`.

    Returns
    -------
    str
    """
    rs = report["resplits"]
    callback_t = report.get("temperature_callback")
    also = f" (the callback's own fit at the end of training: {callback_t:.4f})" if _finite(callback_t) else ""
    seconds = report["seconds"]
    return (
        f"# {report['title']}\n\nPairs (a right answer chosen over a wrong one, BIG-bench {report['task']}, split by "
        f"question): {report['pairs']} from {report['questions']} questions. Recipe: {report['recipe']}.\n\n"
        f"## Test pairs before and after the pairwise temperature\n\nT = {report['temperature']:.4f}, fitted on "
        f"the {report['pairs']['validation']} validation pairs{also}.\n\n{before_after_table(report)}\n\n"
        f"{length_line(report)}\n\n"
        f"## Over {rs['resplits']} re-splits of validation + test ({rs['pairs']} pairs, fitted on half)\n\n"
        f"T: {summary_cell(rs['temperatures'])} ({rs['unfitted']} re-splits not fitted).\n\n{resplit_table(rs)}\n\n"
        "## Verdicts\n\n"
        + "\n".join(f"- **{v['verdict']}**: {v['claim']}: {v['numbers']}" for v in rs["verdicts"])
        + f"\n\n## During training (the preference callback, each epoch on the validation pairs)\n\n"
        f"{history_table(report['history'])}\n\n## The calibrated reward model\n\n{reload_line(report)}\n\n"
        f"Time: training {seconds['training']:.0f} s, whole run {seconds['total']:.0f} s.\n"
    )


def page(report: dict[str, Any], paths: dict[str, Path]) -> str:
    """Render the demo's page in the reports' design: the answer, the figure, the verdicts, the tables.

    Parameters
    ----------
    report : dict
    paths : dict of str to Path
        ``reliability`` (the figure) at least.

    Returns
    -------
    str
        One self-contained HTML document.
    """
    from calibkit.plots import pages

    before = report["test"]["before"]
    numbers = [(m, before.get(m), None) for m in PREFERENCE_HEADLINE]
    facts = [
        f"{report['pairs']['train']} training pairs, {report['pairs']['validation']} validation, "
        f"{report['pairs']['test']} test (BIG-bench {report['task']}, split by question)",
        f"T = {report['temperature']:.3f}",
        f"{report['resplits']['resplits']} re-splits",
    ]
    table = pages.markdown_to_html_table
    bias = [f"<p>{html.escape(length_line(report))}</p>"] if length_line(report) else []
    sections = [
        pages.Section("Reliability", [pages.figure(
            paths["reliability"], "Reliability diagram of the test pairs read in the model's preference: the fraction "
            "where the preferred answer is the right one against the confidence, as trained and after T",
            "test pairs, before and after T", data=paths.get("reliability_csv"))]),
        pages.Section("Verdicts", [pages.verdict_table(report["resplits"]["verdicts"])]),
        pages.Section("Before and after", [table(before_after_table(report)), *bias],
                      "T fitted on the validation pairs, numbers on the test pairs."),
        pages.Section(f"Over {report['resplits']['resplits']} re-splits", [table(resplit_table(report["resplits"]))],
                      "Cells: mean [2.5%, 97.5%] over the re-splits of validation + test."),
        pages.Section("During training", [table(history_table(report["history"]))],
                      "TRL's accuracy is an average of batch averages; the callback's numbers are pooled over pairs."),
        pages.Section("The calibrated model", [f"<p>{html.escape(reload_line(report))}</p>"]),
    ]  # fmt: skip
    head = pages.summary(answer(report), facts, numbers)
    return pages.report_page(report["title"], head, sections, files=["table.md", "report.json", "reliability.csv"])
