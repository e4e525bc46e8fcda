"""Reward models and preference pairs: how far a reward model's preference probabilities can be trusted.

A reward model scores answers; ``sigmoid((r_a - r_b) / T)`` is its probability that ``a`` is
preferred to ``b`` (:func:`preference_probability`). calibkit judges those probabilities on pairs
people labelled (:class:`Preferences`: every label is "chosen wins"), read from RewardBench's
per-sample output or a plain file (:func:`read_preferences`), per subset and pooled with
RewardBench's sections (:func:`preference_report`), and fits the pairwise temperature
(:func:`fit_preference_temperature`), judged on re-splits (:func:`preference_resplits`).
"""

from calibkit.calibrators.preference import fit_preference_temperature
from calibkit.lm.preferences.data import Preferences
from calibkit.lm.preferences.readers import read_preferences
from calibkit.lm.preferences.report import preference_report, preference_resplits
from calibkit.lm.preferences.rewardbench import rewardbench_sections
from calibkit.metrics.preferences import preference_metrics, preference_probability

__all__ = [
    "Preferences",
    "fit_preference_temperature",
    "preference_metrics",
    "preference_probability",
    "preference_report",
    "preference_resplits",
    "read_preferences",
    "rewardbench_sections",
]
