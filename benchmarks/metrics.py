"""Speed and memory of calibkit's metrics against torchmetrics, netcal and the machine itself, on the same arrays.

    python benchmarks/metrics.py            # 10M x 4 and 2M x 66, float32, medians of 5 rounds
    python benchmarks/metrics.py --quick    # 1M x 4 and 200k x 66
    python benchmarks/metrics.py --shapes 2000000x66 --no-netcal   # one shape, e.g. to re-run under less load

Every figure is printed in seconds and as a multiple of the floor: one read of the same arrays
(``probs.max()`` and ``labels.max()``, SIMD and memory-bound; ``logits.max()`` for the logit
rows), timed in the same rounds. From logits a softmax also needs an exp per entry: the
logit rows are printed against the read plus numpy's float64 exp of every logit, the
precision calibkit computes in (issue targets: ``ece`` within 3 floors, from logits 3 read
floors plus the exp; the whole report within 20 floors). Then the ratio of each calibkit call
to torchmetrics' single top-label ECE (targets: ``ece`` <= 0.25x, ``calibration_report`` <= 2x),
the peak memory the report adds above the input arrays, and the accuracy (torchmetrics
accumulates in float32). Contenders run round-robin; each ratio to torchmetrics is the median
of its per-round ratios, as the machine's speed drifts.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import interleaved_times, peak_rss_above_now  # noqa: E402


def make(n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    logits = (rng.standard_normal((n, k), dtype=np.float32) * 3).astype(np.float32)
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    labels = rng.integers(0, k, n)
    return probs, logits, labels


def run_shape(n: int, k: int, repeats: int, netcal_ece) -> None:
    """Time every contender on one (N, K) array and print the ratios (a function, so lambdas bind locals)."""
    import torch
    from torchmetrics.functional.classification import multiclass_calibration_error

    import calibkit

    probs, logits, labels = make(n, k)
    tp, tl, ty = torch.from_numpy(probs), torch.from_numpy(logits), torch.from_numpy(labels)
    # warm-up: numba compiles on first use (cached on disk afterwards)
    calibkit.calibration_report(probs[:1000], labels[:1000])
    calibkit.ece(probs[:1000], labels[:1000])
    calibkit.ece(logits[:1000], labels[:1000], from_logits=True)
    calibkit.calibration_report(logits[:1000], labels[:1000], from_logits=True)

    logits64 = logits.astype(np.float64)
    exp_out = np.empty_like(logits64)
    contenders = {
        "floor: probs.max() + labels.max()": lambda: (probs.max(), labels.max()),
        "floor: logits.max() + labels.max()": lambda: (logits.max(), labels.max()),
        "exp of every logit (float64, numpy)": lambda: np.exp(logits64, out=exp_out),
        "torchmetrics ECE (probs)": lambda: multiclass_calibration_error(tp, ty, k, n_bins=15),
        "torchmetrics ECE (logits)": lambda: multiclass_calibration_error(tl, ty, k, n_bins=15),
        "calibkit.ece (probs)": lambda: calibkit.ece(probs, labels),
        "calibkit.ece (logits)": lambda: calibkit.ece(logits, labels, from_logits=True),
        "calibkit.calibration_report (probs)": lambda: calibkit.calibration_report(probs, labels),
        "calibkit.calibration_report (logits)": lambda: calibkit.calibration_report(logits, labels, from_logits=True),
    }
    times = interleaved_times(contenders, repeats)
    if netcal_ece is not None:
        # timed apart, after the rounds: its 2-3 s of numpy temporaries slowed whichever call
        # came next in a round by up to 40% (calibkit.ece at 10M x 4: 0.12 s against 0.08 s)
        times.update(interleaved_times({"netcal ECE (probs)": lambda: netcal_ece.measure(probs, labels)}, repeats))

    print(f"== {n:,} x {k} ==  (median of {repeats} round-robin rounds)")
    median = {name: statistics.median(seconds) for name, seconds in times.items()}
    read = {kind: median[f"floor: {kind}.max() + labels.max()"] for kind in ("probs", "logits")}
    exp = median["exp of every logit (float64, numpy)"]
    print(f"  {'':42s} {'seconds':>8s}  {'x read':>7s}  {'(t - exp) / read':>16s}")
    for name, seconds in median.items():
        kind = "logits" if "logit" in name else "probs"
        line = f"  {name:42s} {seconds:8.3f}  {seconds / read[kind]:7.1f}"
        if kind == "logits" and not name.startswith(("floor", "exp")):
            line += f"  {(seconds - exp) / read[kind]:16.1f}"
        print(line)
    print(
        "  targets: ece (probs) <= 3 x read; ece (logits) (t - exp) / read <= 3; "
        "calibration_report (probs) <= 20 x read"
    )
    print("  ratios, median of the per-round ratios (range over rounds) (target):")
    for label, ours, theirs, target in (
        ("ece / torchmetrics (probs)", "calibkit.ece (probs)", "torchmetrics ECE (probs)", "<= 0.25"),
        ("ece / torchmetrics (logits)", "calibkit.ece (logits)", "torchmetrics ECE (logits)", "<= 0.25"),
        (
            "report / torchmetrics ECE (probs)",
            "calibkit.calibration_report (probs)",
            "torchmetrics ECE (probs)",
            "<= 2",
        ),
        (
            "report / torchmetrics ECE (logits)",
            "calibkit.calibration_report (logits)",
            "torchmetrics ECE (logits)",
            "<= 2",
        ),
    ):
        per_round = [a / b for a, b in zip(times[ours], times[theirs])]  # a ratio per round cancels drift
        print(
            f"    {label:38s} {statistics.median(per_round):6.3f}"
            f"  ({min(per_round):.3f}-{max(per_round):.3f})  ({target})"
        )
    probs_mb, logits_mb = (peak_in_fresh_process(n, k, from_logits) for from_logits in (False, True))
    print(
        f"  peak memory of the report above the inputs (fresh process): probs {probs_mb:.0f} MB, "
        f"logits {logits_mb:.0f} MB (inputs {probs.nbytes / 2**20:.0f} MB)"
    )
    exact = calibkit.ece(probs.astype(np.float64), labels)
    theirs = multiclass_calibration_error(tp, ty, k, n_bins=15).item()
    print(f"  ECE float64 {exact:.8f}; calibkit(float32) - it: {calibkit.ece(probs, labels) - exact:+.1e};")
    print(f"  torchmetrics - it: {theirs - exact:+.1e}\n")


def peak_in_fresh_process(n: int, k: int, from_logits: bool) -> float:
    """MB the report adds at its peak, measured in a new process: in this one, memory that
    earlier calls freed stays resident and is reused, so the high-water mark hardly moves (it
    read 0 MB at 10M x 4 after the timing rounds)."""
    out = subprocess.run(
        [sys.executable, __file__, "--peak-of", f"{n}x{k}", *(["--logits"] if from_logits else [])],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.split()[-1])


def parse_shape(shape: str) -> tuple[int, int]:
    """``"2000000x66"`` -> (2000000, 66)."""
    n, k = (int(v) for v in shape.lower().split("x"))
    return n, k


def _print_peak(shape: str, from_logits: bool) -> None:
    import calibkit

    n, k = parse_shape(shape)
    probs, logits, labels = make(n, k)
    x = logits if from_logits else probs
    del probs, logits
    calibkit.calibration_report(x[:1000], labels[:1000], from_logits=from_logits)  # compile (or load) first
    print(peak_rss_above_now(lambda: calibkit.calibration_report(x, labels, from_logits=from_logits)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10x smaller arrays")
    parser.add_argument("--repeats", type=int, default=5, help="round-robin rounds")
    parser.add_argument("--no-netcal", action="store_true", help="skip netcal (slow to import)")
    parser.add_argument(
        "--shapes", nargs="+", metavar="NxK", help="shapes to run instead of the default two (before --quick scaling)"
    )
    parser.add_argument("--peak-of", metavar="NxK", help=argparse.SUPPRESS)  # internal: one peak measurement
    parser.add_argument("--logits", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peak_of:
        _print_peak(args.peak_of, args.logits)
        return

    import torch

    netcal_ece = None
    if not args.no_netcal:
        try:
            from netcal.metrics import ECE as NetcalECE

            netcal_ece = NetcalECE(bins=15)
        except ImportError:
            print("netcal not installed: skipped (pip install -e '.[bench]')")

    scale = 10 if args.quick else 1
    shapes = [parse_shape(s) for s in args.shapes] if args.shapes else None
    shapes = [(n // scale, k) for n, k in (shapes or [(10_000_000, 4), (2_000_000, 66)])]
    print(f"torch threads: {torch.get_num_threads()}, repeats: {args.repeats}, float32 inputs\n")
    for n, k in shapes:
        run_shape(n, k, args.repeats, netcal_ece)


if __name__ == "__main__":
    main()
