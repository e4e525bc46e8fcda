"""Coverage of the corrected pass rates' 95% intervals: a simulated judge with known error rates.

    python benchmarks/judges_coverage.py                  # 1,000 repeats, 5/10/25% labelled, two judges
    python benchmarks/judges_coverage.py --repeats 200    # quicker
    python benchmarks/judges_coverage.py --judgy-repeats 0   # without judgy's (slow, unseeded) interval

Each repeat draws ``N = 2,000`` answers whose true pass (1) has probability ``theta = 0.7``; the
judge passes a true pass with probability TPR and a true fail with probability 1 - TNR; people
label a random 5%, 10% or 25% of the answers (their label is the truth). Two judges: the issue's
(TPR 0.9, TNR 0.8) and a lenient one (TPR 0.95, TNR 0.6). Every estimator is computed for all
repeats at once (``calibkit.metrics.judges`` takes stacks of data sets), so 1,000 repeats take
seconds. Printed per judge and labelled share, the coverage of ``theta`` by each 95% interval and
the interval's mean width:

* ``naive``: the judge's rate over the N answers with its CLT interval (the judge taken as truth);
* ``human``: the labelled answers' mean alone (CLT, as ppi-python's ``classical_mean_ci``);
* ``ppi++``: :func:`calibkit.metrics.judges.ppi_mean` (power-tuned lambda), and beside it the
  largest difference of its bounds from ppi-python 0.2.3's ``ppi_mean_ci`` on the same numbers (a
  loop over the repeats) and the ratio of the mean widths;
* ``rg-boot``: :func:`calibkit.metrics.judges.rogan_gladen_from_counts` with the seeded bootstrap of
  both the labelled table and the unlabelled passes (2,000 replicates, the default);
* ``rg-delta``: the same with the delta method;
* ``judgy``: judgy 0.1.0's ``estimate_success_rate`` on the first ``--judgy-repeats`` repeats
  (1,000 bootstrap iterations; its interval resamples the labelled set only; numpy's global
  state seeded here for a reproducible table).

The acceptance band of the issue is printed: PPI++ and Rogan-Gladen (bootstrap) cover in [0.93, 0.97].
With 1,000 repeats, a coverage's Monte Carlo standard error is sqrt(0.95 * 0.05 / 1000) = 0.007.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from calibkit.metrics import judges as J  # noqa: E402

JUDGES = {"TPR 0.9, TNR 0.8": (0.9, 0.8), "lenient: TPR 0.95, TNR 0.6": (0.95, 0.6)}
SHARES = (0.05, 0.10, 0.25)
THETA = 0.7
TOTAL = 2000
BAND = (0.93, 0.97)


def simulate(repeats: int, tpr: float, tnr: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Truth and judge verdicts, ``(repeats, TOTAL)`` each; the first columns are the labelled ones."""
    rng = np.random.default_rng(seed)
    truth = (rng.random((repeats, TOTAL)) < THETA).astype(np.float64)
    draw = rng.random((repeats, TOTAL))
    verdict = np.where(truth == 1, draw < tpr, draw >= tnr).astype(np.float64)
    return truth, verdict  # i.i.d. columns: the first n are a random labelled slice


def covered(out: dict, mask: np.ndarray | None = None) -> tuple[float, float]:
    lower, upper = np.asarray(out["ci_lower"]), np.asarray(out["ci_upper"])
    keep = ~np.isnan(lower) if mask is None else mask
    return float(np.mean((lower[keep] <= THETA) & (THETA <= upper[keep]))), float(np.mean(upper[keep] - lower[keep]))


def against_ppi_python(y: np.ndarray, f: np.ndarray, u: np.ndarray, ours: dict) -> tuple[float, float]:
    """Largest bound difference from ppi-python's ``ppi_mean_ci``, and its mean width over ours."""
    try:
        from ppi_py import ppi_mean_ci
    except ImportError:
        return float("nan"), float("nan")
    bounds = np.array([np.ravel(ppi_mean_ci(y[r], f[r], u[r], alpha=0.05)) for r in range(len(y))])
    diff = max(np.abs(bounds[:, 0] - ours["ci_lower"]).max(), np.abs(bounds[:, 1] - ours["ci_upper"]).max())
    return float(diff), float(np.mean(bounds[:, 1] - bounds[:, 0]) / np.mean(ours["ci_upper"] - ours["ci_lower"]))


def judgy_coverage(y: np.ndarray, f: np.ndarray, u: np.ndarray, repeats: int) -> tuple[float, float, int]:
    try:
        import judgy
    except ImportError:
        return float("nan"), float("nan"), 0
    np.random.seed(0)  # judgy draws from numpy's global state
    hits, widths, done = 0, [], 0
    for r in range(min(repeats, len(y))):
        try:
            _, low, high = judgy.estimate_success_rate(y[r], f[r], u[r], bootstrap_iterations=1000)
        except (ValueError, RuntimeError):
            continue
        done += 1
        hits += low <= THETA <= high
        widths.append(high - low)
    return (hits / done if done else float("nan")), (float(np.mean(widths)) if widths else float("nan")), done


def one_setting(truth, verdict, share: float, judgy_repeats: int) -> list[tuple[str, float, float, str]]:
    n = int(round(share * TOTAL))
    y, f, u = truth[:, :n], verdict[:, :n], verdict[:, n:]
    rows = [("naive", *covered(J.classical_mean(verdict)), ""), ("human", *covered(J.classical_mean(y)), "")]
    ppi = J.ppi_mean(y, f, u)
    diff, ratio = against_ppi_python(y, f, u, ppi)
    rows.append(("ppi++", *covered(ppi), f"ppi-python: max |bound diff| {diff:.1e}, width ratio {ratio:.4f}"))
    counts, passes = J.confusion_counts(f, y), u.sum(-1)
    for method in ("bootstrap", "delta"):
        rg = J.rogan_gladen_from_counts(counts, passes, u.shape[1], method=method)
        undefined = int(np.isnan(rg["estimate"]).sum())
        note = f"{undefined} repeats undefined (TPR + TNR <= 1)" if undefined else ""
        rows.append((f"rg-{method[:5]}", *covered(rg), note))
    if judgy_repeats:
        cov, width, done = judgy_coverage(y, f, u, judgy_repeats)
        rows.append(("judgy", cov, width, f"{done} repeats, 1,000 bootstrap iterations"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=1000)
    parser.add_argument("--judgy-repeats", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    failed = []
    print(f"true rate {THETA}, {TOTAL:,} answers, {args.repeats:,} repeats; 95% intervals: coverage, mean width")
    print("| judge | labelled | interval | coverage | mean width | note |")
    print("|---|---|---|---|---|---|")
    for j, (name, (tpr, tnr)) in enumerate(JUDGES.items()):
        truth, verdict = simulate(args.repeats, tpr, tnr, args.seed + j)
        for share in SHARES:
            for label, cov, width, note in one_setting(truth, verdict, share, args.judgy_repeats):
                in_band = BAND[0] <= cov <= BAND[1]
                if label in ("ppi++", "rg-boots") and not in_band:
                    failed.append(f"{name}, {share:.0%}, {label}: {cov:.3f}")
                print(f"| {name} | {share:.0%} ({int(share * TOTAL)}) | {label} | {cov:.3f} | {width:.3f} | {note} |")
    print(f"\n{time.perf_counter() - start:.1f} s")
    if failed:
        print(f"outside [{BAND[0]}, {BAND[1]}]: " + "; ".join(failed))
        return 1
    print(f"PPI++ and Rogan-Gladen (bootstrap) cover in [{BAND[0]}, {BAND[1]}] in every setting")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
