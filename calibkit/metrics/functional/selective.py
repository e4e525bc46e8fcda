"""Selective prediction (HELM's view of calibration): answer the most confident, risk-coverage, AURC.

A model that abstains below a confidence threshold answers a share ``q`` of the inputs (the
coverage); its risk is the error rate on those. Ranking the inputs by top-label confidence,
most confident first, the risk at coverage ``k/N`` is ``r(k) = (errors among the first k) / k``,
and the area under the risk-coverage curve is ``AURC = (1/N) sum_k r(k)`` (Geifman & El-Yaniv
2017; HELM reports selective accuracy at a coverage). Inputs of equal confidence have no order:
their errors are spread evenly over their ranks, i.e. every value here is the expectation over
the orders of ties, the same whatever order the data came in.

:func:`aurc` and :func:`selective_accuracy` are the registry's ``aurc`` and ``selective_accuracy``
(one call of the one-shot report, exact); the accumulator, the bootstrap, the shards reader, Dask
and the ``evaluate`` module ``selective`` give them from fine buckets of the confidence, with a
bound on the error (``calibkit.metrics.ranking``).
"""

from __future__ import annotations

import numpy as np

from calibkit.metrics.functional.core import ArrayLike, _report
from calibkit.metrics.ranking import risk_curve, top_label_rows
from calibkit.metrics.settings import UNSET, CalibrationSettings, resolve_settings
from calibkit.metrics.validation import check_coverage, prepare_for

__all__ = ["aurc", "check_coverage", "risk_coverage", "selective_accuracy"]


def risk_coverage(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    settings: CalibrationSettings | None = None,
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
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``.
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

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
    settings = resolve_settings(settings, from_logits=from_logits, ignore_index=ignore_index, next_token=next_token)
    _report(probs, labels, ("accuracy",), settings)  # every input check of the metrics, and their messages
    prep = prepare_for(probs, labels, settings)
    confidence, wrong, _ = top_label_rows(prep, settings.ignore_index)
    if not isinstance(confidence, np.ndarray):  # a CUDA tensor's rows
        confidence, wrong = confidence.cpu().numpy(), wrong.cpu().numpy()
    risk = risk_curve(confidence, wrong)
    return np.arange(1, risk.size + 1) / risk.size, risk


def aurc(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    settings: CalibrationSettings | None = None,
) -> float:
    """Compute the area under the risk-coverage curve [1]_: ``AURC = (1/n) sum_k r(k)``.

    ``r(k)`` is the error rate on the ``k`` most confident inputs (:func:`risk_coverage`); lower
    is better: confident answers are right more often. Its floor for a given accuracy is
    reached when every error ranks below every right answer.

    Parameters
    ----------
    probs, labels, from_logits, ignore_index, next_token
        As in :func:`risk_coverage`.
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

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
    .. [2] SPEC.md, "Metrics": the definition and the convention for ties this function follows.

    Examples
    --------
    >>> round(aurc([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1]), 4)
    0.1111
    """
    settings = resolve_settings(settings, from_logits=from_logits, ignore_index=ignore_index, next_token=next_token)
    return _report(probs, labels, ("aurc",), settings)[0]["aurc"]


def selective_accuracy(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    coverage: float = UNSET.coverage,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    settings: CalibrationSettings | None = None,
) -> float:
    """Compute the accuracy on the ``coverage`` share of inputs the model is most confident about (HELM [1]_).

    Parameters
    ----------
    probs, labels, from_logits, ignore_index, next_token
        As in :func:`risk_coverage`.
    coverage : float, default 0.8
        The share answered, in (0, 1]: the ``ceil(coverage * n)`` most confident inputs.
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

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
    .. [2] SPEC.md, "Metrics": the definition and the convention for ties this function follows.

    Examples
    --------
    >>> selective_accuracy([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1], coverage=0.5)
    1.0
    """
    settings = resolve_settings(
        settings, coverage=coverage, from_logits=from_logits, ignore_index=ignore_index, next_token=next_token
    )
    return _report(probs, labels, ("selective_accuracy",), settings)[0]["selective_accuracy"]
