"""Does a metric's cost grow with the entries or with the vocabulary? The same 3.2M logits, shaped
3,200 x 1,000 (a classifier's look), 200 x 16,000 and 25 x 128,000 (a few tokens of a Llama-3
head), next-token input, each metric of the default next-token report alone and the whole report.

    python benchmarks/vocabulary_cost.py   # prints seconds and the ratio to 3,200 x 1,000

Target (the causal-LM issue): every metric within 2x of its cost at 1,000 classes. ACE, left out
of the default report over a vocabulary (SPEC.md), is timed too, for the record. The plain report
(a classifier's rows, not next-token; issue 55) has the same target: from 2,048 classes on its
default leaves ACE out too (``registry.WIDE_CLASSES``), so it is timed last, whole, beside ACE. Rounds
are interleaved (``_common.interleaved_times``) so that a slow spell of the machine hits every shape.
``--only plain`` times the plain report alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import interleaved_times  # noqa: E402

SHAPES = ((3200, 1000), (200, 16000), (25, 128000))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--only", choices=("next_token", "plain"), help="time one kind of report only")
    args = parser.parse_args()

    from calibkit.metrics import calibration_report
    from calibkit.metrics.registry import NEXT_TOKEN_METRICS

    rng = np.random.default_rng(0)
    data = {}
    for rows, vocab in SHAPES:
        logits = (rng.standard_normal((1, rows, vocab)) * 2.5).astype(np.float32)
        labels = rng.integers(0, vocab, (1, rows))
        data[rows, vocab] = logits, labels

    def call(shape, metrics, next_token=True):
        logits, labels = data[shape]
        if not next_token:  # a classifier's rows and labels
            logits, labels = logits[0], labels[0]

        def run():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # RBECE's empty regions at 25 tokens
                calibration_report(logits, labels, from_logits=True, next_token=next_token, metrics=metrics)

        return run

    rows = {  # name: (metrics, next_token); None: the default report
        **{name: ([name], True) for name in NEXT_TOKEN_METRICS},
        "(default report)": (list(NEXT_TOKEN_METRICS), True),
        "ace": (["ace"], True),
        "(plain report)": (None, False),
        "ace (plain)": (["ace"], False),
    }
    if args.only:
        rows = {name: row for name, row in rows.items() if row[1] == (args.only == "next_token")}
    header = f"{'metric':<18}" + "".join(f"{r:>7} x {v:<8} " for r, v in SHAPES) + "  worst ratio"
    print(header)
    for name, (metrics, next_token) in rows.items():
        contenders = {shape: call(shape, metrics, next_token) for shape in SHAPES}
        for run in contenders.values():
            run()  # compile and warm
        times = interleaved_times(contenders, args.repeats)
        median = {shape: statistics.median(t) for shape, t in times.items()}
        base = median[SHAPES[0]]
        cells = "".join(f"{median[s]:>10.4f} s ({median[s] / base:4.1f}x)" for s in SHAPES)
        print(f"{name:<18}{cells}  {max(median[s] / base for s in SHAPES):.1f}x")


if __name__ == "__main__":
    main()
