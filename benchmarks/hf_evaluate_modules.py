"""calibkit's `evaluate` modules against the functional core and a plain evaluate-style module.

Run: ``python benchmarks/hf_evaluate_modules.py`` (``--quick`` for smaller data). Every timing is the
best of ``--repeat`` runs, all in the same process, so the ratios hold on a busy machine.
The "plain" module is what a straightforward ``evaluate.Metric`` does: declare a float vector
and an int label per sample and let evaluate encode every row into Arrow, then call the same
core; it is timed once per shape (it takes seconds).

(Not named ``evaluate_modules.py``: run as a script, its folder is ``sys.path[0]`` and the file
would shadow the package ``evaluate_modules`` that evaluate imports its cached scripts from.)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

# evaluate reads its cache locations at import: keep the benchmark out of the user's cache.
_TMP = tempfile.mkdtemp(prefix="calibkit-bench-")
os.environ.setdefault("HF_MODULES_CACHE", str(Path(_TMP) / "modules"))
os.environ["HF_METRICS_CACHE"] = str(Path(_TMP) / "metrics")
os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")

import datasets  # noqa: E402
import evaluate  # noqa: E402

import calibkit  # noqa: E402

evaluate.logging.set_verbosity_error()
warnings.simplefilter("ignore", calibkit.MissingClassWarning)  # the 100-row warm-up misses classes


class PlainCece(evaluate.Metric):
    """A plain evaluate metric: every row goes through Arrow encoding (evaluate's default storage)."""

    def _info(self) -> evaluate.MetricInfo:
        features = datasets.Features(
            {"predictions": datasets.Sequence(datasets.Value("float64")), "references": datasets.Value("int64")}
        )
        return evaluate.MetricInfo(description="plain", citation="", features=features)

    def _compute(self, predictions, references, n_bins: int = 15, from_logits: bool = False) -> dict:
        return {"cece": calibkit.cece(np.asarray(predictions), np.asarray(references), from_logits=from_logits)}


def best(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def make(n: int, k: int, seed: int, dtype: type, logits: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=(n, k)) * 2).astype(dtype)
    y = rng.integers(0, k, n)
    if logits:
        return z, y
    p = np.exp(z - z.max(1, keepdims=True))
    return (p / p.sum(1, keepdims=True)).astype(dtype), y


def add_batches(metric, p: np.ndarray, y: np.ndarray, size: int, **kwargs) -> dict:
    for start in range(0, len(y), size):
        metric.add_batch(predictions=p[start : start + size], references=y[start : start + size])
    return metric.compute(**kwargs)


def row(label: str, t: float, core: float, plain: float | None = None) -> str:
    vs_plain = f"{plain / t:8.1f}x faster" if plain else ""
    return f"| {label:<44} | {t * 1000:9.1f} | {t / core:6.2f} | {vs_plain} |"


def shape_bench(n: int, k: int, dtype: type, logits: bool, repeat: int, plain: bool) -> list[str]:
    p, y = make(n, k, 0, dtype, logits)
    kw = {"from_logits": logits}
    cece = evaluate.load(calibkit.evaluate_module_path("cece"))
    ece = evaluate.load(calibkit.evaluate_module_path("ece"))
    calibkit.cece(p, y, **kw)  # compile and warm up
    cece.compute(predictions=p[:100], references=y[:100], **kw)
    t_core, ref = best(lambda: calibkit.cece(p, y, **kw), repeat)
    t_one, out = best(lambda: cece.compute(predictions=p, references=y, **kw), repeat)
    t_batch, out_b = best(lambda: add_batches(cece, p, y, 1000, **kw), repeat)
    assert abs(out["cece"] - ref) < 1e-9 and abs(out_b["cece"] - ref) < 1e-9
    t_core2, _ = best(lambda: (calibkit.cece(p, y, **kw), calibkit.ece(p, y, **kw)), repeat)
    combined = evaluate.combine([cece, ece])
    t_comb, _ = best(lambda: combined.compute(predictions=p, references=y, **kw), repeat)
    t_plain = None
    if plain:
        t_plain, out_p = best(lambda: PlainCece().compute(predictions=p, references=y, **kw), 1)
        assert abs(out_p["cece"] - ref) < 1e-9
    name = f"{n:,} x {k} {np.dtype(dtype).name} {'logits' if logits else 'probs'}"
    lines = [f"| **{name}** | | | |", row("functional core `calibkit.cece`", t_core, t_core)]
    lines.append(row("module `compute(predictions=, references=)`", t_one, t_core, t_plain))
    lines.append(row("module `add_batch` x 1,000 rows, `compute()`", t_batch, t_core, t_plain))
    lines.append(row("`evaluate.combine([cece, ece])` vs core cece+ece", t_comb, t_core2))
    if t_plain:
        lines.append(row("plain evaluate-style module (Arrow per row)", t_plain, t_core))
    return lines


def token_bench(n: int, length: int, k: int, repeat: int) -> list[str]:
    rng = np.random.default_rng(1)
    z = (rng.normal(size=(n, length, k)) * 2).astype(np.float32)
    y = rng.integers(0, k, (n, length))
    pad = np.arange(length)[None, :] >= rng.integers(length // 4, length + 1, n)[:, None]
    y[pad], z[pad] = -100, -100.0  # Trainer pads logits and labels with -100
    cece = evaluate.load(calibkit.evaluate_module_path("cece"), "token")
    calibkit.cece(z, y, from_logits=True)
    t_core, ref = best(lambda: calibkit.cece(z, y, from_logits=True), repeat)
    t_one, out = best(lambda: cece.compute(predictions=z, references=y, from_logits=True), repeat)
    assert abs(out["cece"] - ref) < 1e-9
    return [f"| **token: {n:,} x {length} x {k} float32 logits, -100 padding** | | | |",
            row("functional core `calibkit.cece`", t_core, t_core),
            row('module `evaluate.load(..., "token").compute`', t_one, t_core)]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10x smaller data")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-plain", action="store_true", help="skip the slow plain evaluate-style module")
    args = parser.parse_args(argv)
    scale = 10 if args.quick else 1
    print(f"calibkit evaluate modules, best of {args.repeat}; python {sys.version.split()[0]}, "
          f"evaluate {evaluate.__version__}, {len(os.sched_getaffinity(0))} cores")  # fmt: skip
    print("| case | ms | x core | vs plain |\n|---|---|---|---|")
    for line in [
        *shape_bench(1_000_000 // scale, 4, np.float64, False, args.repeat, not args.no_plain),
        *shape_bench(200_000 // scale, 66, np.float32, True, args.repeat, not args.no_plain),
        *token_bench(2_000 // scale, 128, 9, args.repeat),
    ]:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
