"""The ``"auto"`` engine choice: which compiled kernels are ready, and the background compile.

Under ``"auto"`` (:mod:`calibkit.metrics.backends`), host input goes to the kernels once they
are compiled for its kind (in this process, or cached on disk by an earlier one); until then a
call runs on the torch engine while a background thread compiles the kernels on small synthetic
input of the same kind (:func:`synthetic_like`). :func:`engine` is asked once per call, by the
engines' entry (``calibkit.metrics.engines.fill_statistics()``).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.util
import math
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numba
import numpy as np

from calibkit._numba import cache as _numba_cache
from calibkit._version import __version__
from calibkit.metrics import _kernels as kernels
from calibkit.metrics.backends import get_backend, on_device, use_backend
from calibkit.metrics.validation import PreparedInput

COMPILE_SECONDS = 13.0
"""What compiling one kind's kernels costs (a whole report, 2 cores; ``benchmarks/cold_start.py``
measures it): the estimate of a compile's remaining time before it has reported its own."""
TORCH_SECONDS_PER_ENTRY = 3.8e-7
"""What the torch engine costs per entry (rows x classes) of host input, a report on 2 cores
(``benchmarks/cold_start.py``): the estimate of a torch call before one of its kind has run."""
COLD_TORCH_MAX_ENTRIES = int(COMPILE_SECONDS / TORCH_SECONDS_PER_ENTRY)
"""Under ``"auto"``, a first call on host input of more entries than this compiles instead of
running on torch: there the torch call would cost more than the compile."""
EXIT_WAIT_SECONDS = 120.0
"""At exit, how long a process waits at most for the compiles it started (so that the next
process finds them cached and never pays the torch detour again)."""

_READY: set[tuple] = set()
_SCHEDULED: set[tuple] = set()
_FAILED: set[tuple] = set()
_LOCK = threading.Lock()
_JOBS: queue.Queue = queue.Queue()
_WORKER: threading.Thread | None = None


def _stamp() -> str:
    """Describe what a compiled kernel depends on: numba, Python, and the kernels' sources."""
    sources = _numba_cache.sources_stamp()
    return repr((numba.__version__, sys.version_info[:2], __version__, sources))


def _marker(key: tuple) -> Path | None:
    folder = _numba_cache.cache_folder()
    if folder is None:
        return None
    digest = hashlib.sha1(repr((key, _stamp())).encode()).hexdigest()[:20]
    return folder / f"calibkit-ready-{digest}"


_IN_FLIGHT = 0
_QUIET = threading.Event()  # set while no call runs on torch
_QUIET.set()
_STARTED: dict[tuple, float] = {}  # key -> when its compile began (time.monotonic)
_COMPILED_IN: list[float] = []  # seconds the compiles of this process took
_TORCH_SPENT: dict[tuple, float] = {}  # key -> seconds spent on torch calls of that kind
_TORCH_RATE: dict[tuple, float] = {}  # key -> seconds per entry of its last torch call


@contextlib.contextmanager
def torch_call(key: tuple | None = None, entries: int = 0) -> Iterator[None]:
    """Mark a call that runs on the torch engine: background compiles wait until it returns.

    A compile thread holds the GIL most of the time, and a thread that releases it (torch
    releases it in every operation, an import on every file read) waits up to the switch
    interval to get it back: measured here, a first report took 4 s instead of 1 s with a
    compile running beside it. So the compile starts once the call that needed it is over.

    The call's time is recorded under its kind, for :func:`engine`'s choice of waiting.

    Parameters
    ----------
    key : tuple, optional
        :func:`kind_key` of the call.
    entries : int, default 0
        Entries (rows x classes) of its input.

    Yields
    ------
    None
    """
    global _IN_FLIGHT
    with _LOCK:
        _IN_FLIGHT += 1
        _QUIET.clear()
    start = time.monotonic()
    try:
        yield
    finally:
        spent = time.monotonic() - start
        with _LOCK:
            _IN_FLIGHT -= 1
            if _IN_FLIGHT == 0:
                _QUIET.set()
            if key is not None:
                _TORCH_SPENT[key] = _TORCH_SPENT.get(key, 0.0) + spent
                if entries:
                    _TORCH_RATE[key] = spent / entries


def _worker() -> None:
    with use_backend("numba"):  # the warm-ups themselves run the kernels
        while True:
            key, warm = _JOBS.get()
            time.sleep(0.05)  # the call that scheduled it enters torch_call() right after
            _QUIET.wait()
            with _LOCK:
                _STARTED[key] = time.monotonic()
            try:
                warm()
            except Exception:  # noqa: BLE001 - a failed compile leaves torch in charge, never the caller broken
                with _LOCK:
                    _FAILED.add(key)
                continue
            marker = _marker(key)  # written before the key is marked ready: ready implies the marker is there
            if marker is not None:
                with contextlib.suppress(OSError):
                    marker.parent.mkdir(parents=True, exist_ok=True)
                    marker.touch()
            with _LOCK:
                _COMPILED_IN.append(time.monotonic() - _STARTED[key])
                _READY.add(key)


def _schedule(key: tuple, warm: Callable[[], Any]) -> None:
    global _WORKER
    with _LOCK:
        if key in _SCHEDULED:
            return
        _SCHEDULED.add(key)
        if _WORKER is None or not _WORKER.is_alive():
            # a daemon thread: a short script exits without waiting for the compile (numba writes
            # its cache files under a temporary name, so a compile cut short leaves no broken file)
            _WORKER = threading.Thread(target=_worker, name="calibkit-warmup", daemon=True)
            _WORKER.start()
    _JOBS.put((key, warm))


def _finish_at_exit() -> None:
    """Let the compiles this process started finish (bounded), so the next process has them cached.

    Without it a short script that exits during its compile leaves nothing in the cache, and
    every run of it pays the torch detour again (``benchmarks/cold_start.py --loop`` shows it).
    """
    wait_until_ready(timeout=EXIT_WAIT_SECONDS)


atexit.register(_finish_at_exit)  # returns at once in a process that scheduled no compile


def kind_key(job: str, prep: Any, detail: Any = None) -> tuple:
    """Return what decides which kernels a call compiles: the job, the input kind, its dtypes.

    Parameters
    ----------
    job : str
        ``"report"``, ``"statistics"``, ...
    prep : PreparedInput
        The input.
    detail : object, optional
        The job's own choice of kernels (the metrics asked for).

    Returns
    -------
    tuple
    """
    k = prep.num_classes
    # the top-label kernels of short rows are compiled once per class count up to UNROLLED_ROW
    # (8), once for 9-15 classes; other code paths only depend on whether rows are long
    shape = k if k <= kernels.UNROLLED_ROW else ("long" if k >= kernels.LONG_ROW else "mid")
    return (job, _canonical(detail), prep.mode, str(prep.values.dtype), str(prep.labels.dtype), shape)


def _canonical(value: Any) -> Any:
    """Turn sets into sorted tuples: a key's repr names the marker file, and a set's order changes between processes."""
    if isinstance(value, (set, frozenset)):
        return tuple(sorted(_canonical(v) for v in value))
    if isinstance(value, tuple):
        return tuple(_canonical(v) for v in value)
    return value


def engine(prep: Any, key: tuple, warm: Callable[[], Any]) -> str:
    """Choose the engine of one call.

    Parameters
    ----------
    prep : PreparedInput
        The input.
    key : tuple
        :func:`kind_key` of the call.
    warm : callable
        Runs the same job on the kernels (on small synthetic input of the same kind): the
        background compile, under ``"auto"``, when the kernels are not ready.

    Returns
    -------
    str
        ``"numba"`` or ``"torch"``.
    """
    if on_device(prep.values):
        return "torch"
    backend = get_backend()
    if backend != "auto":
        return backend
    if key in _READY:
        return "numba"
    if key in _FAILED or not _torch_available():
        return "numba"
    marker = _marker(key)
    if marker is not None and marker.exists():
        with _LOCK:
            _READY.add(key)
        return "numba"
    entries = math.prod(prep.values.shape)  # numpy or torch (on a tensor, .size is a method)
    if entries > COLD_TORCH_MAX_ENTRIES:
        return "numba"  # compiling pays for itself on this much data
    _schedule(key, warm)
    remaining = _compile_remaining(key)
    if remaining is not None and remaining <= _torch_estimate(key, entries) + _TORCH_SPENT.get(key, 0.0):
        # The compile ends sooner than this call would on torch, or this kind has already spent
        # as long on torch as the compile still needs (the ski-rental rule: a loop of calls
        # then pays at most about twice the compile, never a torch call per iteration).
        if wait_until_ready(timeout=2 * remaining + 1.0, keys={key}):
            return "numba" if key in _READY else "torch"
    return "torch"


def _compile_remaining(key: tuple) -> float | None:
    """Seconds the compile of ``key`` still needs, by the compiles seen (None when not running)."""
    with _LOCK:
        started = _STARTED.get(key)
        if started is None or key in _READY or key in _FAILED:
            return None
        typical = max(_COMPILED_IN) if _COMPILED_IN else COMPILE_SECONDS
    return max(typical - (time.monotonic() - started), 0.0)


def _torch_estimate(key: tuple, entries: int) -> float:
    """Seconds a torch call of ``entries`` entries of this kind would take, by the last one seen."""
    return _TORCH_RATE.get(key, TORCH_SECONDS_PER_ENTRY) * entries


def wait_until_ready(timeout: float | None = None, keys: set[tuple] | None = None) -> bool:
    """Wait for the background compiles started so far (tests, benchmarks, ``calibkit warmup``).

    Parameters
    ----------
    timeout : float, optional
        Seconds to wait at most (default: no limit).
    keys : set of tuple, optional
        Wait only for these kinds (default: all scheduled).

    Returns
    -------
    bool
        True when every scheduled compile has finished.
    """
    end = None if timeout is None else time.monotonic() + timeout
    while True:
        with _LOCK:
            pending = (_SCHEDULED if keys is None else _SCHEDULED & keys) - _READY - _FAILED
        if not pending:
            return True
        if end is not None and time.monotonic() >= end:
            return False
        time.sleep(0.05)


def _torch_available() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # pragma: no cover
        return False


def synthetic_like(prep: Any, ignore_index: int, rows: int = 512) -> Any:
    """Return random input of the same kind as ``prep`` (mode, classes, dtypes), for a warm-up.

    Parameters
    ----------
    prep : PreparedInput
        The kind to copy.
    ignore_index : int
        The masked label (one row carries it, so the masked path is compiled too).
    rows : int, default 512
        Rows: enough for every ACE range boundary to cut a bucket, so the exact pass compiles.

    Returns
    -------
    PreparedInput
    """
    rng = np.random.default_rng(0)
    k = prep.num_classes
    if prep.mode >= kernels.MODE_BINARY_PROBS:
        z = rng.normal(size=(rows, 1)) * 2
        values = 1 / (1 + np.exp(-z)) if prep.mode == kernels.MODE_BINARY_PROBS else z
    else:
        z = rng.normal(size=(rows, k)) * 2
        values = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True) if prep.mode == kernels.MODE_PROBS else z
    labels = rng.integers(0, k, rows).astype(prep.labels.dtype)
    if not 0 <= ignore_index < k and np.can_cast(np.min_scalar_type(ignore_index), prep.labels.dtype):
        labels[0] = ignore_index
    values = np.ascontiguousarray(values.astype(str(prep.values.dtype).replace("torch.", "")))
    return PreparedInput(values, labels, prep.mode, k, values.shape)


def scheduled_count() -> int:
    """Return how many kinds have been scheduled for a background compile in this process.

    Returns
    -------
    int
    """
    with _LOCK:
        return len(_SCHEDULED)
