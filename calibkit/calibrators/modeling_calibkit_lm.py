"""A calibrated causal LM: its next-token logits divided by a temperature, in ``generate()`` too.

Self-contained as :mod:`calibkit.calibrators.modeling_calibkit` is (torch, transformers and that
file only, by a relative import): ``save_pretrained`` copies both files next to the weights, so
``AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)`` loads a calibrated causal
LM on a machine without calibkit.
"""

from __future__ import annotations

from typing import Any

from torch import nn
from transformers import PreTrainedModel

from .modeling_calibkit import CAUSAL_LM_METHODS, CalibratedConfig, _CalibratedModel, _ForwardWithTheBaseInputs


def is_causal_lm(model: Any) -> bool:
    """Tell whether ``model`` is a causal LM by its class: ``*ForCausalLM``, or ``*LMHeadModel`` (GPT-2's older name).

    Parameters
    ----------
    model : object

    Returns
    -------
    bool
    """
    name = type(model).__name__
    return name.endswith("ForCausalLM") or name.endswith("LMHeadModel")


class CalibratedModelForCausalLM(_CalibratedModel):
    """A causal LM whose next-token logits are divided by a temperature; ``generate()`` samples from them.

    The calibration is applied to the output of the LM head (``get_output_embeddings()``) by a
    forward hook that exists only while this model runs, so that everything the base model does
    with its logits sees the calibrated ones: its loss (the shifted cross-entropy), and
    ``generate()``'s processors and sampling (the ``scores`` it returns are the base scores / T,
    before any generation temperature or top-p of its own). The base model is not changed: called
    directly, it gives its own logits. Only a temperature (TS or WTS) calibrates a vocabulary.

    Parameters
    ----------
    config : CalibratedConfig
        With ``task="causal-lm"``; the base model is built from its ``base_config`` when
        ``base_model`` is not given (as ``from_pretrained`` does).
    base_model : transformers.PreTrainedModel, optional
        The causal LM to wrap (not copied).

    Raises
    ------
    ValueError
        When the config's task, base config or calibration block is invalid, the method is not a
        temperature, or the base model caps its logits after the head (``final_logit_softcapping``:
        a temperature on the head's output would not divide the logits it returns).
    """

    _task = "causal-lm"

    def __init__(self, config: CalibratedConfig, base_model: PreTrainedModel | None = None) -> None:
        super().__init__(config, base_model)
        method = self.calibration_head.method
        if method not in CAUSAL_LM_METHODS:
            raise ValueError(
                f"a causal LM is calibrated by a temperature ({', '.join(CAUSAL_LM_METHODS)}); got method {method!r}"
            )
        if getattr(self.model.config, "final_logit_softcapping", None) is not None:
            raise ValueError(
                "the base model caps its logits after the LM head (final_logit_softcapping): a temperature on the "
                "head's output would not divide the logits it returns; calibrating it is not supported"
            )
        if self.model.get_output_embeddings() is None:
            raise ValueError(f"{type(self.model).__name__} has no LM head (get_output_embeddings() is None)")
        self.generation_config = getattr(self.model, "generation_config", None)

    def _calibrated(self):
        """Register the calibration on the LM head's output for one call (the caller removes the hook)."""
        head = self.model.get_output_embeddings()
        return head.register_forward_hook(lambda module, inputs, output: self.calibration_head(output))

    def _calibrated_forward(self, *args, **kwargs):
        """Run the base model with its LM head's output calibrated: logits, loss (with ``labels``) and all.

        Parameters
        ----------
        *args, **kwargs
            The base model's inputs (``input_ids``, ``attention_mask``, ``labels``, ...).

        Returns
        -------
        transformers.utils.ModelOutput or tuple
            The base model's output, its ``logits`` calibrated and its ``loss`` that of the
            calibrated logits.
        """
        hook = self._calibrated()
        try:
            return self.model(*args, **kwargs)
        finally:
            hook.remove()

    forward = _ForwardWithTheBaseInputs()

    def can_generate(self) -> bool:
        """Tell that this model generates: the base model runs with the calibrated head.

        Returns
        -------
        bool
            True.
        """
        return True

    def generate(self, *args, **kwargs):
        """Generate with the base model, its next-token logits calibrated at every step.

        Parameters
        ----------
        *args, **kwargs
            As the base model's ``generate`` (``do_sample=True`` samples from the calibrated
            distribution; ``output_scores=True`` returns the base scores / T).

        Returns
        -------
        object
            What the base model's ``generate`` returns.
        """
        hook = self._calibrated()
        try:
            return self.model.generate(*args, **kwargs)
        finally:
            hook.remove()

    def get_output_embeddings(self) -> nn.Module:
        """Return the base model's LM head (uncalibrated weights; the calibration is applied to its output).

        Returns
        -------
        torch.nn.Module
        """
        return self.model.get_output_embeddings()


# save_pretrained copies this file (and modeling_calibkit.py, which it imports) next to the weights.
CalibratedModelForCausalLM.register_for_auto_class("AutoModelForCausalLM")
