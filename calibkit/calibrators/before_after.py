"""The metrics before and after a calibration, stored in the calibration block and the model card.

One function, :func:`before_after_metrics`, for the three model kinds: a classifier (sequence
or token), a causal LM's next tokens, a multi-label head.
"""

from __future__ import annotations

import warnings
from typing import Any

from calibkit.metrics.registry import METRICS
from calibkit.metrics.registry import metric as metric_entry
from calibkit.metrics.settings import DEFAULTS

__all__ = ["CARD_METRICS", "before_after_metrics"]

# Scalar metrics reported before/after in the calibration block and the model card.
CARD_METRICS = ("accuracy", *(name for name in METRICS if not metric_entry(name).per_class))


def before_after_metrics(
    logits: Any,
    labels: Any,
    calibrator: Any,
    *,
    multilabel: bool = DEFAULTS.multilabel,
    next_token: bool = DEFAULTS.next_token,
    ignore_index: int = DEFAULTS.ignore_index,
) -> dict:
    """Compute the scalar metrics of a model's predictions before and after ``calibrator``.

    A classifier: every metric of :data:`CARD_METRICS`. A causal LM (``next_token``): the same
    on next tokens (position ``t`` scored against the label at ``t + 1``), the logits divided
    by the temperature, ACE left out over a vocabulary. A multi-label head (``multilabel``):
    the macro average over labels of every label metric, as ``<metric>_macro``, and CECE over
    labels.

    Parameters
    ----------
    logits : array-like or torch.Tensor of shape (N, K), (N, L, K) or (N, T, V)
        Uncalibrated logits.
    labels : array-like of int
        Their labels (multi-hot ``(N, K)`` for a multi-label head; a causal LM's unshifted).
    calibrator : Calibrator or float
        Fitted; a causal LM's may be given as its temperature.
    multilabel : bool, default False
        A multi-label head (a sigmoid per label).
    next_token : bool, default False
        A causal LM's logits.
    ignore_index : int, default -100
        Label of the positions to skip.

    Returns
    -------
    dict
        ``{"n": samples (tokens, label decisions), "before": {metric: value}, "after": {metric: value}}``.
    """
    from calibkit.metrics import calibration_report

    settings = {"ignore_index": ignore_index}
    if multilabel:
        settings["multilabel"] = True
    if next_token:
        settings["next_token"] = True
    with warnings.catch_warnings():  # absent classes, empty regions, unseen tokens: expected on small sets
        warnings.simplefilter("ignore")
        before = calibration_report(logits, labels, from_logits=True, **settings)
        if next_token:
            temperature = calibrator if isinstance(calibrator, (int, float)) else calibrator.temperature_
            after = calibration_report(logits / temperature, labels, from_logits=True, **settings)
        else:
            after = calibration_report(calibrator.predict_proba(logits), labels, **settings)
    pick = _multilabel_metrics if multilabel else _card_metrics
    return {"n": int(before["n"]), "before": pick(before), "after": pick(after)}


def _card_metrics(report: dict) -> dict:
    # a next-token report leaves ACE out over a vocabulary (NEXT_TOKEN_METRICS)
    return {name: float(report[name]) for name in CARD_METRICS if name in report}


def _multilabel_metrics(report: dict) -> dict:
    return {**{f"{m}_macro": float(v) for m, v in report["macro"].items()}, "cece": float(report["cece"])}
