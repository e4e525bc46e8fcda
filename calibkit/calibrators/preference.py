"""The pairwise temperature: the one calibration of a reward model's preference probabilities.

The pairwise temperature ``T`` minimises the mean NLL over pairs, ``mean softplus(-m / T)`` for
margins ``m = r_chosen - r_rejected`` (every label "chosen wins"): it is convex in ``beta = 1 / T``
and is minimised by the same safeguarded Newton method as temperature scaling
(``calibkit.calibrators.temperature.fit_inverse_temperature``). Dividing every reward by ``T``
changes no ranking. Papers: Bradley and Terry 1952; Guo et al. 2017 (temperature scaling).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from calibkit.calibrators.temperature import fit_inverse_temperature
from calibkit.metrics.preferences import check_margins, preference_probability

__all__ = ["PreferenceTemperature", "fit_preference_temperature"]


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


class PreferenceTemperature:
    """The pairwise temperature, fitted: what :func:`~calibkit.calibrators.calibrate` takes for a reward model.

    Fit it on the margins of pairs (:meth:`fit`), or give a known ``T`` (:meth:`from_temperature`).

    Attributes
    ----------
    temperature_ : float
        ``T > 0``, after :meth:`fit`.
    n_pairs_ : int or None
        The pairs it was fitted on (None when given as a number).

    Examples
    --------
    >>> round(PreferenceTemperature().fit([2.0, 1.0, -0.5, 3.0, -1.0]).temperature_, 4)
    1.3369
    """

    method = "reward-ts"  # its head in modeling_calibkit_heads.HEADS: the reward divided by T

    def fit(self, margins: np.ndarray) -> PreferenceTemperature:
        """Fit ``T`` on the margins of pairs (:func:`~calibkit.calibrators.preference.fit_preference_temperature`).

        Parameters
        ----------
        margins : array-like of shape (N,)
            ``reward_chosen - reward_rejected`` per pair.

        Returns
        -------
        PreferenceTemperature
            Itself, fitted.

        Raises
        ------
        ValueError
            As :func:`~calibkit.calibrators.preference.fit_preference_temperature` (no pair ranked wrong, NaN, ...).
        """
        m = check_margins(margins)
        self.temperature_ = fit_preference_temperature(m)
        self.n_pairs_ = int(m.size)
        return self

    @classmethod
    def from_temperature(cls, temperature: float) -> PreferenceTemperature:
        """Return a fitted object holding a known ``T``.

        Parameters
        ----------
        temperature : float
            ``T``, finite and > 0.

        Returns
        -------
        PreferenceTemperature

        Raises
        ------
        ValueError
            When ``temperature`` is not a finite number > 0.
        """
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float, np.floating, np.integer)):
            raise ValueError(f"`temperature` must be a finite number > 0, got {temperature!r}")
        if not (np.isfinite(temperature) and temperature > 0):
            raise ValueError(f"`temperature` must be a finite number > 0, got {temperature!r}")
        fitted = cls()
        fitted.temperature_, fitted.n_pairs_ = float(temperature), None
        return fitted

    def _temperature(self) -> float:
        if not hasattr(self, "temperature_"):
            raise ValueError("this PreferenceTemperature is not fitted: call .fit(margins) first")
        return self.temperature_

    def transform(self, rewards: np.ndarray) -> np.ndarray:
        """Return the calibrated rewards, ``rewards / T`` (every ranking unchanged).

        Parameters
        ----------
        rewards : array-like
            Rewards of any shape.

        Returns
        -------
        ndarray of float64
        """
        return np.asarray(rewards, dtype=np.float64) / self._temperature()

    def predict_proba(self, margins: np.ndarray) -> np.ndarray:
        """Return the calibrated probability that the first answer of each pair is preferred, ``sigmoid(m / T)``.

        Parameters
        ----------
        margins : array-like of shape (N,)

        Returns
        -------
        ndarray of shape (N,)
        """
        return preference_probability(margins, self._temperature())

    def calibration_block(self) -> dict:
        """Return the ``calibration`` block of a calibrated reward model's config.

        Returns
        -------
        dict
            ``{"method": "reward-ts", "temperature": T}``, and ``"pairs"`` when fitted on pairs.
        """
        block = {"method": self.method, "temperature": self._temperature()}
        if self.n_pairs_ is not None:
            block["pairs"] = self.n_pairs_
        return block
