"""Preference pairs as calibkit holds them: a reward (or implicit reward) for each answer of a pair."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Preferences:
    """Pairs of answers to one prompt, the one people preferred (chosen) and the other (rejected).

    Every label is "chosen wins": a reward model's preference probability for a pair is
    ``sigmoid((reward_chosen - reward_rejected) / T)``, and it is right when that margin is positive.

    Parameters
    ----------
    ids : ndarray of str, shape (N,)
        The pair's id, unique.
    subset : ndarray of str, shape (N,)
        The subset (RewardBench's ``subset``; ``"all"`` when the file has none).
    chosen : ndarray of float64, shape (N,)
        The reward of the chosen answer.
    rejected : ndarray of float64, shape (N,)
        The reward of the rejected answer.
    length_chosen, length_rejected : ndarray of float64, shape (N,), optional
        The answers' lengths (characters, or tokens where the reader says so), for the length
        bias; None when unknown.
    origin : list of str, default []
        Where each pair was read (``file, line l``), for error messages.
    dropped : list of str, default []
        The pairs a reader left out (``read_preferences(..., drop_missing=True)``: a reward
        missing, NaN or infinite), one line each saying where and why; reports count and state them.
    """

    ids: np.ndarray
    subset: np.ndarray
    chosen: np.ndarray
    rejected: np.ndarray
    length_chosen: np.ndarray | None = None
    length_rejected: np.ndarray | None = None
    origin: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        """Return the number of pairs."""
        return len(self.ids)

    @property
    def margins(self) -> np.ndarray:
        """The reward margins ``chosen - rejected``, one per pair (positive: ranked right)."""
        return np.asarray(self.chosen, dtype=np.float64) - np.asarray(self.rejected, dtype=np.float64)
