"""What the comparison measured on the held test rows, drawn: conformal sets and smooth reliability.

The per-bin sums give every other table and figure; these two need the rows themselves. The
conformal sets' coverage and mean size after each method (``conformal_cells``) become a Markdown
table, the smooth reliability curves (:func:`calibkit.smooth_reliability`) a figure beside the
binned diagram; :mod:`calibkit.verdicts.reporting` writes both.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calibkit.verdicts.comparison import CONFORMAL_LEVEL, METHOD_LABELS, Comparison


def _cell(value: float) -> str:
    """Format one number as the comparison's tables do (``n/a`` for NaN)."""
    return "n/a" if math.isnan(value) else f"{value:.4f}"


def conformal_table(comparison: Comparison) -> str:
    """Render the conformal sets after each method as Markdown: coverage and mean set size per score.

    Parameters
    ----------
    comparison : Comparison
        From :func:`~calibkit.verdicts.comparison.compare_calibrators`.

    Returns
    -------
    str
        One row per method; the smallest mean set size per score in bold.
    """
    scores = list(next(iter(comparison.sets.values()), {}))
    head = " | ".join(f"{s.upper()} coverage | {s.upper()} mean set size" for s in scores)
    lines = [f"| method | {head} |", "|---" * (1 + 2 * len(scores)) + "|"]
    smallest = {s: np.nanmin([c[s]["set_size"] for c in comparison.sets.values()] + [np.inf]) for s in scores}
    for method, cells in comparison.sets.items():
        row = []
        for s in scores:
            size = _cell(cells[s]["set_size"])
            row += [_cell(cells[s]["coverage"]), f"**{size}**" if cells[s]["set_size"] == smallest[s] else size]
        lines.append(f"| {METHOD_LABELS[method]} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def conformal_note(comparison: Comparison) -> str:
    """Say what the conformal table holds (its level, where the sets are fitted).

    Parameters
    ----------
    comparison : Comparison

    Returns
    -------
    str
    """
    return (
        f"Split-conformal prediction sets at {CONFORMAL_LEVEL:.0%} (calibkit.calibrators.SplitConformal, "
        "non-randomised) after each method: the calibrator fitted on one half of the validation rows, the sets "
        "on the other half, coverage and mean set size measured on the test set. Does a calibrator before "
        "conformal prediction shrink the sets, at the coverage the level promises?"
    )


def smooth_figure(comparison: Comparison, new_figure: Any) -> Any:
    """Draw the smooth reliability diagram of the uncalibrated model and of the best calibrator.

    Parameters
    ----------
    comparison : Comparison
        With its ``smooth`` curves.
    new_figure : callable
        Returns a matplotlib ``Figure`` from its keywords (the report's, which needs no backend).

    Returns
    -------
    matplotlib.figure.Figure
    """
    from calibkit.verdicts.plots import SmoothReliabilityDiagram

    methods = ["uncalibrated"] + ([comparison.best] if comparison.best in comparison.smooth else [])
    methods = [m for m in dict.fromkeys(methods) if m in comparison.smooth]
    fig = new_figure(figsize=(4.2 * len(methods), 4.4))
    axes = fig.subplots(1, len(methods), squeeze=False)[0]
    for ax, method in zip(axes, methods):
        label = METHOD_LABELS[method]
        display = SmoothReliabilityDiagram(comparison.smooth[method], label=label).plot(ax)
        ax.set_title(f"{label}: smooth ECE {display.smece:.4f}", fontsize=9)
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig
