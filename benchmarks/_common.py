"""Timing and memory helpers shared by the benchmark scripts."""

from __future__ import annotations

import statistics
import time


def median_time(fn, repeats: int) -> float:
    """Median wall time of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _rss(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


def peak_rss_above_now(fn) -> float:
    """MB of resident memory ``fn`` adds at its peak (Linux: reset the high-water mark first)."""
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    before = _rss("VmRSS:")
    fn()
    return (_rss("VmHWM:") - before) / 2**20
