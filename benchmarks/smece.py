"""Speed and agreement of calibkit's smooth ECE against the authors' relplot 1.0.3, on the same arrays.

    python benchmarks/smece.py              # N = 10k, 1M, 10M, medians of 5 rounds
    python benchmarks/smece.py --sizes 10000 1000000 --repeats 3

Binary problems, predictions ``f`` uniform on [0, 1]: outcomes drawn from ``f**1.5`` (over-confident:
a wide bandwidth, every step of the search on one grid) and from ``f`` (calibrated: a narrow
bandwidth, whose grid grows as it narrows, so the search fills several grids). Contenders, round-robin in each round:
``relplot.smECE(f, y)``, ``calibkit.smece(f, y)`` (the public face: input checks, the rows, the
search) and ``calibkit.metrics.smooth.smece_from_rows(f, y)`` (the computation alone). Printed: each
median time, the median of the per-round ratios to relplot (as the machine's speed drifts), and
the largest absolute difference of the values (and whether the bandwidths are equal).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import interleaved_times  # noqa: E402


def run_size(n: int, repeats: int, power: float) -> None:
    """Time the contenders on one size and print the ratios (a function, so lambdas bind locals)."""
    import relplot

    import calibkit
    from calibkit.metrics.smooth import smece_from_rows

    rng = np.random.default_rng(n)
    f = rng.uniform(size=n)
    y = (rng.uniform(size=n) < f**power).astype(np.float64)
    labels = y.astype(np.int64)
    calibkit.smece(f[:100], labels[:100])  # compile the input checks' kernels outside the rounds
    values = {
        "relplot": relplot.smECE(f, y, return_width=True),
        "calibkit.smece": calibkit.smece(f, labels, return_bandwidth=True),
        "smece_from_rows": smece_from_rows(f, y),
    }
    contenders = {
        "relplot": lambda: relplot.smECE(f, y),
        "calibkit.smece": lambda: calibkit.smece(f, labels),
        "smece_from_rows": lambda: smece_from_rows(f, y),
    }
    times = interleaved_times(contenders, repeats)
    ref_value, ref_sigma = values["relplot"]
    kind = "calibrated" if power == 1 else "over-confident"
    print(f"N = {n:,}, {kind}: smECE {ref_value:.6f} at sigma {ref_sigma}")
    for name, rounds in times.items():
        ratio = statistics.median(t / r for t, r in zip(rounds, times["relplot"]))
        value, sigma = values[name]
        print(
            f"  {name:16s} {statistics.median(rounds):8.4f} s  {ratio:5.2f}x relplot's time  "
            f"|diff| {abs(float(value) - float(ref_value)):.1e}  same bandwidth: {sigma == ref_sigma}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000, 10_000_000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for n in args.sizes:
        for power in (1.5, 1.0):
            run_size(n, args.repeats, power)


if __name__ == "__main__":
    main()
