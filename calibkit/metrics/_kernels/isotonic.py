"""Pool adjacent violators: the isotonic fit behind the score decomposition and the IR calibrators."""

from __future__ import annotations

import numba as nb
import numpy as np

from calibkit._numba.cache import CACHE


@nb.njit(cache=CACHE)
def pool_adjacent_violators(y, w):
    """Isotonic (non-decreasing) fit of ``y`` with weights ``w``: block values and block ends.

    Returns ``(values, ends)`` with one entry per block; block j covers indices
    ``[ends[j-1], ends[j])``. Linear time (each merge removes a block).
    """
    n = y.shape[0]
    values = np.empty(n)
    weights = np.empty(n)
    ends = np.empty(n, dtype=np.int64)
    top = -1
    for i in range(n):
        top += 1
        values[top] = y[i]
        weights[top] = w[i]
        ends[top] = i + 1
        while top > 0 and values[top - 1] >= values[top]:
            total = weights[top - 1] + weights[top]
            values[top - 1] = (values[top - 1] * weights[top - 1] + values[top] * weights[top]) / total
            weights[top - 1] = total
            ends[top - 1] = ends[top]
            top -= 1
    return values[: top + 1].copy(), ends[: top + 1].copy()
