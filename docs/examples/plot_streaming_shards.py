"""
Streaming predictions from shards on disk
=========================================

Every calibkit metric is a function of per-bin sums that add across batches, so an evaluation
that does not fit in memory can be read one piece at a time. This example writes a few
prediction shards (Parquet and ``.npz``) into a temporary folder, computes every metric over
them with :func:`calibkit.io.shards.stream_report` (the Python side of ``calibkit report
--predictions 'DIR_OR_GLOB'``), and checks that the streamed report equals
:func:`calibkit.calibration_report` on the concatenated arrays. It then shows the same idea
inside your own evaluation loop, with a :class:`calibkit.CalibrationAccumulator`, and draws the
plots from the accumulated sums alone.
"""

# %%
# Writing the shards
# ------------------
# A shard has the schema of a single prediction file: a ``labels`` column and a ``logits`` (or
# ``probs``) column holding one vector per row (sequence classification). Parquet shards are
# written with pyarrow; an ``.npz`` shard holds the arrays ``logits`` and ``labels``. Every
# shard must hold the same kind (logits here: calibkit reads the column name and applies the
# softmax) and the same number of classes; the shards may have any sizes and formats. They
# go to a temporary folder that is removed at the end of the example.
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

import calibkit
from calibkit.io.shards import find_shards, stream_report
from calibkit.plots import RegionPlot, ReliabilityDiagram

rng = np.random.default_rng(0)
k = 4
sizes = [25_000, 40_000, 10_000, 25_000]
parts = []
for size in sizes:
    z = rng.normal(size=(size, k)).astype(np.float32) * 2
    z[np.arange(size), rng.integers(0, k, size)] += 2.0
    # The labels follow the logits at temperature 1.6: the model is over-confident.
    p_true = np.exp(z / 1.6) / np.exp(z / 1.6).sum(axis=1, keepdims=True)
    y = (p_true.cumsum(axis=1) > rng.random((size, 1))).argmax(axis=1)
    parts.append((z, y))

tmp = tempfile.TemporaryDirectory()
folder = Path(tmp.name) / "preds"
folder.mkdir()
for i, (z, y) in enumerate(parts[:3]):
    logits = pa.FixedSizeListArray.from_arrays(pa.array(z.ravel()), k)  # one float32 vector per row
    pq.write_table(pa.table({"logits": logits, "labels": pa.array(y)}), folder / f"part-{i}.parquet")
np.savez(folder / "part-3.npz", logits=parts[3][0], labels=parts[3][1])

files, skipped = find_shards(str(folder))
print("shards found:", [f.name for f in files], " skipped:", skipped)

# %%
# Streaming every metric
# ----------------------
# ``stream_report`` reads the shards in sorted order, a record batch at a time (``batch_bytes``
# of uncompressed data, 8 MiB by default; an ``.npz`` shard is read whole), with a tqdm progress
# bar per pass on stderr (``progress=False`` hides it). One pass gives every metric but ACE;
# ACE's equal-mass ranges need the order of all the values, so it reads the shards again until
# ACE is exact (``exact_ace=False`` reads once and reports ACE with an error bound). Settings
# such as ``n_bins`` or ``theta`` are keywords with the names :func:`calibkit.calibration_report`
# uses; whether the shards hold probabilities or logits is read from the column name.
streamed = stream_report(str(folder), progress=True)
print(f"passes: {streamed['passes']}, shards: {streamed['shards']}, samples: {int(streamed['n'])}")
for name in ["ece", "ace", "ace_error_bound", "cece", "rbece", "fce", "ecd", "nll", "accuracy"]:
    print(f"  {name:16s} {streamed[name]:.6f}")

# %%
# The same numbers as the one-shot report
# ---------------------------------------
# Concatenating the shards in the same order (sorted names) and calling
# :func:`calibkit.calibration_report` on the logits (``from_logits=True``) must give every
# metric to rounding (about 1e-12).
all_logits = np.concatenate([z for z, _ in parts])
all_labels = np.concatenate([y for _, y in parts])
one_shot = calibkit.calibration_report(all_logits, all_labels, from_logits=True)
differences = {key: float(np.nanmax(np.abs(np.asarray(one_shot[key]) - np.asarray(streamed[key])))) for key in one_shot}
worst = max(differences, key=differences.get)
print(f"{len(differences)} keys compared; largest difference {differences[worst]:.2e} ({worst})")
print("every value within 1e-12:", all(d <= 1e-12 for d in differences.values()))

# %%
# Streaming inside your own loop
# ------------------------------
# The same sums are available to any evaluation loop: ``CalibrationAccumulator.update`` adds a
# batch (memory O(bins x classes) whatever the number of samples), ``merge`` adds another
# accumulator (another process, another shard), ``compute`` gives the report. Here the batches
# come from the in-memory arrays, with a tqdm bar over them; two accumulators stand for two
# processes that evaluate half of the batches each.
batch = 5_000
starts = range(0, len(all_labels), batch)
first, second = calibkit.CalibrationAccumulator(from_logits=True), calibkit.CalibrationAccumulator(from_logits=True)
for i, start in enumerate(tqdm(starts, desc="batches", unit="batch")):
    (first if i % 2 == 0 else second).update(all_logits[start : start + batch], all_labels[start : start + batch])
acc = first.merge(second)
streamed_loop = acc.compute()
print(f"ECE:  accumulator {streamed_loop['ece']:.6f}   one-shot {one_shot['ece']:.6f}")
print(f"CECE: accumulator {streamed_loop['cece']:.6f}   one-shot {one_shot['cece']:.6f}")
print(
    f"ACE:  accumulator {streamed_loop['ace']:.6f} (error bound {streamed_loop['ace_error_bound']:.2e})"
    f"   one-shot {one_shot['ace']:.6f}"
)

# %%
# The accumulator's ACE comes from one pass: it splits the fine buckets that an equal-mass range
# boundary cuts in proportion, and ``ace_error_bound`` is a guaranteed bound on its distance to
# the exact ACE. Every other metric is exact.
#
# Plots from the sums
# -------------------
# The accumulated statistics hold the per-bin tables that the plots need, so the reliability
# diagram and the RBECE region plot are drawn without the predictions.
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
ReliabilityDiagram.from_statistics(acc.statistics, n_bins=15, ax=ax1, label="all shards")
ax1.set_title(f"Reliability (ECE = {streamed_loop['ece']:.3f})")
ax1.legend(loc="upper left", fontsize=8)
RegionPlot.from_statistics(
    acc.statistics, rbece_bins=20, theta=40, ax=ax2, title=f"Regions (RBECE = {streamed_loop['rbece']:.3f})"
)
tmp.cleanup()
plt.show()
