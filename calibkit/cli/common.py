"""What the sub-commands share: option checks, the ``--output`` folder, the metrics table and JSON."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any


def format_value(value: Any) -> str:
    """Format a metric for a table: four decimals, ``nan`` for NaN.

    Parameters
    ----------
    value : float

    Returns
    -------
    str
    """
    return "nan" if isinstance(value, float) and math.isnan(value) else f"{value:.4f}"


def format_table(report: dict[str, Any], class_names: list[str] | None = None) -> str:
    """Render a report as a Markdown table: every metric, then each class's ECE and ``n``.

    Parameters
    ----------
    report : dict
        From :func:`calibkit.calibration_report`.
    class_names : list of str, optional
        Names of the per-class rows (default: the class indices).

    Returns
    -------
    str
    """
    from calibkit.metrics.registry import METRICS, metric

    lines = ["| metric | value |", "|---|---|"]
    for name in (*METRICS, "accuracy"):
        if metric(name).per_class:  # subset_ece: one row per class, below
            continue
        lines.append(f"| {name} | {format_value(report[name])} |")
    names = class_names or [str(k) for k in range(report["num_classes"])]
    for k, value in enumerate(report["subset_ece"]):
        lines.append(f"| ece_class_{names[k] if k < len(names) else k} | {format_value(float(value))} |")
    lines.append(f"| n | {report['n']} |")
    return "\n".join(lines)


def interval_lines(ci: dict[str, Any], class_names: list[str] | None) -> str:
    """Render bootstrap intervals as a Markdown table: every metric, then each class's ECE.

    Parameters
    ----------
    ci : dict
        From :func:`calibkit.metrics.bootstrap.bootstrap_intervals`.
    class_names : list of str or None
        Names of the per-class rows (default: the class indices).

    Returns
    -------
    str
    """
    lines = [f"| metric | {100 * ci['confidence']:g}% interval (bootstrap, {ci['n_boot']} replicates) |", "|---|---|"]
    for name, (low, high) in ci["intervals"].items():
        lines.append(f"| {name} | [{format_value(low)}, {format_value(high)}] |")
    if "subset_ece" in ci:
        low, high = ci["subset_ece"]
        names = class_names or [str(k) for k in range(len(low))]
        for k in range(len(low)):
            lines.append(f"| ece_class_{names[k]} | [{format_value(float(low[k]))}, {format_value(float(high[k]))}] |")
    return "\n".join(lines)


def check_count(value: int, option: str, maximum: int | None = None) -> None:
    """Refuse an option below 0 (for a count, 0 is none) or above ``maximum``, naming it as typed.

    Parameters
    ----------
    value : int
        The option's value.
    option : str
        The option as typed (``--bootstrap``).
    maximum : int, optional
        The largest value allowed.

    Raises
    ------
    ValueError
        Naming the option and its bounds.
    """
    if value < 0 or (maximum is not None and value > maximum):
        bounds = ">= 0" if maximum is None else f"in [0, {maximum}]"
        raise ValueError(f"`{option}` must be an integer {bounds}, got {value}")


def writable_folder(location: str) -> Path:
    """Create ``--output`` (and its parents) now and check that a file can be written in it.

    A run then does not end, after all its work, on a folder it cannot write.

    Parameters
    ----------
    location : str
        The ``--output`` argument.

    Returns
    -------
    Path

    Raises
    ------
    ValueError
        When the folder cannot be created or written to.
    """
    import tempfile

    folder = Path(location)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise ValueError(f"--output: cannot write to {location}: {exc.strerror or exc}") from None
    return folder
