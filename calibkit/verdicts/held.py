"""What the comparison measured on the held test rows: the conformal sets, as a table.

The per-bin sums give every other table and figure; the conformal sets need the rows themselves.
Their coverage and mean size after each method (``conformal_cells``) become a Markdown table, which
:mod:`calibkit.verdicts.reporting` writes. The smooth reliability curves
(:func:`calibkit.smooth_reliability`), the other measurement on the rows, are drawn by
:func:`calibkit.plots.figures.smooth_figure`.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from calibkit.plots import figures, tables
from calibkit.verdicts.comparison import CONFORMAL_LEVEL, METHOD_LABELS, Comparison


def _cell(value: float) -> str:
    return tables.cell(float(value), missing="n/a")  # the conformal table's own mark for NaN


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
    head = [title for s in scores for title in (f"{s.upper()} coverage", f"{s.upper()} mean set size")]
    smallest = {s: np.nanmin([c[s]["set_size"] for c in comparison.sets.values()] + [np.inf]) for s in scores}
    rows = []
    for method, cells in comparison.sets.items():
        row = [METHOD_LABELS[method]]
        for s in scores:
            size = _cell(cells[s]["set_size"])
            row += [_cell(cells[s]["coverage"]), f"**{size}**" if cells[s]["set_size"] == smallest[s] else size]
        rows.append(row)
    return tables.markdown_table(["method", *head], rows)


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
    """Draw the smooth reliability diagram (deprecated: :func:`calibkit.plots.figures.smooth_figure`).

    Parameters
    ----------
    comparison : Comparison
        With its ``smooth`` curves.
    new_figure : callable
        Unused: the figure is a ``calibkit.plots.figures.new_figure``, as it always was.

    Returns
    -------
    matplotlib.figure.Figure
    """
    warnings.warn(
        "`calibkit.verdicts.held.smooth_figure(comparison, new_figure)` moved to "
        "`calibkit.plots.figures.smooth_figure(comparison)` in calibkit 0.2; call it from there "
        "(the old path will be removed in a later release)",
        DeprecationWarning,
        stacklevel=2,
    )
    return figures.smooth_figure(comparison)
