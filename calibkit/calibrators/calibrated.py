"""From a fine-tuned ``transformers`` classifier to a calibrated one, in one call.

- :func:`calibrate` wraps a model with a fitted calibrator (or fits one on logits or on a
  validation ``datasets.Dataset``) and returns a calibrated ``PreTrainedModel`` that saves,
  reloads (also with ``trust_remote_code=True`` where calibkit is not installed) and pushes.
- :func:`fold_into_classifier` turns an affine calibration (TS, WTS, VS, MS) into a plain model
  of the base architecture by rewriting its last linear layer: no custom code needed to load it.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

import numpy as np
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from calibkit.calibrators import registry as calibrator_registry
from calibkit.calibrators.base import Calibrator, logits_rows, prepare_fit
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
from calibkit.metrics.registry import METRICS
from calibkit.metrics.registry import metric as metric_entry
from calibkit.metrics.validation import check_bool, check_positive_int

# With calibkit imported, the Auto classes load calibrated checkpoints without remote code.
AutoConfig.register(CalibratedConfig.model_type, CalibratedConfig, exist_ok=True)
AutoModelForSequenceClassification.register(CalibratedConfig, CalibratedModelForSequenceClassification, exist_ok=True)
AutoModelForTokenClassification.register(CalibratedConfig, CalibratedModelForTokenClassification, exist_ok=True)
AutoModelForCausalLM.register(CalibratedConfig, CalibratedModelForCausalLM, exist_ok=True)

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

CALIBRATORS: dict[str, type[Calibrator]] = calibrator_registry.classes()
"""Method name (as in a model's ``calibration`` block) -> calibrator class (from the registry)."""

# Scalar metrics reported before/after in the calibration block and the model card.
CARD_METRICS = ("accuracy", *(name for name in METRICS if not metric_entry(name).per_class))


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


def _task_of(model) -> str:
    name = type(model).__name__
    if name.endswith("ForTokenClassification"):
        return "token-classification"
    if name.endswith("ForSequenceClassification"):
        return "sequence-classification"
    if is_causal_lm(model):
        return "causal-lm"
    raise ValueError(
        f"`model` must be a sequence- or token-classification model or a causal LM (a *ForSequenceClassification, "
        f"*ForTokenClassification or *ForCausalLM class), got {name}"
    )


def calibration_metrics(logits: Any, labels: Any, calibrator: Calibrator, ignore_index: int = -100) -> dict:
    """Compute every scalar metric of :data:`CARD_METRICS` before and after ``calibrator`` on ``(logits, labels)``.

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
    import warnings

    from calibkit.metrics import calibration_report

    with warnings.catch_warnings():  # absent classes / empty regions are expected on small sets
        warnings.simplefilter("ignore")
        before = calibration_report(logits, labels, from_logits=True, ignore_index=ignore_index)
        after = calibration_report(calibrator.predict_proba(logits), labels, ignore_index=ignore_index)

    def pick(report: dict) -> dict:
        return {name: float(report[name]) for name in CARD_METRICS}

    return {"n": int(before["n"]), "before": pick(before), "after": pick(after)}


def collect_logits(
    model,
    dataset,
    *,
    batch_size: int = 32,
    data_collator=None,
    label_column: str = "labels",
    progress: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Run ``model`` over a tokenised ``datasets.Dataset`` and return the logits and labels of the kept predictions.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A sequence- or token-classification model (put in eval mode while it runs).
    dataset : datasets.Dataset
        Tokenised, with a label column.
    batch_size : int, default 32
        Rows per forward pass.
    data_collator : callable, optional
        Pads a batch (e.g. ``DataCollatorWithPadding(tokenizer)``); without one, the rows must
        already have equal lengths.
    label_column : str, default "labels"
        The label column; if absent, the first of ``labels``, ``label``, ``ner_tags`` present.
    progress : bool, default True
        Show a progress bar.

    Returns
    -------
    logits : ndarray
        Sequence classification: ``(N, K)``; token classification: the tokens whose label is
        not -100, ``(T, K)`` (padding never stored).
    labels : ndarray
        ``(N,)`` or ``(T,)``.

    Raises
    ------
    ValueError
        When ``dataset`` is not a tokenised Dataset, has no label column or no rows, or its rows
        cannot be collated.
    """
    import torch
    from torch.utils.data import DataLoader
    from tqdm.auto import tqdm
    from transformers import default_data_collator

    if not all(hasattr(dataset, name) for name in ("column_names", "select_columns", "rename_column")):
        raise ValueError(f"`dataset` must be a tokenised datasets.Dataset, got {type(dataset).__name__}")
    batch_size = check_positive_int(batch_size, "batch_size")
    check_bool(progress, "progress")
    if not isinstance(label_column, str):
        raise ValueError(f"`label_column` must be a column name, got {label_column!r}")
    if label_column not in dataset.column_names:
        candidates = [c for c in ("labels", "label", "ner_tags") if c in dataset.column_names]
        if not candidates:
            raise ValueError(f"`dataset` has no label column {label_column!r}; columns: {dataset.column_names}")
        label_column = candidates[0]
    forward_names = set(inspect.signature(model.forward).parameters) | {"input_ids", "attention_mask", "token_type_ids"}
    keep = [c for c in dataset.column_names if c in forward_names or c == label_column]
    data = dataset.select_columns(keep)
    if label_column != "labels":
        data = data.rename_column(label_column, "labels")
    collator = data_collator or default_data_collator

    def collate(rows):
        # Rows of unequal length without a padding collator end in a torch error deep in the
        # collator: say what to pass instead.
        try:
            batch = collator(rows)
        except (ValueError, RuntimeError, TypeError) as exc:
            raise ValueError(
                f"`dataset` rows could not be collated into a batch ({exc}); pass a padding `data_collator`, "
                "e.g. DataCollatorWithPadding(tokenizer)"
            ) from exc
        if "labels" not in batch or not isinstance(batch["labels"], torch.Tensor):
            raise ValueError(f"`dataset` column {label_column!r} did not collate into a tensor of integer labels")
        return batch

    loader = DataLoader(data, batch_size=batch_size, collate_fn=collate)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    chunks, label_chunks = [], []
    try:
        with torch.no_grad():
            for batch in tqdm(loader, desc="collecting logits", disable=not progress):
                labels = batch.pop("labels")
                logits = model(**{k: v.to(device) for k, v in batch.items()}).logits.float().cpu()
                if logits.ndim == 3:  # tokens: keep the labelled ones only
                    mask = labels != -100
                    logits, labels = logits[mask], labels[mask]
                chunks.append(logits.numpy())
                label_chunks.append(labels.numpy())
    finally:
        model.train(was_training)
    if not chunks:
        raise ValueError("`dataset` has no rows: there is nothing to calibrate on")
    return np.concatenate(chunks), np.concatenate(label_chunks)


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
):
    """Wrap ``model`` with a calibrator: same outputs, calibrated ``logits``, no copy of the model.

    Give either a fitted ``calibrator``, or a ``method`` and validation data: ``logits`` and
    ``labels``, or a tokenised ``dataset`` the model is run on (batched, with a progress bar). A
    causal LM gets one temperature on its next-token logits (for a large evaluation set, pass
    ``TemperatureScaling().fit_batches(..., next_token=True)`` as ``calibrator``).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A fine-tuned ``*ForSequenceClassification`` (single- or multi-label) or
        ``*ForTokenClassification`` model, or a ``*ForCausalLM``.
    calibrator : Calibrator, optional
        Fitted, or fitted here on the data given.
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
    task = _task_of(model)
    check_bool(report, "report")
    check_bool(progress, "progress")
    batch_size = check_positive_int(batch_size, "batch_size")
    if task == "causal-lm":
        return _calibrate_causal_lm(model, calibrator, method, logits, labels, dataset, report)
    if getattr(model.config, "problem_type", None) == MULTI_LABEL or isinstance(calibrator, MULTILABEL_CLASSES):
        return _calibrate_multilabel(model, task, calibrator, method, logits, labels, dataset, report)
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
        block["metrics"] = calibration_metrics(logits, labels, calibrator, calibrator.ignore_index)
    return _wrap(model, task, block)


def _wrap(model, task: str, block: dict):
    """Wrap ``model`` with the calibration ``block``; the config keeps the base's labels and problem type."""
    config = CalibratedConfig(
        base_config=model.config.to_dict(),
        calibration=block,
        task=task,
        id2label=dict(model.config.id2label),
        label2id=dict(model.config.label2id),
        problem_type=getattr(model.config, "problem_type", None),  # pipelines pick softmax or sigmoid from it
    )
    cls = {
        "token-classification": CalibratedModelForTokenClassification,
        "causal-lm": CalibratedModelForCausalLM,
    }.get(task, CalibratedModelForSequenceClassification)
    return cls(config, base_model=model)


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
        block["metrics"] = next_token_metrics(logits, labels, calibrator.temperature_, calibrator.ignore_index)
    return _wrap(model, "causal-lm", block)


def next_token_metrics(logits: Any, labels: Any, temperature: float, ignore_index: int = -100) -> dict:
    """Compute every scalar metric of :data:`CARD_METRICS` on next tokens, before and after dividing by ``temperature``.

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
    import warnings

    from calibkit.metrics import calibration_report

    settings = {"from_logits": True, "next_token": True, "ignore_index": ignore_index}
    with warnings.catch_warnings():  # tokens never seen: expected over a vocabulary
        warnings.simplefilter("ignore")
        before = calibration_report(logits, labels, **settings)
        after = calibration_report(logits / temperature, labels, **settings)

    def pick(report: dict) -> dict:  # ACE is left out over a vocabulary (NEXT_TOKEN_METRICS)
        return {name: float(report[name]) for name in CARD_METRICS if name in report}

    return {"n": int(before["n"]), "before": pick(before), "after": pick(after)}


# --------------------------------------------------------------------------------------------
# Folding an affine calibration into the classifier


_MULTILABEL_ALIASES = calibrator_registry.MULTILABEL_ALIASES
MULTILABEL_CLASSES = (MultiLabelScaling, MultiLabelIsotonic)


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
        block["metrics"] = multilabel_calibration_metrics(logits, labels, calibrator)
    return _wrap(model, task, block)


def multilabel_calibration_metrics(logits: Any, labels: Any, calibrator: Any) -> dict:
    """Compute the macro average over labels of every label metric, and CECE over labels, before and after.

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
    import warnings

    from calibkit.metrics import calibration_report

    ignore = calibrator.ignore_index
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        before = calibration_report(logits, labels, from_logits=True, multilabel=True, ignore_index=ignore)
        after = calibration_report(calibrator.predict_proba(logits), labels, multilabel=True, ignore_index=ignore)

    def pick(r: dict) -> dict:
        return {**{f"{m}_macro": float(v) for m, v in r["macro"].items()}, "cece": float(r["cece"])}

    return {"n": int(before["n"]), "before": pick(before), "after": pick(after)}


def _affine_map(calibrator_block: dict, num_labels: int) -> tuple[np.ndarray, np.ndarray]:
    affine = CalibrationHead(calibrator_block, num_labels).affine_map()  # the head says whether its map is
    if affine is None:
        raise ValueError(
            f"method {calibrator_block['method']!r} is not affine in the logits; only the affine maps "
            f"({', '.join(AFFINE_METHODS)}) can be folded into the classifier"
        )
    return affine[0].numpy(), affine[1].numpy()


def classifier_layer(model):
    """Find the linear layer that produces the logits of a classification model.

    BERT, DistilBERT, DeBERTa(-v2) and token classifiers end in ``classifier``; RoBERTa-style
    sequence heads in ``classifier.out_proj``; decoder models in ``score``. The rule: the last
    registered ``nn.Linear`` whose ``out_features`` is ``num_labels``, preferring those names.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A classification model.

    Returns
    -------
    name : str
    module : torch.nn.Linear

    Raises
    ------
    ValueError
        When no linear layer has ``num_labels`` outputs.
    """
    import torch

    num_labels = model.config.num_labels
    linears = [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and module.out_features == num_labels
    ]
    for preferred in ("classifier.out_proj", "classifier", "score", "classifier.dense_out"):
        for name, module in linears:
            if name == preferred:
                return name, module
    if not linears:
        raise ValueError(f"no linear layer with {num_labels} outputs found in {type(model).__name__}")
    return linears[-1]


def fold_into_classifier(calibrated_model):
    """Fold an affine calibration into a plain base-architecture model whose logits equal ``calibrated_model``'s.

    ``W' = A W``, ``b' = A b + c`` for the calibration ``z -> A z + c`` (TS, WTS: ``A = I/T``;
    VS: ``diag(v)``; MS: ``W``). The result saves and loads with no custom code and no
    ``trust_remote_code``. The wrapped model is not modified.

    Parameters
    ----------
    calibrated_model : CalibratedModelForSequenceClassification, ...ForTokenClassification or ...ForCausalLM
        Calibrated by an affine method (TS, WTS, VS or MS; a causal LM by TS or WTS, its LM head
        divided by T: when the head is tied to the input embeddings, the copy unties them first,
        with a warning, since dividing a tied head would change the inputs too).

    Returns
    -------
    transformers.PreTrainedModel
        A copy of the base model with the rewritten last linear layer.

    Raises
    ------
    ValueError
        On a method that is not affine (RD-TS, IR, HB), or a bias the layer has no room for.
    """
    import torch

    config = calibrated_model.config
    if config.task == "causal-lm":
        return _fold_into_lm_head(calibrated_model)
    base = copy.deepcopy(calibrated_model.model)
    scale, shift = _affine_map(config.calibration, base.config.num_labels)
    _, layer = classifier_layer(base)
    with torch.no_grad():
        weight = torch.as_tensor(scale, dtype=torch.float64) @ layer.weight.double()
        if layer.bias is not None:
            bias = torch.as_tensor(scale, dtype=torch.float64) @ layer.bias.double() + torch.as_tensor(shift)
        elif np.any(shift != 0):
            raise ValueError("the classifier layer has no bias, so a calibration bias cannot be folded into it")
        layer.weight.copy_(weight.to(layer.weight.dtype))
        if layer.bias is not None:
            layer.bias.copy_(bias.to(layer.bias.dtype))
    return base


def _fold_into_lm_head(calibrated_model):
    """:func:`fold_into_classifier` of a causal LM: the LM head's weights divided by T, untied first if tied."""
    import warnings

    import torch

    temperature = float(calibrated_model.config.calibration["temperature"])
    base = copy.deepcopy(calibrated_model.model)
    head, embeddings = base.get_output_embeddings(), base.get_input_embeddings()
    if embeddings is not None and head.weight.data_ptr() == embeddings.weight.data_ptr():
        # Dividing a tied head would divide the input embeddings too: the copy gets a head of its own.
        warnings.warn(
            f"{type(base).__name__} ties its LM head to its input embeddings: the folded copy unties them "
            "(tie_word_embeddings=False) and divides the head alone, so it saves the head's weights separately",
            UserWarning,
            stacklevel=2,
        )
        head.weight = torch.nn.Parameter(head.weight.detach().clone())
        for config in {id(c): c for c in (base.config, base.config.get_text_config())}.values():
            config.tie_word_embeddings = False
    with torch.no_grad():
        head.weight.div_(temperature)
        if getattr(head, "bias", None) is not None:
            head.bias.div_(temperature)
    return base
