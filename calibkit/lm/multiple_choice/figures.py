"""The multiple-choice report on disk: reliability diagrams per task and pooled, and one HTML page."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.lm.multiple_choice.data import SCORE_NAMES, ChoiceData, choice_probabilities
from calibkit.metrics.registry import headline
from calibkit.metrics.sampling import SAMPLING_DEFAULTS
from calibkit.metrics.settings import DEFAULTS


def reliability_grid(data: ChoiceData, score: str, n_bins: int = DEFAULTS.n_bins, skipped: Any = ()) -> Any:
    """Draw one reliability diagram per task and one pooled, side by side (a matplotlib Figure).

    Parameters
    ----------
    data : ChoiceData
    score : {"loglik", "chars", "bytes", "tokens"}
    n_bins : int, default 15
    skipped : collection of str, optional
        Tasks left out (those the report could not score).

    Returns
    -------
    matplotlib.figure.Figure
        With ``diagrams_``: ``(panel name, ReliabilityDiagram)`` of each panel, the numbers it drew.
    """
    from calibkit.plots import ReliabilityDiagram
    from calibkit.plots.figures import new_figure

    probs = choice_probabilities(data, score)
    tasks = sorted(set(data.task.tolist()) - set(skipped))
    panels = [(task, data.task == task) for task in tasks] + [("(pooled)", np.ones(len(data.gold), dtype=bool))]
    if len(tasks) == 1:
        panels = panels[:1]
    columns = min(4, len(panels))
    rows = math.ceil(len(panels) / columns)
    fig = new_figure(figsize=(3.2 * columns, 3.2 * rows), layout="constrained")
    for i, (name, keep) in enumerate(panels):
        ax = fig.add_subplot(rows, columns, i + 1)
        draws = SAMPLING_DEFAULTS.bootstrap
        diagram = ReliabilityDiagram.from_predictions(
            probs[keep], data.gold[keep], n_bins=n_bins, ax=ax, bootstrap=draws
        )
        ax.set_title(f"{name}: ECE {diagram.ece:.3f} ({int(keep.sum())} q.)", fontsize=9)
        fig.diagrams_ = [*getattr(fig, "diagrams_", []), (name, diagram)]  # the numbers behind each panel
    fig.suptitle(f"confidence: softmax over the choices of score={score}", fontsize=10)
    return fig


def write_choice_report(
    folder: Path, title: str, table: str, report: dict[str, Any], data: ChoiceData, n_bins: int = DEFAULTS.n_bins
) -> dict[str, Path]:
    """Write ``reliability.png`` and a self-contained ``index.html`` (table and figure) into ``folder``.

    Parameters
    ----------
    folder : Path
        An existing, writable folder.
    title : str
        What was evaluated (the logs, the questions), first in the summary's facts; the page adds the
        number of tasks and what the confidence is (say neither in ``title``).
    table : str
        The Markdown tables (per task, and temperature scaling if fitted).
    report : dict
        From :func:`~calibkit.lm.multiple_choice.multiple_choice_report`.
    data : ChoiceData
    n_bins : int, default 15

    Returns
    -------
    dict of str to Path
        ``"figure"``, ``"figure_data"`` (its per-bin numbers, ``reliability.csv``) and ``"html"``.
    """
    from calibkit.plots import pages
    from calibkit.plots.figures import reliability_csv

    figure = folder / "reliability.png"
    grid = reliability_grid(data, report["score"], n_bins, report.get("skipped", {}))
    grid.savefig(figure, dpi=110)
    numbers = reliability_csv(folder / "reliability.csv", grid.diagrams_)
    pooled, tasks = report["pooled"], report["tasks"]
    worst = ""
    if len(tasks) > 1:
        name = max(tasks, key=lambda t: -math.inf if tasks[t].get("ece") is None else tasks[t]["ece"])
        worst = f", worst task '{name}' ({tasks[name]['ece']:.2f})"
    answer = pages.answer_line(
        pooled.get("esce", math.nan), pooled["ece"], then=f" over {pooled['questions']:,} questions{worst}"
    )
    count = len(tasks) + len(report.get("skipped", {}))
    facts = [
        title,
        f"{count} task{'s' * (count != 1)}",
        f"confidence: the softmax over the choices of the {SCORE_NAMES[report['score']]}",
    ]
    shown = [(m, pooled[m], None) for m in headline(pooled)]
    ts = "Temperature scaling" in table  # fitted (--calibrate): its table follows the metrics'
    sections = [
        pages.Section(
            "Reliability per task",
            [
                pages.figure(
                    figure,
                    "One reliability diagram per task and one pooled: the share of right answers against the "
                    "confidence in the chosen answer",
                    "per task and pooled; shaded: each bin's 95% bootstrap band",
                    data=numbers,
                    wide=True,
                )
            ],
        ),
        pages.Section(
            "Every metric",
            pages.markdown_to_html(table),
            "Per task and pooled."
            + (
                " Temperature scaling: fitted on half of each task's questions, judged on the other half." if ts else ""
            ),
        ),
    ]
    page = pages.report_page(
        "calibkit report: multiple choice",
        pages.summary(answer, facts, shown),
        sections,
        files=["table.md", "report.json"],
    )
    (folder / "index.html").write_text(page, encoding="utf-8")
    return {"figure": figure, "figure_data": numbers, "html": folder / "index.html"}
