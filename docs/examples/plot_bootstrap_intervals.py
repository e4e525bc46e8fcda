"""
Bootstrap intervals as the evaluation set grows
===============================================

A calibration metric computed on a few hundred test examples is itself a noisy estimate: two
models whose ECEs differ by 0.01 may not differ at all. :func:`calibkit.metrics.bootstrap.bootstrap_intervals`
gives percentile bootstrap intervals for every metric (and for each class's ECE) in one pass
over the data: the rows are cut into blocks, each block's per-bin sums are computed once, and
each bootstrap replicate is a Poisson-weighted sum of those sums, so no metric is re-run on
resampled data. This example computes the intervals of ECE, CECE, SCE and the Brier score on
growing subsets of one synthetic test set and shows how they shrink.
"""

# %%
# A synthetic over-confident model
# --------------------------------
# 16,000 test predictions of a 4-class model whose labels follow its logits at temperature
# 1.6 (so the model is over-confident). The evaluation sets are the first ``n`` rows, for ``n``
# from 250 to 16,000.
import matplotlib.pyplot as plt
import numpy as np

import calibkit
from calibkit.metrics.bootstrap import bootstrap_intervals


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


rng = np.random.default_rng(0)
n_max, k = 16_000, 4
z = rng.normal(size=(n_max, k)) * 2.0
z[np.arange(n_max), rng.integers(0, k, n_max)] += 2.0
labels = (softmax(z / 1.6).cumsum(axis=1) > rng.random((n_max, 1))).argmax(axis=1)
probs = softmax(z)
sizes = [250, 500, 1_000, 2_000, 4_000, 8_000, 16_000]
metrics = ["ece", "cece", "sce", "brier"]

# %%
# Intervals for each evaluation size
# ----------------------------------
# ``bootstrap_intervals(probs, labels, bootstrap=..., metrics=..., seed=...)`` returns
# ``{"intervals": {metric: (low, high)}, ...}``; the level is 95% by default (``confidence``).
# The point estimates come from :func:`calibkit.calibration_report` on the same rows.
estimates, intervals = {}, {}
for n in sizes:
    estimates[n] = calibkit.calibration_report(probs[:n], labels[:n], metrics=metrics)
    intervals[n] = bootstrap_intervals(probs[:n], labels[:n], bootstrap=400, metrics=metrics, seed=0)["intervals"]

print("     n" + "".join(f"  {m:>23s}" for m in metrics))
for n in sizes:
    cells = [f"{estimates[n][m]:.3f} [{intervals[n][m][0]:.3f}, {intervals[n][m][1]:.3f}]" for m in metrics]
    print(f"{n:6d}" + "".join(f"  {c:>23s}" for c in cells))

print()
print("interval width:")
for m in metrics:
    widths = [intervals[n][m][1] - intervals[n][m][0] for n in sizes]
    print(
        f"  {m:6s}",
        " ".join(f"{w:.4f}" for w in widths),
        f"  (x{widths[0] / widths[-1]:.1f} narrower at {sizes[-1]:,})",
    )

# %%
# The widths shrink roughly as ``1/sqrt(n)``: 64 times more data gives intervals about 6 to 8
# times narrower (the printed ratios; ``sqrt(64) = 8``). At small ``n`` the intervals are wide enough to hold
# very different models: with 250 examples the ECE interval spans several hundredths.
#
# The class-wise metrics CECE and SCE show a second effect: their point estimates are higher
# on the small sets than on the large ones. A binned calibration error is biased upwards by
# sampling noise (an absolute gap estimated from a few samples is never negative), and these
# metrics average gaps over per-class bins that hold fewer samples still. A bootstrap replicate
# adds its own noise on top, so the percentile intervals are shifted upwards too: at the
# smallest sizes the CECE and SCE intervals lie entirely above their point estimates (the
# first rows of the table). Percentile intervals measure the spread, they do not correct the
# bias: compare such metrics only across evaluation sets of similar size.
#
# Per-class intervals
# -------------------
# With ``subset_ece`` among the metrics (as by default, ``metrics=None``), the result also holds
# ``"subset_ece": (low, high)``, the interval of each class's ECE.
full = bootstrap_intervals(probs, labels, bootstrap=400, seed=0)
low, high = full["subset_ece"]
point = calibkit.subset_ece(probs, labels)
for c in range(k):
    print(f"class {c}: ECE {point[c]:.4f} [{low[c]:.4f}, {high[c]:.4f}]")
print(f"{full['n_boot']} replicates over {full['n_blocks']} blocks of rows; level {full['confidence']:.0%}")

# %%
# Rows are resampled one by one up to ``max_blocks`` rows (4,000 by default) and as long as the
# blocks' statistics fit a memory bound; beyond, in random blocks of several rows (here 16,000
# rows in the printed number of blocks), which are i.i.d. units too.
#
# The intervals against the evaluation size
# -----------------------------------------
fig, axes = plt.subplots(1, len(metrics), figsize=(13, 3.4), layout="constrained")
for ax, m in zip(axes, metrics):
    point = np.array([estimates[n][m] for n in sizes])
    lo = np.array([intervals[n][m][0] for n in sizes])
    hi = np.array([intervals[n][m][1] for n in sizes])
    ax.fill_between(sizes, lo, hi, alpha=0.3, label="95% interval")
    ax.vlines(sizes, lo, hi, color="tab:blue", lw=1)
    ax.plot(sizes, point, "ko-", ms=4, label="estimate")
    ax.set_xscale("log")
    ax.set_title(m.upper() if m != "brier" else "Brier")
    ax.set_xlabel("evaluation samples")
axes[0].set_ylabel("metric value")
axes[0].legend(fontsize=8)
plt.show()
