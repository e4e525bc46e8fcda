"""Which bin, and which ACE bucket, a probability falls in: the one home of both layouts.

Equal-width bins are right-closed, ``((m-1)/M, m/M]`` with 0 in the first (SPEC.md). An ACE
bucket is the top 16 bits of a probability's float64 pattern, offset by ``ACE_OFFSET``
(``constants.py`` says why); :func:`ace_buckets_of_patterns` maps patterns to buckets on
numpy arrays and torch tensors alike (the torch engine's map), :func:`ace_bucket_patterns` and
:func:`ace_bucket_bounds` invert it.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from calibkit._numba.cache import CACHE
from calibkit.metrics._kernels.constants import ACE_BUCKETS, ACE_OFFSET, EDGE_SHRINK


@nb.njit(cache=CACHE, inline="always")
def _bin_index(p, n_bins):
    # Right-closed equal-width bins ((m-1)/M, m/M]; 0 goes to the first bin; a value within
    # 2**-40 above an edge counts as on it (SPEC.md, constants.EDGE_SHRINK).
    b = int(math.ceil((p * n_bins) * EDGE_SHRINK)) - 1
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
        out[j] = min(max(np.int64(math.ceil((P[j] * n_bins) * EDGE_SHRINK)) - 1, 0), n_bins - 1)


@nb.njit(cache=CACHE, nogil=True)
def _ace_buckets(bits, out, n):
    for j in range(n):
        out[j] = max((bits[j] >> 48) - ACE_OFFSET, 0)


def ace_buckets_of_patterns(bits):
    """Return the ACE bucket of float64 bit patterns (int64; numpy array or torch tensor), as ``_ace_bucket``."""
    return ((bits >> 48) - ACE_OFFSET).clip(0, ACE_BUCKETS - 1)


def ace_bucket_patterns(bucket: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the smallest and largest float64 bit pattern of ACE buckets (``_ace_bucket``'s inverse)."""
    lo = (bucket.astype(np.int64) + ACE_OFFSET) << 48
    hi = lo + (np.int64(1) << 48) - 1
    return np.where(bucket == 0, 0, lo), hi


def ace_bucket_bounds(num_buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the lower and upper probability of every ACE bucket (``_ace_bucket``'s inverse)."""
    keys = np.arange(num_buckets, dtype=np.int64)
    patterns = (keys + ACE_OFFSET) << 48
    lower = patterns.view(np.float64).copy()
    upper = ((keys + 1 + ACE_OFFSET) << 48).view(np.float64).copy()
    lower[0] = 0.0
    return lower, np.minimum(upper, 1.0)
