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


@nb.njit(cache=CACHE)
def near_tie_groups(x, resolution):
    """Group index of each of the sorted distinct values ``x``, values closer than ``resolution`` merged.

    scikit-learn's ``_make_unique`` rule, which the score decomposition's reference fits with: a
    group starts at its first value and takes every later value less than ``resolution`` above it,
    so the groups follow from the order and cannot be found by looking at neighbours alone.
    """
    group = np.empty(x.shape[0], dtype=np.int64)
    g = 0
    anchor = x[0]
    for i in range(x.shape[0]):
        if x[i] - anchor >= resolution:
            g += 1
            anchor = x[i]
        group[i] = g
    return group
