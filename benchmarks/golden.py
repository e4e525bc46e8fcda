"""A golden set for refactors: every public metric and report on fixed inputs, written or checked bit for bit.

    python benchmarks/golden.py --write golden.json   # on the commit before the change
    python benchmarks/golden.py --check golden.json   # after it: every value must be identical

Inputs: sequence, token (with -100), binary and long-row data, probabilities and logits,
float32 and float64, default and unusual settings, values on bin edges, both engines, the
streaming accumulator (with ExactACE) and the bootstrap. Values are compared as float64 bit
patterns (NaN equal to NaN), so "within noise" is not enough.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import calibkit  # noqa: E402
from calibkit.metrics.backends import use_backend  # noqa: E402

FUNCTIONS = [
    "ece", "mce", "ece_l2", "ece_l2_debiased", "ace", "sce", "subset_ece", "cece", "msece", "wsece",
    "ece_variance", "rbece", "fce", "overconfidence", "ecd", "esce", "brier", "nll",
]  # fmt: skip


def softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def inputs():
    rng = np.random.default_rng(2026)
    for k, n in ((4, 3000), (20, 1500), (66, 400)):
        z = rng.normal(size=(n, k)) * 2.5
        y = rng.integers(0, k, n)
        yield f"seq{k}", z, y
    z = rng.normal(size=(300, 7, 5)) * 2
    y = rng.integers(0, 5, (300, 7))
    y[rng.random((300, 7)) < 0.3] = -100
    yield "token5", z, y
    zb = rng.normal(size=2000) * 2
    yield "binary", zb, rng.integers(0, 2, 2000)
    counts = rng.integers(1, 8, size=(1500, 3))
    counts[:, 2] = 15 - counts[:, 0] - counts[:, 1]
    counts = counts[counts[:, 2] > 0]
    yield "edges15", np.log(counts.astype(np.float64)), rng.integers(0, 3, len(counts))


def values(report):
    out = {}
    for key, value in report.items():
        arr = np.asarray(value, dtype=np.float64).reshape(-1)
        out[key] = [int(b) for b in arr.view(np.int64)]
    return out


def collect() -> dict:
    results = {}
    settings = [{}, {"n_bins": 7, "ace_ranges": 4, "sce_bins": 40, "fce_bins": 5, "rbece_bins": 9, "theta": 3}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, z, y in inputs():
            probs = 1 / (1 + np.exp(-z)) if z.ndim == 1 else softmax(z)
            for engine in ("numba", "torch"):
                with use_backend(engine):
                    for dtype in (np.float64, np.float32):
                        for form, x, kw in (("probs", probs, {}), ("logits", z, {"from_logits": True})):
                            x = x.astype(dtype)
                            for s, extra in enumerate(settings):
                                tag = f"{name}/{engine}/{np.dtype(dtype).name}/{form}/s{s}"
                                results[f"{tag}/report"] = values(calibkit.calibration_report(x, y, **kw, **extra))
                            tag = f"{name}/{engine}/{np.dtype(dtype).name}/{form}"
                            for fn in FUNCTIONS:
                                results[f"{tag}/{fn}"] = values({fn: getattr(calibkit, fn)(x, y, **kw)})
                            acc = calibkit.CalibrationAccumulator(**kw)
                            for i in range(0, len(y), 700):
                                acc.update(x[i : i + 700], y[i : i + 700])
                            results[f"{tag}/stream"] = values(acc.compute())
            from calibkit.metrics.bootstrap import bootstrap_intervals

            b = bootstrap_intervals(probs, y, metrics=["ece", "sce", "rbece"], bootstrap=30, seed=1)
            results[f"{name}/bootstrap"] = values(
                {f"{m}_{i}": v for m, iv in b["intervals"].items() for i, v in enumerate(np.ravel(iv))}
            )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path)
    group.add_argument("--check", type=Path)
    args = parser.parse_args()
    results = collect()
    entries = sum(len(v) for v in results.values())
    if args.write:
        args.write.write_text(json.dumps(results))
        print(f"wrote {len(results)} results, {entries} values")
        return
    golden = json.loads(args.check.read_text())
    diff = [
        f"{tag}:{key}"
        for tag in sorted(set(golden) | set(results))
        for key in sorted(set(golden.get(tag, {})) | set(results.get(tag, {})))
        if golden.get(tag, {}).get(key) != results.get(tag, {}).get(key)
    ]
    print(f"{len(results)} results, {entries} values; {len(diff)} differ")
    for line in diff[:40]:
        print("  ", line)
    sys.exit(1 if diff else 0)


if __name__ == "__main__":
    main()
