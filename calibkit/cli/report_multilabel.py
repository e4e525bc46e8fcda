"""``calibkit multilabel``: a multi-label head's saved predictions, as a table per label and averaged.

With ``--output`` it writes ``report.json`` (as ``--json`` prints it), ``table.md`` and
``report.html``: the reports' one page design (:func:`calibkit.plots.pages.report_page`), a
reliability diagram per frequent label drawn from the per-label sums (a file's or the shards'),
the averages and each label's metrics.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.io.jsonable import json_ready
from calibkit.metrics.registry import MULTILABEL_BINNED, MULTILABEL_OVER_LABELS
from calibkit.metrics.settings import DEFAULTS
from calibkit.plots.tables import cell, interval_cell, markdown_table


def format_multilabel_table(report: dict[str, Any], intervals: dict[str, Any] | None = None) -> str:
    """Render :func:`calibkit.multilabel_report` as Markdown: a row per metric, a column per label and average.

    Parameters
    ----------
    report : dict
        From :func:`calibkit.multilabel_report` (or ``calibration_report(multilabel=True)``).
    intervals : dict, optional
        :func:`~calibkit.metrics.bootstrap.bootstrap_intervals`' ``"intervals"`` with
        ``multilabel=True``: a macro interval column is added.

    Returns
    -------
    str
        Then the class-wise summaries over the labels' ECEs, and each label's support.
    """
    k = len(report["support"])
    head = ["metric", *[f"label {j}" for j in range(k)], "macro", "weighted", "micro"]
    head += ["macro 95% interval"] if intervals else []
    rows: list[Any] = []
    for name, values in report["per_label"].items():
        cells = [_cell(v) for v in values] + [_cell(report[avg][name]) for avg in ("macro", "weighted", "micro")]
        if intervals:
            low, high = intervals["macro"][name]
            cells.append(interval_cell(_float(low), _float(high), missing="-"))
        rows.append([name, *cells])
    rows.append(
        "| support | " + " | ".join(str(int(s)) for s in report["support"]) + " | | | |" + (" |" if intervals else "")
    )  # the averages have no support: empty cells, written as the table always wrote them
    lines = [markdown_table(head, rows), ""]
    summaries = [key for key, value in report.items() if isinstance(value, float)]
    lines.append("Over the labels' ECEs: " + ", ".join(f"{key} {_cell(report[key])}" for key in summaries))
    if "ace_error_bound" in report:  # streamed: each ACE an estimate within its bound
        bound = report["ace_error_bound"]
        lines.append(
            f"ACE, streamed: within {_cell(bound['macro'])} of the exact value (macro), "
            f"{_cell(bound['micro'])} (micro), per label up to {_cell(np.nanmax(bound['per_label']))}"
        )
    lines.append(f"Label decisions counted: {report['n']}")
    return "\n".join(lines)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)  # a count too has four decimals here


def _cell(value: Any) -> str:
    return cell(_float(value), missing="-")


def run(args: argparse.Namespace) -> int:
    """Run ``calibkit multilabel --predictions PATH``.

    Parameters
    ----------
    args : argparse.Namespace
        The command's options.

    Returns
    -------
    int
        0.

    Raises
    ------
    ValueError
        On bad input (one line).
    """
    from calibkit.cli.common import check_options
    from calibkit.io.prediction_files import load_predictions
    from calibkit.io.shards import is_shard_location, stream_report
    from calibkit.lm.multiple_choice import is_choice_location

    settings = check_options(args)
    if is_choice_location(args.predictions):
        raise ValueError(
            f"--predictions: {args.predictions} holds multiple-choice logs (one answer per question), "
            "not multi-label predictions; use `calibkit choices`"
        )
    intervals, statistics = None, None
    if is_shard_location(args.predictions):
        if args.bootstrap:
            raise ValueError("--bootstrap resamples predictions held in memory; with shards it is not available")
        report = stream_report(
            args.predictions, multilabel=True, progress=not args.quiet, return_statistics=True, **settings
        )
        source = f"{args.predictions} ({report.pop('shards')} shards, read {report.pop('passes')} time)"
        report.pop("skipped")
        statistics = report.pop("statistics")
    else:
        from calibkit.metrics import calibration_report
        from calibkit.metrics.bootstrap import bootstrap_intervals

        values, labels, from_logits = load_predictions(args.predictions, multilabel=True)
        report = calibration_report(values, labels, from_logits=from_logits, multilabel=True, **settings)
        if args.bootstrap:
            ci = bootstrap_intervals(
                values, labels, from_logits=from_logits, multilabel=True, bootstrap=args.bootstrap, seed=args.seed,
                **settings,
            )  # fmt: skip
            intervals = ci["intervals"]
        source = args.predictions
    out = json_ready({"source": source, **report, "intervals": intervals})
    table = format_multilabel_table(report, intervals)
    if args.output:
        from calibkit.cli.common import writable_folder

        if statistics is None:  # a file: the per-label sums of its diagrams, from the rows in memory
            from calibkit.metrics.accumulator import CalibrationAccumulator

            statistics = CalibrationAccumulator(
                ("ece",), from_logits=from_logits, multilabel=True, **settings
            ).update(values, labels).statistics  # fmt: skip
        folder = writable_folder(args.output)
        (folder / "report.json").write_text(json.dumps(out, indent=2) + "\n")
        (folder / "table.md").write_text(f"# calibkit report (multi-label): {source}\n\n{table}\n")
        n_bins = settings.get("n_bins", DEFAULTS.n_bins)
        page = multilabel_page(folder, str(source), report, intervals, statistics, n_bins)
        (folder / "report.html").write_text(page, encoding="utf-8")
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"calibkit report (multi-label): {source}")
        print(table)
        if args.output:
            where = Path(args.output)
            print(f"json: {where / 'report.json'}\nmarkdown: {where / 'table.md'}\nhtml: {where / 'report.html'}")
    return 0


LABEL_PANELS = 4
"""Reliability diagrams drawn on the page: those of the labels of largest support."""

_AVERAGES = ("macro", "weighted", "micro")
_OVER_LABELS = MULTILABEL_OVER_LABELS
_BINNED = frozenset(MULTILABEL_BINNED)


def _interval(intervals: dict[str, Any] | None, metric: str) -> Any:
    return None if not intervals else intervals.get("macro", {}).get(metric)


def multilabel_page(
    folder: Path, source: str, report: dict[str, Any], intervals: dict[str, Any] | None, statistics: list[Any],
    n_bins: int,
) -> str:  # fmt: skip
    """Build the multi-label page: the answer, a diagram per frequent label, the averages, each label.

    Parameters
    ----------
    folder : Path
        The output folder (the figure and its CSV are written there).
    source : str
        What was read.
    report : dict
        From :func:`calibkit.multilabel_report` or :func:`calibkit.io.shards.stream_report`.
    intervals : dict or None
        ``--bootstrap``'s intervals (``"macro"``: per metric), or None.
    statistics : list of CalibrationStatistics
        One per label: the sums the diagrams are drawn from.
    n_bins : int

    Returns
    -------
    str
        The HTML (:func:`calibkit.plots.pages.report_page`).
    """
    from calibkit.cli.report_shards import _worst, reliability_panels
    from calibkit.plots import pages

    support = np.asarray(report["support"], dtype=np.float64)
    per_label = report["per_label"]
    ece = np.asarray(per_label["ece"], dtype=np.float64)
    worst = _worst(ece, support)
    then = f" (macro over {len(support)} labels, {report['n']:,} label decisions)"
    if worst is not None:
        then += f", worst label {worst} ({ece[worst]:.2f})"
    macro = report["macro"]
    # no direction: a label's diagram is of its probability of presence, whose signed gap (ESCE) says
    # "too low a probability", not "less confident than right" (it flips with the label's base rate)
    answer = pages.answer_line(float("nan"), float(macro["ece"]), ece_interval=_interval(intervals, "ece"), then=then)
    facts = [source, f"{len(support)} labels", f"{report['n']:,} label decisions"]
    facts.append("[ ]: 95% bootstrap intervals of the macro averages" if intervals else "no intervals (--bootstrap)")
    headline = [
        ("ece", macro.get("ece"), _interval(intervals, "ece"), "ece (macro)"),
        ("ece", report["micro"].get("ece"), None, "ece (micro)"),
        ("cece", report.get("cece"), None),
        ("brier", macro.get("brier"), _interval(intervals, "brier"), "brier (macro)"),
    ]
    order = sorted(range(len(support)), key=lambda j: (-support[j], j))
    panels = [(f"label {j} ({int(support[j]):,} present)", statistics[j]) for j in order[:LABEL_PANELS]]
    figure, numbers = reliability_panels(
        folder, panels, n_bins, xlabel="predicted probability", ylabel="fraction present"
    )  # fmt: skip
    shown = f"the {len(panels)} labels of largest support" if len(panels) < len(support) else "every label"
    image = pages.figure(
        figure,
        f"One reliability diagram per label ({shown}): the fraction of rows where the label is present against "
        f"its predicted probability in {n_bins} bins, with each bin's 95% band, and the rows per bin below",
        f"{shown}; shaded: each bin's 95% bootstrap band (binomial, from its count and accuracy)",
        data=numbers,
        wide=len(panels) > 1,
    )
    averages, labels_tables = _tables(report, intervals, support, order)
    bound = ""
    if "ace_error_bound" in report and np.nanmax(report["ace_error_bound"]["per_label"]) > 0:
        bound = f" ACE streamed: per label within {np.nanmax(report['ace_error_bound']['per_label']):.2g}."
    sections = [
        pages.Section("Reliability per label", [image], "Below the diagonal: the label is present less often than "
                      "predicted; above: more often."),
        pages.Section("Averages", [averages],
                      "Macro: the mean over the labels; weighted: by each label's support; micro: every label "
                      f"decision pooled.{bound}", ident="averages"),
        pages.Section("Labels", labels_tables, "Each label's metrics, the labels of largest support first.",
                      ident="labels-section"),
    ]  # fmt: skip
    return pages.report_page(
        "calibkit report: multi-label", pages.summary(answer, facts, headline), sections,
        files=["table.md", "report.json", "reliability.csv"],
    )  # fmt: skip


def _tables(
    report: dict[str, Any], intervals: dict[str, Any] | None, support: np.ndarray, order: list[int]
) -> tuple[str, list[str]]:
    """Render the averages (beside the summaries over the labels) and each label's metrics, in tables that fit."""
    from calibkit.plots import pages

    per_label = report["per_label"]
    metrics = list(per_label)
    head = ["metric", *_AVERAGES]
    rows = [
        [
            pages.metric_link(m),
            *(
                pages.number(_float(report[avg][m]), _interval(intervals, m) if avg == "macro" else None)
                for avg in _AVERAGES
            ),
        ]
        for m in metrics
    ]  # the metrics as rows: a narrow table, whatever the metrics
    averages = pages.html_table(head, rows, table_id="table")
    over = [[pages.metric_link(m), pages.number(_float(report[m]))] for m in _OVER_LABELS if m in report]
    over_table = pages.html_table(["metric", "value"], over, caption="Over the labels' ECEs") if over else ""
    groups = [("Binned calibration errors", [m for m in metrics if m in _BINNED]),
              ("Signed gaps and proper scores", [m for m in metrics if m not in _BINNED])]  # fmt: skip
    labels_tables = []
    for i, (title, group) in enumerate((t, g) for t, g in groups if g):  # two tables: each fits the page
        label_rows = [
            [f"label {j}", int(support[j]), *(pages.number(_float(per_label[m][j])) for m in group)] for j in order
        ]
        labels_tables.append(pages.collapsed_table(
            ["label", "present", *(pages.metric_link(m) for m in group)], label_rows, keep=20,
            what="labels (smaller support)", caption=title, table_id="labels" if i == 0 else None,
        ))  # fmt: skip
    return pages.side_by_side(averages, over_table, kind="tables"), labels_tables
