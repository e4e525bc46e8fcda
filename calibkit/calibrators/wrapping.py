"""Wrapping a model with its calibration block: the calibrated ``PreTrainedModel`` of each model kind.

The classes themselves live in :mod:`~calibkit.calibrators.modeling_calibkit` and
:mod:`~calibkit.calibrators.modeling_calibkit_lm` (the files a checkpoint carries for
``trust_remote_code``); here they are registered with the ``Auto`` classes, a model's kind is
read from its class, and :func:`wrap` builds the calibrated model around it (no copy).
"""

from __future__ import annotations

from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from calibkit.calibrators.modeling_calibkit import (
    CalibratedConfig,
    CalibratedModelForSequenceClassification,
    CalibratedModelForTokenClassification,
)
from calibkit.calibrators.modeling_calibkit_lm import CalibratedModelForCausalLM, is_causal_lm

__all__ = ["WRAPPERS", "task_of", "wrap"]

# With calibkit imported, the Auto classes load calibrated checkpoints without remote code.
AutoConfig.register(CalibratedConfig.model_type, CalibratedConfig, exist_ok=True)
AutoModelForSequenceClassification.register(CalibratedConfig, CalibratedModelForSequenceClassification, exist_ok=True)
AutoModelForTokenClassification.register(CalibratedConfig, CalibratedModelForTokenClassification, exist_ok=True)
AutoModelForCausalLM.register(CalibratedConfig, CalibratedModelForCausalLM, exist_ok=True)

WRAPPERS = {
    "sequence-classification": CalibratedModelForSequenceClassification,  # single- and multi-label heads
    "token-classification": CalibratedModelForTokenClassification,
    "causal-lm": CalibratedModelForCausalLM,
}
"""A model's task (:func:`task_of`) -> the calibrated class that wraps it."""


def task_of(model) -> str:
    """Return the task of a ``transformers`` model, read from its class name.

    Parameters
    ----------
    model : transformers.PreTrainedModel

    Returns
    -------
    str
        ``"sequence-classification"``, ``"token-classification"`` or ``"causal-lm"``.

    Raises
    ------
    ValueError
        On a model of another kind.
    """
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


def wrap(model, task: str, block: dict):
    """Wrap ``model`` with the calibration ``block``; the config keeps the base's labels and problem type.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The base model, held (not copied).
    task : str
        Its task (:func:`task_of`).
    block : dict
        A fitted calibrator's ``calibration_block()`` (with its ``metrics`` where reported).

    Returns
    -------
    CalibratedModelForSequenceClassification, CalibratedModelForTokenClassification or CalibratedModelForCausalLM
    """
    config = CalibratedConfig(
        base_config=model.config.to_dict(),
        calibration=block,
        task=task,
        id2label=dict(model.config.id2label),
        label2id=dict(model.config.label2id),
        problem_type=getattr(model.config, "problem_type", None),  # pipelines pick softmax or sigmoid from it
    )
    return WRAPPERS.get(task, CalibratedModelForSequenceClassification)(config, base_model=model)
