"""Reward models and preference pairs: how far a reward model's preference probabilities can be trusted.

A reward model scores answers; ``sigmoid((r_a - r_b) / T)`` is its probability that ``a`` is
preferred to ``b`` (:func:`preference_probability`). calibkit judges those probabilities on pairs
people labelled (:class:`Preferences`: every label is "chosen wins") and fits the pairwise
temperature (:func:`fit_preference_temperature`).
"""

from calibkit.calibrators.preference import fit_preference_temperature
from calibkit.lm.preferences.data import Preferences
from calibkit.metrics.preferences import preference_probability

__all__ = ["Preferences", "fit_preference_temperature", "preference_probability"]
