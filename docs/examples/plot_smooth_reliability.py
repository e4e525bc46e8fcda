"""
Smooth reliability diagram: calibration without a bin count
===========================================================

A binned reliability diagram and the binned ECE depend on a choice the data do not make: the
number of bins. With few bins the gaps of different confidences are averaged together; with many,
each bin holds a handful of predictions and its gap is mostly noise, which the ECE adds up. The
smooth ECE (Blasiok & Nakkiran, ICLR 2024) replaces the bins by a Gaussian kernel whose width is
chosen by the data (the fixed point ``sigma = smECE_sigma``), so there is no bin count to choose.
This example draws the binned diagram of :class:`calibkit.plots.ReliabilityDiagram` and
the smooth one of :class:`calibkit.plots.SmoothReliabilityDiagram` for the same
over-confident predictions, and prints the ECE at several bin counts against one
:func:`calibkit.smece`. It matters when you report one calibration number for a model evaluated
on a thousand examples and would like it not to hinge on ``n_bins``.
"""

# %%
# Synthetic predictions
# ---------------------
# 1,000 predictions of a 4-class model, as a small test set gives. The labels are drawn from
# ``softmax(z)``, so a model that outputs ``softmax(z)`` is calibrated; the over-confident model
# outputs ``softmax(2 z)``: the same predicted classes, with probabilities pushed towards 0 and 1.
import matplotlib.pyplot as plt
import numpy as np

import calibkit
from calibkit.plots import ReliabilityDiagram, SmoothReliabilityDiagram


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


rng = np.random.default_rng(0)
n, k = 1_000, 4
z = rng.normal(size=(n, k))
z[np.arange(n), rng.integers(0, k, n)] += rng.gamma(2.0, 0.8, n)  # one class stands out, by a random margin
calibrated = softmax(z)
labels = (calibrated.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)  # y ~ softmax(z)
overconfident = softmax(2.0 * z)
print(f"accuracy {np.mean(overconfident.argmax(1) == labels):.3f}, mean confidence: "
      f"calibrated {calibrated.max(1).mean():.3f}, over-confident {overconfident.max(1).mean():.3f}")  # fmt: skip

# %%
# ECE at several bin counts, one smooth ECE
# -----------------------------------------
# :func:`calibkit.ece` takes ``n_bins``; :func:`calibkit.smece` takes no bin count
# (``return_bandwidth=True`` also returns the bandwidth it settled on).
bin_counts = [5, 10, 15, 20, 30, 50, 100]
print(f"{'':15s}" + "".join(f"  M={m:<4d}" for m in bin_counts) + "   smECE  (sigma)")
smooth = {}
for name, probs in [("calibrated", calibrated), ("over-confident", overconfident)]:
    eces = [calibkit.ece(probs, labels, n_bins=m) for m in bin_counts]
    smooth[name] = calibkit.smece(probs, labels, return_bandwidth=True)
    value, sigma = smooth[name]
    print(f"{name:15s}" + "".join(f"  {e:.4f}" for e in eces) + f"  {value:.4f}  ({sigma:.4f})")

# %%
# The calibrated model's true error is 0, so every value on its line is estimation error: the
# binned ECE grows several-fold from 5 to 100 bins, as the bins get fewer predictions each and
# their noisy gaps stop cancelling, while the smooth ECE is one small number. The over-confident
# model's error is large and the binned ECE agrees with the smooth one at a few bins, then also
# creeps up with ``M``. Which ``M`` is "the" ECE is a convention (15 in most papers); the smooth
# ECE has no such argument: its bandwidth (here about equal to the error, by its definition) is
# the resolution the data support.
#
# The two diagrams
# ----------------
# The binned diagram draws one point per bin (15 here); the smooth diagram draws the
# kernel-smoothed accuracy against the confidence at smECE's bandwidth, the density of the
# confidences shaded along the bottom, and smECE in the corner. Both show the over-confident model
# below the diagonal; the smooth curve does it without a choice of bins, and where the confidences
# are rare (the shading is thin) it leans on its neighbours instead of drawing a noisy bin.
fig, axes = plt.subplots(1, 2, figsize=(10, 4.6), layout="constrained")
binned = ReliabilityDiagram.from_predictions(overconfident, labels, n_bins=15, ax=axes[0], color="tab:red")
axes[0].set_title(f"binned, 15 bins: ECE {binned.ece:.3f}")
curve = SmoothReliabilityDiagram.from_predictions(overconfident, labels, ax=axes[1])
axes[1].set_title(f"smooth: smECE {curve.smece:.3f}")
axes[0].legend(loc="upper left", fontsize=8)
axes[1].legend(loc="lower right", fontsize=8)  # smECE and its bandwidth are written in the upper left

# %%
# The numbers drawn are those of :func:`calibkit.smooth_reliability` (``grid``, ``accuracy``,
# ``density``, ``smece``, ``bandwidth``), and the display's smECE is :func:`calibkit.smece`'s.
points = calibkit.smooth_reliability(overconfident, labels)
print(f"display smECE {curve.smece:.4f} = calibkit.smece {smooth['over-confident'][0]:.4f}")
mid = np.searchsorted(points["grid"], 0.8)
print(f"at confidence {points['grid'][mid]:.2f} the smoothed accuracy is {points['accuracy'][mid]:.3f}")

# %%
# ECE against the bin count
# -------------------------
# The same table as a figure: the binned ECE of each model as ``M`` grows, and each model's one
# smooth ECE as a horizontal line. The smooth ECE needs every row at once (its bandwidth depends
# on all of them), so it is computed by the functions, ``calibration_report(...,
# metrics=["smece"])`` and the ``smece`` ``evaluate`` module; the streaming accumulator, which
# keeps only per-bin sums, offers the binned ECE.
fig, ax = plt.subplots(figsize=(6.5, 4), layout="constrained")
models = {"calibrated": (calibrated, "tab:blue"), "over-confident": (overconfident, "tab:red")}
for name, (probs, color) in models.items():
    eces = [calibkit.ece(probs, labels, n_bins=m) for m in bin_counts]
    ax.plot(bin_counts, eces, "o-", color=color, label=f"{name}: binned ECE")
    ax.axhline(smooth[name][0], color=color, ls="--", label=f"{name}: smECE {smooth[name][0]:.3f}")
ax.set_xscale("log")
ax.set_xticks(bin_counts, [str(m) for m in bin_counts])
ax.set_xlabel("number of bins M")
ax.set_ylabel("calibration error")
ax.set_title("1,000 predictions: binned ECE moves with M, smECE has no M")
ax.legend(fontsize=8)
plt.show()
