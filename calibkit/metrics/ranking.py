"""Selective prediction as sums: AURC and selective accuracy at every door, exact where the rows are held.

AURC and selective accuracy (:mod:`calibkit.metrics.functional.selective`) rank the inputs by
top-label confidence, so per-bin sums of equal width cannot give them. Here the confidence goes
into fine buckets of ``1 - confidence`` (:data:`SELECTIVE_BUCKETS`: 64 an octave of its float64
value, down to ``2**-53``), each holding the count and the errors of its inputs: additive like
every other sum, so the accumulator, the bootstrap, the shards reader, Dask and the torch engine
all carry them. Within a bucket the order is unknown; the estimate spreads a bucket's errors
evenly over its ranks (the convention for tied confidences, so a bucket of equal values is
exact), and the bound is the largest change any order within the buckets could make: every
error ranked first, or last (:func:`selective_from_buckets`). The one-shot door still holds the
rows and computes both exactly (:func:`selective_from_rows`; bound 0), as it does ACE.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import numpy as np

from calibkit.metrics import _kernels as kernels

SELECTIVE_OCTAVE = 64
"""Buckets per octave of ``1 - confidence``: relative width at most 1/64."""
SELECTIVE_BUCKETS = 53 * SELECTIVE_OCTAVE + 1
"""Bucket 0 holds ``1 - confidence < 2**-53`` (confidences that round to 1); then 64 an octave up to 1."""

_ROW_BLOCK_ENTRIES = 1 << 22  # rows are read a block of about this many entries at a time
_EULER_GAMMA = 0.5772156649015329
_HARMONIC_TABLE = 4096
_HARMONIC = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, _HARMONIC_TABLE, dtype=np.float64))])


def _is_tensor(x: Any) -> bool:
    return hasattr(x, "detach") and not isinstance(x, np.ndarray)


def _top_label_block(x: Any, mode: int) -> tuple[Any, Any]:
    """Top-label confidence (float64) and predicted class of a block of rows, as the engines define them.

    Probabilities: the largest value as given (first index of a tie); logits: ``1 / sum exp(z -
    max z)``; 1-D binary: ``max(p, 1 - p)``, class 1 only when ``p > 0.5``.
    """
    torch_in = _is_tensor(x)
    if mode in (kernels.MODE_PROBS, kernels.MODE_LOGITS):
        if torch_in:
            top, pred = x.max(dim=1)
            top = top.double()
        else:
            pred = x.argmax(axis=1)
            top = np.take_along_axis(x, pred[:, None], axis=1)[:, 0].astype(np.float64)
        if mode == kernels.MODE_PROBS:
            return top, pred
        if torch_in:
            return 1.0 / (x.double() - top[:, None]).exp().sum(dim=1), pred
        return 1.0 / np.exp(x.astype(np.float64) - top[:, None]).sum(axis=1), pred
    v = x[:, 0].double() if torch_in else x[:, 0].astype(np.float64)
    if mode == kernels.MODE_BINARY_LOGITS:  # both tails without cancellation
        e = (-v.abs()).exp() if torch_in else np.exp(-np.abs(v))
        p1 = (v >= 0) * (1.0 / (1.0 + e)) + (v < 0) * (e / (1.0 + e))
    else:
        p1 = v
    pred = p1 > 0.5
    conf = pred * p1 + ~pred * (1.0 - p1)
    return conf, (pred.long() if torch_in else pred.astype(np.int64))


def top_label_rows(prep: Any, ignore_index: int, start: int = 0, stop: int | None = None) -> tuple[Any, Any, Any]:
    """Return each labelled row's top-label confidence, whether it is wrong, and its row number.

    Parameters
    ----------
    prep : PreparedInput
        Validated rows and labels (numpy arrays or torch tensors; the result is of the same kind).
    ignore_index : int
        Label of the rows to skip.
    start, stop : int
        The row range (default: every row).

    Returns
    -------
    confidence : ndarray or tensor of float64, shape (n,)
    wrong : ndarray or tensor of float64, shape (n,)
        1 where the top label is not the true label.
    rows : ndarray or tensor of int64, shape (n,)
        The kept rows' numbers.
    """
    values, labels = prep.values, prep.labels
    stop = values.shape[0] if stop is None else stop
    step = max(1, _ROW_BLOCK_ENTRIES // values.shape[1])
    confs, wrongs, kept = [], [], []
    for a in range(start, stop, step):
        b = min(stop, a + step)
        if _is_tensor(values):
            y = labels[a:b].to(values.device).long()
            rows = (y != ignore_index).nonzero().squeeze(1)
        else:
            y = labels[a:b]
            rows = np.flatnonzero(y != ignore_index)
        conf, pred = _top_label_block(values[a:b][rows], prep.mode)
        confs.append(conf)
        wrongs.append(pred != y[rows])
        kept.append(rows + a)
    if _is_tensor(values):
        import torch

        if not confs:
            empty = torch.zeros(0, dtype=torch.float64, device=values.device)
            return empty, empty, empty.long()
        return torch.cat(confs), torch.cat(wrongs).double(), torch.cat(kept)
    if not confs:
        return np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64)
    return np.concatenate(confs), np.concatenate(wrongs).astype(np.float64), np.concatenate(kept)


def selective_bucket(confidence: Any) -> Any:
    """Return each confidence's bucket: 0 for ``1 - c < 2**-53``, then 64 an octave of ``1 - c`` (numpy or torch).

    Parameters
    ----------
    confidence : ndarray or tensor of float64
        Top-label confidences in (0, 1].

    Returns
    -------
    ndarray or tensor of int64
        In ``[0, SELECTIVE_BUCKETS)``, non-decreasing as the confidence decreases.
    """
    d = 1.0 - confidence
    if _is_tensor(confidence):
        import torch

        mantissa, exponent = torch.frexp(d)
        sub = ((2.0 * mantissa - 1.0) * SELECTIVE_OCTAVE).floor().long()
        index = (exponent.long() + 52) * SELECTIVE_OCTAVE + sub + 1
        return index.clamp(0, SELECTIVE_BUCKETS - 1) * (d >= 2.0**-53)
    mantissa, exponent = np.frexp(d)
    sub = np.floor((2.0 * mantissa - 1.0) * SELECTIVE_OCTAVE).astype(np.int64)
    index = (exponent.astype(np.int64) + 52) * SELECTIVE_OCTAVE + sub + 1
    return np.where(d >= 2.0**-53, np.clip(index, 0, SELECTIVE_BUCKETS - 1), 0)


def selective_sums(
    prep: Any, ignore_index: int, ranges: list[tuple[int, int]], *, keep_rows: bool = False
) -> tuple[list[Any], tuple[np.ndarray, np.ndarray] | None]:
    """Fill the selective buckets of each row range: count and errors per bucket.

    Parameters
    ----------
    prep : PreparedInput
        Validated rows and labels (checked by the engine's pass already).
    ignore_index : int
        Label of the rows to skip.
    ranges : list of tuple of int
        Row ranges ``[a, b)``, in order and covering the rows they name.
    keep_rows : bool, default False
        Also return every kept row's confidence and error (numpy), for the exact values.

    Returns
    -------
    sums : list of ndarray or tensor of float64, shape (SELECTIVE_BUCKETS, 2)
        One per range; tensors on the input's device for tensor input.
    rows : tuple of ndarray or None
        ``(confidence, wrong)`` with ``keep_rows``.
    """
    start, stop = ranges[0][0], ranges[-1][1]
    conf, wrong, row = top_label_rows(prep, ignore_index, start, stop)
    bucket = selective_bucket(conf)
    starts = [a for a, _ in ranges]
    if _is_tensor(conf):
        import torch

        part = torch.searchsorted(torch.tensor(starts, device=row.device), row, right=True) - 1
        key = part * SELECTIVE_BUCKETS + bucket
        size = len(ranges) * SELECTIVE_BUCKETS
        table = torch.stack(
            [torch.bincount(key, minlength=size).double(), torch.bincount(key, weights=wrong, minlength=size)], dim=1
        )
        sums = list(table.view(len(ranges), SELECTIVE_BUCKETS, 2).unbind(0))
        rows = (conf.cpu().numpy(), wrong.cpu().numpy()) if keep_rows else None
        return sums, rows
    part = np.searchsorted(np.asarray(starts), row, side="right") - 1
    key = part * SELECTIVE_BUCKETS + bucket
    size = len(ranges) * SELECTIVE_BUCKETS
    table = np.stack([np.bincount(key, minlength=size), np.bincount(key, weights=wrong, minlength=size)], axis=1)
    sums = list(table.astype(np.float64).reshape(len(ranges), SELECTIVE_BUCKETS, 2))
    return sums, ((conf, wrong) if keep_rows else None)


def risk_curve(confidence: np.ndarray, wrong: np.ndarray) -> np.ndarray:
    """Return the expected error rate on the ``k`` most confident inputs, for ``k = 1 .. n`` (ties: over their orders).

    Parameters
    ----------
    confidence : ndarray of shape (n,)
    wrong : ndarray of shape (n,)
        1 for a wrong prediction.

    Returns
    -------
    ndarray of float64, shape (n,)
    """
    n = confidence.size
    order = np.argsort(-confidence, kind="stable")
    c, errors = confidence[order], np.asarray(wrong, dtype=np.float64)[order]
    # Tie groups: runs of equal confidence; within a run the errors are spread evenly over its ranks.
    starts = np.flatnonzero(np.concatenate([[True], c[1:] != c[:-1]]))
    sizes = np.diff(np.concatenate([starts, [n]]))
    group_errors = np.add.reduceat(errors, starts)
    before = np.concatenate([[0.0], np.cumsum(group_errors)[:-1]])  # errors of the groups ranked above
    k = np.arange(1, n + 1)
    g = np.repeat(np.arange(starts.size), sizes)
    return (before[g] + (k - starts[g]) * group_errors[g] / sizes[g]) / k


def coverage_rank(coverage: float, n: float) -> int:
    """Return how many inputs a coverage answers: ``ceil(coverage * n)``, at least 1, the product exact.

    ``coverage`` is read as the decimal it prints as (Python's shortest ``repr``): 0.7 is 7/10, so
    0.7 of 10 inputs answers 7 (the float product is 7.000000000000001), while 0.50000000005 of
    10 answers 6 (SPEC.md).

    Parameters
    ----------
    coverage : float
        In (0, 1].
    n : float
        Inputs counted.

    Returns
    -------
    int
    """
    product = Decimal(repr(float(coverage))) * Decimal(repr(float(n)))  # exact: no rounding of the product
    return max(1, math.ceil(product))


def selective_from_rows(confidence: np.ndarray, wrong: np.ndarray, coverage: float) -> dict[str, tuple[float, float]]:
    """Return AURC and the selective accuracy at ``coverage`` exactly, each with a bound of 0.

    Parameters
    ----------
    confidence, wrong : ndarray of shape (n,)
        As :func:`top_label_rows` returns them.
    coverage : float
        In (0, 1].

    Returns
    -------
    dict
        ``aurc`` and ``selective_accuracy``: ``(value, 0.0)``.
    """
    risk = risk_curve(confidence, wrong)
    k = coverage_rank(coverage, risk.size)
    return {"aurc": (float(np.mean(risk)), 0.0), "selective_accuracy": (float(1.0 - risk[k - 1]), 0.0)}


def _harmonic(x: np.ndarray) -> np.ndarray:
    """``H(x) = sum_{j <= x} 1/j`` for whole ``x >= 0``: a table, then the asymptotic series (error < 1e-24)."""
    x = np.asarray(x, dtype=np.float64)
    small = x < _HARMONIC_TABLE
    big = np.where(small, _HARMONIC_TABLE, x)
    series = np.log(big) + _EULER_GAMMA + 1 / (2 * big) - 1 / (12 * big**2) + 1 / (120 * big**4)
    return np.where(small, _HARMONIC[np.clip(x, 0, _HARMONIC_TABLE - 1).astype(np.int64)], series)


def _ranked(s: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``sum_{j=1..m} 1/(s+j)`` and ``sum_{j=1..m} j/(s+j)`` (ranks ``s+1 .. s+m``), elementwise."""
    inverse = _harmonic(s + m) - _harmonic(s)
    return inverse, m - s * inverse


def selective_from_buckets(table: np.ndarray, coverage: float) -> dict[str, tuple[float, float]]:
    """Return AURC and the selective accuracy at ``coverage`` from the buckets, each with its bound.

    A bucket ``b`` of ``m`` inputs and ``e`` errors holds the ranks ``s+1 .. s+m`` after ``B``
    errors; its errors spread evenly contribute ``sum_j (B + j e/m) / (s + j)`` to ``n AURC``;
    ranked all first, ``sum_j (B + min(j, e)) / (s + j)``; all last, ``sum_j (B + max(0, j - m +
    e)) / (s + j)``. Sums over ``j`` are differences of harmonic numbers, so the cost is per
    bucket, not per input.

    Parameters
    ----------
    table : ndarray of shape (SELECTIVE_BUCKETS, 2)
        Count and errors per bucket (:attr:`CalibrationStatistics.selective`).
    coverage : float
        In (0, 1].

    Returns
    -------
    dict
        ``aurc`` and ``selective_accuracy``: ``(estimate, bound)``, the bound the largest
        distance from the estimate to a value some order within the buckets gives.
    """
    full = table[:, 0] > 0
    m, e = table[full, 0], table[full, 1]
    n = float(m.sum())
    s = np.cumsum(m) - m
    before = np.cumsum(e) - e
    inverse, ranked = _ranked(s, m)
    base = before * inverse
    even = base + e / m * ranked
    first = base + _ranked(s, e)[1] + e * (_harmonic(s + m) - _harmonic(s + e))
    last = base + _ranked(s + m - e, e)[1]
    estimate = float(even.sum() / n)
    aurc = (estimate, float(max(first.sum() / n - estimate, estimate - last.sum() / n, 0.0)))
    k = coverage_rank(coverage, n)
    b = min(int(np.searchsorted(np.cumsum(m), k - 0.5)), m.size - 1)  # the bucket holding rank k
    j = k - s[b]
    risk = (before[b] + j * e[b] / m[b]) / k
    high = (before[b] + min(j, e[b])) / k
    low = (before[b] + max(0.0, j - m[b] + e[b])) / k
    return {"aurc": aurc, "selective_accuracy": (float(1.0 - risk), float(max(high - risk, risk - low, 0.0)))}
