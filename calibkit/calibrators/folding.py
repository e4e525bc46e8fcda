"""Folding an affine calibration into the classifier: a plain model of the base architecture, no custom code.

:func:`fold_into_classifier` rewrites the last linear layer (:func:`classifier_layer` finds it)
of a classifier calibrated by TS, WTS, VS or MS, or divides a causal LM's head by its temperature.
"""

from __future__ import annotations

import copy

import numpy as np

from calibkit.calibrators.modeling_calibkit import AFFINE_METHODS, CalibrationHead

__all__ = ["classifier_layer", "fold_into_classifier"]


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
