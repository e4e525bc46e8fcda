"""Which engine makes the statistics: the compiled kernels, or torch where the data lives.

- ``"numba"``: the compiled kernels (:mod:`calibkit.metrics._kernels`), the fastest on host
  memory once compiled. Their first compile takes seconds per input kind (a whole report,
  the longest; ``benchmarks/cold_start.py`` measures it); numba then caches them on disk.
- ``"torch"``: :mod:`calibkit.metrics.torch_backend`, the same sums with torch: on the tensor's
  own device for CUDA input (only the sums come back), and on CPU tensors or numpy arrays
  without any compile.
- ``"auto"`` (the default): CUDA tensors go to torch; host input goes to the kernels when they
  are ready for its kind (compiled in this process, or cached on disk by an earlier one);
  otherwise this call runs on torch while the kernels compile in a background thread, so the
  first call returns in about a second instead of waiting for the compile, and later calls
  switch to the kernels as soon as they are ready.

Choose with :func:`set_backend`, the context manager :func:`use_backend`, or the environment
variable ``CALIBKIT_BACKEND``. Both engines give the same numbers to about 1e-15 relative (the
sums are added in another order); CI checks them against each other on every input kind.
``calibkit warmup`` compiles and caches the common kinds ahead of time.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

BACKENDS = ("auto", "numba", "torch")
"""The engines :func:`set_backend` accepts."""

_override: contextvars.ContextVar[str | None] = contextvars.ContextVar("calibkit_backend", default=None)
_default = os.environ.get("CALIBKIT_BACKEND", "auto")
if _default not in BACKENDS:  # a typo in the environment must not pass silently
    raise ValueError(f"CALIBKIT_BACKEND must be one of {list(BACKENDS)}, got {_default!r}")


def _check(name: Any) -> str:
    if not isinstance(name, str) or name not in BACKENDS:
        raise ValueError(f"`backend` must be one of {list(BACKENDS)}, got {name!r}")
    return name


def get_backend() -> str:
    """Return the engine in effect here: the innermost :func:`use_backend`, else :func:`set_backend`'s.

    Returns
    -------
    str
        One of :data:`BACKENDS`.
    """
    return _override.get() or _default


def set_backend(name: str) -> None:
    """Set the engine of every later call in this process (threads included).

    Parameters
    ----------
    name : {"auto", "numba", "torch"}
        See the module docstring.

    Raises
    ------
    ValueError
        Naming ``backend``, for another value.
    """
    global _default
    _default = _check(name)


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[None]:
    """Use an engine within a ``with`` block (this thread and context only).

    Parameters
    ----------
    name : {"auto", "numba", "torch"}
        See the module docstring.

    Yields
    ------
    None

    Raises
    ------
    ValueError
        Naming ``backend``, for another value.

    Examples
    --------
    >>> import numpy as np
    >>> from calibkit import ece
    >>> with use_backend("torch"):
    ...     round(ece(np.array([[0.9, 0.1], [0.2, 0.8]]), [0, 0]), 4)
    0.45
    """
    token = _override.set(_check(name))
    try:
        yield
    finally:
        _override.reset(token)


def on_device(array: Any) -> bool:
    """Tell whether ``array`` is a torch tensor outside host memory (CUDA, MPS, ...).

    Parameters
    ----------
    array : object
        Values or labels.

    Returns
    -------
    bool
    """
    device = getattr(array, "device", None)
    return device is not None and getattr(device, "type", "cpu") != "cpu" and hasattr(array, "detach")


# --------------------------------------------------------------------------------------------
# "auto": which kernels are ready, and the background compile


COLD_TORCH_MAX_ENTRIES = 1 << 23
"""Under ``"auto"``, host input of more entries (rows x classes) than this waits for the compile
instead of running on torch: on the CPU torch takes some 30 times the kernels' time, which
passes the compile's own cost at a few million entries (``benchmarks/gpu.py --device cpu``)."""

_READY: set[tuple] = set()
_SCHEDULED: set[tuple] = set()
_FAILED: set[tuple] = set()
_LOCK = threading.Lock()
_JOBS: queue.Queue = queue.Queue()
_WORKER: threading.Thread | None = None


def _stamp() -> str:
    """Describe what a compiled kernel depends on: numba, Python, and the kernels' sources."""
    import numba

    from calibkit import __version__
    from calibkit._numba_cache import sources_stamp

    sources = sources_stamp()
    return repr((numba.__version__, sys.version_info[:2], __version__, sources))


def _marker(key: tuple) -> Path | None:
    from calibkit._numba_cache import cache_folder

    folder = cache_folder()
    if folder is None:
        return None
    digest = hashlib.sha1(repr((key, _stamp())).encode()).hexdigest()[:20]
    return folder / f"calibkit-ready-{digest}"


_IN_FLIGHT = 0
_QUIET = threading.Event()  # set while no call runs on torch
_QUIET.set()


@contextlib.contextmanager
def torch_call() -> Iterator[None]:
    """Mark a call that runs on the torch engine: background compiles wait until it returns.

    A compile thread holds the GIL most of the time, and a thread that releases it (torch
    releases it in every operation, an import on every file read) waits up to the switch
    interval to get it back: measured here, a first report took 4 s instead of 1 s with a
    compile running beside it. So the compile starts once the call that needed it is over.

    Yields
    ------
    None
    """
    global _IN_FLIGHT
    with _LOCK:
        _IN_FLIGHT += 1
        _QUIET.clear()
    try:
        yield
    finally:
        with _LOCK:
            _IN_FLIGHT -= 1
            if _IN_FLIGHT == 0:
                _QUIET.set()


def _worker() -> None:
    token = _override.set("numba")  # the warm-ups themselves run the kernels
    try:
        while True:
            key, warm = _JOBS.get()
            time.sleep(0.05)  # the call that scheduled it enters torch_call() right after
            _QUIET.wait()
            try:
                warm()
            except Exception:  # noqa: BLE001 - a failed compile leaves torch in charge, never the caller broken
                with _LOCK:
                    _FAILED.add(key)
                continue
            with _LOCK:
                _READY.add(key)
            marker = _marker(key)
            if marker is not None:
                with contextlib.suppress(OSError):
                    marker.parent.mkdir(parents=True, exist_ok=True)
                    marker.touch()
    finally:
        _override.reset(token)


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
    # top-label kernels are compiled once per class count up to 8; other code paths only
    # depend on whether rows are long (a runtime branch, one compile)
    shape = k if k <= 8 else ("long" if k >= 16 else "mid")
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
    if prep.values.size > COLD_TORCH_MAX_ENTRIES:
        return "numba"  # compiling pays for itself on this much data
    _schedule(key, warm)
    return "torch"


def wait_until_ready(timeout: float | None = None) -> bool:
    """Wait for the background compiles started so far (tests, benchmarks, ``calibkit warmup``).

    Parameters
    ----------
    timeout : float, optional
        Seconds to wait at most (default: no limit).

    Returns
    -------
    bool
        True when every scheduled compile has finished.
    """
    end = None if timeout is None else time.monotonic() + timeout
    while True:
        with _LOCK:
            pending = _SCHEDULED - _READY - _FAILED
        if not pending:
            return True
        if end is not None and time.monotonic() >= end:
            return False
        time.sleep(0.05)


def _torch_available() -> bool:
    try:
        import importlib.util

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
    from calibkit.metrics import _kernels as kernels
    from calibkit.metrics.validation import PreparedInput

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


def warmup(num_classes: tuple[int, ...] = (4, 20), verbose: bool = False) -> int:
    """Compile and cache the kernels of the common input kinds now, instead of on first use.

    Runs every metric and the report on small synthetic input of each kind (probabilities and
    logits, rows and 1-D binary, float32 and float64) under ``"auto"``, then waits for the
    background compiles; later processes find the kernels in numba's cache and use them from
    their first call. Takes a few minutes on 2 cores, once per install.

    Parameters
    ----------
    num_classes : tuple of int, default (4, 20)
        Class counts to warm (the top-label kernels compile once per count up to 8; above,
        one compile serves every count).
    verbose : bool, default False
        Print each kind as it is done.

    Returns
    -------
    int
        The number of kinds compiled (0 when all were cached already).
    """
    import warnings

    from calibkit.metrics import _kernels as kernels
    from calibkit.metrics.accumulator import CalibrationAccumulator
    from calibkit.metrics.functional import calibration_report, ece
    from calibkit.metrics.validation import PreparedInput

    dtypes = ("float32", "float64")
    kinds = [(m, d, k) for k in num_classes for m in (kernels.MODE_PROBS, kernels.MODE_LOGITS) for d in dtypes]
    kinds += [(m, d, 2) for m in (kernels.MODE_BINARY_PROBS, kernels.MODE_BINARY_LOGITS) for d in dtypes]
    before = len(_SCHEDULED)
    token = _override.set("auto")
    try:
        for mode, dtype, k in kinds:
            shape = (1, 1) if mode >= kernels.MODE_BINARY_PROBS else (1, k)
            like = PreparedInput(np.zeros(shape, dtype=dtype), np.zeros(1, dtype=np.int64), mode, k, shape)
            prep = synthetic_like(like, -100)
            values = prep.values[:, 0] if mode >= kernels.MODE_BINARY_PROBS else prep.values
            from_logits = mode in (kernels.MODE_LOGITS, kernels.MODE_BINARY_LOGITS)
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # synthetic input: RBECE's empty regions say nothing here
                calibration_report(values, prep.labels, from_logits=from_logits)
                ece(values, prep.labels, from_logits=from_logits)
                CalibrationAccumulator(from_logits=from_logits).update(values, prep.labels)
            wait_until_ready()
            if verbose:
                name = ["probabilities", "logits", "binary probabilities", "binary logits"][mode]
                print(f"{name}, {dtype}, {k} classes: {time.perf_counter() - start:.1f} s", flush=True)
    finally:
        _override.reset(token)
    return len(_SCHEDULED) - before
