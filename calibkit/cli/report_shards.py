"""``calibkit report --predictions DIR_OR_GLOB``: shards streamed in bounded memory, ACE exact by extra passes.

With ``--output`` it writes ``report.json``, ``table.md`` and ``index.html``: the reports' one page
design (:func:`calibkit.plots.pages.report_page`), its reliability diagram drawn from the per-bin
sums the stream accumulated (no second read; each bin's band from its sums, as every report draws
it), no interval on the metrics (``--bootstrap`` needs the predictions in memory).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.cli.common import format_table, with_absent_metrics, writable_folder
from calibkit.io.jsonable import json_ready
from calibkit.metrics.registry import headline
from calibkit.metrics.settings import DEFAULTS


def run(args: argparse.Namespace, settings: dict[str, Any]) -> int:
    """``--predictions`` is a folder or a glob: stream the shards (bounded memory, exact ACE).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``calibkit report``.
    settings : dict of str to object
        The metric settings it was given (:func:`calibkit.cli.options.settings_of`).

    Returns
    -------
    int
        The exit status, 0 (bad input raises a one-line ``ValueError``, which :func:`calibkit.cli.main`
        prints as exit status 2).
    """
    from calibkit.io.shards import skipped_note, stream_report

    if args.bootstrap:
        raise ValueError(
            "--bootstrap resamples predictions held in memory; with shards (a folder or glob) it is not available"
        )
    report = stream_report(
        args.predictions, exact_ace=not args.approximate_ace, progress=not args.quiet, return_statistics=True,
        **settings,
    )  # fmt: skip
    passes, shards, skipped = report.pop("passes"), report.pop("shards"), report.pop("skipped")
    statistics = report.pop("statistics")
    left_out = skipped_note(skipped)
    source = f"{args.predictions} ({shards} shards, {report['n']} labelled predictions, read {passes} times"
    source += f"; {left_out})" if left_out else ")"
    if args.approximate_ace:
        source += f"; ace within {report['ace_error_bound']:.2g} (--approximate-ace: one pass)"
    if args.fce_variant != "paper":
        source += f"; fce as the fuzzy-binning authors' code computes it (--fce-variant {args.fce_variant})"
    out = {"source": source, "fce_variant": args.fce_variant, "passes": passes, "shards": shards, "skipped": skipped}
    out.update(json_ready(report))
    shown, note = with_absent_metrics(report)
    table = f"calibkit report: {source}\n{format_table(shown)}" + (f"\n\n{note}" if note else "")
    if args.output:
        folder = writable_folder(args.output)
        (folder / "report.json").write_text(json.dumps(out, indent=2) + "\n")
        (folder / "table.md").write_text(f"# {table}\n")
        n_bins = settings.get("n_bins", DEFAULTS.n_bins)
        page = folder / "index.html"
        page.write_text(shards_page(folder, source, report, statistics, n_bins, shards), encoding="utf-8")
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(table)
        if args.output:
            where = Path(args.output)
            print(f"json: {where / 'report.json'}\nmarkdown: {where / 'table.md'}\nhtml: {where / 'index.html'}")
    return 0


def reliability_panels(
    folder: Path, panels: list[tuple[str, Any]], n_bins: int, *, xlabel: str = "confidence", ylabel: str = "accuracy"
) -> tuple[Path, Path]:
    """Draw a reliability diagram per panel from accumulated sums; write ``reliability.png`` and its CSV.

    Parameters
    ----------
    folder : Path
        Where the figure and ``reliability.csv`` (its per-bin numbers) go.
    panels : list of (str, CalibrationStatistics)
        Each panel's title and its sums (a stream's, or one label's of a multi-label head).
    n_bins : int
        The bins of the diagrams (the sums hold a top-label table of as many bins: the ECE's).
    xlabel, ylabel : str
        The axes' names.

    Returns
    -------
    tuple of (Path, Path)
        The PNG and the CSV (per panel and bin: samples, confidence, accuracy, its 95% band).
    """
    from calibkit.plots import ReliabilityDiagram
    from calibkit.plots.figures import BAND_DRAWS, new_figure, reliability_csv

    columns = min(len(panels), 4)
    rows = math.ceil(len(panels) / columns)
    fig = new_figure(figsize=(3.6 * columns if columns > 1 else 4.6, 4.4 * rows))
    grid = fig.add_gridspec(rows, columns)
    drawn = []
    for i, (name, stats) in enumerate(panels):
        cell = grid[divmod(i, columns)].subgridspec(2, 1, height_ratios=[3, 1], hspace=0.08)
        ax, support_ax = fig.add_subplot(cell[0]), fig.add_subplot(cell[1])
        diagram = ReliabilityDiagram.from_statistics(
            stats, n_bins=n_bins, ax=ax, support_ax=support_ax, bootstrap=BAND_DRAWS
        )
        ax.set_title(f"{name}: ECE {diagram.ece:.3f}", fontsize=9)
        ax.set_ylabel(ylabel)
        support_ax.set_xlabel(xlabel)
        if i == 0:
            ax.legend(loc="upper left", fontsize=7)
        drawn.append((name, diagram))
    fig.tight_layout()
    figure = folder / "reliability.png"
    fig.savefig(figure, dpi=100)
    return figure, reliability_csv(folder / "reliability.csv", drawn)


def _worst(values: np.ndarray, support: np.ndarray) -> int | None:
    """Return the group of largest ECE among those of enough samples (of any, when fewer than two have)."""
    from calibkit.plots.figures import MIN_PANEL_SUPPORT

    values = np.asarray(values, dtype=np.float64)
    big = (support >= MIN_PANEL_SUPPORT) & np.isfinite(values)
    pool = big if big.sum() >= 2 else (support > 0) & np.isfinite(values)
    if pool.sum() < 2:
        return None
    return int(np.flatnonzero(pool)[np.argmax(values[pool])])


def _value(report: dict[str, Any], name: str) -> float | None:
    value = report.get(name)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def shards_page(
    folder: Path, source: str, report: dict[str, Any], statistics: Any, n_bins: int, shards: int
) -> str:  # fmt: skip
    """Build the shards' page: the answer, the reliability diagram beside the overall metrics, the rest, the classes.

    Parameters
    ----------
    folder : Path
        The output folder (the figure and its CSV are written there).
    source : str
        What was read (the location, the shards, the rows, the passes).
    report : dict
        From :func:`calibkit.io.shards.stream_report`.
    statistics : CalibrationStatistics
        Its accumulated sums (``return_statistics=True``).
    n_bins : int
    shards : int

    Returns
    -------
    str
        The HTML (:func:`calibkit.plots.pages.report_page`).
    """
    from calibkit.metrics.statistics import largest_classes
    from calibkit.plots import pages
    from calibkit.verdicts.page import FAMILIES

    support = np.asarray(statistics.label_counts(), dtype=np.float64)
    per_class = np.asarray(report["subset_ece"], dtype=np.float64)
    worst = _worst(per_class, support)
    then = f" over {report['n']:,} predictions in {shards:,} shard{'s' * (shards != 1)}"
    if worst is not None:
        then += f", worst class '{worst}' ({per_class[worst]:.2f})"
    answer = pages.answer_line(report.get("esce", math.nan), report["ece"], then=then)
    facts = [
        source,
        f"{report['num_classes']:,} classes",
        "no intervals: --bootstrap resamples predictions held in memory, shards are streamed",
    ]
    shown = [(m, _value(report, m), None) for m in headline(report)]
    figure, numbers = reliability_panels(folder, [("all predictions", statistics)], n_bins)
    image = pages.figure(
        figure,
        f"Reliability diagram of the streamed predictions: accuracy against confidence in {n_bins} bins, with each "
        "bin's 95% band from its sums, and the samples per bin below",
        "binned; shaded: each bin's 95% bootstrap band",
        data=numbers,
    )
    tables = []
    for i, (title, metrics) in enumerate(FAMILIES):
        rows = [[pages.metric_link(m), pages.number(_value(report, m))] for m in metrics if m in report]
        if rows:
            tables.append(
                pages.html_table(["metric", "value"], rows, caption=title, table_id="table" if i == 0 else None)
            )
    known = {m for _, metrics in FAMILIES for m in metrics}
    other = [m for m, v in report.items() if isinstance(v, float) and m not in known and m != "ace_error_bound"]
    if other:
        rows = [[pages.metric_link(m), pages.number(_value(report, m))] for m in other]
        tables.append(pages.html_table(["metric", "value"], rows, caption="Other"))
    order = sorted(largest_classes(support), key=lambda c: (-support[c], c))
    class_rows = [[str(c), int(support[c]), pages.number(float(per_class[c]))] for c in order]
    shown = "" if len(order) == len(support) else f" The {len(order):,} classes of largest support of {len(support):,}."
    bound = report.get("ace_error_bound") or 0.0
    ace = f" ACE within {bound:.2g} of its exact value (--approximate-ace)." if bound else " ACE exact."
    sections = [
        pages.Section("Reliability", [pages.side_by_side(image, *tables[:1])],
                      "Below the diagonal: more confident than accurate. Drawn from the stream's per-bin sums, each "
                      "bin's band from its count and accuracy; no smooth diagram (it needs every row in memory)."),
        pages.Section("Every metric", [pages.side_by_side(*tables[1:], kind="tables")],
                      f"Over {report['n']:,} predictions, streamed.{ace}", ident="metrics"),
        pages.Section("Classes", [pages.collapsed_table(
            ["class", "n", pages.metric_link("subset_ece", "ECE")], class_rows, keep=20,
            what="classes (smaller support)", table_id="classes")],
            f"Each class's ECE on its own samples (subset ECE), the classes of largest support first.{shown}"),
    ]  # fmt: skip
    return pages.report_page(
        "calibkit report: shards", pages.summary(answer, facts, shown), sections,
        files=["table.md", "report.json", "reliability.csv"],
    )  # fmt: skip
