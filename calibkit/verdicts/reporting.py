"""The papers' comparison rendered: tables, JSON, figures and one HTML page.

:func:`markdown_table` and :func:`write_csv` render a :class:`~calibkit.verdicts.comparison.Comparison`
(from :func:`calibkit.verdicts.comparison.compare_calibrators`) like the papers' tables;
:func:`write_report` writes the table, the JSON, the figures (:func:`calibkit.plots.figures.write_figures`)
and, with re-splits (:mod:`calibkit.verdicts.resplits`), their table and verdicts to a folder.
Imports go one way: comparison <- resplits <- reporting; :mod:`calibkit.plots` (the figures and the
Markdown tables' cells) stands below them all and knows nothing of comparisons.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from calibkit._moved import moved_name
from calibkit.metrics.statistics import largest_classes
from calibkit.plots import figures, tables
from calibkit.verdicts import resplits as rs
from calibkit.verdicts.comparison import (
    CONFORMAL_LEVEL,
    HIGHER_IS_BETTER,
    METHOD_LABELS,
    SIGNED,
    TABLE_METRICS,
    Comparison,
)
from calibkit.verdicts.held import conformal_note, conformal_table
from calibkit.verdicts.resplits import resplit_note

__all__ = [
    "conformal_table",
    "html_report",
    "markdown_table",
    "per_class_table",
    "to_json",
    "write_csv",
    "write_report",
]


def markdown_table(comparison: Comparison) -> str:
    """Render methods x metrics as a Markdown table, the best value of each column in bold.

    The best is the closest to 0 for the signed ECD and ESCE.

    Parameters
    ----------
    comparison : Comparison
        From :func:`~calibkit.verdicts.comparison.compare_calibrators`.

    Returns
    -------
    str
    """
    metrics = [m for m in TABLE_METRICS if any(m in row for row in comparison.rows.values())]
    best = {}
    for m in metrics:
        values = {k: row[m] for k, row in comparison.rows.items() if not math.isnan(row[m])}
        if m in SIGNED:
            values = {k: abs(v) for k, v in values.items()}
        if values:
            best[m] = (max if m in HIGHER_IS_BETTER else min)(values, key=values.get)
    rows = []
    for method, row in comparison.rows.items():
        cells = []
        for m in metrics:
            text = tables.cell(float(row[m]), comparison.intervals.get(method, {}).get(m))
            cells.append(f"**{text}**" if best.get(m) == method else text)
        rows.append([METHOD_LABELS[method], *cells])
    return tables.markdown_table(["method", *metrics], rows)


def more_classes_line(support: np.ndarray, shown: int) -> str:
    """Say, in one line, what a table of the largest classes leaves out.

    Parameters
    ----------
    support : ndarray of shape (K,)
        Samples of each class.
    shown : int
        The classes shown.

    Returns
    -------
    str
        Empty when every class is shown.
    """
    left = len(support) - shown
    if left <= 0:
        return ""
    labelled = int(np.count_nonzero(support))
    return (
        f"The {shown} classes of largest support are shown; {left:,} more ({labelled:,} of the "
        f"{len(support):,} classes have a test sample) are in the JSON output."
    )


def per_class_table(comparison: Comparison) -> str:
    """Render each class's test-set ECE (rows) under each method (columns), with its support.

    Beyond ``MAX_CLASS_ROWS`` classes (a vocabulary), the classes of largest support and a line
    saying how many more there are.

    Parameters
    ----------
    comparison : Comparison
        From :func:`~calibkit.verdicts.comparison.compare_calibrators`.

    Returns
    -------
    str
        A Markdown table.
    """
    support = comparison.statistics["uncalibrated"].label_counts()
    methods = list(comparison.rows)
    rows = []
    shown = largest_classes(support)
    for k in shown:
        cells = []
        for m in methods:
            ci = comparison.class_intervals.get(m)
            cells.append(tables.cell(float(comparison.per_class[m][k]), None if ci is None else (ci[0][k], ci[1][k])))
        rows.append([str(comparison.class_names[k]), str(int(support[k])), *cells])
    more = more_classes_line(support, len(shown))
    table = tables.markdown_table(["class", "n", *(METHOD_LABELS[m] for m in methods)], rows)
    return table + (f"\n\n{more}" if more else "")


def write_csv(comparison: Comparison, path: str | Path) -> None:
    """Write one row per method; interval columns ``<metric>_low``/``<metric>_high`` when bootstrapped.

    Parameters
    ----------
    comparison : Comparison
        From :func:`~calibkit.verdicts.comparison.compare_calibrators`.
    path : str or Path
        The CSV file to write.
    """
    metrics = [m for m in TABLE_METRICS if any(m in row for row in comparison.rows.values())]
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        header = ["method", *metrics]
        if comparison.intervals:
            header += [f"{m}_{side}" for m in metrics for side in ("low", "high")]
        writer.writerow(header)
        for method, row in comparison.rows.items():
            line = [METHOD_LABELS[method], *(row[m] for m in metrics)]
            if comparison.intervals:
                ci = comparison.intervals.get(method, {})
                line += [v for m in metrics for v in ci.get(m, (math.nan, math.nan))]
            writer.writerow(line)


def to_json(comparison: Comparison) -> dict[str, Any]:
    """Summarise the comparison as JSON-able data (NaN as null).

    Parameters
    ----------
    comparison : Comparison
        From :func:`~calibkit.verdicts.comparison.compare_calibrators`.

    Returns
    -------
    dict
        ``methods``, ``per_class_ece``, ``intervals``, ``per_class_intervals``, ``best``,
        ``select``, ``errors``, ``parameters`` (each calibrator's block), ``n_validation``,
        ``n_test`` and ``conformal_sets`` (the level, and per method and score the coverage and
        mean set size).
    """

    def clean(value):
        if isinstance(value, dict):
            return {str(k): clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple, np.ndarray)):
            return [clean(v) for v in value]
        if isinstance(value, (float, np.floating)):
            return None if math.isnan(value) else float(value)
        if isinstance(value, np.integer):
            return int(value)
        return value

    return clean(
        {
            "methods": comparison.rows,
            "per_class_ece": {m: dict(zip(comparison.class_names, v)) for m, v in comparison.per_class.items()},
            "intervals": comparison.intervals,
            "per_class_intervals": {
                m: {"low": dict(zip(comparison.class_names, lo)), "high": dict(zip(comparison.class_names, hi))}
                for m, (lo, hi) in comparison.class_intervals.items()
            },
            "best": comparison.best,
            "select": comparison.select,
            "errors": comparison.errors,
            "parameters": {m: c.calibration_block() for m, c in comparison.calibrators.items()},
            "n_validation": comparison.n_val,
            "n_test": comparison.n_test,
            "conformal_sets": {"level": CONFORMAL_LEVEL, "methods": comparison.sets},
        }
    )


def write_report(
    comparison: Comparison, folder: str | Path, title: str, resplits: Any = None, source: str = ""
) -> dict[str, Path]:
    """Write ``table.md``, ``table.csv``, ``report.json``, the figures and ``index.html``.

    With ``resplits``, the table of means, standard deviations and 95% intervals over the
    re-splits leads, followed by the verdicts on the papers' claims (also in ``verdicts.md`` and
    under ``resplits`` in ``report.json``); the single split's table follows it.

    Parameters
    ----------
    comparison : Comparison
        From :func:`~calibkit.verdicts.comparison.compare_calibrators`.
    folder : str or Path
        Created if needed.
    title : str
        Heading of the Markdown and HTML pages.
    resplits : Resplits, optional
        From :func:`calibkit.verdicts.resplits.resplit_comparison`.
    source : str, default=""
        What was evaluated (a file, a model on a dataset), for the page's summary.

    Returns
    -------
    dict of str to Path
        The files written, by name (``markdown``, ``csv``, ``json``, ``html``, the figures, the
        numbers behind each figure as ``<figure>_data`` CSVs and, with ``resplits``, ``verdicts``).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": folder / "table.md", "csv": folder / "table.csv", "json": folder / "report.json"}
    notes = "".join(f"\n- {METHOD_LABELS[m]} not fitted: {e}" for m, e in comparison.errors.items())
    summary = json_summary = None
    lead = ""
    if resplits is not None:
        claims = rs.verdicts(resplits)
        json_summary = rs.to_json(resplits, claims)
        summary = (rs.markdown_table(resplits), rs.verdict_text(claims))
        meaning = json_summary["what_this_means"]
        paths["verdicts"] = folder / "verdicts.md"
        paths["verdicts"].write_text(
            f"# Verdicts on the papers' claims\n\n## What this means\n\n{meaning}\n\n{resplit_note(resplits)}\n\n"
            f"{summary[1]}\n"
        )
        lead = (
            f"## What this means\n\n{meaning}\n\n"
            f"## Over {resplits.resplits} re-splits\n\n{resplit_note(resplits)}\n\n{summary[0]}\n\n"
            f"## Verdicts on the papers' claims\n\n{summary[1]}\n\n## One split\n\n"
        )
    single = (
        f"Calibrators fitted on {comparison.n_val} validation predictions, evaluated on "
        f"{comparison.n_test} test predictions. Bold: best per column (closest to 0 for the signed ECD, ESCE).\n"
        f"Best calibrator by {comparison.select}: **{METHOD_LABELS[comparison.best]}**.{notes}"
        if len(comparison.rows) > 1 or comparison.errors
        else f"{comparison.n_test} predictions."  # a predictions file: no calibrator, no sentence about one
    )
    paths["markdown"].write_text(
        f"# {title}\n\n{lead}{single}\n\n{markdown_table(comparison)}\n\n"
        f"## ECE of each class (subset ECE)\n\n{per_class_table(comparison)}\n"
        + (f"\n## Conformal prediction sets\n\n{conformal_note(comparison)}\n\n{conformal_table(comparison)}\n"
           if comparison.sets else "")
    )  # fmt: skip
    write_csv(comparison, paths["csv"])
    report = to_json(comparison)
    if json_summary is not None:
        report["resplits"] = json_summary
    paths["json"].write_text(json.dumps(report, indent=2))
    paths.update(figures.write_figures(comparison, folder))
    paths.update(figures.write_figure_data(comparison, folder))
    paths["html"] = folder / "index.html"
    paths["html"].write_text(html_report(comparison, title, paths, resplits, source=source))
    return paths


def html_report(
    comparison: Comparison, title: str, paths: dict[str, Path], resplits: Any = None, source: str = ""
) -> str:
    """Render one self-contained page (figures embedded as data URIs, no network): the answer first.

    The page of ``calibkit.verdicts.page.comparison_page``: a summary (the one-sentence answer,
    what was evaluated, the headline numbers), then reliability (binned with bootstrap bands, and
    smooth), the verdicts and the re-splits (with ``resplits``), every metric, the classes, the
    regions and, where measured, the conformal sets.

    Parameters
    ----------
    comparison : Comparison
        From :func:`~calibkit.verdicts.comparison.compare_calibrators`.
    title : str
        The page's title.
    paths : dict of str to Path
        The files written so far; the ``.png`` ones are embedded, each with its ``*_data`` CSV.
    resplits : Resplits, optional
        Adds the verdicts and the table over the re-splits.
    source : str, default=""
        What was evaluated, for the summary.

    Returns
    -------
    str
        The HTML.
    """
    from calibkit.verdicts.page import comparison_page

    return comparison_page(comparison, title, paths, resplits, source)


def __getattr__(name: str) -> Any:
    # the figures moved to calibkit.plots.figures, the page's helpers to calibkit.plots.pages: their
    # old names here still work, with a warning
    return moved_name(__name__, name)
