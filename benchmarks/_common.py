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


def interleaved_times(contenders: dict, repeats: int) -> dict[str, list[float]]:
    """Wall times of ``repeats`` rounds, each calling every contender once in turn.

    On a shared machine speed drifts by 20-40% over a minute: timing one contender's repeats
    and then the next's lets a fast or slow spell land on one side of a ratio. Round-robin
    rounds give every contender the same spells, and a ratio taken per round cancels them.
    """
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


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
