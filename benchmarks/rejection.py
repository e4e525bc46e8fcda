"""Speed and agreement of calibkit's PRR against LM-Polygraph 0.7.0's, and the Monte-Carlo error of its baseline.

    python benchmarks/rejection.py                  # 1,000 and 10,000 answers, medians of 3 rounds
    python benchmarks/rejection.py --sizes 1000 --repeats 5

LM-Polygraph's PRR (``UEManager.eval_ue``): ``PredictionRejectionArea`` of the estimator, of the
oracle, and of 1,000 shuffles (``get_random_scores``) for the random baseline. calibkit's
``rejection_metrics`` gives PRR with the random baseline in closed form (the mean quality), and
every other rejection metric of the same sort (PRR@50%, ROC AUC, PR AUC, AURC, AUGRC, risk at
coverage, coverage at risk); ``rejection_intervals`` adds 1,000 bootstrap replicates. Printed:
each median time, the ratio to LM-Polygraph's per round, and the PRR each gives (their difference
is the shuffles' Monte-Carlo error). LM-Polygraph is installed ``--no-deps`` (.ci/run); its metric
modules are loaded alone, as ``tests/data/rejection_references/make.py`` loads them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "data" / "rejection_references"))
from _common import interleaved_times  # noqa: E402
from make import _load  # noqa: E402


def run_size(n: int, repeats: int) -> None:
    """Time the contenders on ``n`` answers with a ROUGE-like quality (a function, so lambdas bind locals)."""
    from calibkit.metrics.bootstrap import rejection_intervals
    from calibkit.metrics.rejection import rejection_metrics

    ue = _load("lm-polygraph", "lm_polygraph_ue.ue_metric", "lm_polygraph/ue_metrics/ue_metric.py")
    pra = _load("lm-polygraph", "lm_polygraph_ue.pred_rej_area", "lm_polygraph/ue_metrics/pred_rej_area.py")
    rng = np.random.default_rng(n)
    confidence = rng.random(n)
    quality = np.clip(0.6 * confidence + 0.5 * rng.random(n) - 0.1, 0.0, 1.0)

    def lm_polygraph() -> float:
        metric = pra.PredictionRejectionArea()
        value, oracle = metric(-confidence, quality), metric(-quality, quality)
        return float(ue.normalize_metric(value, oracle, ue.get_random_scores(metric, quality)))

    values = {
        "LM-Polygraph PRR": lm_polygraph(),
        "calibkit, every metric": rejection_metrics(confidence, quality)["prr"],
    }
    contenders = {
        "LM-Polygraph PRR": lm_polygraph,
        "calibkit, every metric": lambda: rejection_metrics(confidence, quality),
        "calibkit, + 1,000 replicates": lambda: rejection_intervals(confidence, quality, bootstrap=1000),
    }
    times = interleaved_times(contenders, repeats)
    print(f"N = {n:,}: PRR (LM-Polygraph, 1,000 shuffles) {values['LM-Polygraph PRR']:.6f}, "
          f"(calibkit, exact baseline) {values['calibkit, every metric']:.6f}")  # fmt: skip
    for name, rounds in times.items():
        ratio = statistics.median(t / r for t, r in zip(rounds, times["LM-Polygraph PRR"]))
        print(f"  {name:30s} {statistics.median(rounds):8.4f} s  {ratio:6.3f}x LM-Polygraph's time")


def main() -> None:
    """Run every size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for n in args.sizes:
        run_size(n, args.repeats)


if __name__ == "__main__":
    main()
