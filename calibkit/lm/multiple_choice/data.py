"""Scored choices of multiple-choice questions, and the confidences their scores give."""

from __future__ import annotations

from collections.abc import Sequence
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

    @classmethod
    def stack(
        cls,
        loglik: Sequence[Sequence[float]] | np.ndarray,
        gold: Sequence[int] | np.ndarray,
        *,
        task: str | Sequence[str],
        source: str | Sequence[str],
        doc_id: Sequence[Any] | None = None,
        chars: Sequence[Sequence[float] | None] | np.ndarray | None = None,
        bytes: Sequence[Sequence[float] | None] | np.ndarray | None = None,  # noqa: A002 - the field's name
        tokens: Sequence[Sequence[float] | None] | np.ndarray | None = None,
    ) -> ChoiceData:
        """Stack questions of different numbers of choices into one table, NaN past each one's last choice.

        Every reader and plugin builds its :class:`ChoiceData` here: one padding rule, one
        broadcast of the task and source names, one rule for lengths that are unknown.

        Parameters
        ----------
        loglik : sequence of sequences of float, or ndarray of shape (Q, K)
            Each question's choices' log-likelihoods (a 2-D array: padded with NaN already).
        gold : sequence of int
            Each question's right choice.
        task, source : str or sequence of str
            The task and the file (or tool) of each question; a string names every question's.
        doc_id : sequence, optional
            Each question's id in its task; default its place, 0 to Q - 1.
        chars, bytes, tokens : sequence of (sequence of float or None), or ndarray, optional
            The choices' lengths; a question's row that is None, or of another length than its
            log-likelihoods, is unknown (NaN). A table with no known length is None.

        Returns
        -------
        ChoiceData

        Examples
        --------
        >>> data = ChoiceData.stack([[-1.0, -2.0], [-0.5, -1.5, -3.0]], [0, 2], task="t", source="f")
        >>> data.loglik.tolist()
        [[-1.0, -2.0, nan], [-0.5, -1.5, -3.0]]
        >>> data.n_choices.tolist(), data.doc_id.tolist()
        ([2, 3], [0, 1])
        """
        table = _padded(loglik)
        q, width = table.shape
        counts = np.sum(~np.isnan(table), axis=1) if isinstance(loglik, np.ndarray) else [len(r) for r in loglik]

        def lengths(rows: Any) -> np.ndarray | None:
            if rows is None:
                return None
            if isinstance(rows, np.ndarray):
                out = np.full((q, width), np.nan)
                out[:, : rows.shape[1]] = rows
            else:
                known = [r if r is not None and len(r) == n else () for r, n in zip(rows, counts)]
                out = _padded(known, width)
            return None if np.isnan(out).all() else out

        def names(value: Any) -> np.ndarray:
            return np.full(q, value, dtype=object) if isinstance(value, str) else np.asarray(value, dtype=object)

        ids = np.arange(q).astype(object) if doc_id is None else np.asarray(doc_id, dtype=object)
        return cls(
            names(task), ids, table, np.asarray(gold, dtype=np.int64).reshape(q), lengths(chars), lengths(bytes),
            names(source), lengths(tokens),
        )  # fmt: skip


def _padded(rows: Any, width: int | None = None) -> np.ndarray:
    """Stack ragged rows into ``(len(rows), width)`` (default the longest row), NaN past each row's end."""
    if isinstance(rows, np.ndarray) and rows.ndim == 2:
        return rows.astype(np.float64, copy=False)
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    flat = [np.asarray(r, dtype=np.float64).reshape(-1) for r in rows]
    return pad_flat(np.concatenate(flat) if flat else np.empty(0), lengths, width)


def pad_flat(flat: np.ndarray, lengths: np.ndarray, width: int | None = None) -> np.ndarray:
    """Lay rows given end to end out as a table, NaN past each row's end.

    Parameters
    ----------
    flat : ndarray of float, shape (sum(lengths),)
        The rows' values, one row after the other.
    lengths : ndarray of int, shape (Q,)
        Each row's number of values.
    width : int, optional
        The table's width; default the longest row.

    Returns
    -------
    ndarray of float64, shape (Q, width)

    Examples
    --------
    >>> pad_flat(np.array([1.0, 2.0, 3.0]), np.array([2, 1])).tolist()
    [[1.0, 2.0], [3.0, nan]]
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    width = int(lengths.max(initial=0)) if width is None else width
    out = np.full((lengths.size, width), np.nan)
    out[np.arange(width) < lengths[:, None]] = flat  # row-major: each row's values in order
    return out


def check_question(where: str, n_choices: int, logprobs: Sequence[float] | None, gold: Any) -> tuple[np.ndarray, int]:
    """Check one question's scored choices and return its log-probabilities and its right choice.

    The check every tool's question passes (lighteval's details files and its plugin's questions):
    one log-probability per choice, or two (a PMI task appends the unconditioned ones: the first
    half is kept), all finite, and one gold index among the choices (calibration needs one).

    Parameters
    ----------
    where : str
        Where the question is, for the message (a file and its question, a task and its doc).
    n_choices : int
        The question's number of choices.
    logprobs : sequence of float or None
        ``n_choices`` or ``2 * n_choices`` log-probabilities.
    gold : int or list of one int
        The index of the right choice.

    Returns
    -------
    (ndarray of float64, int)
        The ``n_choices`` log-probabilities and the gold index.

    Raises
    ------
    ValueError
        Beginning with ``where``: no choice, another count of log-probabilities, one not
        finite, a gold that is not one index of the choices.

    Examples
    --------
    >>> check_question("doc 1", 2, [-0.1, -2.3, -0.5, -1.0], [1])  # PMI: the unconditioned half dropped
    (array([-0.1, -2.3]), 1)
    """
    n = n_choices
    if n == 0:
        raise ValueError(f"{where}: the question has no choice")
    count = 0 if logprobs is None else len(logprobs)
    if count not in (n, 2 * n):
        raise ValueError(f"{where}: {count} log-probabilities for {n} choices")
    ll = np.asarray(logprobs[:n], dtype=np.float64)  # 2n: the unconditioned half (PMI) follows
    if not np.isfinite(ll).all():
        raise ValueError(f"{where}: a log-probability is not finite: {ll.tolist()}")
    golds = gold if isinstance(gold, list) else [gold]
    if len(golds) != 1 or not isinstance(golds[0], (int, np.integer)) or not 0 <= golds[0] < n:
        raise ValueError(f"{where}: `gold_index` {gold!r} is not one index of the {n} choices")
    return ll, int(golds[0])


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
