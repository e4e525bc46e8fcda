"""Preference probabilities of reward margins: the functional core of reward-model calibration.

A reward model trained with the Bradley-Terry loss ``-log sigmoid(r_chosen - r_rejected)`` (TRL's
``RewardTrainer``; DPO's implicit reward ``beta * log(pi / pi_ref)`` likewise) gives the probability
``sigmoid((r_a - r_b) / T)`` that ``a`` is preferred to ``b``. Paper: Bradley and Terry 1952.
"""

from __future__ import annotations

import numpy as np


def check_margins(margins: object, name: str = "margins") -> np.ndarray:
    """Return reward margins as a 1-D float64 array, refusing an empty one, NaN and infinity.

    Parameters
    ----------
    margins : array-like of shape (N,)
        ``reward_chosen - reward_rejected`` per pair.
    name : str, default "margins"
        The argument's name in error messages.

    Returns
    -------
    ndarray of float64, shape (N,)

    Raises
    ------
    ValueError
        Naming ``name``: not 1-D, empty, or holding NaN or infinity (the first such pair given).
    """
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
    m = check_margins(margins)
    if not (np.isfinite(temperature) and temperature > 0):
        raise ValueError(f"`temperature` must be a finite number > 0, got {temperature!r}")
    z = m / temperature
    # sigmoid without overflow for large |z|
    return np.where(z >= 0, 1.0 / (1.0 + np.exp(-np.abs(z))), np.exp(-np.abs(z)) / (1.0 + np.exp(-np.abs(z))))
