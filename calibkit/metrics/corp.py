"""The CORP decomposition of a binary proper score, on rows (Dimitriadis, Gneiting and Jordan 2021).

``S(p) = MCB - DSC + UNC`` with the isotonic recalibration of ``p``: :func:`binary_decomposition`.
On the floor of the formulas, so that the registry's table metrics (the Brier score's
miscalibration and discrimination of the top label, which need the rows held) and
:func:`calibkit.score_decomposition` compute it once.
"""

from __future__ import annotations

import numpy as np

from calibkit.metrics.formulas import isotonic_points

__all__ = ["PARTS", "SCORES", "binary_decomposition"]

SCORES = ("brier", "log")
PARTS = ("miscalibration", "discrimination", "uncertainty", "score")
# the reference's isotonic fit (scikit-learn's) pools probabilities closer than this, as softmaxes
# of equal logits in another order are (one ulp apart); pooling only exact ties moved MCB by 1e-4
RESOLUTION = float(np.finfo(np.float64).resolution)


def _score(kind: str, y: np.ndarray, p: np.ndarray) -> float:
    """Mean score of forecasts ``p`` of 0/1 outcomes ``y``; ``0 log 0 = 0`` as in the reference."""
    if kind == "brier":
        return float(np.mean((y - p) ** 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = -np.where(y > 0, np.log(p), 0.0) - np.where(y < 1, np.log1p(-p), 0.0)
    return float(np.mean(loss))


def binary_decomposition(p: np.ndarray, y: np.ndarray, score: str = "brier") -> dict[str, float]:
    """Decompose the mean score of probabilities ``p`` of outcomes ``y`` (CORP, isotonic recalibration).

    Parameters
    ----------
    p : ndarray of shape (n,)
        Probabilities of ``y = 1``.
    y : ndarray of shape (n,)
        Outcomes, 0 or 1.
    score : {"brier", "log"}, default "brier"

    Returns
    -------
    dict of str to float
        ``miscalibration``, ``discrimination``, ``uncertainty`` and ``score``
        (``score = miscalibration - discrimination + uncertainty``); NaN for no sample.

    Examples
    --------
    >>> d = binary_decomposition(np.array([0.9, 0.9, 0.2, 0.2]), np.array([1, 0, 0, 0]))
    >>> {k: round(v, 4) for k, v in d.items()}
    {'miscalibration': 0.1, 'discrimination': 0.0625, 'uncertainty': 0.1875, 'score': 0.225}
    """
    if score not in SCORES:
        raise ValueError(f"`score` must be one of {list(SCORES)}, got {score!r}")
    p, y = np.asarray(p, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if p.size == 0:
        return dict.fromkeys(PARTS, float("nan"))
    xs, vs = isotonic_points(p, y, resolution=RESOLUTION)
    recalibrated = np.interp(p, xs, vs)
    base = np.full_like(p, y.mean())
    s, s_r, s_b = _score(score, y, p), _score(score, y, recalibrated), _score(score, y, base)
    return {"miscalibration": s - s_r, "discrimination": s_b - s_r, "uncertainty": s_b, "score": s}
