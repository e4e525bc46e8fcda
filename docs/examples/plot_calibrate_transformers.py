"""
Calibrating a transformers classifier
=====================================

:func:`calibkit.calibrators.calibrate` wraps a fine-tuned ``*ForSequenceClassification`` model
with a calibrator fitted on its validation logits and returns a ``PreTrainedModel`` whose
``logits`` are calibrated: it saves with ``save_pretrained``, reloads with
``AutoModelForSequenceClassification.from_pretrained(..., trust_remote_code=True)`` (also where
calibkit is not installed), and pipelines use it as any other model.
:func:`~calibkit.calibrators.fold_into_classifier` goes one step further for affine calibrators
(TS, WTS, VS, MS): it rewrites the last linear layer so that a plain model of the base
architecture gives the calibrated logits, with no custom code at all. This example runs the
whole path on a tiny randomly initialised BERT, so it needs no download.
"""

# %%
# A tiny BERT classifier and synthetic data
# -----------------------------------------
# A 2-layer BERT with a hidden size of 32 and 3 labels, built from its config (random weights).
# A random model outputs logits near 0; to stand in for a fine-tuned, over-confident model we
# scale up its classifier layer, so that its logits spread over a few units. Inputs are random
# token ids. The labels are synthetic: drawn from ``softmax(logits / 2)``, i.e. the truth is the
# model's own ranking at temperature 2, so the model is over-confident and temperature scaling
# should find ``T`` close to 2.
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from transformers import AutoModelForSequenceClassification, BertConfig, BertForSequenceClassification

import calibkit
from calibkit.calibrators import TemperatureScaling, calibrate, fold_into_classifier
from calibkit.plots import ReliabilityDiagram

torch.manual_seed(0)
rng = np.random.default_rng(0)
config = BertConfig(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37, vocab_size=100, num_labels=3
)
model = BertForSequenceClassification(config).eval()
with torch.no_grad():
    model.classifier.weight.mul_(150.0)  # a "fine-tuned" head: confident logits


def logits_of(m, input_ids):
    """The model's logits for a batch of token ids (one forward pass, no gradients), as numpy."""
    with torch.no_grad():
        return m(input_ids=input_ids).logits.numpy()


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


n_val, n_test, length = 4_000, 4_000, 16
val_ids = torch.as_tensor(rng.integers(1, 100, (n_val, length)))
test_ids = torch.as_tensor(rng.integers(1, 100, (n_test, length)))
val_logits, test_logits = logits_of(model, val_ids), logits_of(model, test_ids)
true_temperature = 2.0
val_labels = (softmax(val_logits / true_temperature).cumsum(1) > rng.random((n_val, 1))).argmax(1)
test_labels = (softmax(test_logits / true_temperature).cumsum(1) > rng.random((n_test, 1))).argmax(1)
print("validation logits:", val_logits.shape, " label counts:", np.bincount(val_labels).tolist())
print(f"test accuracy: {np.mean(test_logits.argmax(1) == test_labels):.4f}")
print(f"test ECE before calibration: {calibkit.ece(test_logits, test_labels, from_logits=True):.4f}")

# %%
# Calibrating the model
# ---------------------
# ``calibrate(model, method="ts", logits=..., labels=...)`` fits temperature scaling on the
# validation logits and wraps the model (the model itself, not a copy). A fitted calibrator
# can be passed instead: ``calibrate(model, TemperatureScaling().fit(val_logits, val_labels))``.
# The fitted parameters, and the metrics before and after on the validation data, are stored in
# the config's ``calibration`` block (and in the model card written by ``save_pretrained``).
calibrated = calibrate(model, method="ts", logits=val_logits, labels=val_labels)
block = calibrated.config.calibration
temperature = block["temperature"]
print(type(calibrated).__name__, "method:", block["method"], f"T = {temperature:.4f}")
before, after = block["metrics"]["before"], block["metrics"]["after"]
print(f"validation ECE before/after: {before['ece']:.4f} / {after['ece']:.4f}")
print(f"validation NLL before/after: {before['nll']:.4f} / {after['nll']:.4f}")

same = TemperatureScaling().fit(val_logits, val_labels)
print(f"TemperatureScaling().fit gives the same T: {same.temperature_:.4f}")

# %%
# The calibrated model's logits are the base model's divided by ``T``: it runs the base model
# and passes its logits through a calibration head.
cal_logits = logits_of(calibrated, test_ids)
print(f"max |calibrated logits - logits / T| = {np.abs(cal_logits - test_logits / temperature).max():.2e}")
print(f"test ECE after calibration: {calibkit.ece(cal_logits, test_labels, from_logits=True):.4f}")
print(f"same predictions: {np.array_equal(cal_logits.argmax(1), test_logits.argmax(1))}")

# %%
# Saving, reloading, folding
# --------------------------
# ``save_pretrained`` writes the weights, a ``config.json`` holding the ``calibration`` block,
# a model card (``README.md``) and ``modeling_calibkit.py``, the code that
# ``trust_remote_code=True`` loads where calibkit is not installed. (Here calibkit is imported,
# and it registers its classes with the ``Auto`` classes, so they are used directly.) Everything
# goes to a temporary directory that is removed at the end.
#
# ``fold_into_classifier`` turns the TS calibration into a plain ``BertForSequenceClassification``
# whose classifier layer is divided by ``T``: it saves and loads like any BERT, without
# ``trust_remote_code``. Its logits equal the calibrated ones up to float32 rounding.
with tempfile.TemporaryDirectory() as tmp:
    calibrated.save_pretrained(f"{tmp}/calibrated")
    print("saved files:", sorted(p.name for p in Path(f"{tmp}/calibrated").iterdir()))
    reloaded = AutoModelForSequenceClassification.from_pretrained(f"{tmp}/calibrated", trust_remote_code=True).eval()
    reloaded_logits = logits_of(reloaded, test_ids)
    print(
        f"reloaded: {type(reloaded).__name__}; logits equal the calibrated ones: "
        f"{np.array_equal(reloaded_logits, cal_logits)}"
    )

    folded = fold_into_classifier(calibrated)
    folded.save_pretrained(f"{tmp}/folded")
    plain = AutoModelForSequenceClassification.from_pretrained(f"{tmp}/folded").eval()
    plain_logits = logits_of(plain, test_ids)
    print(f"folded: {type(plain).__name__}; max |folded - calibrated| = {np.abs(plain_logits - cal_logits).max():.2e}")

# %%
# Reliability before and after
# ----------------------------
# On the test inputs, the base model's diagram lies below the diagonal (over-confident); the
# calibrated model's follows it.
fig, axes = plt.subplots(1, 2, figsize=(9, 4.2), sharey=True, layout="constrained")
for ax, (name, z) in zip(axes, [("base model", test_logits), (f"TS-calibrated (T = {temperature:.2f})", cal_logits)]):
    d = ReliabilityDiagram.from_predictions(z, test_labels, from_logits=True, ax=ax, label=name)
    ax.set_title(f"{name}: test ECE = {d.ece:.3f}")
    ax.legend(loc="upper left", fontsize=8)
plt.show()
