"""Labelled token rows taken out of their sentences, and put back: the one place that does either.

The calibrators fit on labelled rows ``(R, K)``; the bootstrap, the halves and the re-splits must
move whole sentences, since the tokens of one sentence are not independent. The comparison, the
re-splits and ``calibkit compare --task token`` all go through these functions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibkit.metrics.settings import DEFAULTS


def labelled_rows(
    logits: Any, labels: Any, ignore_index: int = DEFAULTS.ignore_index
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Return the rows whose label is not ``ignore_index``, with the example each belongs to.

    Parameters
    ----------
    logits : array-like of shape (N, K) or (N, L, K)
        Logits (or probabilities).
    labels : array-like of int, shape (N,) or (N, L)
        Their labels.
    ignore_index : int, default -100
        Label of the rows to drop.

    Returns
    -------
    rows : ndarray of shape (R, K)
        In row-major order of the kept places.
    labels : ndarray of shape (R,)
    example : ndarray of int, shape (R,)
        Index along the first axis (the sequence, or the sample) of each row.
    n_examples : int
        ``N``.

    Raises
    ------
    ValueError
        When the shapes do not match.

    Examples
    --------
    >>> z = np.zeros((2, 3, 4)); y = np.array([[1, -100, 2], [-100, -100, 3]])
    >>> rows, kept, example, n = labelled_rows(z, y)
    >>> rows.shape, kept.tolist(), example.tolist(), n
    ((3, 4), [1, 2, 3], [0, 0, 1], 2)
    """
    z = np.asarray(logits)
    y = np.asarray(labels)
    if z.ndim < 2 or y.shape != z.shape[:-1]:
        raise ValueError(f"`logits` of shape {z.shape} and `labels` of shape {y.shape} do not match")
    example = np.broadcast_to(np.arange(z.shape[0]).reshape(-1, *([1] * (y.ndim - 1))), y.shape)
    keep = y != ignore_index
    if keep.all():  # no copy of the logits when nothing is masked
        return z.reshape(-1, z.shape[-1]), y.reshape(-1), example.reshape(-1).copy(), int(z.shape[0])
    return z[keep], y[keep], example[keep], int(z.shape[0])


def into_sequences(rows: np.ndarray, labels: np.ndarray, places: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Put labelled rows back in their sequences: the inverse of :func:`labelled_rows` on ``(N, L)`` input.

    Parameters
    ----------
    rows : ndarray of shape (R, K)
        Rows in row-major order of ``places``.
    labels : ndarray of int, shape (R,)
        Their labels.
    places : ndarray of bool, shape (S, L)
        Where the rows go; ``places.sum() == R``.

    Returns
    -------
    sequences : ndarray of shape (S, L, K)
        Zeros at the other places (never read: their label is -100).
    labels : ndarray of shape (S, L)
        -100 at the other places.

    Examples
    --------
    >>> z, y = into_sequences(np.eye(3), np.array([0, 1, 2]), np.array([[True, False], [True, True]]))
    >>> z.shape, y.tolist()
    ((2, 2, 3), [[0, -100], [1, 2]])
    """
    out = np.zeros((*places.shape, rows.shape[-1]), dtype=rows.dtype)
    out[places] = rows
    padded = np.full(places.shape, -100, dtype=labels.dtype)
    padded[places] = labels
    return out, padded


def sequences_of_lengths(rows: np.ndarray, labels: np.ndarray, lengths: Any) -> tuple[np.ndarray, np.ndarray]:
    """Put labelled rows, given in sentence order, back into sentences of ``lengths`` labelled rows each.

    Parameters
    ----------
    rows : ndarray of shape (R, K)
    labels : ndarray of int, shape (R,)
    lengths : array-like of int
        Labelled rows of each sentence, in order; sentences with none are left out.

    Returns
    -------
    sequences : ndarray of shape (S, L, K)
    labels : ndarray of shape (S, L)
        -100 where a sentence is shorter than the longest.

    Raises
    ------
    ValueError
        When the lengths do not add up to the rows.
    """
    lengths = np.asarray([c for c in lengths if c], dtype=np.int64)
    if lengths.sum() != len(labels):
        raise ValueError(f"{len(labels)} labelled rows, {lengths.sum()} expected from the sentences' lengths")
    width = int(lengths.max()) if lengths.size else 0
    return into_sequences(rows, labels, np.arange(width)[None, :] < lengths[:, None])
