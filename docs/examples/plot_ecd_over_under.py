"""
ECD: a signed calibration metric for over- and under-confidence
===============================================================

ECE is an absolute value: an ECE of 0.1 does not say whether the model is too sure or not sure
enough, and the fix is opposite in the two cases (a temperature above or below 1). The entropic
calibration difference of Sumler et al. 2025, :func:`calibkit.ecd`, is
``mean_i [sum_k p_ik log p_ik - log p_i,y_i]``: the model's expected log-probability of its own
prediction minus the log-probability it gave the truth. It is positive when the model is
over-confident and negative when it is under-confident. This example takes one set of
calibrated logits, sharpens them (``T < 1``) and flattens them (``T > 1``), and follows ECD, ECE
and the signed gap ``mean confidence - accuracy`` across the temperatures.
"""

# %%
# Calibrated logits, rescaled
# ---------------------------
# Labels are drawn from ``softmax(z)``, so the model ``softmax(z)`` is calibrated; the model
# ``softmax(z / T)`` has the same predictions (the same accuracy) for every ``T`` but is
# over-confident for ``T < 1`` and under-confident for ``T > 1``.
import matplotlib.pyplot as plt
import numpy as np

import calibkit


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


rng = np.random.default_rng(0)
n, k = 20_000, 5
z = rng.normal(size=(n, k)) * 1.5
z[np.arange(n), rng.integers(0, k, n)] += rng.gamma(2.0, 1.0, n)
labels = (softmax(z).cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)

# %%
# Metrics across temperatures
# ---------------------------
# For each ``T`` one :func:`calibkit.calibration_report` call on the logits ``z / T``
# (``from_logits=True``) gives ECD, ECE, ESCE (the signed ECE, ``accuracy - confidence`` per
# bin: negative when over-confident) and the overconfidence OF of the fuzzy-binning paper
# (:func:`calibkit.overconfidence`, the mean confidence of the wrong predictions). The signed
# gap ``mean confidence - accuracy`` is computed with numpy.
temperatures = np.geomspace(0.4, 2.5, 15)
rows = []
for t in temperatures:
    r = calibkit.calibration_report(z / t, labels, from_logits=True, metrics=["ecd", "ece", "esce", "overconfidence"])
    gap = softmax(z / t).max(axis=1).mean() - r["accuracy"]
    rows.append((t, r["ecd"], r["ece"], r["esce"], r["overconfidence"], gap, r["accuracy"]))
rows = np.array(rows)

print("    T      ECD      ECE     ESCE       OF  conf-acc  accuracy")
for t, ecd, ece, esce, of, gap, acc in rows:
    print(f"{t:5.2f}  {ecd:+.4f}  {ece:.4f}  {esce:+.4f}  {of:.4f}  {gap:+.4f}    {acc:.4f}")

# %%
# Reading the table: the accuracy does not change with ``T``. ECD is positive for every
# ``T < 1`` and negative for every ``T > 1``, with the same sign as ``confidence - accuracy``
# (and the opposite sign of ESCE, whose convention is ``accuracy - confidence``); at ``T = 1``
# it is within sampling noise of 0. ECE is near 0 at ``T = 1`` and grows on both sides: from
# ECE alone one cannot tell ``T = 0.6`` from ``T = 1.6``. OF rises steadily as the model
# sharpens but has no zero point: even a calibrated model's wrong predictions have some
# confidence, so OF says "more or less confident than another model", not "over- or
# under-confident".
signs_agree = np.all(np.sign(rows[:, 1]) == np.sign(rows[:, 5]))
print(f"sign(ECD) == sign(confidence - accuracy) at every T: {signs_agree}")
at_one = calibkit.ecd(z, labels, from_logits=True)
print(f"ECD of the calibrated model (T = 1): {at_one:+.5f}")

# %%
# Per-bin breakdown
# -----------------
# ``return_bins=True`` gives the per-bin mean ECD (as in the entropic paper's tables), here on
# 10 bins of the top-label confidence for an over-confident (``T = 0.5``) and an
# under-confident (``T = 2``) version: the sign holds bin by bin.
for t in [0.5, 2.0]:
    value, bins = calibkit.ecd(z / t, labels, from_logits=True, return_bins=True, n_bins=10)
    filled = bins["count"] > 0
    print(f"T = {t}: ECD = {value:+.4f}; per-bin ECD of the non-empty bins:", np.round(bins["ecd"][filled], 3).tolist())

# %%
# ECD and ECE against the temperature
# -----------------------------------
fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
ax.axhline(0, color="k", lw=0.8)
ax.axvline(1, color="0.6", ls=":", lw=1)
ax.plot(rows[:, 0], rows[:, 1], "o-", label="ECD (signed)")
ax.plot(rows[:, 0], rows[:, 2], "s-", label="ECE")
ax.plot(rows[:, 0], rows[:, 5], "^--", label="mean confidence - accuracy")
ax.set_xscale("log")
ax.set_xticks([0.4, 0.6, 1, 1.6, 2.5], ["0.4", "0.6", "1", "1.6", "2.5"])
ax.set_xticks([], minor=True)
ax.set_xlabel("temperature T applied to calibrated logits")
ax.set_ylabel("metric value")
ax.text(0.62, 0.97, "T < 1: over-confident", ha="center", va="top", transform=ax.get_xaxis_transform(), fontsize=9)
ax.text(1.6, 0.97, "T > 1: under-confident", ha="center", va="top", transform=ax.get_xaxis_transform(), fontsize=9)
ax.set_title("ECD is signed, ECE is not")
ax.legend(loc="lower left")
plt.show()
