"""Metrics on tensors that live on a GPU: calibkit's torch engine against torchmetrics, same tensors.

    python benchmarks/gpu.py                       # 10M x 4, 2M x 66, 100M x 4 (float32 logits), medians of 5
    python benchmarks/gpu.py --shapes 1000000x4    # one shape
    python benchmarks/gpu.py --device cpu --shapes 200000x4   # the same code path on the CPU (a smoke run)

For each shape: ECE from probabilities (calibkit ``ece`` and torchmetrics'
``multiclass_calibration_error``, both on the CUDA tensors), calibkit's ``calibration_report``
with every metric, the streaming accumulator's ``update`` (its sums stay on the device), and
the host path for contrast (a copy to the host, then the compiled kernels). The reference of
exactness is calibkit on a float64 host copy; torchmetrics sums in float32. Ratios are to
torchmetrics' ECE of the same round (round-robin rounds, median of the per-round ratios).
Needs a CUDA device for the figures the README quotes; CI never runs it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def make(n: int, k: int, device: str, seed: int = 0):
    import torch

    g = torch.Generator(device=device).manual_seed(seed)
    logits = torch.randn((n, k), generator=g, device=device, dtype=torch.float32) * 3
    probs = torch.softmax(logits, dim=1)
    labels = torch.randint(0, k, (n,), generator=g, device=device)
    return probs, logits, labels


def timed(fn, device: str) -> float:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start


def run_shape(n: int, k: int, repeats: int, device: str) -> None:
    import torch
    from torchmetrics.functional.classification import multiclass_calibration_error

    import calibkit
    from calibkit.metrics.backends import use_backend

    probs, logits, labels = make(n, k, device)
    reference = calibkit.ece(probs.double().cpu().numpy(), labels.cpu().numpy())  # float64 on the host
    contenders = {
        "torchmetrics ECE": lambda: multiclass_calibration_error(probs, labels, num_classes=k, n_bins=15, norm="l1"),
        "calibkit ece": lambda: calibkit.ece(probs, labels),
        "calibkit calibration_report (all metrics), logits": lambda: calibkit.calibration_report(
            logits, labels, from_logits=True
        ),
        "calibkit accumulator update (sums stay on the device)": lambda: calibkit.CalibrationAccumulator(
            from_logits=True
        ).update(logits, labels),
    }
    if not device.startswith("cuda"):  # on CPU tensors "auto" picks the kernels: time the torch engine too

        def torch_ece():
            with use_backend("torch"):
                return calibkit.ece(probs, labels)

        contenders["calibkit ece, torch engine"] = torch_ece
    if n * k <= 40_000_000:
        contenders["calibkit ece, host path (copy + kernels)"] = lambda: calibkit.ece(
            probs.cpu().numpy(), labels.cpu().numpy()
        )
    for fn in contenders.values():  # warm up: CUDA context, kernels, caches
        fn()
    times = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            times[name].append(timed(fn, device))
    base = times["torchmetrics ECE"]
    tm = float(multiclass_calibration_error(probs, labels, num_classes=k, n_bins=15, norm="l1"))
    ours = calibkit.ece(probs, labels)
    print(f"\n## {n:,} x {k} float32 on {device}")
    print("| call | seconds (median) | ratio to torchmetrics ECE |\n|---|---|---|")
    for name, ts in times.items():
        ratio = statistics.median(t / b for t, b in zip(ts, base))
        print(f"| {name} | {statistics.median(ts):.4f} | {ratio:.2f}x |")
    print(
        f"ECE, float64 host reference {reference:.12f}: calibkit on {device} off by {abs(ours - reference):.1e}, "
        f"torchmetrics off by {abs(tm - reference):.1e}"
    )
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="10000000x4,2000000x66,100000000x4")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("no CUDA device here: run on a GPU machine, or pass --device cpu for a smoke run")
    print(
        f"torch {torch.__version__}, device {torch.cuda.get_device_name() if args.device.startswith('cuda') else 'cpu'}"
    )
    for shape in args.shapes.split(","):
        n, k = (int(v) for v in shape.lower().split("x"))
        run_shape(n, k, args.repeats, args.device)


if __name__ == "__main__":
    main()
