"""Recalibration of a 1-D confidence score: Platt scaling, isotonic regression, histogram binning.

Each map is fitted on scores in [0, 1] and 0/1 outcomes (right or wrong) with no loop over the
answers, and applied with :func:`apply_score_map`:

- ``platt``: ``sigmoid(a * logit(s) + b)`` by Newton's method on the log-loss (Platt 1999, on the
  score's logit; scores clipped to ``[1e-6, 1 - 1e-6]`` first, so that 0 and 1 have a logit);
- ``isotonic``: the non-decreasing step map of pool-adjacent-violators, interpolated between its
  points (``calibkit.metrics.formulas.isotonic_points``, the one of the classifiers' IR);
- ``histogram``: 15 equal-width bins, right-closed as the metrics' bins, each mapped to the share
  of right answers in it; an empty bin maps to its centre (as the classifiers' HB).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibkit.metrics.formulas import isotonic_points
from calibkit.metrics.settings import DEFAULTS

SCORE_MAPS = ("platt", "isotonic", "histogram")
"""The recalibration maps of a 1-D score, in the order of every output."""

CLIP = 1e-6
BINS = DEFAULTS.n_bins
"""Bins of the histogram map: the metrics' ``n_bins``, so that a bin of the map is a bin of ECE."""


def fit_score_map(method: str, scores: np.ndarray, outcomes: np.ndarray) -> dict[str, Any]:
    """Fit a recalibration map of a confidence score.

    Parameters
    ----------
    method : {"platt", "isotonic", "histogram"}
    scores : ndarray of shape (n,)
        Confidences in [0, 1].
    outcomes : ndarray of shape (n,)
        1 for a right answer, 0 for a wrong one.

    Returns
    -------
    dict
        The map's parameters (``method`` and its numbers), for :func:`apply_score_map`.

    Raises
    ------
    ValueError
        On an unknown method or no answer to fit on.

    Examples
    --------
    >>> m = fit_score_map("histogram", np.array([0.1, 0.12, 0.9, 0.95]), np.array([0, 1, 1, 1]))
    >>> apply_score_map(m, np.array([0.11, 0.92])).round(2).tolist()
    [0.5, 1.0]
    """
    if method not in SCORE_MAPS:
        raise ValueError(f"`method` must be one of {list(SCORE_MAPS)}, got {method!r}")
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(outcomes, dtype=np.float64)
    if s.size == 0:
        raise ValueError("no answer with a confidence to fit a recalibration on")
    if method == "isotonic":
        xs, vs = isotonic_points(s, y)
        return {"method": method, "x": xs, "y": vs}
    if method == "histogram":
        index = _bins(s)
        counts = np.bincount(index, minlength=BINS)
        right = np.bincount(index, weights=y, minlength=BINS)
        centres = (np.arange(BINS) + 0.5) / BINS
        return {"method": method, "values": np.where(counts > 0, right / np.maximum(counts, 1), centres)}
    return {"method": method, **_platt(_logit(s), y)}


def apply_score_map(fitted: dict[str, Any], scores: np.ndarray) -> np.ndarray:
    """Apply a fitted map to confidences.

    Parameters
    ----------
    fitted : dict
        From :func:`fit_score_map`.
    scores : ndarray of shape (n,)

    Returns
    -------
    ndarray of shape (n,)
        Recalibrated confidences in [0, 1].
    """
    s = np.asarray(scores, dtype=np.float64)
    if fitted["method"] == "isotonic":
        return np.interp(s, fitted["x"], fitted["y"])
    if fitted["method"] == "histogram":
        return fitted["values"][_bins(s)]
    return 1.0 / (1.0 + np.exp(-(fitted["a"] * _logit(s) + fitted["b"])))


def _bins(s: np.ndarray) -> np.ndarray:
    return np.clip(np.ceil(s * BINS).astype(np.int64) - 1, 0, BINS - 1)


def _logit(s: np.ndarray) -> np.ndarray:
    s = np.clip(s, CLIP, 1 - CLIP)
    return np.log(s) - np.log1p(-s)


def _platt(x: np.ndarray, y: np.ndarray, steps: int = 50) -> dict[str, float]:
    """Logistic regression of ``y`` on ``x`` (slope and intercept) by damped Newton steps."""
    w = np.array([1.0, 0.0])  # the identity map: a = 1, b = 0
    design = np.stack([x, np.ones_like(x)], axis=1)
    ridge = 1e-9 * np.eye(2)  # all answers right (or wrong): the optimum is at infinity; stay finite
    for _ in range(steps):  # a loop over Newton steps, each a vector pass over the answers
        p = 1.0 / (1.0 + np.exp(-(design @ w)))
        gradient = design.T @ (p - y)
        hessian = (design * (p * (1 - p))[:, None]).T @ design + ridge
        step = np.linalg.solve(hessian, gradient)
        w = w - step
        if np.abs(step).max() < 1e-10:
            break
    return {"a": float(w[0]), "b": float(w[1])}
