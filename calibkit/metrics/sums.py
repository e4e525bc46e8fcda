"""What a metric's ``compute`` reads: the sums of a pass, the settings, and the values metrics share.

:class:`Sums` is the argument of every ``Metric.compute`` of :mod:`calibkit.metrics.registry`:
a table, the per-class ECEs, ACE's boundary points or SCE are computed once per report, however
many metrics read them.
"""

from __future__ import annotations

import warnings
from functools import cached_property

import numpy as np

from calibkit.metrics import _kernels as kernels
from calibkit.metrics.corp import binary_decomposition
from calibkit.metrics.formulas import (
    MissingClassWarning,
    ace_from_points,
    class_wise_summary,
    ece_from_table,
    per_class_ece,
    sce_from_rows,
    sce_from_table,
)
from calibkit.metrics.ranking import selective_from_buckets, selective_from_rows
from calibkit.metrics.settings import CalibrationSettings
from calibkit.metrics.smooth import smece_from_rows
from calibkit.metrics.statistics import CalibrationStatistics, ace_points

HELD_ONLY = (
    "`metrics`: {} needs every row at once (smECE's bandwidth, the isotonic fit of a score "
    "decomposition depend on all of them) and has no streamed form; the streaming doors (accumulator, "
    "bootstrap, shards, Dask, the callback) keep sums only: compute it where the rows are held "
    "(calibkit.smece, calibkit.score_decomposition, calibkit.calibration_report, the evaluate modules)"
)
"""The refusal of a metric that needs the rows held, at a door that streams (``.format(name)``)."""

FEW_CLASSES = 10
"""A message lists at most this many class ids, then gives the count."""


class Sums:
    """What a metric's ``compute`` reads: the statistics, the settings, and shared intermediate values.

    Values that several metrics share (a table, the per-class ECEs, ACE's boundary points) are
    computed once per report.

    Parameters
    ----------
    statistics : CalibrationStatistics
        The sums of a pass.
    settings : CalibrationSettings
        The settings the sums were filled with.
    ace_partials : tuple of ndarray, optional
        Exact sums where a range boundary cuts an ACE bucket (ACE is then exact).
    selective_rows : tuple of ndarray, optional
        Every row's top-label confidence and error (AURC and selective accuracy are then exact).
    smooth_rows : tuple of ndarray, optional
        Every row's prediction and outcome in smECE's convention (``calibkit.metrics.smooth``):
        the metrics that need the rows held (smECE) are computed only from these.
    """

    def __init__(
        self,
        statistics: CalibrationStatistics,
        settings: CalibrationSettings,
        ace_partials: tuple[np.ndarray, np.ndarray] | None = None,
        selective_rows: tuple[np.ndarray, np.ndarray] | None = None,
        smooth_rows: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        self.statistics = statistics
        self.settings = settings
        self.ace_partials = ace_partials
        self.selective_rows = selective_rows
        self.smooth_rows = smooth_rows
        self._tables: dict[int, np.ndarray] = {}

    @property
    def n(self) -> float:
        """Samples counted (after masking)."""
        return float(self.statistics.scalars[kernels.S_N])

    def scalar(self, slot: int) -> float:
        """Return one of the always-kept scalar sums.

        Parameters
        ----------
        slot : int
            Its index, one of ``kernels.S_*``.

        Returns
        -------
        float
        """
        return float(self.statistics.scalars[slot])

    def by_class(self, n_bins: int) -> np.ndarray:
        """Return the top-label table of ``n_bins`` bins split by true label, the class-wise family's.

        For 1-D binary input, that of the top label of ``[1 - p, p]`` (SPEC.md).

        Parameters
        ----------
        n_bins : int
            A bin count the statistics hold.

        Returns
        -------
        ndarray of shape (K, n_bins, 4)
            Over a vocabulary, a row per label that occurs (``statistics.table_classes``).
        """
        return self.statistics.top_table(n_bins, top_label=True)

    def top(self, n_bins: int) -> np.ndarray:
        """Return the top-label table of ``n_bins`` bins over all samples (computed once).

        Parameters
        ----------
        n_bins : int
            A bin count the statistics hold.

        Returns
        -------
        ndarray of shape (n_bins, 4)
        """
        if n_bins not in self._tables:
            self._tables[n_bins] = self.statistics.top_table(n_bins).sum(axis=0)
        return self._tables[n_bins]

    @cached_property
    def class_ece(self) -> np.ndarray:
        """``ECE_k`` per class on the ``n_bins`` table; NaN (with one warning) for absent classes."""
        value = self.statistics.by_label(per_class_ece(self.by_class(self.settings.n_bins)), np.nan)
        absent = np.flatnonzero(np.isnan(value))
        if absent.size and not self.settings.next_token:  # a vocabulary's unseen tokens are expected
            # A count and the first ids: at a vocabulary's 16,000 classes the whole list is a wall of text
            shown = ", ".join(str(k) for k in absent[:FEW_CLASSES].tolist())
            which = f"classes [{shown}]" if absent.size <= FEW_CLASSES else f"{absent.size} classes ([{shown}, ...])"
            warnings.warn(
                f"{which} have no sample: their ECE_k is NaN and they are left out of "
                "CECE, MSECE, WSECE and ECE variance",
                MissingClassWarning,
                stacklevel=5,
            )
        return value

    @cached_property
    def class_wise(self) -> dict[str, float]:
        """CECE, MSECE, WSECE and ECE variance (class-wise paper, eq 3.4-3.7)."""
        table = self.by_class(self.settings.n_bins)
        counts = self.statistics.by_label(table[:, :, 0].sum(axis=1), 0.0)
        # the ECE the variance is taken around: top-label, as the ECE_k (the same table as ece's but
        # for 1-D binary input, whose ece bins the class-1 probability)
        return class_wise_summary(self.class_ece, counts, ece_from_table(table.sum(axis=0)))

    @cached_property
    def ace(self) -> tuple[float, float]:
        """ACE and the bound on its error (0 when ``ace_partials`` resolve every cut bucket)."""
        points = ace_points(self.statistics.ace, self.settings.ace_ranges)
        return ace_from_points(self.statistics.ace, points, self.ace_partials, self.scored_classes)

    @cached_property
    def sce(self) -> float:
        """SCE over all classes, or over a vocabulary (next_token) those with a label (SPEC.md)."""
        stats = self.statistics
        if stats.classwise_classes is None:
            return sce_from_table(stats.classwise, self.n, self.scored_classes)
        rows = (stats.classwise, stats.classwise_classes, stats.column_first)
        return sce_from_rows(*rows, self.n, self.scored_classes)

    @cached_property
    def scored_classes(self) -> np.ndarray | None:
        """The classes ACE and SCE average over: all (None), or over a vocabulary (next_token) those with a label.

        A vocabulary's unseen tokens would each add ``mean p_k`` (about 1/V) to ACE and SCE and divide
        them by V: the class-wise metrics over a vocabulary are those of the tokens that occur (SPEC.md).
        """
        if not self.settings.next_token:
            return None
        return self.statistics.label_counts() > 0

    @cached_property
    def selective(self) -> dict[str, tuple[float, float]]:
        """AURC and the selective accuracy, each with the bound on its error (0 from the rows)."""
        if self.selective_rows is not None:
            return selective_from_rows(*self.selective_rows, self.settings.coverage)
        return selective_from_buckets(self.statistics.selective, self.settings.coverage)

    @cached_property
    def smooth(self) -> tuple[float, float]:
        """The smooth ECE and its bandwidth, from the rows (no streamed form: refused without them)."""
        if self.smooth_rows is None:
            raise ValueError(HELD_ONLY.format("smece"))
        return smece_from_rows(*self.smooth_rows)

    @cached_property
    def decomposition(self) -> dict[str, float]:
        """The top label's Brier score decomposed (CORP), from the rows (its isotonic fit needs them all)."""
        if self.smooth_rows is None:
            raise ValueError(HELD_ONLY.format("brier_miscalibration / brier_discrimination"))
        return binary_decomposition(*self.smooth_rows, "brier")
