"""Compiled passes over logits for the temperature fits (TS, WTS, RD-TS), and Venn-Abers' tables.

One pass returns the weighted NLL and its first two derivatives with respect to the one
parameter being fitted, so a safeguarded Newton method needs one pass per step and no copy of
the logits: rows are read in place (float32 or float64), rows whose label is ``ignore_index``
are skipped, sums are float64.

Per row i with inverse temperature ``b_i`` and ``p = softmax(b_i z_i)``:

- loss ``l_i = logsumexp(b_i z_i) - b_i z_iy``
- ``dl/db = E_p[z] - z_y`` and ``d2l/db2 = Var_p[z]`` (closed form, no autograd).

TS/WTS fit ``b_i = beta`` (so ``db/dbeta = 1``); RD-TS fits the slope ``m`` of
``T(h) = m h + 1``, ``b_i = 1/(m h_i + 1)``, by the chain rule with ``db/dm = -h b^2`` and
``d2b/dm2 = 2 h^2 b^3``.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from calibkit._numba.cache import CACHE
from calibkit._numba.fastmath import exp

# Columns of the ``out`` array of :func:`nll_derivatives`.
# O_SLOPE0 is the gradient at beta = 0 (uniform p: mean_k z - z_y), read for free in every pass.
O_WEIGHT, O_LOSS, O_GRAD, O_HESS, O_NONFINITE, O_SLOPE0 = range(6)
N_OUT = 6


# A row's three sums in class order. Reassociated (several lanes at a time), they were faster,
# but LLVM may vectorise such a sum differently in a process that compiles the kernel and in one
# that loads it from the cache (it did for the metrics' row entropy: ECD differed in the last
# bit), and a fitted temperature must not depend on the state of the cache.
@nb.njit(cache=CACHE, nogil=True)
def _moments(e, d, n):
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    for k in range(n):
        t = e[k] * d[k]
        s0 += e[k]
        s1 += t
        s2 += t * d[k]
    return s0, s1, s2


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def nll_derivatives(z, labels, start, stop, ignore_index, class_weight, beta, slope, h, region, out):
    """Add the weighted loss, gradient and Hessian of rows ``[start, stop)`` into ``out``."""
    n_classes = z.shape[1]
    # Row buffers: the exp loop runs over a contiguous float64 row, which LLVM vectorises with
    # the metrics' 1-ulp exp (numba's math.exp is one scalar call per entry here, no SVML).
    d = np.empty(n_classes)
    e = np.empty(n_classes)
    for i in range(start, stop):
        y = labels[i]
        if y == ignore_index:
            continue
        w = class_weight[y]
        if region:
            b = 1.0 / (slope * h[i] + 1.0)
        else:
            b = beta
        # Shift by the row's largest logit: exp never overflows and the variance is computed
        # on centred values (no cancellation between E[z^2] and E[z]^2).
        z_max = -np.inf
        z_sum = 0.0
        for k in range(n_classes):
            v = np.float64(z[i, k])
            d[k] = v
            z_max = max(z_max, v)
            z_sum += v
        if not math.isfinite(z_sum):  # NaN or inf somewhere in the row
            out[O_NONFINITE] += 1.0
            continue
        for k in range(n_classes):
            d[k] -= z_max
            e[k] = exp(b * d[k])
        s0, s1, s2 = _moments(e, d, n_classes)
        mean = s1 / s0
        var = s2 / s0 - mean * mean
        if var < 0.0:
            var = 0.0
        d_y = d[y]
        loss = math.log(s0) - b * d_y
        grad = mean - d_y
        if region:
            d1 = -h[i] * b * b
            d2 = 2.0 * h[i] * h[i] * b * b * b
            out[O_GRAD] += w * grad * d1
            out[O_HESS] += w * (var * d1 * d1 + grad * d2)
        else:
            out[O_GRAD] += w * grad
            out[O_HESS] += w * var
        out[O_WEIGHT] += w
        out[O_LOSS] += w * loss
        out[O_SLOPE0] += w * (z_sum / n_classes - (d_y + z_max))


@nb.njit(cache=CACHE, nogil=True)
def max_softmax(z, labels, start, stop, ignore_index, h):
    """Write ``h_i = max_k softmax(z_i)_k`` for the rows of ``[start, stop)`` that are kept."""
    n_classes = z.shape[1]
    for i in range(start, stop):
        if labels[i] == ignore_index:
            continue
        z_max = -np.inf
        for k in range(n_classes):
            v = np.float64(z[i, k])
            if v > z_max:
                z_max = v
        s0 = 0.0
        for k in range(n_classes):
            s0 += math.exp(np.float64(z[i, k]) - z_max)
        h[i] = 1.0 / s0


@nb.njit(cache=CACHE, nogil=True)
def venn_abers_tables(weight, positives):  # pragma: no cover - compiled
    """Tabulate the Venn-Abers isotonic fits ``p0``, ``p1`` at the slots between distinct scores.

    ``weight[g]``, ``positives[g]``: count and positives of the g-th distinct calibration score
    (sorted). Slot ``j`` (0..m) is a test score with ``j`` distinct scores before it. ``p0[j]``
    (``p1[j]``) is the isotonic fit at a test point labelled 0 (1) put in slot ``j``: pool
    adjacent violators of the prefix (left to right) and of the suffix (right to left) are run
    once; their blocks stay whole in the fit with the test point, which only pools its own block
    with its neighbours. Sorting aside, O(m + merges); the merges of one slot are at most its
    distance to the ends, few in practice.
    """
    m = weight.shape[0]
    cw = np.zeros(m + 1)
    cy = np.zeros(m + 1)
    for g in range(m):
        cw[g + 1] = cw[g] + weight[g]
        cy[g + 1] = cy[g] + positives[g]
    # start[g] (1-based groups): first group of the prefix fit's last block ending at g.
    start = np.zeros(m + 2, dtype=np.int64)
    for g in range(1, m + 1):
        s = g
        while s > 1:
            left = start[s - 1]
            # the block [left, s-1] violates [s, g] when its mean is larger
            if (cy[s - 1] - cy[left - 1]) * (cw[g] - cw[s - 1]) > (cy[g] - cy[s - 1]) * (cw[s - 1] - cw[left - 1]):
                s = left
            else:
                break
        start[g] = s
    # end[g]: last group of the suffix fit's first block starting at g.
    end = np.zeros(m + 2, dtype=np.int64)
    for g in range(m, 0, -1):
        e = g
        while e < m:
            right = end[e + 1]
            if (cy[e] - cy[g - 1]) * (cw[right] - cw[e]) > (cy[right] - cy[e]) * (cw[e] - cw[g - 1]):
                e = right
            else:
                break
        end[g] = e
    p0 = np.empty(m + 1)
    p1 = np.empty(m + 1)
    for label in range(2):
        out = p1 if label == 1 else p0
        for j in range(m + 1):
            bw = 1.0
            by = float(label)
            lo = j  # the left neighbour block ends at group lo (0: none)
            hi = j + 1  # the right neighbour block starts at group hi (m + 1: none)
            while True:
                if lo >= 1:
                    a = start[lo]
                    lw = cw[lo] - cw[a - 1]
                    ly = cy[lo] - cy[a - 1]
                    if ly * bw > by * lw:
                        bw += lw
                        by += ly
                        lo = a - 1
                        continue
                if hi <= m:
                    e = end[hi]
                    rw = cw[e] - cw[hi - 1]
                    ry = cy[e] - cy[hi - 1]
                    if by * rw > ry * bw:
                        bw += rw
                        by += ry
                        hi = e + 1
                        continue
                break
            out[j] = by / bw
    return p0, p1
