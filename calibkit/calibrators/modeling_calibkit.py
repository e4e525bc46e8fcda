"""Calibrated ``transformers`` models: a fine-tuned classifier followed by a calibration head.

This file is self-contained on purpose: it imports only ``torch``, ``transformers`` and its
sibling ``modeling_calibkit_heads.py`` (by a relative import), because ``save_pretrained`` copies
both next to the weights (``register_for_auto_class``), so that
``AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True)`` loads a
calibrated model on a machine without calibkit.

The calibration parameters live in ``config.json`` under ``calibration`` (never ``temperature``,
which generation code reads), e.g. ``{"method": "ts", "temperature": 1.7}``. The head is built
from that block and checked when the model is built, so a checkpoint with a missing or invalid
block fails at load time instead of silently giving uncalibrated scores.

Each method's map (SPEC.md, "Calibrators") is a small class in ``HEADS``
(``modeling_calibkit_heads.py``, re-exported here with :class:`CalibrationHead`): its parameters
and their checks, its forward, its name, paper and formula for the model card. A multi-label head
(a sigmoid per label: ``multilabel``, ``multilabel-ir``) keeps the base model's ``problem_type``,
so the loss with labels is the binary cross-entropy and pipelines apply the sigmoid.
"""

from __future__ import annotations

import functools
import inspect
import os

import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    PretrainedConfig,
    PreTrainedModel,
)

from .modeling_calibkit_heads import (  # noqa: F401  (re-exported: the table of heads and the head)
    AFFINE_METHODS,
    CAUSAL_LM_METHODS,
    HEADS,
    METHODS,
    CalibrationHead,
)

REWARD_METHOD = "reward-ts"  # a reward model's head: its one output divided by the pairwise temperature

MULTI_LABEL = "multi_label_classification"  # transformers' problem_type of a sigmoid-per-label head
TASKS = ("sequence-classification", "token-classification", "causal-lm")


class CalibratedConfig(PretrainedConfig):
    """Config of a calibrated model: the base model's config (as a dict) and the calibration block.

    Parameters
    ----------
    base_config : dict, optional
        The base model's ``config.to_dict()``.
    calibration : dict, optional
        The calibration block (:class:`CalibrationHead`).
    task : {"sequence-classification", "token-classification", "causal-lm"}, default "sequence-classification"
        Which head the base model has.
    """

    model_type = "calibkit-calibrated"

    base_config: dict | None = None
    calibration: dict | None = None
    task: str = "sequence-classification"


_AUTO_CLASSES = {
    "sequence-classification": AutoModelForSequenceClassification,
    "token-classification": AutoModelForTokenClassification,
    "causal-lm": AutoModelForCausalLM,
}


def output_classes(model: PreTrainedModel) -> int:
    """Return the classes of a model's logits: ``num_labels``, or a causal LM's vocabulary (its head's outputs).

    Parameters
    ----------
    model : transformers.PreTrainedModel

    Returns
    -------
    int
    """
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is not None and getattr(head, "out_features", None):
        return int(head.out_features)
    vocabulary = getattr(model.config, "vocab_size", None)
    return int(vocabulary) if vocabulary else int(model.config.num_labels)


def _card_name(method) -> str:
    head = HEADS.get(method) if isinstance(method, str) else None
    if head is None:
        return str(method)
    return f"{head.title} ({head.paper})" if head.paper else head.title


def model_card(config: CalibratedConfig) -> str:
    """Write the README.md of a calibrated model: method, parameters, before/after metrics on the calibration set.

    Parameters
    ----------
    config : CalibratedConfig
        The calibrated model's config.

    Returns
    -------
    str
        The Markdown card, with its YAML header.
    """
    block = config.calibration or {}
    method = block.get("method", "?")
    base_type = (config.base_config or {}).get("model_type", "?")
    task = config.task
    auto = {"token-classification": "AutoModelForTokenClassification", "causal-lm": "AutoModelForCausalLM"}.get(
        task, "AutoModelForSequenceClassification"
    )
    tag = {"token-classification": "token-classification", "causal-lm": "text-generation"}.get(
        task, "text-classification"
    )
    formula = HEADS[method].formula if method in HEADS else "?"
    lines = ["---", "library_name: transformers", "tags:", "- calibkit", "- calibration", f"- {method}"]
    lines += [f"pipeline_tag: {tag}", "---", ""]
    if method == REWARD_METHOD:
        lines += [
            f"# Calibrated {base_type} reward model ({method})",
            "",
            f"A `{base_type}` reward model (one output) whose reward passes through {_card_name(method)}: "
            f"calibrated reward = `{formula}`.",
        ]
        return "\n".join(lines + _reward_card(block, auto))
    lines += [
        f"# Calibrated {base_type} model ({method})",
        "",
        f"A fine-tuned `{base_type}` {task.replace('-', ' ')} model whose logits pass through "
        f"{_card_name(method)}: calibrated logits = `{formula}`.",
        "Made with [calibkit](https://github.com/calibkit/calibkit).",
        "",
        "## Calibration parameters",
        "",
    ]
    for key, value in block.items():
        if key in ("method", "metrics"):
            continue
        if isinstance(value, (int, float)):
            lines.append(f"- `{key}` = {value:.6g}")
        elif isinstance(value, str):
            lines.append(f"- `{key}` = {value}")
        else:
            lines.append(f"- `{key}`: see `calibration.{key}` in config.json")
    metrics = block.get("metrics") or {}
    before, after = metrics.get("before") or {}, metrics.get("after") or {}
    if before and after:
        n = metrics.get("n")
        lines += [
            "",
            "## Calibration metrics on the calibration set" + (f" ({n} predictions)" if n else ""),
            "",
            "Accuracy: higher is better. ECD and ESCE are signed, 0 is calibrated:",
            "ECD > 0 and ESCE < 0 mean over-confident. The rest: lower is better.",
            "",
            "| metric | uncalibrated | calibrated |",
            "|---|---|---|",
        ]
        for name in before:
            if name in after:
                lines.append(f"| {name} | {before[name]:.4f} | {after[name]:.4f} |")
        lines += [
            "",
            "These figures are measured on the data the calibrator was fitted on; check them on held-out data.",
        ]
    return "\n".join(lines + _usage(auto))


def _usage(auto: str) -> list[str]:
    return [
        "",
        "## Usage",
        "",
        "```python",
        f"from transformers import {auto}",
        "",
        f'model = {auto}.from_pretrained("path/or/hub-id", trust_remote_code=True)',
        "```",
        "",
        "`trust_remote_code=True` loads `modeling_calibkit.py` (torch and transformers only) shipped with the",
        "weights; with calibkit installed, `calibkit.CalibratedModelForSequenceClassification.from_pretrained`",
        "(or the token-classification or causal-LM class) loads it without remote code.",
        "",
    ]


def _reward_card(block: dict, auto: str) -> list[str]:
    """Write the body of a calibrated reward model's card: T, the pairs it was fitted on, the preference metrics."""
    temperature, pairs = block.get("temperature"), block.get("pairs")
    data = block.get("fitted_on") or "pairs the card does not name"
    counted = f" ({pairs} pairs)" if isinstance(pairs, int) else ""
    lines = [
        "Every ranking is unchanged, and the probability that answer a is preferred to answer b,",
        "`sigmoid((r_a - r_b) / T)`, is the calibrated one.",
        "Made with [calibkit](https://github.com/calibkit/calibkit).",
        "",
        "## Calibration",
        "",
        f"- `temperature` T = {temperature:.6g}" if isinstance(temperature, (int, float)) else "- `temperature`: ?",
        f"- fitted on: {data}{counted}",
    ]
    metrics = block.get("metrics") or {}
    before, after = metrics.get("before") or {}, metrics.get("after") or {}
    names = [name for name in before if name in after]
    if names:
        n = metrics.get("n")
        lines += [
            "",
            "## Preference metrics" + (f" ({n} pairs)" if n else ""),
            "",
            "Of the preference probabilities, before (T = 1) and after (T) the calibration; accuracy is the",
            "share of pairs ranked right (a tie counted wrong) and does not change.",
            "",
            "| metric | uncalibrated | calibrated |",
            "|---|---|---|",
            *[f"| {name} | {before[name]:.4f} | {after[name]:.4f} |" for name in names],
            "",
            "Where these pairs are the ones T was fitted on, check the figures on held-out pairs.",
        ]
    return lines + _usage(auto)


class _ForwardWithTheBaseInputs:
    """``forward``, bound with the base model's signature (and ``labels``).

    The calibrated forward takes the base model's inputs as ``*args, **kwargs``; tools that read a
    model's inputs from its forward's signature saw none: ``Trainer`` (``remove_unused_columns``,
    its default) dropped ``input_ids`` and ``attention_mask``, and ``trainer.predict`` on a
    calibrated model failed.
    """

    def __get__(self, obj, objtype=None):
        if obj is None:
            return objtype._calibrated_forward
        bound = functools.partial(objtype._calibrated_forward, obj)
        bound.__doc__ = objtype._calibrated_forward.__doc__
        signature = obj.__dict__.get("_forward_signature")  # read once a model: a lookup per forward call
        if signature is None:
            try:
                base = inspect.signature(obj.model.forward)
            except (AttributeError, TypeError, ValueError):  # no base model yet, or no signature to read
                return bound
            parameters = list(base.parameters.values())
            if "labels" not in base.parameters:
                parameters.append(inspect.Parameter("labels", inspect.Parameter.KEYWORD_ONLY, default=None))
            signature = base.replace(parameters=sorted(parameters, key=lambda p: p.kind))
            obj.__dict__["_forward_signature"] = signature
        bound.__signature__ = signature
        return bound


class _CalibratedModel(PreTrainedModel):
    config_class = CalibratedConfig
    base_model_prefix = "calibrated"
    _task = ""

    def __init__(self, config: CalibratedConfig, base_model: PreTrainedModel | None = None) -> None:
        super().__init__(config)
        if config.task != self._task:
            raise ValueError(f"{type(self).__name__} needs task={self._task!r}, the config says {config.task!r}")
        if base_model is None:
            if not isinstance(config.base_config, dict) or "model_type" not in config.base_config:
                raise ValueError("the calibrated model's config has no valid `base_config` (a dict with `model_type`)")
            base = dict(config.base_config)
            base_config = AutoConfig.for_model(base.pop("model_type"), **base)
            base_model = _AUTO_CLASSES[self._task].from_config(base_config)
        self.model = base_model
        classes = output_classes(base_model) if self._task == "causal-lm" else base_model.config.num_labels
        self.calibration_head = CalibrationHead(config.calibration, classes)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        # The wrapper owns no weights: the base model's are trained, the head's come from config.
        return

    def save_pretrained(self, save_directory, *args, **kwargs):
        """Save as ``PreTrainedModel.save_pretrained`` does, plus a model card (README.md) stating the calibration.

        Parameters
        ----------
        save_directory : str or os.PathLike
            The folder.
        *args, **kwargs
            As ``PreTrainedModel.save_pretrained``.

        Returns
        -------
        object
            What ``PreTrainedModel.save_pretrained`` returns.
        """
        result = super().save_pretrained(save_directory, *args, **kwargs)
        if kwargs.get("is_main_process", True):
            with open(os.path.join(save_directory, "README.md"), "w", encoding="utf-8") as f:
                f.write(model_card(self.config))
        return result

    def _upload_modified_files(self, working_dir, *args, **kwargs):
        # push_to_hub writes a generic card over ours just before uploading: put ours back.
        with open(os.path.join(working_dir, "README.md"), "w", encoding="utf-8") as f:
            f.write(model_card(self.config))
        return super()._upload_modified_files(working_dir, *args, **kwargs)

    def get_input_embeddings(self) -> nn.Module:
        """Return the base model's input embeddings.

        Returns
        -------
        torch.nn.Module
        """
        return self.model.get_input_embeddings()

    def _calibrated_forward(self, *args, labels: torch.Tensor | None = None, **kwargs):
        """Run the base model and replace its ``logits`` by calibrated ones (and the loss, if labels).

        Parameters
        ----------
        *args, **kwargs
            The base model's inputs (``input_ids``, ``attention_mask``, ...).
        labels : torch.Tensor, optional
            Labels (-100 ignored): the loss is then the cross-entropy of the calibrated logits;
            for a multi-label head (``problem_type="multi_label_classification"``), multi-hot
            labels of the logits' shape and the binary cross-entropy.

        Returns
        -------
        transformers.utils.ModelOutput or tuple
            The base model's output type, with calibrated ``logits`` (and ``loss``, first); with
            ``return_dict=False`` (or a config that says so) its tuple, as the base model gives.
        """
        return_dict = kwargs.pop("return_dict", None)
        return_dict = getattr(self.config, "return_dict", True) if return_dict is None else return_dict
        kwargs["return_dict"] = True
        if labels is not None and self.calibration_head.method == REWARD_METHOD:
            raise ValueError(
                "`labels`: a calibrated reward model computes no loss of its own (its trainer's Bradley-Terry loss "
                "is computed from the rewards); train the base model (`.model`), then calibrate it again"
            )
        self._pass_the_pad_token()
        output = self.model(*args, **kwargs)
        logits = self.calibration_head(output.logits)
        output["logits"] = logits  # item assignment: transformers 4.x set only the attribute for a new key
        if labels is not None and self.config.problem_type == MULTI_LABEL:  # a sigmoid per label
            if not isinstance(labels, torch.Tensor) or tuple(labels.shape) != tuple(logits.shape):
                raise ValueError(f"`labels` must be multi-hot of the logits' shape {tuple(logits.shape)}")
            target = labels.to(logits.device).float()
            counted = (target != -100).float()  # -100 entries are skipped, as everywhere in calibkit
            loss = nn.functional.binary_cross_entropy_with_logits(
                logits.float(), target.clamp(0, 1), weight=counted, reduction="sum"
            )
            output["loss"] = loss / counted.sum().clamp_min(1.0)
        elif labels is not None:  # the loss of the calibrated scores, not the base model's
            output["loss"] = nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]).float(), _loss_labels(labels, logits), ignore_index=-100
            )
        # rebuilt in the output type's field order: a loss set afterwards came after the logits in
        # to_tuple() and output[0], where every transformers head puts it first
        output = type(output)(**{name: output[name] for name in ("loss", *output.keys()) if name in output})
        return output if return_dict else output.to_tuple()

    forward = _ForwardWithTheBaseInputs()

    def _pass_the_pad_token(self) -> None:
        """Give the base model a pad token set on this model's config, as TRL sets it.

        TRL's ``RewardTrainer`` and ``GRPOTrainer`` set ``model.config.get_text_config().pad_token_id``
        so that a sequence classifier reads the last non-pad token: on a calibrated model that is
        this config, which the base model never reads (a GPT-2 reward model then took the last
        token, a pad, or refused batches of more than one).
        """
        pad = getattr(self.config, "pad_token_id", None)
        base = self.model.config.get_text_config()
        if pad is not None and getattr(base, "pad_token_id", None) != pad:
            base.pad_token_id = pad


def _loss_labels(labels, logits: torch.Tensor) -> torch.Tensor:
    """Return ``labels`` as a flat int64 tensor on the logits' device, checked first.

    cross_entropy raises an IndexError (CPU) or a device-side assert (CUDA) on a label out of
    range, a RuntimeError on float labels, and a cast would wrap a uint64 2**64 - 100 to -100
    (silently ignored).
    """
    if not isinstance(labels, torch.Tensor):
        try:
            labels = torch.as_tensor(labels)
        except (TypeError, ValueError, RuntimeError, OverflowError) as exc:
            raise ValueError(f"`labels` could not be read as a tensor ({exc})") from exc
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(f"`labels` must be an integer tensor, got {labels.dtype}")
    k = logits.shape[-1]
    rows = logits.numel() // k
    if labels.numel() != rows:  # same leniency as transformers' heads: any shape of that many labels
        raise ValueError(
            f"`labels` has shape {tuple(labels.shape)} but logits of shape {tuple(logits.shape)} need "
            f"{rows} labels, shape {tuple(logits.shape[:-1])}"
        )
    if labels.dtype == getattr(torch, "uint64", None) and labels.numel():
        top = int(labels.cpu().numpy().max())  # torch has no comparison for uint64
        if top > torch.iinfo(torch.int64).max:
            raise ValueError(f"`labels` has the value {top}, which does not fit in int64")
    flat = labels.reshape(-1).to(device=logits.device, dtype=torch.long)
    bad = (flat != -100) & ((flat < 0) | (flat >= k))
    if bad.any():
        i = rest = int(torch.nonzero(bad)[0, 0])
        where = []
        for size in reversed(tuple(labels.shape) or (1,)):  # the position in the labels' own shape
            rest, r = divmod(rest, size)
            where.insert(0, r)
        raise ValueError(
            f"`labels` must lie in [0, {k}) or equal -100; got {int(flat[i])} at position "
            f"{where[0] if len(where) == 1 else tuple(where)}"
        )
    return flat


class CalibratedModelForSequenceClassification(_CalibratedModel):
    """A sequence classifier whose logits are calibrated; ``forward`` returns the base output type.

    Parameters
    ----------
    config : CalibratedConfig
        With ``task="sequence-classification"``; the base model is built from its ``base_config``
        when ``base_model`` is not given (as ``from_pretrained`` does).
    base_model : transformers.PreTrainedModel, optional
        The fine-tuned model to wrap (not copied).

    Raises
    ------
    ValueError
        When the config's task, base config or calibration block is invalid.
    """

    _task = "sequence-classification"


class CalibratedModelForTokenClassification(_CalibratedModel):
    """A token classifier whose logits are calibrated; ``forward`` returns the base output type.

    Parameters
    ----------
    config : CalibratedConfig
        With ``task="token-classification"``; the base model is built from its ``base_config``
        when ``base_model`` is not given (as ``from_pretrained`` does).
    base_model : transformers.PreTrainedModel, optional
        The fine-tuned model to wrap (not copied).

    Raises
    ------
    ValueError
        When the config's task, base config or calibration block is invalid.
    """

    _task = "token-classification"


# save_pretrained copies this file next to the weights and writes `auto_map` into config.json,
# so the Auto classes can load a calibrated model with trust_remote_code=True.
CalibratedConfig.register_for_auto_class()
CalibratedModelForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")
CalibratedModelForTokenClassification.register_for_auto_class("AutoModelForTokenClassification")
