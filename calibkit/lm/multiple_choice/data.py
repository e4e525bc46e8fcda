"""Scored choices of multiple-choice questions, and the confidences their scores give."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

SCORES = ("loglik", "chars", "bytes", "tokens")
"""The scores a choice's confidence can be the softmax of (see the module docstring)."""

SCORE_NAMES = {
    "loglik": "log-likelihood (acc)",
    "chars": "log-likelihood per character (acc_norm)",
    "bytes": "log-likelihood per UTF-8 byte (acc_bytes)",
    "tokens": "log-likelihood per token (acc_norm_token)",
}
"""What each score is, in words, with the harness's accuracy that takes it (the reports say it once)."""


@dataclass(frozen=True)
class ChoiceData:
    """Scored choices of multiple-choice questions, one row per question (padded with NaN).

    Parameters
    ----------
    task : ndarray of str, shape (Q,)
        The task of each question.
    doc_id : ndarray of object, shape (Q,)
        The question's id in its task (for messages).
    loglik : ndarray of float64, shape (Q, K)
        Log-likelihood of each choice; NaN past the question's last choice.
    gold : ndarray of int64, shape (Q,)
        Index of the correct choice.
    chars, bytes : ndarray of float64, shape (Q, K), or None
        Lengths of the choices (NaN where unknown), for ``score="chars"`` / ``"bytes"``.
    source : ndarray of str, shape (Q,)
        The file each question was read from.
    tokens : ndarray of float64, shape (Q, K), or None
        Lengths of the choices in tokens of the model's tokenizer, for ``score="tokens"``
        (lighteval's ``acc_norm_token``; the harness's samples do not store them).
    """

    task: np.ndarray
    doc_id: np.ndarray
    loglik: np.ndarray
    gold: np.ndarray
    chars: np.ndarray | None
    bytes: np.ndarray | None
    source: np.ndarray
    tokens: np.ndarray | None = None

    @property
    def n_choices(self) -> np.ndarray:
        """Number of choices of each question, shape (Q,)."""
        return np.sum(~np.isnan(self.loglik), axis=1)

    def select(self, rows: np.ndarray) -> ChoiceData:
        """Return the questions ``rows``, the columns trimmed to their most choices.

        Parameters
        ----------
        rows : ndarray of bool or int
            A mask over the questions, or their indices.

        Returns
        -------
        ChoiceData
        """
        width = int(self.n_choices[rows].max()) if np.size(self.gold[rows]) else 1

        def cut(a):
            return None if a is None else a[rows][:, :width]

        return ChoiceData(
            self.task[rows], self.doc_id[rows], cut(self.loglik), self.gold[rows], cut(self.chars),
            cut(self.bytes), self.source[rows], cut(self.tokens),
        )  # fmt: skip


def choice_probabilities(data: ChoiceData, score: str = "loglik") -> np.ndarray:
    """Return each question's softmax over its choices of ``score``, padded with zeros.

    Parameters
    ----------
    data : ChoiceData
    score : {"loglik", "chars", "bytes", "tokens"}, default "loglik"
        Log-likelihood, or log-likelihood per character, per UTF-8 byte or per token of the choice.

    Returns
    -------
    ndarray of float64, shape (Q, K)

    Raises
    ------
    ValueError
        When ``score`` is unknown, or the lengths it needs are missing for a question (named
        by its task and ``doc_id``).

    Examples
    --------
    >>> data = ChoiceData(np.array(["t"]), np.array([0], dtype=object), np.array([[-1.0, -2.0, np.nan]]),
    ...                   np.array([0]), None, None, np.array(["f"]))
    >>> choice_probabilities(data).round(4).tolist()
    [[0.7311, 0.2689, 0.0]]
    """
    s = _scores(data, score)
    s = np.where(np.isnan(s), -np.inf, s)  # a missing choice: softmax 0
    z = np.exp(s - s.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def choice_logits(data: ChoiceData, score: str = "loglik") -> np.ndarray:
    """Return the scores as logits ``(Q, K)``, a question's missing choices far below its own (softmax 0).

    A missing choice sits 1e7 below the question's lowest score: its softmax is 0 (below 1e-40)
    at any temperature up to 1e5, so a calibrator over ``K`` columns sees each question's own
    choices.

    Parameters
    ----------
    data : ChoiceData
    score : {"loglik", "chars", "bytes", "tokens"}, default "loglik"

    Returns
    -------
    ndarray of float64, shape (Q, K)
    """
    s = _scores(data, score)
    present = ~np.isnan(s)
    floor = np.nanmin(s, axis=1, keepdims=True) - 1e7
    return np.where(present, s, floor)


def _scores(data: ChoiceData, score: Any) -> np.ndarray:
    """Return each choice's ``score`` (NaN past a question's last choice), checked: the lengths it needs exist."""
    score = check_score(score)
    if score == "loglik":
        return data.loglik
    present = ~np.isnan(data.loglik)
    lengths = getattr(data, score)
    missing = present if lengths is None else present & ~(lengths > 0)
    if missing.any():
        i = int(np.flatnonzero(missing.any(axis=1))[0])
        raise ValueError(
            f"score={score!r} needs each choice's length in {score}: {data.source[i]}, task {data.task[i]}, "
            f"doc_id {data.doc_id[i]} has none (a multiple_input task, a file without choice_{score}, or, for "
            "tokens, an lm-evaluation-harness log: its samples do not store token counts)"
        )
    return data.loglik / lengths


def check_score(score: Any) -> str:
    """Check ``score`` against :data:`SCORES`.

    Parameters
    ----------
    score : object

    Returns
    -------
    str

    Raises
    ------
    ValueError
        Naming ``score`` and the choices.
    """
    from calibkit.metrics.validation import check_choice

    return check_choice(score, "score", SCORES)
