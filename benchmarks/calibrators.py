"""Speed, accuracy and memory of calibkit's temperature fits against the usual recipes, same logits.

    python benchmarks/calibrators.py            # 1M x 4 and 2M x 66 float32 logits, medians of 3
    python benchmarks/calibrators.py --quick    # 200k x 4 and 200k x 66, one run

The data has a known temperature (labels drawn from softmax(z / 2)). Contenders: calibkit's
TS, WTS and RD-TS (nll rule); torch L-BFGS on T with a strong-Wolfe line search (the
reference of the issue's target: TS and WTS at most 0.2x its time); the common recipe
(L-BFGS, lr 0.01, max_iter 50, no line search); scipy's bounded scalar search on the float64
NLL (``--scipy``, slow). Prints seconds, the ratio to L-BFGS, the fitted T and its relative
error against the exact optimum, and the peak memory each fit adds as a fraction of the logits.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import median_time, peak_rss_above_now  # noqa: E402


def make(n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """float32 logits and labels drawn from softmax(logits / 2), in chunks to bound memory."""
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((n, k), dtype=np.float32) * 3
    labels = np.empty(n, dtype=np.int64)
    for start in range(0, n, 250_000):
        z = logits[start : start + 250_000] / 2
        p = np.exp(z - z.max(axis=1, keepdims=True))
        cdf = np.cumsum(p, axis=1)
        labels[start : start + len(z)] = (cdf > rng.random((len(z), 1), dtype=np.float32) * cdf[:, -1:]).argmax(1)
    return logits, labels


def lbfgs_temperature(logits, labels, *, strong_wolfe: bool) -> float:
    import torch

    z, y = torch.from_numpy(logits), torch.from_numpy(labels)
    t = torch.ones(1, requires_grad=True)
    if strong_wolfe:
        opt = torch.optim.LBFGS([t], lr=1.0, max_iter=100, line_search_fn="strong_wolfe")
    else:  # the recipe found in many calibration repositories
        opt = torch.optim.LBFGS([t], lr=0.01, max_iter=50)

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(z / t, y)
        loss.backward()
        return loss

    opt.step(closure)
    return float(t.detach())


def scipy_temperature(logits, labels) -> float:
    from scipy.optimize import minimize_scalar
    from scipy.special import log_softmax

    z = logits.astype(np.float64)
    rows = np.arange(len(labels))
    res = minimize_scalar(
        lambda t: -np.mean(log_softmax(z / t, axis=1)[rows, labels]), bounds=(0.05, 20), method="bounded"
    )
    return float(res.x)


def run_shape(n: int, k: int, repeats: int, with_scipy: bool, with_recipe: bool = True) -> None:
    import torch

    from calibkit.calibrators import RegionDependentTemperatureScaling, TemperatureScaling, WeightedTemperatureScaling

    torch.set_num_threads(2)
    logits, labels = make(n, k)
    size_mb = logits.nbytes / 2**20
    exact = TemperatureScaling().fit(logits, labels).temperature_  # also compiles the kernel
    contenders = {
        "calibkit TS": lambda: TemperatureScaling().fit(logits, labels).temperature_,
        "calibkit WTS": lambda: WeightedTemperatureScaling().fit(logits, labels).temperature_,
        "calibkit RD-TS (nll)": lambda: RegionDependentTemperatureScaling(rule="nll").fit(logits, labels).slope_,
        "torch LBFGS strong-Wolfe": lambda: lbfgs_temperature(logits, labels, strong_wolfe=True),
        "torch LBFGS lr=0.01 x50": lambda: lbfgs_temperature(logits, labels, strong_wolfe=False),
    }
    if not with_recipe:
        del contenders["torch LBFGS lr=0.01 x50"]
    if with_scipy:
        contenders["scipy bounded (float64)"] = lambda: scipy_temperature(logits, labels)
    print(f"\n## {n:,} x {k} float32 logits ({size_mb:.0f} MB), true T = 2, exact optimum T = {exact:.6f}\n")
    print("| fit | seconds | x LBFGS strong-Wolfe | result | rel. error of T | peak added / logits |")
    print("|---|---|---|---|---|---|")
    results = {}
    for name, fn in contenders.items():
        seconds = median_time(fn, repeats)
        value = fn()
        peak = peak_rss_above_now(fn)
        results[name] = (seconds, value, peak)
    reference = results["torch LBFGS strong-Wolfe"][0]
    for name, (seconds, value, peak) in results.items():
        error = "" if "RD-TS" in name or "WTS" in name else f"{abs(value - exact) / exact:.1e}"
        label = f"m = {value:.4f}" if "RD-TS" in name else f"T = {value:.5f}"
        print(f"| {name} | {seconds:.3f} | {seconds / reference:.3f} | {label} | {error} | {peak / size_mb:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes, one repeat")
    parser.add_argument("--scipy", action="store_true", help="also time scipy's bounded search (slow)")
    parser.add_argument("--no-recipe", action="store_true", help="skip the lr=0.01 recipe (~2 min a run at 2M x 66)")
    args = parser.parse_args()
    shapes = [(200_000, 4), (200_000, 66)] if args.quick else [(1_000_000, 4), (2_000_000, 66)]
    for n, k in shapes:
        run_shape(n, k, 1 if args.quick else 3, args.scipy, not args.no_recipe)


if __name__ == "__main__":
    main()
