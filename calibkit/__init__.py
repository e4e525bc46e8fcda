"""calibkit: calibration metrics, calibrators and a Trainer callback for Hugging Face models."""

from calibkit.evaluate_modules import evaluate_module_path, install_evaluate_modules
from calibkit.metrics import *  # noqa: F403 - the functional API is the package's face
from calibkit.metrics import __all__ as _metrics_all

__version__ = "0.1.0"
__all__ = [*_metrics_all, "evaluate_module_path", "install_evaluate_modules", "__version__"]
