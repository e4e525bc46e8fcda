"""The preference report against the binary report: the cost of judging a reward model's pairs.

    python benchmarks/preferences.py                     # 10M pairs against 10M binary rows
    python benchmarks/preferences.py --pairs 1000000 --subsets 4

A pair's numbers are the binary report's numbers of its top-label reading (confidence in the
preferred answer against whether it is the chosen one, SPEC.md "Preference calibration"), so
the preference report should cost about what the binary report costs on as many rows. Timed in
interleaved rounds in one run (``_common.interleaved_times``), medians and the median ratio of
each round, against the default binary report (``calibration_report(p, y)``: every metric of its
default set, in one pass) and, beside it, against the binary report of the same numbers (ECE,
Brier, NLL and the exact AURC, whose rows' risk curve sorts with a permutation where the
preference report sorts the distinct confidences alone). Target (issue 64, item 8): the
preference report within 2x of the default binary report.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import interleaved_times  # noqa: E402

import calibkit  # noqa: E402
from calibkit.lm.preferences import Preferences, preference_report  # noqa: E402
from calibkit.metrics.preferences import preference_metrics  # noqa: E402


def make(pairs: int, subsets: int, seed: int = 0) -> tuple[Preferences, np.ndarray, np.ndarray]:
    """Pairs of rewards (over-confident by 2, with length differences), and binary rows of as many."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0.8, 1.5, pairs)
    wins = rng.random(pairs) < 1.0 / (1.0 + np.exp(-z))
    chosen = np.where(wins, z, -z) * 2.0
    names = np.array([f"subset-{s}" for s in range(subsets)], dtype=object)
    prefs = Preferences(
        ids=np.arange(pairs).astype(str).astype(object) if pairs <= 2_000_000 else np.zeros(pairs, dtype=object),
        subset=names[rng.integers(0, subsets, pairs)] if subsets > 1 else np.full(pairs, "all", dtype=object),
        chosen=chosen,
        rejected=np.zeros(pairs),
        length_chosen=rng.integers(10, 400, pairs).astype(np.float64),
        length_rejected=rng.integers(10, 400, pairs).astype(np.float64),
    )
    p = rng.random(pairs)
    y = (rng.random(pairs) < p).astype(np.int64)
    return prefs, p, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=10_000_000)
    parser.add_argument("--subsets", type=int, default=1, help="subsets of the pairs (each judged, then pooled)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    prefs, p, y = make(args.pairs, args.subsets)
    margins = prefs.margins
    calibkit.calibration_report(p[:1000], y[:1000])  # compile or load the kernels
    preference_metrics(margins[:1000])
    contenders = {
        "binary report (every metric)": lambda: calibkit.calibration_report(p, y),
        "binary report (ece, brier, nll, aurc)": lambda: calibkit.calibration_report(
            p, y, metrics=["ece", "brier", "nll", "aurc"]
        ),
        "preference_metrics": lambda: preference_metrics(margins),
        "preference_metrics with lengths": lambda: preference_metrics(
            margins, length_chosen=prefs.length_chosen, length_rejected=prefs.length_rejected
        ),
        "preference_report": lambda: preference_report(prefs),
    }
    times = interleaved_times(contenders, args.repeats)
    base = times["binary report (every metric)"]
    print(f"{args.pairs:,} pairs ({args.subsets} subset{'s' * (args.subsets != 1)}), {args.repeats} rounds")
    for name, spent in times.items():
        ratio = statistics.median(t / b for t, b in zip(spent, base))
        print(f"  {name:<40} {statistics.median(spent):7.2f} s   {ratio:5.2f}x the binary report")
    ratio = statistics.median(t / b for t, b in zip(times["preference_report"], base))
    print(f"preference report / binary report: {ratio:.2f} (target <= 2: {'met' if ratio <= 2 else 'NOT met'})")


if __name__ == "__main__":
    main()
