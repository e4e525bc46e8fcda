"""Figures of a :class:`calibkit.reporting.Comparison` (matplotlib, installed with ``calibkit[demo]``).

- ``reliability.png``: the overall reliability diagram, uncalibrated vs the best calibrator,
  with the bin support drawn under each panel;
- ``reliability_per_class.png``: one panel per class with at least ``MIN_PANEL_SUPPORT`` test
  samples (samples of that true class, top-label confidence vs accuracy), as in the class-wise
  paper's Figures 1-2; the smaller classes are listed in one line with their support and ECE;
- ``class_ece_vs_support.png``: each class's ECE against its support, uncalibrated, TS and WTS;
- ``regions.png``: the gap of every RBECE bin, and which bins RBECE counts (support > theta).

Every number drawn comes from the comparison's per-bin statistics (no metric is recomputed).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from calibkit.metrics.statistics import binned_gaps, ece_from_table

MIN_PANEL_SUPPORT = 30
"""A class gets its own reliability panel only with at least this many test samples: below it,
15 bins hold one or two samples each and the curve is noise."""


def small_classes_line(comparison, classes: list[int], support: np.ndarray) -> str:
    """One line naming the classes too small for a panel, with their support and ECE."""
    parts = [
        f"{comparison.class_names[c]} (n={int(support[c])}, ECE {comparison.per_class['uncalibrated'][c]:.3f})"
        for c in classes
    ]
    return f"Fewer than {MIN_PANEL_SUPPORT} test samples, no panel: " + ", ".join(parts)


def _pyplot():
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ValueError("plots need matplotlib: pip install 'calibkit[demo]' (or matplotlib)") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _reliability_panel(ax, support_ax, table: np.ndarray, label: str, color: str) -> None:
    n_bins = table.shape[0]
    centres = (np.arange(n_bins) + 0.5) / n_bins
    bins = binned_gaps(table)
    filled = bins["count"] > 0
    ax.bar(centres[filled], bins["accuracy"][filled], width=1 / n_bins, alpha=0.35, color=color, edgecolor=color)
    ax.plot(centres[filled], bins["accuracy"][filled], "o-", color=color, ms=3, label=label)
    support_ax.bar(centres, bins["count"], width=1 / n_bins, color=color, alpha=0.5)


def _frame(ax, support_ax, title: str) -> None:
    ax.plot([0, 1], [0, 1], "k--", lw=0.8, label="perfect calibration")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title(title, fontsize=9)
    ax.set_ylabel("accuracy")
    ax.tick_params(labelbottom=False)
    support_ax.set_xlim(0, 1)
    support_ax.set_yscale("symlog")
    support_ax.set_xlabel("confidence")
    support_ax.set_ylabel("samples", fontsize=8)


def write_figures(comparison, folder: str | Path) -> dict[str, Path]:
    """Write the three figures into ``folder``; return their paths by name."""
    plt = _pyplot()
    folder = Path(folder)
    n_bins = comparison.n_bins
    methods = ["uncalibrated"] + ([comparison.best] if comparison.best != "uncalibrated" else [])
    colours = {"uncalibrated": "tab:red", comparison.best: "tab:blue"}
    from calibkit.reporting import METHOD_LABELS

    paths = {}
    # Overall: one column per method.
    fig, axes = plt.subplots(
        2, len(methods), figsize=(4.2 * len(methods), 5), squeeze=False, gridspec_kw={"height_ratios": [3, 1]}
    )
    for j, method in enumerate(methods):
        table = comparison.statistics[method].top_table(n_bins).sum(axis=0)
        _reliability_panel(axes[0, j], axes[1, j], table, METHOD_LABELS[method], colours[method])
        _frame(axes[0, j], axes[1, j], f"{METHOD_LABELS[method]}: ECE {ece_from_table(table):.4f}")
        axes[0, j].legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    paths["reliability"] = folder / "reliability.png"
    fig.savefig(paths["reliability"], dpi=110)
    plt.close(fig)

    # Per class: methods overlaid in each class's panel, for the classes with enough test samples
    # to draw a curve; the others are listed in one line under the panels.
    support = comparison.statistics["uncalibrated"].top_table(n_bins)[:, :, 0].sum(axis=1)
    drawn = [c for c in range(len(comparison.class_names)) if support[c] >= MIN_PANEL_SUPPORT]
    rest = [c for c in range(len(comparison.class_names)) if support[c] < MIN_PANEL_SUPPORT]
    k = max(len(drawn), 1)
    cols = min(k, 4)
    rows = math.ceil(k / cols)
    fig = plt.figure(figsize=(3.6 * cols, 3.4 * rows + (0.5 if rest else 0)))
    grid = fig.add_gridspec(rows * 2, cols, height_ratios=[3, 1] * rows)
    for i, c in enumerate(drawn):
        name = comparison.class_names[c]
        r, col = divmod(i, cols)
        ax, support_ax = fig.add_subplot(grid[2 * r, col]), fig.add_subplot(grid[2 * r + 1, col])
        parts = []
        for method in methods:
            table = comparison.statistics[method].top_table(n_bins)[c]
            _reliability_panel(ax, support_ax, table, METHOD_LABELS[method], colours[method])
            parts.append(f"{METHOD_LABELS[method]} {comparison.per_class[method][c]:.3f}")
        _frame(ax, support_ax, f"{name} (n={int(support[c])})\nECE: " + ", ".join(parts))
        if i == 0:
            ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout(rect=(0, 0.06 if rest else 0, 1, 1))
    if rest:
        fig.text(0.01, 0.01, small_classes_line(comparison, rest, support), fontsize=7, wrap=True)
    paths["reliability_per_class"] = folder / "reliability_per_class.png"
    fig.savefig(paths["reliability_per_class"], dpi=100)
    plt.close(fig)

    # Each class's ECE against its support (log scale), before and after TS and WTS: the class-wise
    # paper's point that rare classes are the worse calibrated ones.
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    shown = [m for m in ("uncalibrated", "ts", "wts") if m in comparison.per_class]
    styles = {"uncalibrated": ("tab:red", "o"), "ts": ("tab:orange", "s"), "wts": ("tab:blue", "^")}
    present = support > 0
    for method in shown:
        colour, marker = styles[method]
        ax.scatter(
            support[present], comparison.per_class[method][present], color=colour, marker=marker, s=24,
            label=f"{METHOD_LABELS[method]} (CECE {comparison.rows[method].get('cece', math.nan):.3f})",
        )  # fmt: skip
    for c in np.flatnonzero(present):
        ax.annotate(comparison.class_names[c], (support[c], comparison.per_class["uncalibrated"][c]), fontsize=6)
    ax.set_xscale("log")
    ax.set_xlabel("test samples of the class (log scale)")
    ax.set_ylabel("ECE of the class (subset ECE)")
    ax.set_title("Rare classes and their calibration", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    paths["class_ece_vs_support"] = folder / "class_ece_vs_support.png"
    fig.savefig(paths["class_ece_vs_support"], dpi=110)
    plt.close(fig)

    # Regions: the RBECE bins, counted or not.
    fig, axes = plt.subplots(1, len(methods), figsize=(5 * len(methods), 3.6), squeeze=False)
    for j, method in enumerate(methods):
        ax = axes[0, j]
        table = comparison.statistics[method].top_table(comparison.rbece_bins).sum(axis=0)
        bins = binned_gaps(table)
        m = table.shape[0]
        centres = (np.arange(m) + 0.5) / m
        counted = bins["count"] > comparison.theta
        gap = np.nan_to_num(np.abs(bins["gap"]))
        ax.bar(
            centres[counted], gap[counted], width=1 / m, color="tab:green", label=f"counted (n > {comparison.theta:g})"
        )
        ax.bar(centres[~counted], gap[~counted], width=1 / m, color="lightgray", label="ignored by RBECE")
        rbece = comparison.rows[method].get("rbece", math.nan)
        ax.set_title(f"{METHOD_LABELS[method]}: |acc - conf| per region, RBECE {rbece:.4f}", fontsize=9)
        ax.set_xlabel("confidence")
        ax.set_ylabel("|accuracy - confidence|")
        ax.set_xlim(0, 1)
        twin = ax.twinx()
        twin.plot(centres, bins["count"], "k.", ms=4)
        twin.set_yscale("symlog")
        twin.set_ylabel("samples per bin (dots)", fontsize=8)
        ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    paths["regions"] = folder / "regions.png"
    fig.savefig(paths["regions"], dpi=110)
    plt.close(fig)
    return paths
