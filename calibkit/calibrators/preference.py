"""The pairwise temperature: the one calibration of a reward model's preference probabilities.

The pairwise temperature ``T`` minimises the mean NLL over pairs, ``mean softplus(-m / T)`` for
margins ``m = r_chosen - r_rejected`` (every label "chosen wins"): it is convex in ``beta = 1 / T``
and is minimised by the same safeguarded Newton method as temperature scaling
(:func:`calibkit.calibrators.temperature.fit_inverse_temperature`). Dividing every reward by ``T``
changes no ranking. Papers: Bradley and Terry 1952; Guo et al. 2017 (temperature scaling).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from calibkit.calibrators.temperature import fit_inverse_temperature
from calibkit.metrics.preferences import check_margins, preference_probability


def _derivatives(m: np.ndarray) -> Callable[[float], tuple[float, float, float, float]]:
    def derivatives(beta: float) -> tuple[float, float, float, float]:
        z = beta * m
        loss = np.logaddexp(0.0, -z).mean()  # softplus(-z) = -log sigmoid(z)
        s_neg = preference_probability(-z)  # sigmoid(-z)
        grad = float(np.mean(-m * s_neg))
        hess = float(np.mean(m * m * s_neg * (1.0 - s_neg)))
        return float(loss), grad, hess, float(-0.5 * m.mean())

    return derivatives


def fit_preference_temperature(margins: np.ndarray) -> float:
    """Fit the pairwise temperature: ``T`` minimising ``mean softplus(-m / T)`` over pairs.

    Parameters
    ----------
    margins : array-like of shape (N,)
        ``reward_chosen - reward_rejected`` per pair (every label is "chosen wins").

    Returns
    -------
    float
        ``T > 0``, to about 1e-12 relative.

    Raises
    ------
    ValueError
        When no pair is ranked wrong (every margin >= 0: the NLL falls as ``T -> 0``, so there is
        no temperature to fit; a 0 would be silent nonsense), or when the margins favour the
        rejected answers on average (no ``T > 0`` lowers the NLL).

    Examples
    --------
    >>> round(fit_preference_temperature([2.0, 1.0, -0.5, 3.0, -1.0]), 4)
    1.3369
    """
    m = check_margins(margins)
    if not (m < 0).any():
        raise ValueError(
            f"`margins`: every one of the {m.size} pairs is ranked right or tied (no margin < 0): the NLL keeps "
            "falling as T -> 0, so no temperature is fitted; judge it on pairs the model gets wrong too"
        )
    return 1.0 / fit_inverse_temperature(_derivatives(m), start=1.0)
