"""The figures of a comparison of calibrators, drawn on backend-free matplotlib figures.

:func:`write_figures` writes the report's figures (:func:`calibkit.verdicts.reporting.write_report`
calls it): the reliability diagrams of the uncalibrated model and of the best calibrator, one panel
per class, each class's ECE against its support, the RBECE regions and, where the comparison has
them, the smooth reliability curves. Each figure is drawn from a comparison's per-bin statistics
(:func:`calibkit.verdicts.comparison.compare_calibrators`; no metric is recomputed) with the
displays of ``calibkit.plots.diagrams``. This module reads the comparison's fields and imports
nothing of ``calibkit.verdicts``, which stands above it.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.calibrators.registry import LABELS as METHOD_LABELS
from calibkit.metrics.formulas import binned_gaps
from calibkit.metrics.sampling import SAMPLING_DEFAULTS
from calibkit.metrics.statistics import largest_classes
from calibkit.plots.diagrams import RegionPlot, ReliabilityDiagram, SmoothReliabilityDiagram, _table, bin_band

__all__ = [
    "BAND_DRAWS",
    "MIN_PANEL_SUPPORT",
    "class_ece_figure",
    "new_figure",
    "per_class_figure",
    "regions_figure",
    "reliability_figure",
    "small_classes_line",
    "smooth_figure",
    "reliability_csv",
    "write_figure_data",
    "write_figures",
]

MIN_PANEL_SUPPORT = 30
"""A class gets its own reliability panel only with at least this many test samples: below it,
15 bins hold one or two samples each and the curve is noise."""

BAND_DRAWS = SAMPLING_DEFAULTS.bootstrap
"""Draws of each bin's bootstrap band in the reliability diagrams (``calibkit.plots.diagrams.bin_band``):
the sampling settings' ``bootstrap``."""

_COLOURS = {"uncalibrated": "tab:red"}


def small_classes_line(comparison: Any, classes: list[int], support: np.ndarray) -> str:
    """Name, in one line, the classes too small for a panel, with their support and ECE.

    Parameters
    ----------
    comparison : Comparison
        From :func:`~calibkit.verdicts.comparison.compare_calibrators`.
    classes : list of int
        The classes to name.
    support : ndarray of shape (K,)
        Test samples of each class.

    Returns
    -------
    str
    """
    parts = [
        f"{comparison.class_names[c]} (n={int(support[c])}, ECE {comparison.per_class['uncalibrated'][c]:.3f})"
        for c in classes
    ]
    return f"Fewer than {MIN_PANEL_SUPPORT} test samples, no panel: " + ", ".join(parts)


def new_figure(**kwargs: Any) -> Any:
    """Return a matplotlib ``Figure`` (not pyplot: writing files needs no backend, and the caller's stays).

    Parameters
    ----------
    **kwargs
        Passed to ``matplotlib.figure.Figure``.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        When matplotlib is not installed.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ValueError("figures need matplotlib: pip install 'calibkit[demo]' (or matplotlib)") from exc
    return Figure(**kwargs)


def _save(fig: Any, path: Path, dpi: int) -> Path:
    fig.savefig(path, dpi=dpi)
    return path


def _drawn_methods(comparison: Any) -> list[str]:
    return ["uncalibrated"] + ([comparison.best] if comparison.best != "uncalibrated" else [])


def _colour(comparison: Any, method: str) -> str:
    return _COLOURS.get(method, "tab:blue" if method == comparison.best else "tab:gray")


def reliability_figure(comparison: Any) -> Any:
    """Draw the overall reliability diagram: uncalibrated and the best calibrator side by side.

    Parameters
    ----------
    comparison : Comparison
        From :func:`~calibkit.verdicts.comparison.compare_calibrators`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    methods = _drawn_methods(comparison)
    fig = new_figure(figsize=(4.2 * len(methods), 4.6))
    axes = fig.subplots(2, len(methods), squeeze=False, gridspec_kw={"height_ratios": [3, 1]})
    for j, method in enumerate(methods):
        label = METHOD_LABELS[method]
        display = ReliabilityDiagram.from_statistics(
            comparison.statistics[method],
            n_bins=comparison.n_bins,
            label=label,
            ax=axes[0, j],
            support_ax=axes[1, j],
            color=_colour(comparison, method),
            bootstrap=BAND_DRAWS,
        )
        axes[0, j].set_title(f"{label}: ECE {display.ece:.4f}", fontsize=9)
        axes[0, j].legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig


def per_class_figure(comparison: Any) -> Any:
    """Draw one reliability panel per class with at least :data:`MIN_PANEL_SUPPORT` test samples.

    The methods are overlaid in each panel; the smaller classes are listed in one line below.

    Parameters
    ----------
    comparison : Comparison
        From :func:`~calibkit.verdicts.comparison.compare_calibrators`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    n_bins = comparison.n_bins
    methods = _drawn_methods(comparison)
    support = comparison.statistics["uncalibrated"].label_counts()
    shown = largest_classes(support)
    drawn = [c for c in shown if support[c] >= MIN_PANEL_SUPPORT]
    rest = [c for c in shown if support[c] < MIN_PANEL_SUPPORT]
    cols = min(max(len(drawn), 1), 4)
    rows = math.ceil(max(len(drawn), 1) / cols)
    fig = new_figure(figsize=(3.6 * cols, 3.4 * rows + (0.5 if rest else 0)))
    grid = fig.add_gridspec(rows * 2, cols, height_ratios=[3, 1] * rows)
    for i, c in enumerate(drawn):
        r, col = divmod(i, cols)
        ax, support_ax = fig.add_subplot(grid[2 * r, col]), fig.add_subplot(grid[2 * r + 1, col])
        for j, method in enumerate(methods):
            ReliabilityDiagram.from_statistics(
                comparison.statistics[method],
                n_bins=n_bins,
                class_index=c,
                label=METHOD_LABELS[method],
                ax=ax,
                support_ax=support_ax,
                color=_colour(comparison, method),
                diagonal=j == 0,
            )
        parts = ", ".join(f"{METHOD_LABELS[m]} {comparison.per_class[m][c]:.3f}" for m in methods)
        ax.set_title(f"{comparison.class_names[c]} (n={int(support[c])})\nECE: {parts}", fontsize=9)
        if i == 0:
            ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout(rect=(0, 0.06 if rest else 0, 1, 1))
    if rest:
        fig.text(0.01, 0.01, small_classes_line(comparison, rest, support), fontsize=7, wrap=True)
    return fig


def class_ece_figure(comparison: Any) -> Any:
    """Draw each class's ECE against its support (log scale), uncalibrated, TS and WTS.

    The class-wise paper's point: the rare classes are the worse calibrated ones.

    Parameters
    ----------
    comparison : Comparison
        From :func:`~calibkit.verdicts.comparison.compare_calibrators`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    support = comparison.statistics["uncalibrated"].label_counts()
    fig = new_figure(figsize=(6.5, 4.2))
    ax = fig.subplots()
    styles = {"uncalibrated": ("tab:red", "o"), "ts": ("tab:orange", "s"), "wts": ("tab:blue", "^")}
    present = support > 0
    for method in (m for m in styles if m in comparison.per_class):
        colour, marker = styles[method]
        cece = comparison.rows[method].get("cece", math.nan)
        ax.scatter(
            support[present], comparison.per_class[method][present], color=colour, marker=marker, s=24,
            label=f"{METHOD_LABELS[method]} (CECE {cece:.3f})",
        )  # fmt: skip
    for c in (c for c in largest_classes(support) if present[c]):  # over a vocabulary, the largest only
        ax.annotate(comparison.class_names[c], (support[c], comparison.per_class["uncalibrated"][c]), fontsize=6)
    ax.set_xscale("log")
    ax.set_xlabel("test samples of the class (log scale)")
    ax.set_ylabel("ECE of the class (subset ECE)")
    ax.set_title("Rare classes and their calibration", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def regions_figure(comparison: Any) -> Any:
    """Draw the RBECE bins of uncalibrated and the best calibrator: which regions RBECE counts.

    Parameters
    ----------
    comparison : Comparison
        From :func:`~calibkit.verdicts.comparison.compare_calibrators`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    methods = _drawn_methods(comparison)
    fig = new_figure(figsize=(5 * len(methods), 3.6))
    axes = fig.subplots(1, len(methods), squeeze=False)
    for j, method in enumerate(methods):
        rbece = comparison.rows[method].get("rbece", math.nan)
        RegionPlot.from_statistics(
            comparison.statistics[method],
            rbece_bins=comparison.rbece_bins,
            theta=comparison.theta,
            ax=axes[0, j],
            title=f"{METHOD_LABELS[method]}: |acc - conf| per region, RBECE {rbece:.4f}",
        )
    fig.tight_layout()
    return fig


def smooth_figure(comparison: Any) -> Any:
    """Draw the smooth reliability diagram of the uncalibrated model and of the best calibrator.

    Parameters
    ----------
    comparison : Comparison
        From :func:`~calibkit.verdicts.comparison.compare_calibrators`, with its ``smooth`` curves.

    Returns
    -------
    matplotlib.figure.Figure
    """
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


def write_figures(comparison: Any, folder: str | Path) -> dict[str, Path]:
    """Write the report's four figures into ``folder`` and return their paths by name.

    ``reliability.png``, ``reliability_per_class.png``, ``class_ece_vs_support.png`` and
    ``regions.png``, drawn from the comparison's per-bin statistics (no metric is recomputed), and
    ``reliability_smooth.png`` from its smooth reliability curves where it has them.

    Parameters
    ----------
    comparison : Comparison
        From :func:`~calibkit.verdicts.comparison.compare_calibrators`.
    folder : str or Path
        An existing folder.

    Returns
    -------
    dict of str to Path
    """
    folder = Path(folder)
    smooth = {}
    if comparison.smooth:
        smooth["reliability_smooth"] = _save(smooth_figure(comparison), folder / "reliability_smooth.png", 110)
    return {
        "reliability": _save(reliability_figure(comparison), folder / "reliability.png", 110),
        **smooth,
        "reliability_per_class": _save(per_class_figure(comparison), folder / "reliability_per_class.png", 100),
        "class_ece_vs_support": _save(class_ece_figure(comparison), folder / "class_ece_vs_support.png", 110),
        "regions": _save(regions_figure(comparison), folder / "regions.png", 110),
    }


def _bins(table: np.ndarray) -> tuple[np.ndarray, ...]:
    n = table.shape[0]
    gaps = binned_gaps(table)
    return np.arange(n) / n, np.arange(1, n + 1) / n, gaps["count"], gaps["confidence"], gaps["accuracy"]


def _write_csv(path: Path, head: list[str], rows: list[list[Any]]) -> Path:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(head)
        for row in rows:
            writer.writerow(["" if isinstance(v, float) and math.isnan(v) else v for v in row])
    return path


def write_figure_data(comparison: Any, folder: str | Path) -> dict[str, Path]:
    """Write the numbers behind each figure of :func:`write_figures` as a CSV beside it.

    ``reliability.csv`` (per method drawn and bin: its edges, samples, mean confidence, accuracy
    and the 95% bootstrap band drawn), ``reliability_smooth.csv`` (the smooth curves on their
    grid, with the density of the confidences), ``reliability_per_class.csv`` (per class, method
    and bin), ``class_ece_vs_support.csv`` (per class: support and ECE of each method) and
    ``regions.csv`` (per method and RBECE bin: samples, ``|accuracy - confidence|``, counted).

    Parameters
    ----------
    comparison : Comparison
        From :func:`~calibkit.verdicts.comparison.compare_calibrators`.
    folder : str or Path
        An existing folder.

    Returns
    -------
    dict of str to Path
        Keyed by the figure's name (as :func:`write_figures`) plus ``"_data"``.
    """
    folder = Path(folder)
    methods = _drawn_methods(comparison)
    rows = []
    for method in methods:
        table = comparison.statistics[method].top_table(comparison.n_bins).sum(axis=0)
        low, high, count, confidence, accuracy = _bins(table)
        band = bin_band(count, accuracy, bootstrap=BAND_DRAWS)  # the seed and draws of the figure's band
        rows += [[method, b, low[b], high[b], int(count[b]), confidence[b], accuracy[b], band[0][b], band[1][b]]
                 for b in range(len(count))]  # fmt: skip
    head = ["method", "bin", "lower", "upper", "count", "confidence", "accuracy", "band_low", "band_high"]
    out = {"reliability_data": _write_csv(folder / "reliability.csv", head, rows)}
    if comparison.smooth:
        rows = [
            [method, g, a, d]
            for method in methods if method in comparison.smooth
            for g, a, d in zip(*(comparison.smooth[method][k] for k in ("grid", "accuracy", "density")))
        ]  # fmt: skip
        head = ["method", "confidence", "smoothed_accuracy", "density"]
        out["reliability_smooth_data"] = _write_csv(folder / "reliability_smooth.csv", head, rows)
    support = comparison.statistics["uncalibrated"].label_counts()
    rows = []
    for c in largest_classes(support):
        for method in methods:
            low, high, count, confidence, accuracy = _bins(
                _table(comparison.statistics[method], comparison.n_bins, int(c), "n_bins")
            )
            rows += [[comparison.class_names[c], method, b, low[b], high[b], int(count[b]), confidence[b], accuracy[b]]
                     for b in range(len(count))]  # fmt: skip
    head = ["class", "method", "bin", "lower", "upper", "count", "confidence", "accuracy"]
    out["reliability_per_class_data"] = _write_csv(folder / "reliability_per_class.csv", head, rows)
    shown = list(comparison.per_class)
    rows = [[comparison.class_names[c], int(support[c]), *(comparison.per_class[m][c] for m in shown)]
            for c in range(len(support))]  # fmt: skip
    out["class_ece_vs_support_data"] = _write_csv(
        folder / "class_ece_vs_support.csv", ["class", "support", *(f"ece_{m}" for m in shown)], rows
    )
    rows = []
    for method in methods:
        plot = RegionPlot(
            comparison.statistics[method].top_table(comparison.rbece_bins).sum(axis=0), theta=comparison.theta
        )
        m = len(plot.count)
        rows += [
            [method, b, b / m, (b + 1) / m, int(plot.count[b]), plot.gap[b], bool(plot.counted[b])] for b in range(m)
        ]
    head = ["method", "bin", "lower", "upper", "count", "abs_accuracy_minus_confidence", "counted"]
    out["regions_data"] = _write_csv(folder / "regions.csv", head, rows)
    return out


def reliability_csv(path: str | Path, diagrams: list[tuple[str, Any]]) -> Path:
    """Write the per-bin numbers of drawn reliability diagrams as one CSV (the numbers behind a figure).

    Parameters
    ----------
    path : str or Path
        The CSV file.
    diagrams : list of (str, ReliabilityDiagram)
        Each panel's name (a task, a source, a method) and its drawn display.

    Returns
    -------
    Path
        One row per panel and bin: edges, samples, mean confidence, accuracy and, where drawn, the
        95% bootstrap band.
    """
    rows = []
    for name, d in diagrams:
        n = len(d.count)
        low = d.band_low_ if getattr(d, "band_low_", None) is not None else np.full(n, np.nan)
        high = d.band_high_ if getattr(d, "band_high_", None) is not None else np.full(n, np.nan)
        rows += [[name, b, b / n, (b + 1) / n, int(d.count[b]), d.confidence[b], d.accuracy[b], low[b], high[b]]
                 for b in range(n)]  # fmt: skip
    head = ["panel", "bin", "lower", "upper", "count", "confidence", "accuracy", "band_low", "band_high"]
    return _write_csv(Path(path), head, rows)
