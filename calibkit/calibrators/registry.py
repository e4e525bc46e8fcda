"""Every calibrator, once: its method name, its class, its label in tables, and whether it is affine.

:data:`REGISTRY` is what :func:`calibkit.calibrators.make_calibrator`, the comparison table and
the CLI read. (``modeling_calibkit.py`` keeps its own list of method names on purpose: it is
copied next to the weights of a calibrated model and must load without calibkit.)
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
    paper : str
        Who proposed it.
    """

    name: str
    label: str
    class_path: str
    paper: str

    @property
    def cls(self) -> type:
        """The :class:`~calibkit.calibrators.base.Calibrator` subclass."""
        module, _, name = self.class_path.partition(":")
        return getattr(importlib.import_module(f"calibkit.calibrators.{module}"), name)

    @property
    def affine(self) -> bool:
        """Affine in the logits: foldable into the classifier's last linear layer."""
        return bool(self.cls.affine)


REGISTRY: tuple[CalibratorEntry, ...] = (
    CalibratorEntry("ts", "TS", "temperature:TemperatureScaling", "Guo et al. 2017"),
    CalibratorEntry("wts", "WTS", "temperature:WeightedTemperatureScaling", "Obadinma et al. 2021"),
    CalibratorEntry("rd-ts", "RD-TS", "temperature:RegionDependentTemperatureScaling", "Dawkins et al. 2022"),
    CalibratorEntry("vs", "VS", "baselines:VectorScaling", "Guo et al. 2017"),
    CalibratorEntry("ms", "MS", "baselines:MatrixScaling", "Guo et al. 2017"),
    CalibratorEntry("ir", "IR", "baselines:IsotonicCalibration", "Zadrozny & Elkan 2002"),
    CalibratorEntry("hb", "HB", "baselines:HistogramBinning", "Zadrozny & Elkan 2001"),
    CalibratorEntry("dirichlet", "Dirichlet", "beyond:DirichletCalibration", "Kull et al. 2019"),
    CalibratorEntry("beta", "Beta", "beyond:BetaCalibration", "Kull et al. 2017"),
    CalibratorEntry("venn-abers", "Venn-Abers", "beyond:VennAbersCalibration", "Vovk & Petej 2014"),
)
"""Every calibrator, in table order."""

NAMES: tuple[str, ...] = tuple(e.name for e in REGISTRY)

UNCALIBRATED = "uncalibrated"
"""The row of the model as it is, in every comparison."""

LABELS: dict[str, str] = {UNCALIBRATED: "Uncalibrated", **{e.name: e.label for e in REGISTRY}}
"""Method name -> label, the uncalibrated row included."""

_BY_NAME = {e.name: e for e in REGISTRY}

MULTILABEL_LABELS: dict[str, str] = {
    UNCALIBRATED: "uncalibrated",
    "ts": "TS (one T)",
    "wts": "WTS (per-label weights)",
    "label-ts": "TS per label",
    "platt": "Platt per label",
    "ir": "isotonic per label",
}
"""The multi-label calibrators (:mod:`calibkit.calibrators.multilabel`) by the names
:func:`~calibkit.calibrators.calibrated.multilabel_mode` reads, in table order, with their labels."""


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
