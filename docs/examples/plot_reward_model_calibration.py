"""
Calibrating a reward model's preferences
========================================

A reward model trained with the Bradley-Terry loss (TRL's ``RewardTrainer``) gives the
probability ``sigmoid(r_a - r_b)`` that answer ``a`` is preferred to ``b``. Best-of-n sampling
and RLHF read that probability and its scale, yet training logs only accuracy and the mean
margin: nothing says whether a 0.9 preference is right nine times in ten. This example judges
synthetic over-confident preferences with :func:`calibkit.lm.preferences.preference_metrics`,
fits the pairwise temperature ``T`` on half of the pairs, draws the reliability diagram of the
other half before and after ``T``, and puts ``T`` into a reward model's head with
:func:`calibkit.calibrators.calibrate` (a tiny randomly initialised BERT, no download). The same
steps on a real MiniLM reward model trained with TRL are ``calibkit demo --task rewards``.
"""

# %%
# Over-confident preferences
# --------------------------
# Every label is "chosen wins": a pair has one number, its margin ``r_chosen - r_rejected``, and
# the model ranks it right when the margin is positive. We draw a latent margin ``z`` per pair,
# let the chosen answer win with probability ``sigmoid(z)``, and give the "model" three times
# that margin: it ranks the pairs as well as the truth allows but with preferences that are too
# sure, as a reward model that fits its training pairs often is. ``T = 3`` would calibrate it.
import matplotlib.pyplot as plt
import numpy as np
import torch
from transformers import BertConfig, BertForSequenceClassification

from calibkit.calibrators import calibrate
from calibkit.lm.preferences import fit_preference_temperature, preference_metrics
from calibkit.metrics.preferences import top_label_reading
from calibkit.plots import ReliabilityDiagram

rng = np.random.default_rng(0)
n = 4_000
z = rng.normal(0.8, 1.5, n)
first_wins = rng.random(n) < 1 / (1 + np.exp(-z))
margins = np.where(first_wins, z, -z) * 3.0  # reward of the chosen answer minus the rejected one's

before = preference_metrics(margins)
print(f"accuracy {before['accuracy']:.3f}, mean confidence {before['mean_confidence']:.3f}")
print(f"ECE {before['ece']:.4f}, Brier {before['brier']:.4f}, NLL {before['nll']:.4f}")

# %%
# Each pair is read in the orientation of the model's preference: its confidence is
# ``sigmoid(|margin|)`` in the answer it prefers, right when that is the chosen one, so the order
# in which a pair lists its answers changes no number. The mean confidence is far above the
# accuracy: over-confident. The NLL is the Bradley-Terry loss itself.
#
# The pairwise temperature
# ------------------------
# :func:`~calibkit.lm.preferences.fit_preference_temperature` minimises the NLL of
# ``sigmoid(margin / T)`` over the pairs. We fit it on one half and judge it on the other.
fit, held = margins[: n // 2], margins[n // 2 :]
t = fit_preference_temperature(fit)
as_is, scaled = preference_metrics(held), preference_metrics(held, temperature=t)
print(f"T = {t:.3f} (the truth: 3)")
for name in ("accuracy", "ece", "brier", "nll"):
    print(f"{name:8s} T = 1: {as_is[name]:.4f}   T = {t:.2f}: {scaled[name]:.4f}")

# %%
# The accuracy is unchanged (dividing every margin by ``T > 0`` keeps its sign); ECE, Brier and
# NLL fall. Where every pair is ranked right no temperature minimises the NLL (it falls as
# ``T -> 0``): the fit refuses with a message rather than return 0.
#
# The reliability diagram, before and after
# -----------------------------------------
fig, axes = plt.subplots(1, 2, figsize=(8, 3.8), sharey=True)
for ax, (name, temperature) in zip(axes, (("T = 1", 1.0), (f"T = {t:.2f}", t))):
    confidence, right = top_label_reading(held, temperature)
    ReliabilityDiagram.from_predictions(confidence, right.astype(np.int64), n_bins=10, ax=ax)
    ax.set_title(f"{name}: {n - n // 2} held-out pairs")
    ax.set_xlabel("confidence in the preferred answer")
axes[0].set_ylabel("share where it is the chosen one")
fig.tight_layout()
plt.show()

# %%
# Before ``T`` the points lie below the diagonal: at a confidence of 0.9 the preferred answer is
# the chosen one far less often than nine times in ten. After ``T`` they follow it.
#
# A calibrated reward head
# ------------------------
# :func:`calibkit.calibrators.calibrate` takes a reward model (a ``*ForSequenceClassification``
# with ``num_labels=1``) and ``T`` and returns the model with a head that divides the reward by
# ``T``: every ranking is the same, ``sigmoid(r_a - r_b)`` of the new rewards is calibrated,
# and ``save_pretrained`` writes a folder that loads with ``trust_remote_code=True`` where
# calibkit is not installed (its card states ``T`` and the numbers given).
torch.manual_seed(0)
config = BertConfig(
    hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37, vocab_size=100, num_labels=1
)
reward_model = BertForSequenceClassification(config).eval()
calibrated = calibrate(reward_model, t).eval()
answers = torch.as_tensor(rng.integers(1, 100, (4, 12)))  # four answers as token ids
with torch.no_grad():
    raw = reward_model(input_ids=answers).logits[:, 0]
    new = calibrated(input_ids=answers).logits[:, 0]
print("rewards      ", np.round(raw.numpy(), 4))
print("calibrated   ", np.round(new.numpy(), 4))
print("reward / T   ", np.round((raw / t).numpy(), 4))
print("same ranking:", bool((raw.argsort() == new.argsort()).all()))

# %%
# With TRL, :class:`calibkit.callbacks.preferences.PreferenceCallback` logs these numbers at
# every evaluation of a ``RewardTrainer`` and fits ``T`` at the end of training; ``calibkit
# preferences --scores FILE --fit`` reads RewardBench's per-sample output and writes the report.
