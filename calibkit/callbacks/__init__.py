"""Trainer integration: :class:`CalibrationCallback` (imports transformers on first use)."""

from typing import Any

__all__ = ["CalibrationCallback", "DEFAULT_METRICS"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from calibkit.callbacks import calibration

    return getattr(calibration, name)
