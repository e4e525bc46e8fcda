"""
Reliability diagrams: over-confident vs calibrated
==================================================

A reliability diagram bins the predictions by their top-label confidence and plots, for each
bin, the fraction of correct predictions against the bin's confidence: a calibrated classifier
follows the diagonal, an over-confident one falls below it. This example draws the diagrams of
two synthetic 4-class classifiers that make exactly the same predictions (same argmax, same
accuracy) but with different confidences, with :class:`calibkit.plots.ReliabilityDiagram`, and
prints their ECE and MCE. It is the first plot to make when you ask "can I trust the
probabilities of my fine-tuned model?": accuracy alone cannot tell the two models apart.
"""

# %%
# Synthetic predictions
# ---------------------
# We draw "true" logits ``z`` for 20,000 samples and 4 classes and sample each label from
# ``softmax(z)``: a classifier that outputs ``softmax(z)`` is calibrated by construction. The
# over-confident classifier outputs ``softmax(2.5 z)``: the same ranking of the classes (so the
# same predictions and accuracy), but probabilities pushed towards 0 and 1, as fine-tuned
# networks often do (Guo et al. 2017).
import matplotlib.pyplot as plt
import numpy as np

import calibkit
from calibkit.plots import ReliabilityDiagram


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


rng = np.random.default_rng(0)
n, k = 20_000, 4
z = rng.normal(size=(n, k))
z[np.arange(n), rng.integers(0, k, n)] += rng.gamma(2.0, 0.8, n)  # one class stands out, by a random margin
calibrated = softmax(z)
labels = (calibrated.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)  # y ~ softmax(z), vectorised
overconfident = softmax(2.5 * z)

print(f"accuracy, calibrated model:     {np.mean(calibrated.argmax(1) == labels):.4f}")
print(f"accuracy, over-confident model: {np.mean(overconfident.argmax(1) == labels):.4f}")
print(f"mean confidence, calibrated:     {calibrated.max(1).mean():.4f}")
print(f"mean confidence, over-confident: {overconfident.max(1).mean():.4f}")

# %%
# The two accuracies are identical, while the over-confident model's mean confidence is far
# above its accuracy and the calibrated model's is close to it.
#
# ECE and MCE
# -----------
# :func:`calibkit.ece` averages ``|accuracy - confidence|`` over 15 equal-width bins, weighted
# by the bins' sizes; :func:`calibkit.mce` is the largest gap of a non-empty bin. Both take the
# ``(N, K)`` probabilities and the integer labels (``from_logits=True`` would accept the logits).
for name, probs in [("calibrated", calibrated), ("over-confident", overconfident)]:
    print(f"{name:15s} ECE = {calibkit.ece(probs, labels):.4f}   MCE = {calibkit.mce(probs, labels):.4f}")

# %%
# The calibrated model's ECE is small (sampling noise of 20,000 labels), the over-confident
# model's is large. The calibrated model's MCE is not small, though: MCE is the largest gap over
# the non-empty bins however few samples they hold, and the bin that sets it is nearly empty.
_, cal_bins = calibkit.ece(calibrated, labels, return_bins=True)
worst = np.nanargmax(np.abs(cal_bins["gap"]))
print(
    f"calibrated model: largest gap {abs(cal_bins['gap'][worst]):.4f} in bin "
    f"({cal_bins['edges'][worst]:.3f}, {cal_bins['edges'][worst + 1]:.3f}], "
    f"which holds {int(cal_bins['count'][worst])} of {n} samples"
)

# %%
# ``return_bins=True`` returns the table behind the diagram, here the over-confident model's
# five most populated bins: in each, the accuracy lies below the mean confidence (a negative
# ``gap``).
_, bins = calibkit.ece(overconfident, labels, return_bins=True)
top = np.argsort(bins["count"])[::-1][:5]
print(" bin range      count  confidence  accuracy     gap")
for b in sorted(top):
    lo, hi = bins["edges"][b], bins["edges"][b + 1]
    print(
        f"({lo:.3f}, {hi:.3f}]  {int(bins['count'][b]):6d}  {bins['confidence'][b]:10.4f}"
        f"  {bins['accuracy'][b]:8.4f}  {bins['gap'][b]:+.4f}"
    )

# %%
# Drawing the diagrams from predictions
# -------------------------------------
# ``ReliabilityDiagram.from_predictions`` takes the same inputs as :func:`calibkit.ece` and draws
# on the axes it is given. With ``support_ax`` it also draws the number of samples per bin (log
# scale) below the diagram, which shows how much each point can be trusted: the
# over-confident model puts its largest share of predictions, over four in ten, in the last bin.
fig, axes = plt.subplots(
    2, 2, figsize=(9, 5.5), sharex="col", gridspec_kw={"height_ratios": [3, 1]}, layout="constrained"
)
displays = {}
for col, (name, probs, color) in enumerate(
    [("calibrated", calibrated, "tab:blue"), ("over-confident", overconfident, "tab:red")]
):
    displays[name] = ReliabilityDiagram.from_predictions(
        probs, labels, n_bins=15, ax=axes[0, col], support_ax=axes[1, col], color=color, label=name
    )
    axes[0, col].set_title(f"{name}: ECE = {displays[name].ece:.3f}")
    axes[0, col].legend(loc="upper left", fontsize=8)

# %%
# Each display keeps its numbers: ``display.ece`` equals :func:`calibkit.ece` on the same bins,
# and ``count``, ``confidence`` and ``accuracy`` are the per-bin values drawn.
for name, probs in [("calibrated", calibrated), ("over-confident", overconfident)]:
    print(f"{name:15s} display.ece = {displays[name].ece:.4f}  calibkit.ece = {calibkit.ece(probs, labels):.4f}")

# %%
# Drawing from accumulated statistics
# -----------------------------------
# When the predictions are evaluated batch by batch (a streamed evaluation, or several
# processes), a :class:`calibkit.CalibrationAccumulator` keeps only the per-bin sums, and
# ``ReliabilityDiagram.from_statistics`` draws the diagram from them, without the predictions.
# Both curves can share one axes (``diagonal=False`` for the second avoids drawing the diagonal
# twice). The ECE computed from the accumulated sums is the same number as above.
fig, ax = plt.subplots(figsize=(5, 5), layout="constrained")
for i, (name, probs, color) in enumerate(
    [("calibrated", calibrated, "tab:blue"), ("over-confident", overconfident, "tab:red")]
):
    acc = calibkit.CalibrationAccumulator(metrics=["ece", "mce"])
    for start in range(0, n, 5_000):  # four batches of 5,000 rows
        acc.update(probs[start : start + 5_000], labels[start : start + 5_000])
    result = acc.compute()
    print(f"{name:15s} streamed ECE = {result['ece']:.4f}  MCE = {result['mce']:.4f}")
    ReliabilityDiagram.from_statistics(
        acc.statistics, n_bins=15, ax=ax, color=color, label=f"{name} (ECE {result['ece']:.3f})", diagonal=i == 0
    )
ax.set_title("Both models, from accumulated statistics")
ax.legend(loc="upper left", fontsize=8)
plt.show()
