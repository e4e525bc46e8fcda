"""calibkit's thread pool: row ranges of a pass run in parallel (the compiled kernels release the GIL)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

_MIN_ROWS_PER_THREAD = 65_536


def _default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def row_ranges(n_rows: int, num_threads: int | None) -> list[tuple[int, int]]:
    """Split ``n_rows`` rows into contiguous ``(start, stop)`` ranges, one a thread.

    Parameters
    ----------
    n_rows : int
        Rows to split.
    num_threads : int or None
        Threads to use; None means the CPUs this process may run on. Ranges are never shorter
        than 65,536 rows (a thread's start-up costs more than it saves below that).

    Returns
    -------
    list of tuple of int
        ``(start, stop)`` pairs covering ``range(n_rows)`` in order.
    """
    threads = num_threads or _default_threads()
    parts = max(1, min(threads, n_rows // _MIN_ROWS_PER_THREAD))
    edges = np.linspace(0, n_rows, parts + 1).astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


_POOL: dict[tuple[int, int], ThreadPoolExecutor] = {}


_POOL_LOCK = threading.Lock()


def _pool(workers: int) -> ThreadPoolExecutor:
    """Return calibkit's thread pool of ``workers`` threads for this process.

    One pool per process and size, kept: starting threads on every call would cost most of a
    small report. Keyed by process id too: a forked child inherits the pool object but not its
    threads, and would wait on it forever.
    """
    key = (os.getpid(), workers)
    with _POOL_LOCK:
        pool = _POOL.get(key)
        if pool is None:
            for (pid, _), old in _POOL.items():
                if pid == key[0]:  # another size (the affinity changed): let its threads end
                    old.shutdown(wait=False)  # (never a parent's pool: its locks may be held)
            _POOL.clear()
            pool = _POOL[key] = ThreadPoolExecutor(workers, thread_name_prefix="calibkit")
        return pool


def parallel_map(fn: Callable[..., Any], jobs: list[tuple]) -> list[Any]:
    """Run ``[fn(*job) for job in jobs]`` on calibkit's kept thread pool.

    The compiled kernels release the GIL, so the jobs run in parallel; a single job runs in the
    calling thread.

    Parameters
    ----------
    fn : callable
        Called once per job with the job's items as positional arguments.
    jobs : list of tuple
        The arguments of each call.

    Returns
    -------
    list
        The results, in the order of ``jobs``.
    """
    if len(jobs) == 1:
        return [fn(*jobs[0])]
    return list(_pool(_default_threads()).map(lambda job: fn(*job), jobs))
