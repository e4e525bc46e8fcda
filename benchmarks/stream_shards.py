"""Streaming shards (``calibkit report --predictions DIR``) and ``calibkit.io.dask``: peak memory
and time against the one-shot report on the same data held in memory.

    python benchmarks/stream_shards.py --rows 250000000          # 4 GB of float32 predictions
    python benchmarks/stream_shards.py --rows 20000000 --dask    # plus the Dask report, 2 workers

Writes float32 probabilities (K = 4 by default) as Parquet shards, then runs, each in a fresh
process: the CLI on a 1,000-row shard (the baseline: interpreter, libraries, compiled kernels), the
CLI on all shards (streaming, exact ACE), and ``calibkit.calibration_report`` on the same data
loaded into memory (timed without the loading). Peak resident memory is the child process's
``ru_maxrss``. With ``--dask``, ``calibkit.io.dask.calibration_report`` on the Parquet glob with a
``LocalCluster`` of 2 worker processes (its time includes starting the cluster's work, not the
cluster). Prints a Markdown table and checks that every number agrees to 1e-12.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

FLOATS = ("ece", "mce", "ace", "sce", "cece", "rbece", "fce", "ecd", "esce", "brier", "nll", "accuracy")


def write_shards(folder: Path, rows: int, classes: int, shard_rows: int, seed: int = 0) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    written = 0
    for index, start in enumerate(range(0, rows, shard_rows)):
        n = min(shard_rows, rows - start)
        z = rng.standard_normal((n, classes), dtype=np.float32) * np.float32(2.0)
        z -= z.max(axis=1, keepdims=True)
        np.exp(z, out=z)
        z /= z.sum(axis=1, keepdims=True)
        labels = rng.integers(0, classes, n).astype(np.int64)
        labels[rng.random(n) < 0.05] = -100  # padding positions, as token data has
        probs = pa.FixedSizeListArray.from_arrays(pa.array(z.reshape(-1)), classes)
        pq.write_table(pa.table({"probs": probs, "labels": labels}), folder / f"part-{index:04d}.parquet",
                       row_group_size=1 << 20)  # fmt: skip
        written += z.nbytes
    return written


def child(code: str) -> tuple[dict, float, float]:
    """Run ``code`` in a fresh interpreter; its JSON output, wall seconds and peak RSS (MB)."""
    wrapper = (
        "import json, resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "p = subprocess.run([sys.executable, '-c', sys.argv[1]], capture_output=True, text=True)\n"
        "wall = time.perf_counter() - t\n"
        "sys.stderr.write(p.stderr)\n"
        "print(json.dumps(json.loads(p.stdout)) if p.returncode == 0 else 'null')\n"
        "print(wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", wrapper, code], capture_output=True, text=True, check=True)
    lines = out.stdout.strip().splitlines()
    if lines[-2] == "null":
        raise RuntimeError(out.stderr[-3000:])
    wall, peak = map(float, lines[-1].split())
    return json.loads(lines[-2]), wall, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=250_000_000)
    parser.add_argument("--classes", type=int, default=4)
    parser.add_argument("--shard-rows", type=int, default=10_000_000)
    parser.add_argument("--folder", default="/tmp/calibkit-shards")
    parser.add_argument("--dask", action="store_true", help="also the Dask report on a 2-worker LocalCluster")
    parser.add_argument("--skip-one-shot", action="store_true", help="no in-memory report (needs ~3x the data)")
    parser.add_argument("--keep", action="store_true", help="keep the shards")
    args = parser.parse_args()

    folder = Path(args.folder)
    shutil.rmtree(folder, ignore_errors=True)
    t = time.perf_counter()
    nbytes = write_shards(folder / "all", args.rows, args.classes, args.shard_rows)
    write_shards(folder / "tiny", 1000, args.classes, 1000)
    print(f"wrote {nbytes / 1e9:.2f} GB of float32 probabilities ({args.rows:,} x {args.classes}) in "
          f"{time.perf_counter() - t:.0f} s", file=sys.stderr)  # fmt: skip

    cli = "from calibkit.cli import main; main(['report', '--predictions', {!r}, '--json', '--quiet'])"
    _, base_wall, base_peak = child(cli.format(str(folder / "tiny")))
    stream, stream_wall, stream_peak = child(cli.format(str(folder / "all")))
    rows = [("baseline: CLI on a 1,000-row shard (start-up, imports, kernels)", base_wall, base_peak, None)]
    rows.append((f"CLI streaming {stream['shards']} shards, {stream['passes']} passes", stream_wall, stream_peak, None))
    once, once_wall, once_peak = child(
        cli.format(str(folder / "all")).replace("'--quiet'", "'--quiet', '--approximate-ace'")
    )
    rows.append(("CLI streaming, --approximate-ace (1 pass)", once_wall, once_peak, None))
    one = None
    if not args.skip_one_shot:
        code = (
            "import json, time, numpy as np, pyarrow.parquet as pq, pyarrow.compute as pc, calibkit\n"
            f"t = pq.read_table({str(folder / 'all')!r})\n"
            f"probs = pc.list_flatten(t.column('probs')).to_numpy().reshape(-1, {args.classes})\n"
            "labels = t.column('labels').to_numpy(); del t\n"
            "start = time.perf_counter(); r = calibkit.calibration_report(probs, labels)\n"
            "r['seconds'] = time.perf_counter() - start; r['subset_ece'] = r['subset_ece'].tolist()\n"
            "print(json.dumps(r))\n"
        )
        one, one_wall, one_peak = child(code)
        rows.append(("one-shot calibration_report, data in memory (report only)", one["seconds"], one_peak, None))
        for key in FLOATS:
            assert abs(stream[key] - one[key]) <= 1e-12 * max(1, abs(one[key])), (key, stream[key], one[key])
    if args.dask:
        code = (
            "import json, time, distributed\n"
            "from calibkit.io.dask import calibration_report\n"
            "cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None)\n"
            "client = distributed.Client(cluster)\n"
            f"start = time.perf_counter(); r = calibration_report({str(folder / 'all' / '*.parquet')!r})\n"
            "r['seconds'] = time.perf_counter() - start; r['subset_ece'] = r['subset_ece'].tolist()\n"
            "client.close(); cluster.close(); print(json.dumps(r))\n"
        )
        dask_report, _, dask_peak = child(code)
        label = f"calibkit.io.dask, 2 workers, {dask_report['partitions']} partitions, {dask_report['passes']} passes"
        rows.append((label, dask_report["seconds"], dask_peak, "largest process: client or worker"))
        for key in FLOATS:
            assert abs(dask_report[key] - stream[key]) <= 1e-12 * max(1, abs(stream[key])), key

    print(f"\n{args.rows:,} x {args.classes} float32 ({nbytes / 1e9:.2f} GB), shards of {args.shard_rows:,} rows\n")
    print("| run | seconds | peak RSS (MB) | above baseline (MB) |")
    print("|---|---|---|---|")
    for name, seconds, peak, note in rows:
        above = "" if name.startswith("baseline") else f"{peak - base_peak:.0f}"
        cell = "" if seconds is None else f"{seconds:.1f}"
        print(f"| {name} | {cell} | {peak:.0f}{f' ({note})' if note else ''} | {above} |")
    if one is not None:
        ratio = (stream_wall - base_wall) / one["seconds"]
        ratio_once = (once_wall - base_wall) / one["seconds"]
        print(
            f"\nstreaming (less the baseline's start-up) / one-shot time: {ratio:.2f} exact, {ratio_once:.2f} one pass "
            f"(ACE within {once['ace_error_bound']:.2g}, off by {abs(once['ace'] - one['ace']):.1e}); every other "
            "number equal to 1e-12"
        )
    if args.dask:
        import pickle

        from calibkit.metrics import CalibrationAccumulator

        rng = np.random.default_rng(0)
        acc = CalibrationAccumulator().update(
            rng.dirichlet(np.ones(args.classes), 1000), rng.integers(0, args.classes, 1000)
        )
        size = len(pickle.dumps(acc))
        print(
            f"dask / single-process streaming time: {dask_report['seconds'] / (stream_wall - base_wall):.2f}; "
            f"each partition sends its statistics ({size / 1e3:.0f} kB pickled at K = {args.classes}) in pass 1, "
            "and a histogram or a few boundary values per further pass; no prediction moves"
        )
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
