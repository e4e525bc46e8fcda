"""Smooth ECE (Blasiok & Nakkiran 2024) on rows of (prediction, outcome): kernel smoothing on a grid.

The residuals ``r_i = f_i - y_i`` and the counts are spread linearly onto a grid of ``E`` points
of ``[0, 1]``, reflected at both ends (``0`` and ``1`` are mirrors, so no mass leaks out of the
interval), convolved with a Gaussian of standard deviation ``sigma`` (by FFT, both at once), and
read back at ``T`` evaluation points by linear interpolation:

``smECE_sigma = sum_t |R(t) / (D(t) + 1e-4)| (D(t) + 1e-4) / sum_t (D(t) + 1e-4)``,

``R`` and ``D`` the smoothed residual and count. ``smECE`` is ``smECE_sigma`` at the bandwidth
where ``sigma = smECE_sigma`` (the paper's fixed point), found by the bisection of the reference
code ``relplot`` 1.0.3, whose grid sizes and constants are those here (``E = max(2000,
round(20 / sigma)) // 2 + 1``, ``T = max(200, round(10 / sigma))``): the values equal relplot's to
rounding. Everything needs the rows at once (the bandwidth depends on all of them): no streamed
form. The public faces are ``calibkit.smece`` and ``calibkit.smooth_reliability``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calibkit.metrics import _kernels as kernels
from calibkit.metrics.ranking import top_label_rows

SEARCH_STEPS = 10
"""Bisection steps of the bandwidth search on ``(0, 1]`` (relplot's ``refine``)."""
SMALLEST_BANDWIDTH = 0.001
"""A bandwidth below this is accepted without evaluating (relplot's ``eps``)."""
MESH_POINTS = 200
"""Evaluation points of smECE at least, and of the smooth reliability curve (relplot's config)."""
_DENSITY_EPS = 1e-4  # added to the smoothed count before dividing (relplot's BaseKernelMixin.smooth)


def grid_points(sigma: float) -> int:
    """Return the number of grid points the kernel is convolved on at bandwidth ``sigma``.

    Parameters
    ----------
    sigma : float
        The bandwidth, in (0, 1].

    Returns
    -------
    int
        ``max(2000, round(20 / sigma)) // 2 + 1`` (Python's round, half to even, as relplot).
    """
    return max(2000, round(20 / sigma)) // 2 + 1


def _to_grid(f: np.ndarray, weights: np.ndarray, points: int) -> np.ndarray:
    """Spread each weight linearly onto its two grid neighbours: ``(rows of weights, points)``."""
    scaled = f * (points - 1)
    cell = scaled.astype(np.int64).clip(0, points - 2)
    frac = scaled - cell
    out = np.empty((weights.shape[0], points))
    for j, w in enumerate(weights):  # two or three weight rows, never a loop over samples
        out[j] = np.bincount(cell, (1 - frac) * w, points) + np.bincount(cell + 1, frac * w, points)
    return out


def _reflected_convolution(values: np.ndarray, sigma: float) -> np.ndarray:
    """Convolve each row with the Gaussian on the grid, reflected at 0 and 1 (relplot's kernel, by FFT)."""
    points = values.shape[1]
    t = np.linspace(0.0, 1.0, points)
    kernel = np.exp(-(t - 0.5) * (t - 0.5) / (2 * sigma**2)) / (math.sqrt(2 * math.pi) * sigma)
    extended = np.concatenate([values[:, ::-1][:, :-1], values, values[:, ::-1][:, 1:]], axis=1)
    size = extended.shape[1] + points - 1
    fft = 1 << (size - 1).bit_length()
    full = np.fft.irfft(np.fft.rfft(extended, fft) * np.fft.rfft(kernel, fft), fft)[:, :size]
    # np.convolve(extended, kernel, "valid")[points // 2 : points // 2 + points]
    start = points - 1 + points // 2
    return full[:, start : start + points]


def _interpolate(t: np.ndarray, grid_values: np.ndarray) -> np.ndarray:
    """Read grid values (rows) at ``t`` by linear interpolation (relplot's ``interpolate``)."""
    points = grid_values.shape[1]
    step = 1 / (points - 1)
    cell = (t * (points - 1)).astype(np.int64).clip(0, points - 2)
    residual = (t - cell * step) / step
    return grid_values[:, cell] * (1 - residual) + grid_values[:, cell + 1] * residual


class SmoothRows:
    """The rows of one smECE problem, their grids kept per grid size for the bandwidth search.

    Parameters
    ----------
    f : ndarray of float64, shape (n,)
        Predictions in [0, 1].
    y : ndarray of float64, shape (n,)
        Outcomes in {0, 1}.
    """

    def __init__(self, f: np.ndarray, y: np.ndarray) -> None:
        self.f = np.asarray(f, dtype=np.float64)
        self.y = np.asarray(y, dtype=np.float64)
        self._grids: dict[int, np.ndarray] = {}

    def smoothed(self, sigma: float, t: np.ndarray) -> np.ndarray:
        """Return the smoothed residual, count and outcome at ``t``: shape ``(3, len(t))``.

        Parameters
        ----------
        sigma : float
            The bandwidth.
        t : ndarray
            Evaluation points in [0, 1].

        Returns
        -------
        ndarray
        """
        points = grid_points(sigma)
        if points not in self._grids:  # every bandwidth from 0.01 up shares one grid
            weights = np.stack([self.f - self.y, np.ones_like(self.f), self.y])
            self._grids[points] = _to_grid(self.f, weights, points)
        return _interpolate(t, _reflected_convolution(self._grids[points], sigma))

    def smece_at(self, sigma: float) -> float:
        """Return smECE at the fixed bandwidth ``sigma`` (relplot's ``smECE_sigma``).

        Parameters
        ----------
        sigma : float
            The bandwidth, in (0, 1].

        Returns
        -------
        float
        """
        t = np.linspace(0.0, 1.0, max(round(10 / sigma), MESH_POINTS))
        residual, count, _ = self.smoothed(sigma, t)
        density = count + _DENSITY_EPS
        return float(np.sum(np.abs(residual / density) * density) / np.sum(density))

    def bandwidth(self) -> float:
        """Return the bandwidth of smECE: the bisection's fixed point ``sigma = smECE_sigma`` (relplot's search).

        Returns
        -------
        float
            A multiple of ``2**-SEARCH_STEPS`` in (0, 1].
        """

        def small_enough(sigma: float) -> bool:
            return sigma < SMALLEST_BANDWIDTH or sigma < self.smece_at(sigma)

        if small_enough(1.0):
            return 1.0
        high, low = 1.0, 0.0
        for _ in range(SEARCH_STEPS):
            mid = (high + low) / 2
            if small_enough(mid):
                low = mid
            else:
                high = mid
        return high


def smece_from_rows(f: np.ndarray, y: np.ndarray, bandwidth: float | None = None) -> tuple[float, float]:
    """Return smECE of predictions ``f`` against outcomes ``y`` and its bandwidth.

    Parameters
    ----------
    f : ndarray, shape (n,)
        Predictions in [0, 1].
    y : ndarray, shape (n,)
        Outcomes in {0, 1}.
    bandwidth : float, optional
        A fixed bandwidth in (0, 1]; default: the automatic one (``sigma = smECE_sigma``).

    Returns
    -------
    value : float
    bandwidth : float
    """
    rows = SmoothRows(f, y)
    sigma = rows.bandwidth() if bandwidth is None else float(bandwidth)
    return rows.smece_at(sigma), sigma


def smooth_curve(
    f: np.ndarray, y: np.ndarray, bandwidth: float | None = None, points: int = MESH_POINTS
) -> dict[str, Any]:
    """Return the smooth reliability curve: the kernel-smoothed outcome and density of ``f`` on a mesh.

    Parameters
    ----------
    f : ndarray, shape (n,)
        Predictions in [0, 1].
    y : ndarray, shape (n,)
        Outcomes in {0, 1}.
    bandwidth : float, optional
        Default: smECE's own.
    points : int, default 200
        Points of the mesh on [0, 1].

    Returns
    -------
    dict
        ``grid`` (the mesh), ``accuracy`` (smoothed outcome ``Y(t) / (D(t) + 1e-4)``), ``density``
        (``D(t) / n``, the reflected kernel density of ``f``), ``smece`` and ``bandwidth``.
    """
    rows = SmoothRows(f, y)
    sigma = rows.bandwidth() if bandwidth is None else float(bandwidth)
    grid = np.linspace(0.0, 1.0, points)
    _, count, outcome = rows.smoothed(sigma, grid)
    return {
        "grid": grid,
        "accuracy": outcome / (count + _DENSITY_EPS),
        "density": count / rows.f.size,
        "smece": rows.smece_at(sigma),
        "bandwidth": sigma,
    }


def smooth_rows(prep: Any, ignore_index: int) -> tuple[np.ndarray, np.ndarray]:
    """Return each labelled row's prediction and outcome in smECE's convention (numpy, float64).

    Top label (``(N, K)`` rows, tokens): the top-label confidence and whether it is right. 1-D
    binary input: the class-1 probability and whether the label is 1 (SPEC.md's binary convention).

    Parameters
    ----------
    prep : PreparedInput
        Validated rows and labels.
    ignore_index : int
        Label of the rows to skip.

    Returns
    -------
    f, y : ndarray of float64, shape (n,)
    """
    if prep.values.shape[1] != 1:
        confidence, wrong, _ = top_label_rows(prep, ignore_index)
        if not isinstance(confidence, np.ndarray):  # torch tensors (a GPU's)
            confidence, wrong = confidence.cpu().numpy(), wrong.cpu().numpy()
        return confidence, 1.0 - wrong
    values, labels = (np.asarray(a.cpu() if hasattr(a, "cpu") else a) for a in (prep.values[:, 0], prep.labels))
    kept = labels != ignore_index
    v = values[kept].astype(np.float64)
    if prep.mode == kernels.MODE_BINARY_LOGITS:  # sigmoid, both tails without cancellation
        e = np.exp(-np.abs(v))
        v = np.where(v >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    return v, (labels[kept] == 1).astype(np.float64)
