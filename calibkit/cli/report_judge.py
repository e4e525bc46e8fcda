"""``calibkit judge --judged FILE --labels FILE``: an LLM judge against people, and the pass rate corrected.

Reads judged samples (:func:`calibkit.lm.judges.read_judged`: the plain table, and the tools' logs
its dispatcher knows) and people's labels of some of them; prints the answer (the judge's rate,
people's by PPI++, the judge's lean, its ECE), the pass rates (naive, people's alone, PPI++,
Rogan-Gladen), the agreement, the confidence's calibration and its cross-fitted recalibration, per
task and pooled (:func:`calibkit.lm.judges.judge_report`); with ``--other-judged`` and
``--other-labels``, the difference of two models' pass rates on the same judge
(:func:`calibkit.lm.judges.compare_runs`). ``--output`` writes report.html (the one design of
``calibkit.plots.pages``), report.json and table.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from calibkit.cli.common import check_options, writable_folder
from calibkit.io.jsonable import json_ready
from calibkit.metrics.judges import AGREEMENT
from calibkit.plots.tables import cell, markdown_table

RATE_NAMES = {
    "naive": "the judge's rate (naive)",
    "human": "people's labels alone",
    "ppi": "PPI++",
    "rogan_gladen": "Rogan-Gladen",
}
"""The pass rates' names in the tables."""


def _interval(row: dict[str, Any], lower: str = "ci_lower", upper: str = "ci_upper") -> str:
    return cell(row["estimate"], (row[lower], row[upper]))


def _groups(report: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [("pooled", report["pooled"])] + ([*report["tasks"].items()] if len(report["tasks"]) > 1 else [])


def rates_table(report: dict[str, Any]) -> str:
    """Render the pass rates, pooled and per task, as a Markdown table.

    Parameters
    ----------
    report : dict
        From :func:`calibkit.lm.judges.judge_report`.

    Returns
    -------
    str
    """
    level = f"{report['level']:.0%}"
    head = ["task", "samples", "labelled", *(f"{name} [{level}]" for name in RATE_NAMES.values())]
    rows = []
    for task, group in _groups(report):
        rates = group["rates"]
        cells = ["refused" if "refused" in rates[k] else _interval(rates[k]) for k in RATE_NAMES]
        rows.append([task, str(group["samples"]), str(group["labelled"]), *cells])
    refusals = [
        f"- {task}, {RATE_NAMES[k]}: {group['rates'][k]['refused']}"
        for task, group in _groups(report)
        for k in RATE_NAMES
        if "refused" in group["rates"][k]
    ]
    return markdown_table(head, rows) + ("\n\n" + "\n".join(dict.fromkeys(refusals)) if refusals else "")


def agreement_table(report: dict[str, Any]) -> str:
    """Render the judge against people on the labelled slice (agreement, kappa, TPR, FPR) as Markdown.

    Parameters
    ----------
    report : dict
        From :func:`calibkit.lm.judges.judge_report`.

    Returns
    -------
    str
    """
    names = AGREEMENT[:4]
    rows = []
    for task, group in _groups(report):
        found = group["against_people"]
        if "refused" in found:
            rows.append([task, "0", *(["refused"] * len(names)), ""])
            continue
        spans = found.get("intervals", {})
        counts = found["counts"]
        table = f"{counts['tp']}/{counts['fn']}/{counts['fp']}/{counts['tn']}"
        rows.append([task, str(found["n"]), *(cell(found[k], spans.get(k)) for k in names), table])
    return markdown_table(["task", "labelled", *names, "tp/fn/fp/tn"], rows)


def calibration_table(report: dict[str, Any]) -> str:
    """Render the judge's confidence against people (raw, and each cross-fitted recalibration) as Markdown.

    Parameters
    ----------
    report : dict
        From :func:`calibkit.lm.judges.judge_report`.

    Returns
    -------
    str
        Empty when the judge gave no confidence on a labelled sample.
    """
    from calibkit.lm.judges.report import CALIBRATION, MAPS

    rows = []
    for task, group in _groups(report):
        found = group.get("calibration", {"refused": ""})
        if "refused" in found:
            continue
        spans = found.get("intervals", {})
        rows.append([task, "raw", str(found["samples"]), *(cell(found[m], spans.get(m)) for m in CALIBRATION)])
        again = group.get("recalibration", {})
        for method in MAPS:
            if method in again:
                metrics = again[method]["metrics"]
                how = f"{method} (cross-fitted, {again['folds']} folds)"
                rows.append([task, how, str(again["samples"]), *(cell(metrics[m]) for m in CALIBRATION)])
    return markdown_table(["task", "confidence", "labelled", *CALIBRATION], rows) if rows else ""


def comparison_lines(comparison: dict[str, Any], level: float) -> str:
    """Render the difference of two runs' pass rates (PPI++) as a Markdown table.

    Parameters
    ----------
    comparison : dict
        From :func:`calibkit.lm.judges.compare_runs`.
    level : float

    Returns
    -------
    str
    """
    head = ["first minus second", f"{level:.0%} interval", "construction", "labels (first, second)"]
    row = [
        cell(comparison["estimate"]),
        f"[{cell(comparison['ci_lower'])}, {cell(comparison['ci_upper'])}]",
        comparison["construction"],
        f"{comparison['labelled'][0]}, {comparison['labelled'][1]}",
    ]
    return markdown_table(head, [row])


def _read(judged: str, labels: str, flags: tuple[str, str]) -> tuple[Any, Any]:
    """Read one run; a second run's messages name its own flags."""
    from calibkit.lm.judges import read_judged, read_labels

    try:
        return read_judged(judged), read_labels(labels)
    except ValueError as exc:
        if flags == ("--judged", "--labels"):
            raise
        text = str(exc).replace("`judged`", flags[0]).replace("`labels`", flags[1])
        raise ValueError(text) from None


def run(args: argparse.Namespace) -> int:
    """Run ``calibkit judge --judged FILE --labels FILE``.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``calibkit judge``.

    Returns
    -------
    int
        The exit status, 0 (bad input raises a one-line ``ValueError``, which :func:`calibkit.cli.main`
        prints as exit status 2).
    """
    from calibkit.lm.judges import answer_sentence, compare_runs, judge_report

    settings = check_options(args)
    if bool(args.other_judged) != bool(args.other_labels):
        raise ValueError("--other-judged and --other-labels: give both (the second run and its labels) or neither")
    judged, labels = _read(args.judged, args.labels, ("--judged", "--labels"))
    report = judge_report(
        judged, labels, threshold=args.threshold, bootstrap=args.bootstrap, seed=args.seed, n_bins=settings["n_bins"]
    )
    answer = answer_sentence(report)
    tasks = len(report["tasks"])
    counts = f"{report['samples']:,} judged, {tasks} task{'s' * (tasks != 1)}; {report['labelled']:,} labelled"
    source = f"{args.judged} ({counts})"
    out: dict[str, Any] = {"source": source, "answer": answer, **report}
    sections = [
        ("Pass rate", rates_table(report)),
        ("The judge against people", agreement_table(report)),
        ("The judge's confidence against people", calibration_table(report)),
    ]
    if args.other_judged:
        second = _read(args.other_judged, args.other_labels, ("--other-judged", "--other-labels"))
        out["comparison"] = compare_runs((judged, labels), second, level=report["level"])
        sections.append(("Two runs on the same judge (PPI++)", comparison_lines(out["comparison"], report["level"])))
    table = "\n\n".join(f"{title}:\n{text}" for title, text in sections if text)
    text = json.dumps(json_ready(out), indent=2)
    print(text if args.json else f"calibkit judge: {source}\n{answer}\n\n{table}")
    if args.output:
        folder = writable_folder(args.output)
        (folder / "report.json").write_text(text + "\n")
        (folder / "table.md").write_text(f"# calibkit judge: {source}\n\n{answer}\n\n{table}\n")
        page = _html(folder, source, answer, report, judged, labels, sections, args.n_bins)
        if not args.json:
            print(f"report: {page}")
    return 0


def _html(
    folder: Path, source: str, answer: str, report: dict[str, Any], judged: Any, labels: Any,
    sections: list[tuple[str, str]], n_bins: int,
) -> Path:  # fmt: skip
    """Write ``report.html``: the answer first, the headline rates, the tables, the reliability diagram."""
    from calibkit.plots import pages

    rates = report["pooled"]["rates"]
    headline = [
        (k, rates[k]["estimate"], (rates[k]["ci_lower"], rates[k]["ci_upper"]), RATE_NAMES[k])
        for k in RATE_NAMES
        if "refused" not in rates[k]
    ]
    calibration = report["pooled"].get("calibration", {})
    if "ece" in calibration:
        headline.append(
            ("ece", calibration["ece"], calibration.get("intervals", {}).get("ece"), "ECE of the confidence")
        )
    facts = [source, f"{report['level']:.0%} intervals", "pass: verdict or label >= " + f"{report['threshold']:g}"]
    notes = {
        "Pass rate": "PPI++ corrects the judge's rate with the labelled slice (its interval covers); Rogan-Gladen "
        "corrects it with the judge's TPR and TNR (0/1 verdicts); the naive rate takes the judge as the truth.",
        "The judge against people": "On the labelled slice: seeded bootstrap intervals.",
        "The judge's confidence against people": "The recalibrations are cross-fitted: each sample's "
        "recalibrated confidence comes from a map fitted without it.",
    }
    blocks = [
        pages.Section(title, pages.markdown_to_html(text), notes.get(title, "")) for title, text in sections if text
    ]
    figure = _reliability(folder, judged, labels, report, n_bins)
    if figure is not None:
        blocks.insert(2, pages.Section("Reliability of the judge's confidence", [figure]))
    page = folder / "report.html"
    text = pages.report_page(
        "calibkit judge", pages.summary(answer, facts, headline), blocks, files=["table.md", "report.json"]
    )
    page.write_text(text, encoding="utf-8")
    return page


def _reliability(folder: Path, judged: Any, labels: Any, report: dict[str, Any], n_bins: int) -> str | None:
    """Draw the judge's confidence against people's pass on the labelled slice (None without a confidence)."""
    import numpy as np

    from calibkit.lm.judges import match_labels
    from calibkit.metrics.sampling import SAMPLING_DEFAULTS
    from calibkit.plots import ReliabilityDiagram, pages
    from calibkit.plots.figures import new_figure, reliability_csv

    at = match_labels(judged, labels)
    confidence = judged.confidence[at]
    has = ~np.isnan(confidence)
    if not has.any():
        return None
    passed = (labels.label[has] >= report["threshold"]).astype(np.int64)
    fig = new_figure(figsize=(4.2, 4.2))
    ax = fig.subplots()
    drawn = ReliabilityDiagram.from_predictions(
        confidence[has], passed, n_bins=n_bins, ax=ax, bootstrap=SAMPLING_DEFAULTS.bootstrap
    )
    ax.set_xlabel("the judge's confidence that the answer passes")
    ax.set_ylabel("share people passed")
    fig.tight_layout()
    path = folder / "reliability.png"
    fig.savefig(path, dpi=100)
    numbers = reliability_csv(folder / "reliability.csv", [("judge", drawn)])
    return pages.figure(
        path, "Reliability diagram of the judge's confidence against people's labels, with 95% bootstrap bands",
        f"{int(has.sum()):,} labelled samples with a confidence", data=numbers,
    )  # fmt: skip
