"""Which bin, and which ACE bucket, a probability falls in."""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from calibkit._numba_cache import CACHE
from calibkit.metrics._kernels.constants import ACE_OFFSET


@nb.njit(cache=CACHE, inline="always")
def _bin_index(p, n_bins):
    # Right-closed equal-width bins ((m-1)/M, m/M]; 0 goes to the first bin (SPEC.md).
    b = int(math.ceil(p * n_bins)) - 1
    if b < 0:
        return 0
    if b >= n_bins:
        return n_bins - 1
    return b


@nb.njit(cache=CACHE, inline="always")
def _ace_bucket(bits):
    key = (bits >> 48) - ACE_OFFSET
    if key < 0:
        return 0
    return key


@nb.njit(cache=CACHE, nogil=True, error_model="numpy")
def _equal_width_bins(P, out, n, n_bins):
    for j in range(n):
        out[j] = min(max(np.int64(math.ceil(P[j] * n_bins)) - 1, 0), n_bins - 1)


@nb.njit(cache=CACHE, nogil=True)
def _ace_buckets(bits, out, n):
    for j in range(n):
        out[j] = max((bits[j] >> 48) - ACE_OFFSET, 0)
