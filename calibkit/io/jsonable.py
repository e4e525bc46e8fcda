"""JSON output: numpy arrays and scalars as Python values, NaN as null (every ``--json`` and ``report.json``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def json_ready(value: Any) -> Any:
    """Return ``value`` with numpy arrays and scalars as Python ones and NaN as None, nested (for ``json.dumps``).

    Parameters
    ----------
    value : object

    Returns
    -------
    object
    """
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_ready(value.tolist())
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    if isinstance(value, np.integer):
        return int(value)
    return value
