"""Multi-label classifiers (one sigmoid per label, ``problem_type="multi_label_classification"``).

Each label is a binary problem: its probability ``p_ik`` against its multi-hot label ``y_ik``,
every binary metric computed on it as on 1-D binary input (the confidence is the probability
that the label is present, SPEC.md). The labels' values are then summarised three ways, as
scikit-learn averages multi-label scores:

- ``macro``: the mean over the labels that have a value;
- ``weighted``: weighted by each label's support (the rows where it is present);
- ``micro``: the metric on all label decisions pooled (``N x K`` binary decisions).

And, the class-wise paper's idea applied to labels, CECE, MSECE, WSECE and the ECE variance of
the per-label ECEs (weights: support; centre of the variance: the micro ECE). Nothing is guessed
from the data: multi-label input is asked for by calling this function (or ``multilabel=True``
where a door offers it); a ``(N, K)`` 0/1 label matrix given to a single-label metric is refused
with a message that names this function.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from calibkit.metrics.functional.core import ArrayLike
from calibkit.metrics.multilabel import LABEL_METRICS, exact_label_report, label_metric_names
from calibkit.metrics.settings import UNSET, CalibrationSettings, resolve_settings

__all__ = ["LABEL_METRICS", "multilabel_report"]


def multilabel_report(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    metrics: Iterable[str] | None = None,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    settings: CalibrationSettings | None = None,
    **keywords: Any,
) -> dict[str, Any]:
    """Compute every binary metric per label, its macro, weighted and micro averages, and CECE over labels.

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N, K)
        The probability of each label (logits with ``from_logits=True``: a sigmoid each).
    labels : array-like of shape (N, K)
        Multi-hot labels: 1 where the label is present, 0 where absent, ``ignore_index`` for a
        decision to skip; ints, bools or floats (``BCEWithLogitsLoss`` takes floats).
    metrics : iterable of str, optional
        Names from ``LABEL_METRICS`` (default: all).
    from_logits : bool, default False
    ignore_index : int, default -100
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords (not both).
    **keywords
        Any other setting of :class:`~calibkit.metrics.settings.CalibrationSettings` (``n_bins``,
        ``theta``, ...); ``multilabel`` is accepted and ignored (this is the multi-label door).

    Returns
    -------
    dict
        ``"per_label"``: per metric of ``LABEL_METRICS``, an array ``(K,)`` (NaN for a
        label with no decision left); ``"macro"``, ``"weighted"``, ``"micro"``: per metric, one
        value; ``"support"``: the rows where each label is present; ``"n"``: the label decisions
        counted; ``"cece"``, ``"msece"``, ``"wsece"``, ``"ece_variance"``: over the per-label ECEs.

    Raises
    ------
    ValueError
        Naming the argument: shapes that differ, a label that is not 0, 1 or ``ignore_index``,
        NaN or a probability outside [0, 1], a bad setting, or no decision left.

    Examples
    --------
    >>> p = [[0.9, 0.2], [0.8, 0.6], [0.3, 0.1], [0.6, 0.7]]
    >>> y = [[1, 0], [1, 1], [0, 0], [0, 1]]
    >>> r = multilabel_report(p, y, metrics=["ece", "brier"])
    >>> r["per_label"]["brier"].round(4).tolist(), round(r["micro"]["brier"], 4)
    ([0.125, 0.075], 0.1)
    """
    keywords.pop("multilabel", None)  # this is the multi-label door
    config = resolve_settings(settings, from_logits=from_logits, ignore_index=ignore_index, **keywords)
    return exact_label_report(probs, labels, label_metric_names(metrics), config)
