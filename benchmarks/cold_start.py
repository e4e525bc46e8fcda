"""First-call times in fresh processes with an empty numba cache, then with a warm one.

    python benchmarks/cold_start.py              # 1000 x 4, each kind in its own fresh process
    python benchmarks/cold_start.py --rows 100000
    python benchmarks/cold_start.py --loop       # 20 reports in a row from an empty cache, 1M x 4 and 100k x 66

A fresh install, a new CI container or a notebook on a new machine has an empty numba cache:
the compiled kernels take seconds to compile (about 14 s for a whole report on 2 cores). Under
the default backend ``"auto"`` such a call runs on torch while the kernels compile in a
background thread (:mod:`calibkit.metrics.backends`). Each row below is a new Python process
with ``NUMBA_CACHE_DIR`` pointing at an empty folder ("cold"), or at the folder an earlier
``calibkit warmup`` filled ("warm"); the figure is the wall time of the first call after
``import calibkit``, and ``--backend numba`` shows the compile that "auto" hides. A warm first
call is numba loading its type registries, which imports ``scipy.linalg`` when scipy is
installed (numba checks for BLAS); the last column hides scipy, as in an install without it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CALLS = {
    "import calibkit": None,
    "ece, probabilities": "calibkit.ece(p, y)",
    "calibration_report, probabilities": "calibkit.calibration_report(p, y)",
    "calibration_report, logits": "calibkit.calibration_report(z, y, from_logits=True)",
    "calibration_report, token logits (N, L, K), -100": "calibkit.calibration_report(zt, yt, from_logits=True)",
    "calibration_report, binary": "calibkit.calibration_report(p[:, 1] / (p[:, 0] + p[:, 1]), (y == 1).astype(int))",
    "ece, 7 classes": "calibkit.ece(p7, y % 7)",
    "CalibrationAccumulator.update + compute, logits": (
        "calibkit.CalibrationAccumulator(from_logits=True).update(z, y).compute()"
    ),
}

HIDE_SCIPY = """
import sys
class _NoScipy:  # as in an install without scipy: numba's BLAS check then fails fast
    def find_spec(self, name, path=None, target=None):
        if name == "scipy" or name.startswith("scipy."):
            raise ImportError(name)
sys.meta_path.insert(0, _NoScipy())
"""

SCRIPT = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
start = time.perf_counter()
import numpy as np
import calibkit
imported = time.perf_counter() - start
rng = np.random.default_rng(0)
n = {rows}
z = rng.normal(size=(n, 4)) * 2; y = rng.integers(0, 4, n)
p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
z7 = rng.normal(size=(n, 7)); p7 = np.exp(z7) / np.exp(z7).sum(1, keepdims=True)
zt = z.reshape(-1, 10, 4); yt = y.reshape(-1, 10).copy(); yt[:, 7:] = -100
call = {call!r}
if call is None:
    print(json.dumps(imported)); sys.exit()
start = time.perf_counter(); eval(call); first = time.perf_counter() - start
start = time.perf_counter(); eval(call); second = time.perf_counter() - start
print(json.dumps([first, second]))
"""


def run(call: str | None, cache: str, rows: int, backend: str, hide_scipy: bool = False) -> object:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "CALIBKIT_BACKEND": backend}
    script = (HIDE_SCIPY if hide_scipy else "") + SCRIPT.format(rows=rows, call=call)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


LOOP_SCRIPT = """
import json, time, warnings
warnings.simplefilter("ignore")
import numpy as np
import calibkit
rng = np.random.default_rng(0)
z = rng.normal(size=({rows}, {classes})).astype(np.float32) * 2
p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
y = rng.integers(0, {classes}, {rows})
times = []
for _ in range({calls}):
    start = time.perf_counter(); calibkit.calibration_report(p, y); times.append(time.perf_counter() - start)
print(json.dumps(times))
"""


def loop(rows: int, classes: int, calls: int, cache: str, backend: str = "auto") -> tuple[list[float], float]:
    """Per-call seconds of ``calls`` reports in one fresh process, and the process's wall time."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "CALIBKIT_BACKEND": backend}
    script = LOOP_SCRIPT.format(rows=rows, classes=classes, calls=calls)
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1]), time.perf_counter() - start


def main_loop(calls: int) -> None:
    """The first-call story of a loop: empty cache, then the next process on the cache it left."""
    for rows, classes in ((1_000_000, 4), (100_000, 66)):
        cache = tempfile.mkdtemp(prefix="calibkit-cold-")
        first, wall = loop(rows, classes, calls, cache)
        again, wall_again = loop(rows, classes, 3, cache)
        compiled, _ = loop(rows, classes, 2, tempfile.mkdtemp(prefix="calibkit-cold-"), backend="numba")
        torch_calls, _ = loop(rows, classes, 3, cache, backend="torch")
        print(
            f"\n{rows:,} x {classes}, {calls} reports from an empty cache (auto): {sum(first):.1f} s in calls, "
            f"process {wall:.1f} s (its exit waits for the compiles it started)"
        )
        print("per call: " + ", ".join(f"{t:.2f}" for t in first))
        print("next process, same cache: " + ", ".join(f"{t:.3f}" for t in again) + f" (process {wall_again:.1f} s)")
        print(
            f"compile (numba, cold first call minus a warm one): {compiled[0] - compiled[1]:.1f} s; "
            f"torch per call: {min(torch_calls):.2f} s = {min(torch_calls) / (rows * classes):.2e} s per entry"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--backend", default="auto", choices=("auto", "numba", "torch"))
    parser.add_argument("--loop", type=int, nargs="?", const=20, help="N reports in a row (default 20)")
    args = parser.parse_args()
    if args.loop:
        main_loop(args.loop)
        return
    warm = tempfile.mkdtemp(prefix="calibkit-warm-")
    env = {**os.environ, "NUMBA_CACHE_DIR": warm}
    print("filling a warm cache with `calibkit warmup` ...", flush=True)
    subprocess.run([sys.executable, "-m", "calibkit.cli", "warmup", "--quiet"], env=env, check=True)
    print(f"\n{args.rows} rows, backend={args.backend}; seconds, each cell a fresh process")
    print("| call | cold: first | cold: second | warm: first | warm: second | warm, no scipy: first |")
    print("|---|---|---|---|---|---|")
    for name, call in CALLS.items():
        cold = run(call, tempfile.mkdtemp(prefix="calibkit-cold-"), args.rows, args.backend)
        hot = run(call, warm, args.rows, args.backend)
        bare = run(call, warm, args.rows, args.backend, hide_scipy=True)
        if call is None:
            print(f"| {name} | {cold:.2f} | | {hot:.2f} | | {bare:.2f} |", flush=True)
        else:
            cells = f"{cold[0]:.2f} | {cold[1]:.2f} | {hot[0]:.2f} | {hot[1]:.3f} | {bare[0]:.2f}"
            print(f"| {name} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
