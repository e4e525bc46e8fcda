"""Every calibrator, once: its method name, its class, its label in tables, its aliases.

:data:`REGISTRY` is what :func:`calibkit.calibrators.make_calibrator`, the comparison table and
the CLI read. A calibrator is three things: its fitting class (``module:Class``), its entry here,
and its head in ``HEADS`` of ``modeling_calibkit_heads.py`` (the saved map, its paper and formula), which is kept
apart on purpose: it is copied next to the weights of a calibrated model and must load without
calibkit, so the registry reads the paper from it and ``tests/metrics/test_registry.py`` checks
that the two list the same methods.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CalibratorEntry:
    """One calibrator of the registry.

    Parameters
    ----------
    name : str
        The method name, as in a calibrated model's ``calibration`` block.
    label : str
        Its label in tables and figures.
    class_path : str
        ``"module:Class"`` under :mod:`calibkit.calibrators` (imported on first use).
    aliases : tuple of str, default ()
        Other names :func:`~calibkit.calibrators.make_calibrator` takes for it (lower case, ``-``
        for ``_``).
    """

    name: str
    label: str
    class_path: str
    aliases: tuple[str, ...] = ()

    @property
    def cls(self) -> type:
        """The :class:`~calibkit.calibrators.base.Calibrator` subclass."""
        module, _, name = self.class_path.partition(":")
        return getattr(importlib.import_module(f"calibkit.calibrators.{module}"), name)

    @property
    def paper(self) -> str:
        """Who proposed it: its head's citation in ``modeling_calibkit_heads.HEADS`` (imports torch)."""
        from calibkit.calibrators.modeling_calibkit import HEADS

        return HEADS[self.name].paper

    @property
    def affine(self) -> bool:
        """Affine in the logits: foldable into the classifier's last linear layer."""
        return bool(self.cls.affine)


REGISTRY: tuple[CalibratorEntry, ...] = (
    CalibratorEntry("ts", "TS", "temperature:TemperatureScaling", aliases=("temperature",)),
    CalibratorEntry("wts", "WTS", "temperature:WeightedTemperatureScaling"),
    CalibratorEntry("rd-ts", "RD-TS", "temperature:RegionDependentTemperatureScaling", aliases=("rdts",)),
    CalibratorEntry("vs", "VS", "baselines:VectorScaling"),
    CalibratorEntry("ms", "MS", "baselines:MatrixScaling"),
    CalibratorEntry("ir", "IR", "baselines:IsotonicCalibration"),
    CalibratorEntry("hb", "HB", "baselines:HistogramBinning"),
    CalibratorEntry("dirichlet", "Dirichlet", "beyond:DirichletCalibration"),
    CalibratorEntry("beta", "Beta", "beyond:BetaCalibration"),
    CalibratorEntry("venn-abers", "Venn-Abers", "beyond:VennAbersCalibration"),
)
"""Every calibrator, in table order."""

NAMES: tuple[str, ...] = tuple(e.name for e in REGISTRY)

UNCALIBRATED = "uncalibrated"
"""The row of the model as it is, in every comparison."""

LABELS: dict[str, str] = {UNCALIBRATED: "Uncalibrated", **{e.name: e.label for e in REGISTRY}}
"""Method name -> label, the uncalibrated row included."""

ALIASES: dict[str, str] = {alias: e.name for e in REGISTRY for alias in e.aliases}
"""Alias -> method name, what :func:`~calibkit.calibrators.make_calibrator` also takes."""

_BY_NAME = {e.name: e for e in REGISTRY}


@dataclass(frozen=True)
class MultiLabelEntry:
    """One multi-label calibrator (:mod:`calibkit.calibrators.multilabel`): a sigmoid per label.

    Parameters
    ----------
    name : str
        Its name in tables and in ``calibrate(method=...)`` (``-`` or ``_``).
    mode : str
        What it fits: a mode of :class:`~calibkit.calibrators.MultiLabelScaling` (its ``method``),
        or ``"isotonic"`` (:class:`~calibkit.calibrators.MultiLabelIsotonic`).
    label : str
        Its label in tables and figures.
    """

    name: str
    mode: str
    label: str


MULTILABEL: tuple[MultiLabelEntry, ...] = (
    MultiLabelEntry("ts", "temperature", "TS (one T)"),
    MultiLabelEntry("wts", "weighted_temperature", "WTS (per-label weights)"),
    MultiLabelEntry("label-ts", "label_temperature", "TS per label"),
    MultiLabelEntry("platt", "platt", "Platt per label"),
    MultiLabelEntry("ir", "isotonic", "isotonic per label"),
)
"""Every multi-label calibrator, in table order."""

MULTILABEL_LABELS: dict[str, str] = {UNCALIBRATED: "uncalibrated", **{e.name: e.label for e in MULTILABEL}}
"""The multi-label calibrators by the names
:func:`~calibkit.calibrators.calibrated.multilabel_mode` reads, in table order, with their labels."""

MULTILABEL_ALIASES: dict[str, str] = {e.name.replace("-", "_"): e.mode for e in MULTILABEL if e.name != e.mode}
"""Name (``_`` for ``-``) -> mode, for the names that are not a mode themselves."""


def entry(name: str) -> CalibratorEntry:
    """Return the registry entry of calibration method ``name``.

    Parameters
    ----------
    name : str
        A method name of :data:`NAMES`.

    Returns
    -------
    CalibratorEntry

    Raises
    ------
    ValueError
        Naming the known methods, when ``name`` is not one.
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown calibration method {name!r}; known: {list(NAMES)}") from None


def classes() -> dict[str, Any]:
    """Map each method name to its calibrator class (imports them).

    Returns
    -------
    dict of str to type
    """
    return {e.name: e.cls for e in REGISTRY}
