"""From a fine-tuned ``transformers`` classifier to a calibrated one, in one call.

- :func:`calibrate` wraps a model with a fitted calibrator (or fits one on logits or on a
  validation ``datasets.Dataset``) and returns a calibrated ``PreTrainedModel`` that saves,
  reloads (also with ``trust_remote_code=True`` where calibkit is not installed) and pushes.
- :func:`fold_into_classifier` turns an affine calibration (TS, WTS, VS, MS) into a plain model
  of the base architecture by rewriting its last linear layer: no custom code needed to load it.

This module is the factory (:func:`make_calibrator`, :func:`calibrate` for the three model
kinds) and the face of the jobs it calls, each in its own module: wrapping the model
(:mod:`~calibkit.calibrators.wrapping`), collecting its logits
(:mod:`~calibkit.calibrators.collect`), the metrics before and after
(:mod:`~calibkit.calibrators.before_after`) and folding (:mod:`~calibkit.calibrators.folding`);
their names are re-exported here, where they were.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibkit.calibrators import registry as calibrator_registry
from calibkit.calibrators.base import Calibrator, logits_rows, prepare_fit
from calibkit.calibrators.before_after import CARD_METRICS, before_after_metrics
from calibkit.calibrators.collect import collect_logits
from calibkit.calibrators.folding import classifier_layer, fold_into_classifier
from calibkit.calibrators.modeling_calibkit import (
    AFFINE_METHODS,
    CAUSAL_LM_METHODS,
    MULTI_LABEL,
    CalibratedConfig,
    CalibratedModelForSequenceClassification,
    CalibratedModelForTokenClassification,
    CalibrationHead,
    output_classes,
)
from calibkit.calibrators.modeling_calibkit_lm import CalibratedModelForCausalLM, is_causal_lm
from calibkit.calibrators.multilabel import MULTILABEL_METHODS, MultiLabelIsotonic, MultiLabelScaling
from calibkit.calibrators.preference import PreferenceTemperature
from calibkit.calibrators.reward_head import calibrate_reward_model, is_reward_model
from calibkit.calibrators.wrapping import task_of, wrap
from calibkit.metrics.registry import METRICS
from calibkit.metrics.registry import metric as metric_entry
from calibkit.metrics.settings import DEFAULTS
from calibkit.metrics.validation import check_bool, check_positive_int

__all__ = [
    "CALIBRATORS",
    "CalibratedConfig",
    "CalibratedModelForCausalLM",
    "CalibratedModelForSequenceClassification",
    "CalibratedModelForTokenClassification",
    "CalibrationHead",
    "calibrate",
    "calibration_metrics",
    "classifier_layer",
    "collect_logits",
    "fold_into_classifier",
    "make_calibrator",
]

REEXPORTED = (  # names this module held before its jobs moved out (issue 54): still importable from here
    AFFINE_METHODS,
    CARD_METRICS,
    METRICS,
    MULTILABEL_METHODS,
    MULTI_LABEL,
    Any,
    CalibrationHead,
    check_bool,
    check_positive_int,
    is_causal_lm,
    logits_rows,
    metric_entry,
    output_classes,
    prepare_fit,
)

CALIBRATORS: dict[str, type[Calibrator]] = calibrator_registry.classes()
"""Method name (as in a model's ``calibration`` block) -> calibrator class (from the registry)."""

_MULTILABEL_ALIASES = calibrator_registry.MULTILABEL_ALIASES
MULTILABEL_CLASSES = (MultiLabelScaling, MultiLabelIsotonic)

# the private names the jobs had here, for code that reached for them
_task_of, _wrap = task_of, wrap


def make_calibrator(method: str, **params: Any) -> Calibrator:
    """Create a new, unfitted calibrator for ``method``.

    Parameters
    ----------
    method : str
        One of :data:`CALIBRATORS` (``"ts"``, ``"wts"``, ``"rd-ts"``, ...); case and ``_`` are
        tolerated, and the registry's aliases (``"rdts"``, ``"temperature"``) too.
    **params
        Constructor arguments of that calibrator.

    Returns
    -------
    Calibrator

    Raises
    ------
    ValueError
        On an unknown method, or an argument its constructor does not take.
    """
    key = str(method).lower().replace("_", "-")
    key = calibrator_registry.ALIASES.get(key, key)
    if key not in CALIBRATORS:
        raise ValueError(f"`method` must be one of {sorted(CALIBRATORS)}, got {method!r}")
    CALIBRATORS[key].check_param_names(params)  # a ValueError naming it, not the constructor's TypeError
    return CALIBRATORS[key](**params)


def calibrate(
    model,
    calibrator: Calibrator | None = None,
    *,
    method: str | None = None,
    logits: Any = None,
    labels: Any = None,
    dataset=None,
    batch_size: int = 32,
    data_collator=None,
    report: bool = True,
    progress: bool = True,
    metrics: dict | None = None,
    fitted_on: str | None = None,
):
    """Wrap ``model`` with a calibrator: same outputs, calibrated ``logits``, no copy of the model.

    Give either a fitted ``calibrator``, or a ``method`` and validation data: ``logits`` and
    ``labels``, or a tokenised ``dataset`` the model is run on (batched, with a progress bar). A
    causal LM gets one temperature on its next-token logits (for a large evaluation set, pass
    ``TemperatureScaling().fit_batches(..., next_token=True)`` as ``calibrator``). A reward model
    (one output) gets its pairwise temperature: ``calibrator`` is ``T`` or a fitted
    :class:`~calibkit.calibrators.preference.PreferenceTemperature`, and its head divides the
    reward by ``T`` (rankings unchanged, ``sigmoid((r_a - r_b) / T)`` calibrated); the model card
    states ``T``, ``fitted_on`` and the caller's ``metrics``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A fine-tuned ``*ForSequenceClassification`` (single- or multi-label, or a reward model:
        ``num_labels=1``) or ``*ForTokenClassification`` model, or a ``*ForCausalLM``.
    calibrator : Calibrator, PreferenceTemperature or float, optional
        Fitted, or fitted here on the data given; a reward model's: ``T`` (a number > 0) or a
        fitted ``PreferenceTemperature``.
    method : str, optional
        Instead of ``calibrator``: ``"ts"``, ``"wts"``, ``"rd-ts"``, ``"vs"``, ``"ms"``, ``"ir"``
        or ``"hb"`` (a causal LM: ``"ts"`` or ``"wts"``).
    logits : array-like of shape (N, K) or (N, L, K), optional
        Validation logits (-100 labels skipped), with ``labels``; a causal LM's ``(N, T, V)``,
        position ``t`` scored against the label at ``t + 1``.
    labels : array-like of int, optional
        Their labels (a causal LM's unshifted, as its own loss takes them).
    dataset : datasets.Dataset, optional
        Instead of ``logits`` and ``labels``: a tokenised validation set (not for a causal LM).
    batch_size : int, default 32
        Rows per forward pass over ``dataset``.
    data_collator : callable, optional
        Pads a batch of ``dataset`` (see :func:`collect_logits`).
    report : bool, default True
        Store the metrics before and after calibration on that data in the calibration block
        and the model card.
    progress : bool, default True
        Show a progress bar while collecting logits.
    metrics : dict, optional
        A reward model's only: the preference metrics before and after ``T`` for its card,
        ``{"before": {name: number}, "after": {name: number}, "n": pairs}`` (``"n"`` optional),
        or ``{"before": preference_metrics(m), "after": preference_metrics(m, temperature=T)}``
        (:func:`calibkit.metrics.preferences.preference_metrics`).
    fitted_on : str, optional
        A reward model's only: the data ``T`` was fitted on, in words (the card states it).

    Returns
    -------
    CalibratedModelForSequenceClassification, CalibratedModelForTokenClassification or CalibratedModelForCausalLM
        Holding ``model`` itself (not a copy).

    Raises
    ------
    ValueError
        On a model of another task, conflicting or missing arguments, a class count that does
        not match the model, or bad data.
    """
    task = task_of(model)
    check_bool(report, "report")
    check_bool(progress, "progress")
    batch_size = check_positive_int(batch_size, "batch_size")
    if is_reward_model(model) or isinstance(calibrator, (PreferenceTemperature, int, float, np.number)):
        given = {"method": method, "logits": logits, "labels": labels, "dataset": dataset}
        return calibrate_reward_model(model, calibrator, metrics, fitted_on, given)
    if metrics is not None or fitted_on is not None:
        raise ValueError("`metrics` and `fitted_on` are a reward model's (num_labels=1); a classifier's are measured")
    if task == "causal-lm":
        return _calibrate_causal_lm(model, calibrator, method, logits, labels, dataset, report)
    if getattr(model.config, "problem_type", None) == MULTI_LABEL or isinstance(calibrator, MULTILABEL_CLASSES):
        return _calibrate_multilabel(model, task, calibrator, method, logits, labels, dataset, report)
    return _calibrate_classifier(
        model, task, calibrator, method, logits, labels, dataset, batch_size, data_collator, report, progress
    )


def _calibrate_classifier(
    model, task, calibrator, method, logits, labels, dataset, batch_size, data_collator, report, progress
):
    """:func:`calibrate` for a single-label classifier (sequence or token): any calibrator of the registry."""
    calibrator = _calibrator_of(calibrator, method, "`logits`/`labels` or a `dataset`")
    if dataset is not None and (logits is not None or labels is not None):
        raise ValueError("pass either `dataset` or `logits`/`labels`, not both")
    if (logits is None) != (labels is None):  # one without the other would be silently unused
        raise ValueError("pass `logits` and `labels` together")
    num_labels = model.config.num_labels
    if dataset is not None:
        logits, labels = collect_logits(
            model, dataset, batch_size=batch_size, data_collator=data_collator, progress=progress
        )
    if logits is not None:
        # The class count first: fitting 4-class logits for a 3-label model would fail later, or
        # with a less telling message. The rows are a view, reused below (no second conversion).
        rows, shape = logits_rows(logits)
        if shape[-1] != num_labels:
            raise ValueError(f"`logits` has {shape[-1]} classes but the model has num_labels={num_labels}")
        logits = rows.reshape(shape)
    fitted = hasattr(calibrator, "num_classes_")
    if not fitted:
        if logits is None:
            raise ValueError(f"{type(calibrator).__name__} is not fitted: pass `logits` and `labels`, or a `dataset`")
        calibrator.fit(logits, labels)
    if calibrator.num_classes_ != num_labels:
        raise ValueError(f"the calibrator has {calibrator.num_classes_} classes, the model {num_labels} labels")
    block = calibrator.calibration_block()
    if report and logits is not None:
        data = prepare_fit(logits, labels, calibrator.ignore_index)  # same checks as a fit, before the metrics
        kept = data.kept()[0]
        if not np.isfinite(kept).all():
            row = int(np.flatnonzero(~np.isfinite(kept).all(axis=1))[0])
            raise ValueError(
                f"`logits` contains NaN or inf (row {row} of the kept rows): the report's metrics need finite "
                "logits; pass report=False to wrap the model without them"
            )
        block["metrics"] = before_after_metrics(logits, labels, calibrator, ignore_index=calibrator.ignore_index)
    return wrap(model, task, block)


def _calibrator_of(calibrator, method, data: str) -> Calibrator:
    """Return the calibrator of :func:`calibrate`: the one given, or a new one for ``method`` (one of them)."""
    if calibrator is None:
        if method is None:
            raise ValueError(f"pass a fitted `calibrator`, or a `method` with {data}")
        return make_calibrator(method)
    if method is not None:
        raise ValueError("pass either `calibrator` or `method`, not both")
    if not isinstance(calibrator, Calibrator):
        hint = f"; for a method name pass method={calibrator!r}" if isinstance(calibrator, str) else ""
        raise ValueError(f"`calibrator` must be a Calibrator (e.g. TemperatureScaling()), got {calibrator!r}{hint}")
    return calibrator


def _calibrate_causal_lm(model, calibrator, method, logits, labels, dataset, report: bool):
    """:func:`calibrate` for a causal LM: a temperature, fitted on next-token logits (t scored against t + 1)."""
    if dataset is not None:
        raise ValueError(
            "a causal LM is calibrated from `logits` and `labels` (N, T, V) and (N, T), or a fitted calibrator; "
            "for an evaluation set of any size fit TemperatureScaling().fit_batches(..., next_token=True), which "
            "streams it"
        )
    calibrator = _calibrator_of(calibrator, method, "`logits`/`labels`")
    if calibrator.method not in CAUSAL_LM_METHODS:
        name = calibrator.method
        raise ValueError(
            f"a causal LM is calibrated by a temperature ({', '.join(CAUSAL_LM_METHODS)}), got {name!r}: RD-TS's "
            "slope comes from classifiers' top-label confidence (the region-balanced paper), vector and matrix "
            "scaling would fit V or V x V parameters, and the one-vs-rest maps V columns of mostly unseen tokens"
        )
    if (logits is None) != (labels is None):
        raise ValueError("pass `logits` and `labels` together")
    vocabulary = output_classes(model)
    if logits is not None:
        classes = int(logits.shape[-1])
        if classes != vocabulary:
            raise ValueError(f"`logits` has {classes} classes but the model's vocabulary has {vocabulary}")
        if not hasattr(calibrator, "num_classes_"):
            calibrator.fit_batches(lambda: [(logits, labels)], next_token=True)
    elif not hasattr(calibrator, "num_classes_"):
        raise ValueError(f"{type(calibrator).__name__} is not fitted: pass `logits` and `labels`")
    if calibrator.num_classes_ != vocabulary:
        raise ValueError(f"the calibrator has {calibrator.num_classes_} classes, the model's vocabulary {vocabulary}")
    block = calibrator.calibration_block()
    if report and logits is not None:
        block["metrics"] = before_after_metrics(
            logits, labels, calibrator, next_token=True, ignore_index=calibrator.ignore_index
        )
    return wrap(model, "causal-lm", block)


def multilabel_calibrator(mode: str, **params: Any) -> MultiLabelScaling | MultiLabelIsotonic:
    """Create the unfitted multi-label calibrator of a mode (:func:`multilabel_mode`).

    Parameters
    ----------
    mode : str
        ``"isotonic"`` or a mode of :class:`MultiLabelScaling`.
    **params
        ``ignore_index``.

    Returns
    -------
    MultiLabelScaling or MultiLabelIsotonic
    """
    return MultiLabelIsotonic(**params) if mode == "isotonic" else MultiLabelScaling(mode, **params)


def multilabel_mode(method: Any) -> str | None:
    """Return the :class:`MultiLabelScaling` mode a method name means for a multi-label head, or None.

    Parameters
    ----------
    method : object
        ``"temperature"``, ``"label_temperature"``, ``"platt"``, ``"weighted_temperature"``,
        ``"isotonic"``, or the single-label names that have a multi-label form: ``"ts"``,
        ``"wts"``, ``"ir"``.

    Returns
    -------
    str or None
        None where the name has no multi-label form (``"rd-ts"``, ``"ir"``, ...).
    """
    key = str(method).lower().replace("-", "_")
    key = _MULTILABEL_ALIASES.get(key, key)
    return key if key in (*MULTILABEL_METHODS, "isotonic") else None


def _calibrate_multilabel(model, task: str, calibrator, method, logits, labels, dataset, report: bool):
    """:func:`calibrate` for a multi-label head: :class:`MultiLabelScaling` on its logits, a sigmoid per label."""
    if getattr(model.config, "problem_type", None) != MULTI_LABEL:
        raise ValueError(
            "a multi-label calibrator needs a multi-label model (config.problem_type="
            f"'multi_label_classification'), got problem_type={model.config.problem_type!r}"
        )
    if calibrator is not None and method is not None:
        raise ValueError("pass either `calibrator` or `method`, not both")
    if calibrator is None:
        if method is None:
            raise ValueError("pass a fitted `calibrator`, or a `method` with `logits` and `labels`")
        mode = multilabel_mode(method)
        if mode is None:
            raise ValueError(
                f"`method` must be one of {[*MULTILABEL_METHODS, 'isotonic']} (or ts, wts, ir) for a multi-label "
                f"head, got {method!r}"
            )
        calibrator = multilabel_calibrator(mode)
    elif not isinstance(calibrator, MULTILABEL_CLASSES):
        raise ValueError(
            "a multi-label head (one sigmoid per label) needs a MultiLabelScaling or MultiLabelIsotonic calibrator, "
            f"got {type(calibrator).__name__}: its softmax over the labels would be meaningless here"
        )
    if dataset is not None:
        raise ValueError("for a multi-label head pass the validation `logits` and multi-hot `labels` (not `dataset`)")
    if (logits is None) != (labels is None):
        raise ValueError("pass `logits` and `labels` together")
    num_labels = model.config.num_labels
    if logits is not None and np.shape(logits)[-1] != num_labels:
        raise ValueError(f"`logits` has {np.shape(logits)[-1]} labels but the model has num_labels={num_labels}")
    if not hasattr(calibrator, "num_classes_"):
        if logits is None:
            raise ValueError(f"{type(calibrator).__name__} is not fitted: pass `logits` and `labels`")
        calibrator.fit(logits, labels)
    if calibrator.num_classes_ != num_labels:
        raise ValueError(f"the calibrator has {calibrator.num_classes_} labels, the model {num_labels}")
    block = calibrator.calibration_block()
    if report and logits is not None:
        block["metrics"] = before_after_metrics(
            logits, labels, calibrator, multilabel=True, ignore_index=calibrator.ignore_index
        )
    return wrap(model, task, block)


def calibration_metrics(
    logits: Any, labels: Any, calibrator: Calibrator, ignore_index: int = DEFAULTS.ignore_index
) -> dict:
    """Compute every scalar metric of :data:`CARD_METRICS` before and after ``calibrator`` on ``(logits, labels)``.

    A classifier's case of :func:`~calibkit.calibrators.before_after.before_after_metrics`.

    Parameters
    ----------
    logits : array-like of shape (N, K) or (N, L, K)
        Uncalibrated logits.
    labels : array-like of int
        Their labels.
    calibrator : Calibrator
        A fitted calibrator.
    ignore_index : int, default -100
        Label of the positions to skip.

    Returns
    -------
    dict
        ``{"n": samples, "before": {metric: value}, "after": {metric: value}}``.
    """
    return before_after_metrics(logits, labels, calibrator, ignore_index=ignore_index)


def next_token_metrics(logits: Any, labels: Any, temperature: float, ignore_index: int = DEFAULTS.ignore_index) -> dict:
    """Compute every scalar metric of :data:`CARD_METRICS` on next tokens, before and after dividing by ``temperature``.

    A causal LM's case of :func:`~calibkit.calibrators.before_after.before_after_metrics`.

    Parameters
    ----------
    logits : array-like or torch.Tensor of shape (N, T, V)
        A causal LM's logits.
    labels : array-like of int, shape (N, T)
        Its labels, unshifted (position t is scored against t + 1).
    temperature : float
        The calibration's temperature.
    ignore_index : int, default -100
        Label of the positions to skip.

    Returns
    -------
    dict
        ``{"n": tokens, "before": {metric: value}, "after": {metric: value}}``.
    """
    return before_after_metrics(logits, labels, float(temperature), next_token=True, ignore_index=ignore_index)


def multilabel_calibration_metrics(logits: Any, labels: Any, calibrator: Any) -> dict:
    """Compute the macro average over labels of every label metric, and CECE over labels, before and after.

    A multi-label head's case of :func:`~calibkit.calibrators.before_after.before_after_metrics`.

    Parameters
    ----------
    logits : array-like of shape (N, K)
    labels : array-like of shape (N, K)
        Multi-hot.
    calibrator : MultiLabelScaling or MultiLabelIsotonic
        Fitted.

    Returns
    -------
    dict
        ``{"n": label decisions, "before": {name: value}, "after": {name: value}}``, names
        ``<metric>_macro`` and ``cece``.
    """
    return before_after_metrics(logits, labels, calibrator, multilabel=True, ignore_index=calibrator.ignore_index)
