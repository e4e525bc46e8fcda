"""Calibration plots in scikit-learn's Display style (matplotlib, installed with ``calibkit[demo]``).

Each display is built from predictions (``from_predictions``) or from accumulated statistics
(``from_statistics``: the sums of a :class:`~calibkit.CalibrationAccumulator`, so a plot
of a streamed evaluation never needs the predictions again), draws on the ``ax`` it is given
(a new figure only when none is) and keeps its artists (``ax_``, ``figure_``, ...). Library code
never chooses a matplotlib backend: that is the caller's, and :mod:`calibkit.plots.figures` writes
its files with ``matplotlib.figure.Figure`` objects, which need none.

- :class:`ReliabilityDiagram`: accuracy against top-label confidence per equal-width bin, with the
  diagonal of perfect calibration and, on an optional second axes, the samples per bin.
- :class:`RegionPlot`: ``|accuracy - confidence|`` of every RBECE bin, the bins RBECE counts
  (more than ``theta`` samples) apart from those it ignores, and the samples per bin.
- :class:`SmoothReliabilityDiagram`: the smooth reliability curve of smECE (Blasiok & Nakkiran
  2024, as their ``relplot`` draws it): kernel-smoothed accuracy against confidence, no bins, and
  the density of the confidences. From predictions only: it needs the rows, as smECE does.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from calibkit.metrics.accumulator import CalibrationAccumulator
from calibkit.metrics.formulas import EmptyRegionWarning, binned_gaps, ece_from_table, rbece_from_table
from calibkit.metrics.functional.smooth import smooth_reliability
from calibkit.metrics.sampling import OFF, SAMPLING_DEFAULTS, SAMPLING_UNSET, resolve_sampling
from calibkit.metrics.settings import DEFAULTS, CalibrationSettings, renamed
from calibkit.metrics.statistics import CalibrationStatistics

__all__ = ["RegionPlot", "ReliabilityDiagram", "SmoothReliabilityDiagram", "bin_band"]


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ValueError("plots need matplotlib: pip install 'calibkit[demo]' (or matplotlib)") from exc
    return plt.subplots()[1]


def _table(statistics: CalibrationStatistics, n_bins: int, class_index: int | None, name: str) -> np.ndarray:
    """Return the (n_bins, 4) top-label sums: all samples, or those whose true class is ``class_index``."""
    if not isinstance(statistics, CalibrationStatistics):
        raise ValueError(f"`statistics` must be a CalibrationStatistics, got {type(statistics).__name__}")
    if n_bins not in statistics.top_bins:
        raise ValueError(
            f"`{name}`: the statistics hold top-label tables of {list(statistics.top_bins)} bins, not {n_bins}"
        )
    table = statistics.top_table(n_bins)
    if class_index is None:
        return table.sum(axis=0)
    if isinstance(class_index, bool) or not isinstance(class_index, (int, np.integer)):
        raise ValueError(f"`class_index` must be an integer, got {class_index!r}")
    if not 0 <= class_index < statistics.num_classes:
        raise ValueError(f"`class_index` must lie in [0, {statistics.num_classes}), got {class_index!r}")
    row = np.searchsorted(statistics.table_classes, class_index)  # a vocabulary's table: labels that occur
    if row == len(statistics.table_classes) or statistics.table_classes[row] != class_index:
        return np.zeros(table.shape[1:])
    return table[row]


def bin_band(
    count: np.ndarray,
    accuracy: np.ndarray,
    *,
    bootstrap: int = SAMPLING_UNSET.bootstrap,
    seed: int = SAMPLING_UNSET.seed,
    level: float = SAMPLING_UNSET.level,
    n_boot: int | None = None,
    confidence: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Return the bootstrap band of each bin's accuracy, from the per-bin sums alone.

    Resampling the rows of a bin with replacement, the bin's number of correct rows is
    ``Binomial(n_b, acc_b)`` (each row is right or wrong): the bootstrap distribution of the bin's
    accuracy is drawn from its count and accuracy, with no need of the rows (so a streamed or
    sharded evaluation's diagram has its band too). The band is the percentile interval of
    ``bootstrap`` such draws per bin.

    Parameters
    ----------
    count : ndarray of shape (n_bins,)
        Rows per bin.
    accuracy : ndarray of shape (n_bins,)
        Accuracy per bin (NaN where empty).
    bootstrap : int, default 1000
        Draws per bin (at least 1).
    seed : int, default 0
    level : float, default 0.95
        The band's level.
    n_boot, confidence : optional
        Deprecated names of ``bootstrap`` and ``level`` (a ``FutureWarning``).

    Returns
    -------
    low, high : ndarray of shape (n_bins,)
        NaN in empty bins.

    Examples
    --------
    >>> low, high = bin_band(np.array([100, 0]), np.array([0.8, np.nan]))
    >>> bool(low[0] < 0.8 < high[0]), bool(np.isnan(low[1]))
    (True, True)
    """
    bootstrap = renamed("n_boot", n_boot, "bootstrap", bootstrap, "bin_band()")
    level = renamed("confidence", confidence, "level", level, "bin_band()")
    sampling = resolve_sampling(bootstrap=bootstrap, seed=seed, level=level)
    n_boot, seed, confidence = sampling.require("bootstrap"), sampling.seed, sampling.level
    count = np.asarray(count, dtype=np.int64)
    filled = count > 0
    p = np.where(filled, np.nan_to_num(np.asarray(accuracy, dtype=np.float64)), 0.0).clip(0, 1)
    draws = np.random.default_rng(seed).binomial(count, p, size=(n_boot, count.size)) / np.maximum(count, 1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail], axis=0)
    return np.where(filled, low, np.nan), np.where(filled, high, np.nan)


def _statistics(probs: Any, labels: Any, metrics: tuple[str, ...], settings: CalibrationSettings):
    return CalibrationAccumulator(metrics, settings=settings).update(probs, labels).statistics


class ReliabilityDiagram:
    """Reliability diagram: per equal-width bin of the top-label confidence, the accuracy.

    Build it with :meth:`from_predictions` or :meth:`from_statistics`; both draw at once.

    Parameters
    ----------
    table : ndarray of shape (n_bins, 4)
        Per-bin sums (count, confidence, correct, ...), as ``CalibrationStatistics.top_table``.
    label : str, optional
        Legend label of the curve.

    Attributes
    ----------
    count, confidence, accuracy : ndarray of shape (n_bins,)
        Per-bin samples, mean confidence and accuracy (NaN in empty bins).
    ece : float
        The ECE of these bins.
    ax_, figure_ : matplotlib Axes and Figure
        Where it was drawn.
    line_ : matplotlib Line2D
        The accuracy curve over the non-empty bins.
    bars_ : matplotlib BarContainer
        The accuracy bars.
    support_bars_ : matplotlib BarContainer or None
        The samples per bin, when a ``support_ax`` was given.

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> ax = Figure().subplots()
    >>> display = ReliabilityDiagram.from_predictions([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]], [0, 1, 1], ax=ax)
    >>> round(display.ece, 4), display.ax_ is ax
    (0.3, True)
    """

    metric = "ece"
    """The metric whose sums it draws: its top-label table, split by true class."""

    def __init__(self, table: np.ndarray, *, label: str | None = None) -> None:
        table = np.asarray(table, dtype=np.float64)
        if table.ndim != 2 or table.shape[1] < 3:
            raise ValueError(f"`table` must have shape (n_bins, >= 3), got {table.shape}")
        self.table = table
        self.label = label
        bins = binned_gaps(table)
        self.count, self.confidence, self.accuracy = bins["count"], bins["confidence"], bins["accuracy"]
        self.ece = ece_from_table(table)

    def plot(
        self,
        ax: Any = None,
        *,
        support_ax: Any = None,
        color: str | None = None,
        diagonal: bool = True,
        bootstrap: int = OFF,
        seed: int = SAMPLING_DEFAULTS.seed,
        band: int | None = None,
    ) -> ReliabilityDiagram:
        """Draw on ``ax`` (a new figure if None) and the samples per bin on ``support_ax`` if given.

        Parameters
        ----------
        ax : matplotlib Axes, optional
        support_ax : matplotlib Axes, optional
            Axes for the bar chart of samples per bin (log scale), e.g. below ``ax``.
        color : str, optional
        diagonal : bool, default True
            Draw the diagonal of perfect calibration (once per axes when overlaying curves).
        bootstrap : int, default 0
            With ``bootstrap > 0``, shade each bin's 95% bootstrap band of ``bootstrap`` draws
            (``calibkit.plots.diagrams.bin_band``, from the per-bin sums).
        seed : int, default 0
            Seed of the band's draws.
        band : int, optional
            Deprecated name of ``bootstrap`` (a ``FutureWarning``).

        Returns
        -------
        ReliabilityDiagram
            ``self``, with ``ax_``, ``figure_``, ``line_``, ``bars_``, ``support_bars_``,
            ``band_low_``, ``band_high_`` and ``band_`` (None without a band) set.
        """
        bootstrap = renamed("band", band, "bootstrap", bootstrap, "ReliabilityDiagram.plot()")
        ax = _axes(ax)
        n_bins = self.table.shape[0]
        centres = (np.arange(n_bins) + 0.5) / n_bins
        filled = self.count > 0
        self.bars_ = ax.bar(
            centres[filled], self.accuracy[filled], width=1 / n_bins, alpha=0.35, color=color, edgecolor=color
        )
        colour = self.bars_.patches[0].get_facecolor()[:3] if color is None and filled.any() else color
        (self.line_,) = ax.plot(centres[filled], self.accuracy[filled], "o-", color=colour, ms=3, label=self.label)
        self.band_low_ = self.band_high_ = self.band_ = None
        if bootstrap:
            self.band_low_, self.band_high_ = bin_band(self.count, self.accuracy, bootstrap=bootstrap, seed=seed)
            self.band_ = ax.fill_between(
                centres[filled], self.band_low_[filled], self.band_high_[filled], color=colour, alpha=0.25, lw=0,
                label="95% bootstrap band",
            )  # fmt: skip
        if diagonal:
            ax.plot([0, 1], [0, 1], "k--", lw=0.8, label="perfect calibration")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_ylabel("accuracy")
        self.support_bars_ = None
        if support_ax is None:
            ax.set_xlabel("confidence")
        else:
            ax.tick_params(labelbottom=False)
            self.support_bars_ = support_ax.bar(centres, self.count, width=1 / n_bins, color=colour, alpha=0.5)
            support_ax.set_xlim(0, 1)
            support_ax.set_yscale("symlog")
            support_ax.set_xlabel("confidence")
            support_ax.set_ylabel("samples", fontsize=8)
        self.ax_, self.figure_ = ax, ax.figure
        return self

    @classmethod
    def from_statistics(
        cls,
        statistics: CalibrationStatistics,
        *,
        n_bins: int = DEFAULTS.n_bins,
        class_index: int | None = None,
        label: str | None = None,
        ax: Any = None,
        support_ax: Any = None,
        color: str | None = None,
        diagonal: bool = True,
        bootstrap: int = OFF,
        seed: int = SAMPLING_DEFAULTS.seed,
        band: int | None = None,
    ) -> ReliabilityDiagram:
        """Draw from accumulated statistics (the ``statistics`` attribute of a ``CalibrationAccumulator``).

        Parameters
        ----------
        statistics : CalibrationStatistics
            Sums holding a top-label table of ``n_bins`` bins (any accumulator computing ECE).
        n_bins : int, default 15
        class_index : int, optional
            Only the samples whose true class is this one (the per-class diagrams of the class-wise
            paper); default all samples.
        label, ax, support_ax, color, diagonal, bootstrap, seed, band
            As :meth:`plot`.

        Returns
        -------
        ReliabilityDiagram
        """
        bootstrap = renamed("band", band, "bootstrap", bootstrap, "ReliabilityDiagram.from_statistics()")
        return cls(_table(statistics, n_bins, class_index, "n_bins"), label=label).plot(
            ax, support_ax=support_ax, color=color, diagonal=diagonal, bootstrap=bootstrap, seed=seed
        )

    @classmethod
    def from_predictions(
        cls,
        probs: Any,
        labels: Any,
        *,
        n_bins: int = DEFAULTS.n_bins,
        from_logits: bool = DEFAULTS.from_logits,
        ignore_index: int = DEFAULTS.ignore_index,
        class_index: int | None = None,
        label: str | None = None,
        ax: Any = None,
        support_ax: Any = None,
        color: str | None = None,
        diagonal: bool = True,
        bootstrap: int = OFF,
        seed: int = SAMPLING_DEFAULTS.seed,
        band: int | None = None,
    ) -> ReliabilityDiagram:
        """Draw from predictions, as :func:`calibkit.ece` takes them.

        Parameters
        ----------
        probs, labels, n_bins, from_logits, ignore_index
            As :func:`calibkit.ece`.
        class_index, label, ax, support_ax, color, diagonal, bootstrap, seed, band
            As :meth:`from_statistics`.

        Returns
        -------
        ReliabilityDiagram
        """
        bootstrap = renamed("band", band, "bootstrap", bootstrap, "ReliabilityDiagram.from_predictions()")
        settings = CalibrationSettings(n_bins=n_bins, from_logits=from_logits, ignore_index=ignore_index)
        statistics = _statistics(probs, labels, (cls.metric,), settings)
        return cls.from_statistics(
            statistics,
            n_bins=n_bins,
            class_index=class_index,
            label=label,
            ax=ax,
            support_ax=support_ax,
            color=color,
            diagonal=diagonal,
            bootstrap=bootstrap,
            seed=seed,
        )


class RegionPlot:
    """The regions of certainty RBECE measures: ``|accuracy - confidence|`` per bin, counted or not.

    Parameters
    ----------
    table : ndarray of shape (rbece_bins, 4)
        Per-bin top-label sums.
    theta : float, default 40
        RBECE counts a bin only with more than ``theta`` samples.

    Attributes
    ----------
    count, gap : ndarray of shape (rbece_bins,)
        Samples and ``|accuracy - confidence|`` per bin (0 where empty).
    counted : ndarray of bool
        The bins RBECE counts.
    rbece : float
        RBECE of these bins (NaN when no bin counts).
    ax_, figure_ : matplotlib Axes and Figure
    counted_bars_, ignored_bars_ : matplotlib BarContainer
    support_line_ : matplotlib Line2D
        Samples per bin (dots, on a twin axes with a log scale).

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> probs = [[0.9, 0.1]] * 50 + [[0.6, 0.4]] * 5
    >>> display = RegionPlot.from_predictions(probs, [0] * 45 + [1] * 10, theta=40, ax=Figure().subplots())
    >>> int(display.counted.sum()), round(display.rbece, 4)
    (1, 0.0)
    """

    metric = "rbece"
    """The metric whose sums it draws: the region table of ``rbece_bins`` bins."""

    def __init__(self, table: np.ndarray, *, theta: float = DEFAULTS.theta) -> None:
        table = np.asarray(table, dtype=np.float64)
        if table.ndim != 2 or table.shape[1] < 3:
            raise ValueError(f"`table` must have shape (n_bins, >= 3), got {table.shape}")
        self.table = table
        self.theta = CalibrationSettings(theta=theta).theta
        bins = binned_gaps(table)
        self.count = bins["count"]
        self.gap = np.nan_to_num(np.abs(bins["gap"]))
        self.counted = self.count > self.theta
        with warnings.catch_warnings():  # no bin counted: NaN, which the plot shows; no warning
            warnings.simplefilter("ignore", EmptyRegionWarning)
            self.rbece = rbece_from_table(table, self.theta)

    def plot(self, ax: Any = None, *, title: str | None = None) -> RegionPlot:
        """Draw on ``ax`` (a new figure if None).

        Parameters
        ----------
        ax : matplotlib Axes, optional
        title : str, optional

        Returns
        -------
        RegionPlot
            ``self``, with ``ax_``, ``figure_``, ``counted_bars_``, ``ignored_bars_``, ``support_line_``.
        """
        ax = _axes(ax)
        m = self.table.shape[0]
        centres = (np.arange(m) + 0.5) / m
        c = self.counted
        self.counted_bars_ = ax.bar(
            centres[c], self.gap[c], width=1 / m, color="tab:green", label=f"counted (n > {self.theta:g})"
        )
        self.ignored_bars_ = ax.bar(centres[~c], self.gap[~c], width=1 / m, color="lightgray", label="ignored by RBECE")
        ax.set_xlabel("confidence")
        ax.set_ylabel("|accuracy - confidence|")
        ax.set_xlim(0, 1)
        if title is not None:
            ax.set_title(title, fontsize=9)
        twin = ax.twinx()
        (self.support_line_,) = twin.plot(centres, self.count, "k.", ms=4)
        twin.set_yscale("symlog")
        twin.set_ylabel("samples per bin (dots)", fontsize=8)
        ax.legend(loc="upper left", fontsize=7)
        self.ax_, self.figure_ = ax, ax.figure
        return self

    @classmethod
    def from_statistics(
        cls,
        statistics: CalibrationStatistics,
        *,
        rbece_bins: int = DEFAULTS.rbece_bins,
        theta: float = DEFAULTS.theta,
        ax: Any = None,
        title: str | None = None,
    ) -> RegionPlot:
        """Draw from accumulated statistics holding a top-label table of ``rbece_bins`` bins.

        Parameters
        ----------
        statistics : CalibrationStatistics
        rbece_bins : int, default 20
        theta : float, default 40
        ax, title
            As :meth:`plot`.

        Returns
        -------
        RegionPlot
        """
        return cls(_table(statistics, rbece_bins, None, "rbece_bins"), theta=theta).plot(ax, title=title)

    @classmethod
    def from_predictions(
        cls,
        probs: Any,
        labels: Any,
        *,
        rbece_bins: int = DEFAULTS.rbece_bins,
        theta: float = DEFAULTS.theta,
        from_logits: bool = DEFAULTS.from_logits,
        ignore_index: int = DEFAULTS.ignore_index,
        ax: Any = None,
        title: str | None = None,
    ) -> RegionPlot:
        """Draw from predictions, as :func:`calibkit.rbece` takes them.

        Parameters
        ----------
        probs, labels, rbece_bins, theta, from_logits, ignore_index
            As :func:`calibkit.rbece`.
        ax, title
            As :meth:`plot`.

        Returns
        -------
        RegionPlot
        """
        settings = CalibrationSettings(
            rbece_bins=rbece_bins, theta=theta, from_logits=from_logits, ignore_index=ignore_index
        )
        statistics = _statistics(probs, labels, (cls.metric,), settings)
        return cls.from_statistics(statistics, rbece_bins=rbece_bins, theta=theta, ax=ax, title=title)


class SmoothReliabilityDiagram:
    """Smooth reliability diagram [1]_: the kernel-smoothed accuracy against top-label confidence.

    The numbers of :func:`calibkit.smooth_reliability` (smECE's bandwidth, the Gaussian kernel
    reflected at 0 and 1), drawn as the authors' ``relplot`` draws its main line: the curve, the
    diagonal, the density of the confidences along the bottom, and smECE in the corner. Built with
    :meth:`from_predictions` (no ``from_statistics``: the bandwidth needs every row).

    Parameters
    ----------
    curve : dict
        As :func:`calibkit.smooth_reliability` returns: ``grid``, ``accuracy``, ``density``,
        ``smece``, ``bandwidth``.
    label : str, optional
        Legend label of the curve.

    Attributes
    ----------
    grid, accuracy, density : ndarray
        The curve's mesh, smoothed accuracy and density of the confidences.
    smece, bandwidth : float
    ax_, figure_ : matplotlib Axes and Figure
    line_ : matplotlib Line2D
        The smoothed accuracy.
    density_ : matplotlib PolyCollection or None
        The density, scaled to the bottom fifth of the axes (when drawn).

    References
    ----------
    .. [1] J. Blasiok and P. Nakkiran (2024). "Smooth ECE: Principled Reliability Diagrams via
       Kernel Smoothing". ICLR.

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> display = SmoothReliabilityDiagram.from_predictions([0.2, 0.7, 0.9, 0.4], [0, 1, 1, 1], ax=Figure().subplots())
    >>> round(display.smece, 4), display.line_.get_ydata().shape
    (0.2049, (200,))
    """

    def __init__(self, curve: dict[str, Any], *, label: str | None = None) -> None:
        missing = {"grid", "accuracy", "density", "smece", "bandwidth"} - set(curve)
        if missing:
            raise ValueError(f"`curve` lacks {sorted(missing)}: pass what calibkit.smooth_reliability returns")
        self.grid, self.accuracy, self.density = (
            np.asarray(curve[k], np.float64) for k in ("grid", "accuracy", "density")
        )
        self.smece, self.bandwidth = float(curve["smece"]), float(curve["bandwidth"])
        self.label = label

    def plot(
        self, ax: Any = None, *, color: str = "red", diagonal: bool = True, density: bool = True
    ) -> SmoothReliabilityDiagram:
        """Draw on ``ax`` (a new figure if None).

        Parameters
        ----------
        ax : matplotlib Axes, optional
        color : str, default "red"
            The curve's colour (relplot's).
        diagonal : bool, default True
            Draw the diagonal of perfect calibration (once per axes when overlaying curves).
        density : bool, default True
            Shade the density of the confidences along the bottom of the axes.

        Returns
        -------
        SmoothReliabilityDiagram
            ``self``, with ``ax_``, ``figure_``, ``line_`` and ``density_`` set.
        """
        ax = _axes(ax)
        if diagonal:
            ax.plot([0, 1], [0, 1], "k--", lw=0.8, alpha=0.5, label="perfect calibration")
        label = self.label if self.label is not None else f"smECE {self.smece:.3f}"
        (self.line_,) = ax.plot(self.grid, self.accuracy, "-", color=color, lw=2, label=label)
        self.density_ = None
        if density:
            top = self.density.max()
            scaled = self.density / top * 0.2 if top > 0 else self.density
            self.density_ = ax.fill_between(self.grid, 0, scaled, color="gray", alpha=0.35, lw=0)
        ax.text(0.04, 0.92, f"smECE {self.smece:.3f} (sigma {self.bandwidth:.3g})", transform=ax.transAxes)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("confidence")
        ax.set_ylabel("smoothed accuracy")
        self.ax_, self.figure_ = ax, ax.figure
        return self

    @classmethod
    def from_predictions(
        cls,
        probs: Any,
        labels: Any,
        *,
        bandwidth: float | None = None,
        from_logits: bool = DEFAULTS.from_logits,
        ignore_index: int = DEFAULTS.ignore_index,
        label: str | None = None,
        ax: Any = None,
        color: str = "red",
        diagonal: bool = True,
        density: bool = True,
    ) -> SmoothReliabilityDiagram:
        """Draw from predictions, as :func:`calibkit.smece` takes them.

        Parameters
        ----------
        probs, labels, bandwidth, from_logits, ignore_index
            As :func:`calibkit.smooth_reliability`.
        label : str, optional
            Legend label (default: the smECE value).
        ax, color, diagonal, density
            As :meth:`plot`.

        Returns
        -------
        SmoothReliabilityDiagram
        """
        curve = smooth_reliability(
            probs, labels, bandwidth=bandwidth, from_logits=from_logits, ignore_index=ignore_index
        )
        return cls(curve, label=label).plot(ax, color=color, diagonal=diagonal, density=density)
