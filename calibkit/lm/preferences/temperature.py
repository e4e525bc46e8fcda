"""The preference probability of a reward margin, and the pairwise temperature that calibrates it.

A reward model trained with the Bradley-Terry loss ``-log sigmoid(r_chosen - r_rejected)`` (TRL's
``RewardTrainer``; DPO's implicit reward ``beta * log(pi / pi_ref)`` likewise) gives the probability
``sigmoid((r_a - r_b) / T)`` that ``a`` is preferred to ``b``. The pairwise temperature ``T``
minimises the mean NLL over pairs, ``mean softplus(-m / T)`` for margins ``m = r_chosen -
r_rejected``: it is convex in ``beta = 1 / T`` and is minimised by the same safeguarded Newton
method as temperature scaling (:func:`calibkit.calibrators.temperature.fit_inverse_temperature`).
Papers: Bradley and Terry 1952; Guo et al. 2017 (temperature scaling).
"""

from __future__ import annotations

import numpy as np

from calibkit.calibrators.temperature import fit_inverse_temperature


def _check_margins(margins: object, name: str = "margins") -> np.ndarray:
    m = np.asarray(margins, dtype=np.float64)
    if m.ndim != 1 or m.size == 0:
        raise ValueError(f"`{name}` must be a non-empty 1-D array of reward margins, got shape {m.shape}")
    bad = np.flatnonzero(~np.isfinite(m))
    if bad.size:
        raise ValueError(f"`{name}`: {bad.size} margins are NaN or infinite (first at pair {bad[0]})")
    return m


def preference_probability(margins: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Return the probability that the chosen answer is preferred, ``sigmoid(margin / T)``.

    Parameters
    ----------
    margins : array-like of shape (N,)
        ``reward_chosen - reward_rejected`` per pair.
    temperature : float, default 1.0
        ``T > 0``.

    Returns
    -------
    ndarray of shape (N,)

    Examples
    --------
    >>> preference_probability([0.0, 2.0], temperature=2.0).round(4)
    array([0.5   , 0.7311])
    """
    m = _check_margins(margins)
    if not (np.isfinite(temperature) and temperature > 0):
        raise ValueError(f"`temperature` must be a finite number > 0, got {temperature!r}")
    z = m / temperature
    # sigmoid without overflow for large |z|
    return np.where(z >= 0, 1.0 / (1.0 + np.exp(-np.abs(z))), np.exp(-np.abs(z)) / (1.0 + np.exp(-np.abs(z))))


def _derivatives(m: np.ndarray):
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
    m = _check_margins(margins)
    if not (m < 0).any():
        raise ValueError(
            f"`margins`: every one of the {m.size} pairs is ranked right or tied (no margin < 0): the NLL keeps "
            "falling as T -> 0, so no temperature is fitted; judge it on pairs the model gets wrong too"
        )
    return 1.0 / fit_inverse_temperature(_derivatives(m), start=1.0)
