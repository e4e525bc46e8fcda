"""Smooth ECE and the smooth reliability curve (Blasiok & Nakkiran 2024): calibration without bins.

Binned ECE jumps as a bin edge moves and depends on the bin count. smECE replaces the bins by a
Gaussian kernel of bandwidth ``sigma``, reflected at 0 and 1, and takes ``sigma`` at the fixed
point ``sigma = smECE_sigma``: the bandwidth is chosen by the data, not by the user, and the
value is consistent (within a constant factor of the distance to the nearest calibrated
predictor). :func:`smece` is the registry's ``smece`` (asked for by name:
``calibration_report(..., metrics=["smece"])``); it needs every row at once, so the streaming
doors refuse it. :func:`smooth_reliability` gives the curve of the paper's reliability diagram
(``calibkit.plots.SmoothReliabilityDiagram`` draws it). The numerical method, equal to
the reference code ``relplot`` 1.0.3, is in :mod:`calibkit.metrics.smooth`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calibkit.metrics.functional.core import ArrayLike, _report
from calibkit.metrics.settings import UNSET, CalibrationSettings, resolve_settings
from calibkit.metrics.smooth import MESH_POINTS, smece_from_rows, smooth_curve, smooth_rows
from calibkit.metrics.validation import prepare_for

__all__ = ["smece", "smooth_reliability"]


def _check_bandwidth(bandwidth: Any) -> float | None:
    if bandwidth is None:
        return None
    ok = isinstance(bandwidth, (int, float, np.integer, np.floating)) and not isinstance(bandwidth, bool)
    if not ok or not math.isfinite(bandwidth) or not 0 < bandwidth <= 1:
        raise ValueError(f"`bandwidth` must be a number in (0, 1] or None (automatic), got {bandwidth!r}")
    return float(bandwidth)


def _rows(probs: ArrayLike, labels: ArrayLike, settings: CalibrationSettings) -> tuple[np.ndarray, np.ndarray]:
    _report(probs, labels, ("accuracy",), settings)  # every input check of the metrics, and their messages
    return smooth_rows(prepare_for(probs, labels, settings), settings.ignore_index)


def smece(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    bandwidth: float | None = None,
    return_bandwidth: bool = False,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    settings: CalibrationSettings | None = None,
) -> float | tuple[float, float]:
    """Compute the smooth ECE [1]_ of the top-label confidence: kernel smoothing instead of bins.

    With ``f_i`` the top-label confidence, ``y_i = 1[argmax == label]`` (1-D binary input: the
    class-1 probability and ``1[label == 1]``), ``K_sigma`` the Gaussian kernel reflected at 0 and
    1, ``D(t) = sum_i K_sigma(t, f_i)`` and ``R(t) = sum_i K_sigma(t, f_i) (f_i - y_i)``:

    ``smECE_sigma = integral |R(t)| dt / integral D(t) dt``,

    the mean absolute smoothed residual, weighted by the density of the predictions.
    ``smECE = smECE_sigma*`` at the bandwidth where ``sigma* = smECE_sigma*`` (found by 10 steps of
    bisection on (0, 1], the reference code's search). Computed on a grid exactly as the authors'
    ``relplot`` 1.0.3 does (SPEC.md, "Smooth ECE"), whose values it equals to rounding.

    Offered: top-label smECE (and the binary one for 1-D input). Not offered: a class-wise
    (one-vs-rest) smECE, nor a streamed one (the bandwidth needs every row: the accumulator and
    the bootstrap refuse it).

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes; positions equal to ``ignore_index`` are skipped.
    bandwidth : float, optional
        A fixed ``sigma`` in (0, 1] (the paper's ``smECE_sigma``); default: the automatic one.
    return_bandwidth : bool, default False
        Also return the bandwidth used.
    from_logits : bool, default False
    ignore_index : int, default -100
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``.
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

    Returns
    -------
    float or tuple of float
        smECE in [0, 1]; with ``return_bandwidth``, ``(smECE, sigma)``.

    Raises
    ------
    ValueError
        On bad input, as every metric, or a ``bandwidth`` outside (0, 1].

    References
    ----------
    .. [1] J. Blasiok and P. Nakkiran (2024). "Smooth ECE: Principled Reliability Diagrams via
       Kernel Smoothing". ICLR.
    .. [2] SPEC.md, "Smooth ECE": the kernel, the grid and the bandwidth search this follows.

    Examples
    --------
    >>> value, sigma = smece([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7], [0.8, 0.2]], [0, 1, 1, 0], return_bandwidth=True)
    >>> round(value, 4), sigma
    (0.1316, 0.1328125)
    >>> round(smece([0.2, 0.7, 0.9, 0.4], [0, 1, 1, 1], bandwidth=0.1), 4)
    0.2487
    """
    sigma = _check_bandwidth(bandwidth)
    settings = resolve_settings(settings, from_logits=from_logits, ignore_index=ignore_index, next_token=next_token)
    if sigma is None:
        report = _report(probs, labels, ("smece",), settings)[0]
        value, sigma = report["smece"], report["smece_bandwidth"]
    else:
        value, sigma = smece_from_rows(*_rows(probs, labels, settings), sigma)
    return (value, sigma) if return_bandwidth else value


def smooth_reliability(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    bandwidth: float | None = None,
    points: int = MESH_POINTS,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    settings: CalibrationSettings | None = None,
) -> dict[str, Any]:
    """Compute the smooth reliability curve [1]_: the kernel-smoothed accuracy against confidence.

    On a mesh ``t`` of [0, 1], ``accuracy(t) = sum_i K_sigma(t, f_i) y_i / (D(t) + 1e-4)`` and
    ``density(t) = D(t) / n`` (the reflected kernel density of the confidences), at smECE's
    bandwidth: the main line and the density of ``relplot.prepare_rel_diagram`` (without its
    bootstrap band), in the conventions of :func:`smece`.

    Parameters
    ----------
    probs, labels, from_logits, ignore_index, next_token
        As in :func:`smece`.
    bandwidth : float, optional
        A fixed ``sigma`` in (0, 1]; default: smECE's own.
    points : int, default 200
        Points of the mesh (at least 2).
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

    Returns
    -------
    dict
        ``grid``, ``accuracy`` and ``density`` (arrays of ``points``), ``smece`` and
        ``bandwidth`` (floats).

    Raises
    ------
    ValueError
        On bad input, as every metric, a ``bandwidth`` outside (0, 1] or ``points`` below 2.

    References
    ----------
    .. [1] J. Blasiok and P. Nakkiran (2024). "Smooth ECE: Principled Reliability Diagrams via
       Kernel Smoothing". ICLR.

    Examples
    --------
    >>> curve = smooth_reliability([0.2, 0.7, 0.9, 0.4], [0, 1, 1, 1], points=5)
    >>> curve["grid"].tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    >>> curve["accuracy"].round(3).tolist()
    [0.194, 0.446, 0.829, 1.0, 1.0]
    """
    sigma = _check_bandwidth(bandwidth)
    if isinstance(points, bool) or not isinstance(points, (int, np.integer)) or not 2 <= points <= 10**7:
        raise ValueError(f"`points` must be an integer in [2, 10**7], got {points!r}")
    settings = resolve_settings(settings, from_logits=from_logits, ignore_index=ignore_index, next_token=next_token)
    return smooth_curve(*_rows(probs, labels, settings), sigma, int(points))
