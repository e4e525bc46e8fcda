"""Selective prediction (HELM's view of calibration): answer the most confident, risk-coverage, AURC.

A model that abstains below a confidence threshold answers a share ``q`` of the inputs (the
coverage); its risk is the error rate on those. Ranking the inputs by top-label confidence,
most confident first, the risk at coverage ``k/N`` is ``r(k) = (errors among the first k) / k``,
and the area under the risk-coverage curve is ``AURC = (1/N) sum_k r(k)`` (Geifman & El-Yaniv
2017; HELM reports selective accuracy at a coverage). Inputs of equal confidence have no order:
their errors are spread evenly over their ranks, i.e. every value here is the expectation over
the orders of ties, the same whatever order the data came in.

These need the inputs' order, not per-bin sums: they are computed from the rows in memory
(the confidences sorted once, ``O(N log N)``), not by the accumulator.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calibkit.metrics.functional.core import ArrayLike, _report
from calibkit.metrics.settings import CalibrationSettings
from calibkit.metrics.validation import prepare, to_numpy


def _top_label(probs: ArrayLike, labels: ArrayLike, from_logits: bool, ignore_index: int) -> tuple[np.ndarray, ...]:
    """Return each labelled row's top-label confidence and whether its prediction is right (input checked)."""
    settings = CalibrationSettings(from_logits=from_logits, ignore_index=ignore_index)
    _report(probs, labels, ("accuracy",), settings)  # every input check of the metrics, and their messages
    prep = prepare(probs, labels, from_logits=settings.from_logits, ignore_index=settings.ignore_index)
    keep = prep.labels != settings.ignore_index
    values = to_numpy(prep.values, "probs")[keep].astype(np.float64)
    y = prep.labels[keep]
    if values.shape[1] == 1:  # 1-D binary: P(class 1), or its logit
        p1 = 1.0 / (1.0 + np.exp(-values[:, 0])) if settings.from_logits else values[:, 0]
        pred = (p1 > 0.5).astype(np.int64)  # a tie goes to class 0, the first index, as argmax does
        return np.maximum(p1, 1.0 - p1), pred == y
    if settings.from_logits:
        values = np.exp(values - values.max(axis=1, keepdims=True))
        values /= values.sum(axis=1, keepdims=True)
    pred = values.argmax(axis=1)
    return values[np.arange(len(y)), pred], pred == y


def risk_coverage(
    probs: ArrayLike, labels: ArrayLike, *, from_logits: bool = False, ignore_index: int = -100
) -> tuple[np.ndarray, np.ndarray]:
    """Compute the risk-coverage curve: the error rate on the ``k`` most confident inputs, for every ``k``.

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``), as for every metric.
    labels : array-like of int, shape (N,) or (N, L)
        True classes; positions equal to ``ignore_index`` are skipped.
    from_logits : bool, default False
    ignore_index : int, default -100

    Returns
    -------
    coverage : ndarray of float64, shape (n,)
        ``k / n`` for ``k = 1 .. n`` (``n`` labelled inputs).
    risk : ndarray of float64, shape (n,)
        The expected error rate on the ``k`` most confident inputs (ties: over their orders).

    Raises
    ------
    ValueError
        On bad input, as every metric.

    Examples
    --------
    >>> coverage, risk = risk_coverage([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1])
    >>> coverage.round(3).tolist(), risk.round(3).tolist()
    ([0.333, 0.667, 1.0], [0.0, 0.0, 0.333])
    """
    confidence, correct = _top_label(probs, labels, from_logits, ignore_index)
    n = confidence.size
    order = np.argsort(-confidence, kind="stable")
    c, errors = confidence[order], (~correct[order]).astype(np.float64)
    # Tie groups: runs of equal confidence; within a run the errors are spread evenly over its ranks.
    starts = np.flatnonzero(np.concatenate([[True], c[1:] != c[:-1]]))
    sizes = np.diff(np.concatenate([starts, [n]]))
    group_errors = np.add.reduceat(errors, starts)
    before = np.concatenate([[0.0], np.cumsum(group_errors)[:-1]])  # errors of the groups ranked above
    k = np.arange(1, n + 1)
    g = np.repeat(np.arange(starts.size), sizes)
    expected = before[g] + (k - starts[g]) * group_errors[g] / sizes[g]
    return k / n, expected / k


def aurc(probs: ArrayLike, labels: ArrayLike, *, from_logits: bool = False, ignore_index: int = -100) -> float:
    """Compute the area under the risk-coverage curve [1]_: ``AURC = (1/n) sum_k r(k)``.

    ``r(k)`` is the error rate on the ``k`` most confident inputs (:func:`risk_coverage`); lower
    is better: confident answers are right more often. Its floor for a given accuracy is
    reached when every error ranks below every right answer.

    Parameters
    ----------
    probs, labels, from_logits, ignore_index
        As in :func:`risk_coverage`.

    Returns
    -------
    float
        In [0, 1].

    Raises
    ------
    ValueError
        On bad input, as every metric.

    References
    ----------
    .. [1] Y. Geifman and R. El-Yaniv (2017). "Selective Classification for Deep Neural
       Networks". NeurIPS.

    Examples
    --------
    >>> round(aurc([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1]), 4)
    0.1111
    """
    return area_under(risk_coverage(probs, labels, from_logits=from_logits, ignore_index=ignore_index)[1])


def selective_accuracy(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    coverage: float = 0.8,
    from_logits: bool = False,
    ignore_index: int = -100,
) -> float:
    """Compute the accuracy on the ``coverage`` share of inputs the model is most confident about (HELM [1]_).

    Parameters
    ----------
    probs, labels, from_logits, ignore_index
        As in :func:`risk_coverage`.
    coverage : float, default 0.8
        The share answered, in (0, 1]: the ``ceil(coverage * n)`` most confident inputs.

    Returns
    -------
    float
        ``1 - r(ceil(coverage * n))`` (ties at the cut: the expectation over their orders).

    Raises
    ------
    ValueError
        When ``coverage`` is not in (0, 1], or on bad input.

    References
    ----------
    .. [1] P. Liang et al. (2023). "Holistic Evaluation of Language Models". TMLR.

    Examples
    --------
    >>> selective_accuracy([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1], coverage=0.5)
    1.0
    """
    check_coverage(coverage)
    _, risk = risk_coverage(probs, labels, from_logits=from_logits, ignore_index=ignore_index)
    return accuracy_at(risk, coverage)


def check_coverage(coverage: Any) -> float:
    """Check that ``coverage`` is a number in (0, 1].

    Parameters
    ----------
    coverage : object

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Naming ``coverage``.
    """
    if isinstance(coverage, bool) or not isinstance(coverage, (int, float, np.integer, np.floating)):
        raise ValueError(f"`coverage` must be a number in (0, 1], got {coverage!r}")
    if not 0 < coverage <= 1:
        raise ValueError(f"`coverage` must lie in (0, 1], got {coverage!r}")
    return float(coverage)


def area_under(risk: np.ndarray) -> float:
    """Return AURC from a risk-coverage curve (:func:`risk_coverage`'s ``risk``): its mean over ``k``.

    Parameters
    ----------
    risk : ndarray of shape (n,)

    Returns
    -------
    float
    """
    return float(np.mean(risk))


def accuracy_at(risk: np.ndarray, coverage: float) -> float:
    """Return the selective accuracy at ``coverage`` from a risk-coverage curve: ``1 - r(ceil(coverage n))``.

    Parameters
    ----------
    risk : ndarray of shape (n,)
        :func:`risk_coverage`'s ``risk``.
    coverage : float
        In (0, 1] (:func:`check_coverage`).

    Returns
    -------
    float
    """
    k = max(1, math.ceil(coverage * risk.size - 1e-9))  # 0.8 * 10 is 8, not 9, in floating point
    return float(1.0 - risk[k - 1])
