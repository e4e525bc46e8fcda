"""How fast the whole report could be on this machine: a floor from its unavoidable work.

    python benchmarks/report_floor.py                      # 10M x 4 and 2M x 66, float32
    python benchmarks/report_floor.py --shapes 1000000x4   # one shape

``calibration_report`` adds every row into its histograms in row order (within each of
``LANES`` copies), so that every sum is the same to the bit in every engine, process and
thread count (SPEC.md, the golden set). Whatever the code around them, those adds are
read-modify-writes to scattered cells that no vector unit does for it, and NLL and ECD need the
log of every entry. This script counts that work for the report's default plan and times its
two pieces on this machine, in the same run as one read of the input (``probs.max()`` and
``labels.max()``, the unit of ``benchmarks/metrics.py``):

* one ordered add a row and column of each table it touches: the top-label tables (count and
  correct packed in one int64, confidence, ECD term; per bin count), the fuzzy tables (two bins
  of three sums, for each of the two FCE variants), and per entry the ACE table and, on rows of
  fewer than 16 classes, the class-wise table (packed count, sum of p; longer rows take their
  class-wise bins from the ACE buckets);
* the log of every entry (calibkit's vector log, in cache);
* two reads of the input (the pass, and the exact ACE's second look at the cut buckets).

The floor is that work spread perfectly over the report's threads, plus the two reads, with
everything else free: the checks, top label, bins, fuzzy memberships, cell indices, the cut
buckets' copies and their sort. The real report is timed beside it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numba as nb
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import interleaved_times  # noqa: E402

from calibkit._numba.fastmath import log_into  # noqa: E402
from calibkit.metrics._kernels.constants import LANES, LONG_ROW  # noqa: E402
from metrics import make, parse_shape  # noqa: E402

BLOCK = 2048  # entries: the kernels' block (constants.BLOCK_ENTRIES), replayed so it stays in cache


@nb.njit(nogil=True)
def _ordered_adds(cells, values, table, repeats):
    """``repeats`` times, each value added into its cell in order: the kernels' scatter."""
    for _ in range(repeats):
        for e in range(cells.shape[0]):
            table[cells[e]] += values[e]


@nb.njit(nogil=True)
def _logs(src, dst, repeats):
    for _ in range(repeats):
        log_into(src, dst, src.shape[0], 1e-12)


def seconds_per(fn, count: int, repeats: int = 5) -> float:
    """Seconds per unit of work of ``fn`` (which does ``count`` units), best of ``repeats``."""
    fn()  # compile
    return min(interleaved_times({"fn": fn}, repeats)["fn"]) / count


def run_shape(n: int, k: int, repeats: int) -> None:
    import calibkit
    from calibkit.metrics.engines.threads import row_ranges

    probs, _, labels = make(n, k)
    calibkit.calibration_report(probs[:1000], labels[:1000])  # compile or load the kernels
    threads = len(row_ranges(n, None))  # the report's threads on these rows

    rng = np.random.default_rng(0)
    # cells over 64 bins of LANES copies, row e in copy e % LANES, as the kernels lay them out
    cells = rng.integers(0, 64, BLOCK) * LANES + np.arange(BLOCK) % LANES
    values = rng.random(BLOCK)
    table = np.zeros(64 * LANES)
    replays = 2000
    add = seconds_per(lambda: _ordered_adds(cells, values, table, replays), BLOCK * replays)
    src, dst = rng.random(BLOCK), np.empty(BLOCK)
    log = seconds_per(lambda: _logs(src, dst, replays), BLOCK * replays)

    top_bins, fuzzy = 3, 2 * 2 * 3  # the report's bin counts (10, 15, 20); FCE: 2 variants x 2 bins x 3 sums
    # rows of LONG_ROW classes or more take the class-wise bins from the ACE buckets: no adds of their own
    classwise = 2 * k if k < LONG_ROW else 0
    adds_per_row = top_bins * 3 + fuzzy + classwise + 2 * k  # top (packed, conf, ECD), fuzzy, class-wise, ACE
    work = n * (adds_per_row * add + k * log)  # thread-seconds

    times = interleaved_times(
        {
            "read": lambda: (probs.max(), labels.max()),
            "report": lambda: calibkit.calibration_report(probs, labels),
        },
        repeats,
    )
    read = statistics.median(times["read"])
    report = statistics.median(times["report"])
    floor = work / threads + 2 * read
    print(f"== {n:,} x {k} ==  ({threads} threads, medians of {repeats} rounds)")
    print(f"  one read of the input                 {read * 1e3:8.1f} ms")
    print(f"  an ordered add / a log (one thread)   {add * 1e9:8.2f} / {log * 1e9:.2f} ns")
    print(f"  ordered adds a row / logs a row       {adds_per_row:8d} / {k}")
    print(f"  their work, all threads               {work / threads * 1e3:8.1f} ms")
    print(f"  floor: that work + 2 reads            {floor * 1e3:8.1f} ms  ({floor / read:.1f} reads)")
    print(f"  calibration_report (probabilities)    {report * 1e3:8.1f} ms  ({report / read:.1f} reads)")
    print(f"  report / floor                        {report / floor:8.2f}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", metavar="NxK", default=["10000000x4", "2000000x66"])
    parser.add_argument("--repeats", type=int, default=5, help="round-robin rounds")
    args = parser.parse_args()
    for shape in args.shapes:
        run_shape(*parse_shape(shape), args.repeats)


if __name__ == "__main__":
    main()
