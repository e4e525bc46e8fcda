"""The user's engine switch: which engine makes the statistics. Imports nothing of calibkit.

- ``"numba"``: the compiled kernels (``calibkit.metrics._kernels``), the fastest on host
  memory once compiled. Their first compile takes seconds per input kind (a whole report,
  the longest; ``benchmarks/cold_start.py`` measures it); numba then caches them on disk.
- ``"torch"``: ``calibkit.metrics.engines.torch_engine``, the same sums with torch: on the
  tensor's own device for CUDA input (only the sums come back), and on CPU tensors or numpy
  arrays without any compile.
- ``"auto"`` (the default): CUDA tensors go to torch; host input goes to the kernels when they
  are ready for its kind (compiled in this process, or cached on disk by an earlier one);
  otherwise this call runs on torch while the kernels compile in a background thread, so the
  first call returns in about a second instead of waiting for the compile, and later calls
  switch to the kernels as soon as they are ready (``calibkit.metrics.engines.auto``).

Choose with :func:`set_backend`, the context manager :func:`use_backend`, or the environment
variable ``CALIBKIT_BACKEND``. Both engines give the same numbers to about 1e-15 relative (the
sums are added in another order); CI checks them against each other on every input kind. One
known exception: ACE on logits whose softmax values tie in exact arithmetic (logits that are
logs of counts): each engine's exp is within 1 ulp, not the same ulp, and ACE's rule that tied
values share their mean outcome can then group such values differently (up to about 1e-3 seen).
``calibkit warmup`` compiles and caches the common kinds ahead of time.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from typing import Any

__all__ = ["BACKENDS", "get_backend", "set_backend", "use_backend"]

BACKENDS = ("auto", "numba", "torch")
"""The engines :func:`set_backend` accepts."""

_override: contextvars.ContextVar[str | None] = contextvars.ContextVar("calibkit_backend", default=None)
_default = os.environ.get("CALIBKIT_BACKEND", "auto")  # checked at the first call, so that the
# command line can say so in one line (an import that raised would print a traceback first)


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

    Raises
    ------
    ValueError
        Naming ``CALIBKIT_BACKEND`` when that variable holds another value.
    """
    chosen = _override.get() or _default
    if chosen not in BACKENDS:  # a typo in the environment must not pass silently
        raise ValueError(f"CALIBKIT_BACKEND must be one of {list(BACKENDS)}, got {chosen!r}")
    return chosen


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
