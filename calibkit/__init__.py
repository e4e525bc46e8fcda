"""calibkit: calibration metrics, calibrators and a Trainer callback for Hugging Face models.

The functional metrics are imported eagerly (numpy and numba only); calibrators and the
callback, which need torch and transformers, are resolved on first use, so ``import calibkit``
stays fast.
"""

from typing import Any

from calibkit import _moved
from calibkit._version import __version__
from calibkit.evaluate_modules import evaluate_module_path, install_evaluate_modules
from calibkit.metrics import *  # noqa: F403 - the functional API is the package's face
from calibkit.metrics import __all__ as _metrics_all

_moved.install()  # the 0.1 module paths (calibkit.shards, calibkit.plots, ...) still import, with a warning

_LAZY = {
    "calibrators": "calibkit.calibrators",
    "calibrate": "calibkit.calibrators",
    "fold_into_classifier": "calibkit.calibrators",
    "make_calibrator": "calibkit.calibrators",
    "TemperatureScaling": "calibkit.calibrators",
    "WeightedTemperatureScaling": "calibkit.calibrators",
    "RegionDependentTemperatureScaling": "calibkit.calibrators",
    "VectorScaling": "calibkit.calibrators",
    "MatrixScaling": "calibkit.calibrators",
    "IsotonicCalibration": "calibkit.calibrators",
    "HistogramBinning": "calibkit.calibrators",
    "SplitConformal": "calibkit.calibrators",
    "CalibratedModelForCausalLM": "calibkit.calibrators",
    "CalibratedModelForSequenceClassification": "calibkit.calibrators",
    "CalibratedModelForTokenClassification": "calibkit.calibrators",
    "callbacks": "calibkit.callbacks",
    "CalibrationCallback": "calibkit.callbacks",
}

__all__ = [*_metrics_all, *sorted(_LAZY), "evaluate_module_path", "install_evaluate_modules", "__version__"]


def __getattr__(name: str) -> Any:
    import importlib

    if name not in _LAZY:
        raise AttributeError(f"module 'calibkit' has no attribute {name!r}")
    module = importlib.import_module(_LAZY[name])
    value = module if name == module.__name__.rsplit(".", 1)[-1] else getattr(module, name)
    globals()[name] = value
    return value
