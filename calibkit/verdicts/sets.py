"""The comparison's conformal prediction sets as Markdown: coverage and mean set size after each method.

:func:`calibkit.verdicts.comparison.conformal_cells` measures them; :mod:`calibkit.verdicts.reporting`
puts this table in ``table.md`` and ``index.html`` after the per-class table.
"""

from __future__ import annotations

import math

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
        "non-randomised), fitted on each method's validation probabilities and measured on the test set: does "
        "a calibrator before conformal prediction shrink the sets, at the coverage the level promises?"
    )
