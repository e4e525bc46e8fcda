"""Calibrators: fit on validation logits, apply to logits, wrap a ``transformers`` model.

TS, WTS and RD-TS (the papers' methods), the baselines VS, MS, IR and HB, and Dirichlet, beta
and Venn-Abers calibration share the
scikit-learn-style interface of :class:`Calibrator`; :class:`MultiLabelScaling` and
:class:`MultiLabelIsotonic` calibrate multi-label heads (a sigmoid per label), and
:class:`PreferenceTemperature` a reward model's preferences (its pairwise temperature);
:func:`calibrate` turns a fine-tuned model and a calibrator into a calibrated ``PreTrainedModel``.
:class:`SplitConformal` is no calibrator but stands here beside them: it turns logits into
split-conformal prediction sets (LAC, APS, RAPS) with a coverage guarantee.

Names are resolved lazily: fitting a temperature needs neither torch nor transformers, whose
imports are slow; the model classes import them on first use (and register themselves
with the ``Auto`` classes then).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Calibrator": "base",
    "TemperatureScaling": "temperature",
    "WeightedTemperatureScaling": "temperature",
    "RegionDependentTemperatureScaling": "temperature",
    "VectorScaling": "baselines",
    "MatrixScaling": "baselines",
    "IsotonicCalibration": "baselines",
    "HistogramBinning": "baselines",
    "DirichletCalibration": "beyond",
    "BetaCalibration": "beyond",
    "VennAbersCalibration": "beyond",
    "MultiLabelScaling": "multilabel",
    "MultiLabelIsotonic": "multilabel",
    "SplitConformal": "conformal",
    "PreferenceTemperature": "preference",
    "CALIBRATORS": "calibrated",
    "calibrate": "calibrated",
    "classifier_layer": "calibrated",
    "collect_logits": "calibrated",
    "fold_into_classifier": "calibrated",
    "make_calibrator": "calibrated",
    "CalibratedConfig": "calibrated",
    "CalibratedModelForCausalLM": "calibrated",
    "CalibratedModelForSequenceClassification": "calibrated",
    "CalibratedModelForTokenClassification": "calibrated",
    "CalibrationHead": "calibrated",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
