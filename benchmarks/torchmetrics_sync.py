"""A DDP sync's bytes and an epoch's memory: calibkit's ``CalibrationMetrics`` vs torchmetrics' ``CalibrationError``.

    python benchmarks/torchmetrics_sync.py                 # 1M rows (about a minute on 2 busy cores)
    python benchmarks/torchmetrics_sync.py --rows 100000000  # 100M rows held for real (needs ~1 GB and many minutes)

Both metrics see the same multiclass logits (10 classes, batches of 100,000 rows, float32, as a
model's head gives them). torchmetrics' ``CalibrationError(task="multiclass")`` keeps every row's
confidence and correctness (``dim_zero_cat`` list states) and all-gathers them at a sync;
calibkit's ``CalibrationMetrics`` keeps the accumulator's per-bin sums in one float64 state
(``dist_reduce_fx="sum"``). What a process contributes to a sync is the bytes of its states
(torchmetrics all-gathers each state, so every process then receives world size x that); it is
measured from the states' ``nbytes`` after the epoch. calibkit is measured three ways: the
default metrics (ACE's fine buckets are most of the bytes), the default without ACE, and
``metrics=["ece"]`` (what ``CalibrationError`` computes).

At 100M rows, unless ``--rows`` holds them, torchmetrics' bytes are computed, not held: its
measured bytes per row times 100M (its states grow linearly: one confidence and one correctness a
row). calibkit's state does not grow with the rows (checked here: the same bytes after the first
batch and after the last), so its 100M value is the measured one.

Peak memory is the resident memory one epoch of updates adds at its peak (Linux high-water mark),
each metric in a fresh state, the batches generated inside the epoch for both alike.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _common import peak_rss_above_now  # noqa: E402

from calibkit.metrics.registry import metric_names  # noqa: E402
from calibkit.plugins.torchmetrics import CalibrationMetrics  # noqa: E402

K = 10
BATCH = 100_000
BIG = 100_000_000


def batches(rows: int, seed: int = 0):
    """Logits and labels in batches (the same for every metric: seeded)."""
    gen = torch.Generator().manual_seed(seed)
    for start in range(0, rows, BATCH):
        n = min(BATCH, rows - start)
        logits = torch.randn(n, K, generator=gen) * 2
        yield logits, torch.randint(0, K, (n,), generator=gen)


def state_bytes(metric) -> int:
    """Bytes of a torchmetrics Metric's states (list states: the sum over their tensors)."""
    total = 0
    for value in metric.metric_state.values():
        for tensor in value if isinstance(value, list) else [value]:
            total += tensor.numel() * tensor.element_size()
    return total


def epoch(make, rows: int) -> tuple[object, dict]:
    """One epoch of updates into a fresh metric: the metric, its compute() time and its first batch's bytes."""
    info = {}

    def run():
        metric = make()
        for i, (logits, labels) in enumerate(batches(rows)):
            metric.update(logits, labels)
            if i == 0:
                info["first"] = state_bytes(metric)
        info["metric"] = metric

    start = time.perf_counter()
    info["peak_mb"] = peak_rss_above_now(run)
    info["seconds"] = time.perf_counter() - start
    return info["metric"], info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    torch.set_num_threads(1)  # a shared machine: one thread is stable
    from torchmetrics.classification import MulticlassCalibrationError

    no_ace = [m for m in metric_names(None, streaming=True) if m not in ("ace", "subset_ece")]
    # torchmetrics last: memory it frees may stay with the allocator and hide a later peak
    contenders = {
        "calibkit default metrics": lambda: CalibrationMetrics(from_logits=True),
        "calibkit without ACE": lambda: CalibrationMetrics(no_ace, from_logits=True),
        "calibkit ece only": lambda: CalibrationMetrics(["ece"], from_logits=True),
        "torchmetrics CalibrationError": lambda: MulticlassCalibrationError(num_classes=K, n_bins=15),
    }
    # warm-up: numba kernels compiled before any measurement
    warm = CalibrationMetrics(from_logits=True)
    warm.update(torch.randn(1000, K), torch.randint(0, K, (1000,)))
    warm.compute()

    rows = args.rows
    print(f"{rows:,} rows, {K} classes, batches of {BATCH:,}; bytes = what one process contributes to a sync")
    results = {}
    for name, make in contenders.items():
        metric, info = epoch(make, rows)
        start = time.perf_counter()
        value = metric.compute()
        info["compute_s"] = time.perf_counter() - start
        info["ece"] = float(value["ece"] if isinstance(value, dict) else value)
        info["bytes"] = state_bytes(metric)
        results[name] = info
        del metric, info["metric"]

    tm = results["torchmetrics CalibrationError"]
    per_row = tm["bytes"] / rows
    big_tm = per_row * BIG
    extra_rows = max(BIG - rows, 0)
    columns = (
        "sync bytes",
        "ratio",
        f"at {BIG // 10**6}M",
        "ratio",
        "peak MB",
        "ratio",
        f"at {BIG // 10**6}M",
        "ratio",
    )
    head = f"{'metric':30}" + "".join(f"{c:>14}" if "ratio" not in c else f"{c:>9}" for c in columns)
    head += f"{'epoch s':>9}{'ECE':>9}"
    print(head)
    print("-" * len(head))
    big_tm_peak = tm["peak_mb"] + per_row * extra_rows / 2**20  # its states grow by per_row a row
    for name, info in results.items():
        ours = name != "torchmetrics CalibrationError"
        if ours:
            assert info["bytes"] == info["first"], "calibkit's state grew with the rows"
        at_big = info["bytes"] if ours else big_tm
        peak_big = info["peak_mb"] if ours else big_tm_peak
        cells = (
            f"{info['bytes']:>14,}{tm['bytes'] / info['bytes']:>8.0f}x{at_big:>14,.0f}{big_tm / at_big:>8.0f}x"
            f"{info['peak_mb']:>14.1f}{tm['peak_mb'] / max(info['peak_mb'], 0.1):>8.2f}x"
            f"{peak_big:>14.1f}{big_tm_peak / max(peak_big, 0.1):>8.2f}x"
        )
        print(f"{name:30}{cells}{info['seconds']:>9.2f}{info['ece']:>9.5f}")
    print(
        f"\nratio: torchmetrics' value / this row's. torchmetrics keeps {per_row:.1f} bytes a row; "
        + (
            f"its {BIG // 10**6}M-row bytes are that times {BIG:,} and its {BIG // 10**6}M-row peak the measured "
            f"one plus that times the {extra_rows:,} rows more (computed, not held)"
            if rows < BIG
            else "its 100M-row values were held"
        )
        + "; calibkit's state is the same after the first batch and the last (measured), and its peak is one "
        "batch's working memory, at any row count."
    )
    print(
        "Under DDP every process receives world size x these bytes (torchmetrics all-gathers each "
        "state, then sums calibkit's). ECE: torchmetrics' in float32, calibkit's in float64."
    )


if __name__ == "__main__":
    main()
