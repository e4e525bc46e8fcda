"""Where the compiled kernels are cached, decided once at import: ``CACHE`` for ``njit(cache=...)``.

numba's ``cache=True`` raises at decoration time ("cannot cache function ...: no locator
available") when it can write neither beside the source (``__pycache__``) nor in its user-wide
cache under ``$HOME`` nor in ``NUMBA_CACHE_DIR``: a read-only install run by a user without a
writable home (a container's non-root user), where ``import calibkit`` then failed. The order
here is numba's own, plus one more place: a per-user folder in the system's temporary
directory, which numba is pointed to (``numba.config.CACHE_DIR``) only when nothing else is
writable, so a working setup is never changed. With no writable place at all, the kernels are
compiled in memory (``CACHE = False``): slower first calls, same results.

numba marks a cached kernel stale when *its own* source file changes, not when a function it
calls from another file does: after an edit of ``_numba/fastmath.py`` alone, every kernel that inlines
its ``exp`` would be loaded from the cache with the old code (numba's documented limitation).
So each kernel's cache entry is stamped with all of calibkit's kernel sources
(:func:`sources_stamp`): a change to any of them recompiles them all.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]
# numba caches a function beside its source file: every folder holding compiled kernels
# (_numba/fastmath.py, the metric kernels' package, the calibrators').
_KERNEL_FOLDERS = (
    _PACKAGE / "_numba",
    _PACKAGE / "metrics",
    _PACKAGE / "metrics" / "_kernels",
    _PACKAGE / "calibrators",
)


def kernel_sources() -> list[Path]:
    """Return the files that hold compiled kernels: any change to one recompiles all of them.

    Returns
    -------
    list of pathlib.Path
    """
    return sorted(
        [
            _PACKAGE / "_numba" / "fastmath.py",
            _PACKAGE / "calibrators" / "_kernels.py",
            *(_PACKAGE / "metrics" / "_kernels").glob("*.py"),
        ]
    )


_STAMP: tuple | None = None


def sources_stamp() -> tuple:
    """Return (path, mtime in ns, size) of every kernel source, numba's notion of freshness.

    Returns
    -------
    tuple
    """
    global _STAMP
    if _STAMP is None:
        _STAMP = tuple(
            (str(p.relative_to(_PACKAGE)), p.stat().st_mtime_ns, p.stat().st_size)
            for p in kernel_sources()
            if p.exists()
        )
    return _STAMP


def _stamp_kernels_with_all_sources() -> None:
    """Put a locator in front of numba's own for calibkit's kernel files (see the module docstring).

    It finds the folder as numba would (the next locator that accepts the file) and only adds
    :func:`sources_stamp` to the stamp; on a numba without this hook, numba's per-file stamps stay.
    """
    try:
        from numba.core import caching

        impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl
        classes = impl._locator_classes
        base = caching._CacheLocator
    except (ImportError, AttributeError):  # pragma: no cover - another numba layout
        return
    if any(getattr(c, "calibkit_sources", False) for c in classes):
        return
    ours = {str(p.resolve()) for p in kernel_sources()}

    class KernelSourcesLocator(base):
        calibkit_sources = True

        def __init__(self, inner: object) -> None:
            self._inner = inner

        def ensure_cache_path(self) -> None:
            self._inner.ensure_cache_path()

        def get_cache_path(self) -> str:
            return self._inner.get_cache_path()

        def get_source_stamp(self) -> object:
            return (self._inner.get_source_stamp(), sources_stamp())

        def get_disambiguator(self) -> str:
            return self._inner.get_disambiguator()

        @classmethod
        def from_function(cls, py_func: object, py_file: str) -> object:
            if str(Path(py_file).resolve()) not in ours:
                return None
            for other in classes:
                if other is not cls:
                    inner = other.from_function(py_func, py_file)
                    if inner is not None:
                        return cls(inner)
            return None

    classes.insert(0, KernelSourcesLocator)


def _writable(folder: Path) -> bool:
    """numba's own test (``ensure_cache_path``): the folder can be made and a file written in it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def _user_wide() -> Path | None:
    try:
        from numba.misc.appdirs import user_cache_dir
    except ImportError:  # pragma: no cover - another numba layout
        return None
    try:
        return Path(user_cache_dir(appname="numba", appauthor=False))
    except Exception:  # noqa: BLE001 - no home directory at all: no user-wide cache
        return None


def choose_cache() -> bool:
    """True when ``cache=True`` works (setting numba's cache folder if it must); False: in memory."""
    import numba

    if all(_writable(folder / "__pycache__") for folder in _KERNEL_FOLDERS):
        return True
    configured = os.environ.get("NUMBA_CACHE_DIR") or numba.config.CACHE_DIR
    if configured:
        return _writable(Path(configured))  # the user's choice: used, or in memory, never replaced
    user_wide = _user_wide()
    if user_wide is not None and _writable(user_wide):
        return True
    fallback = Path(tempfile.gettempdir()) / f"calibkit-numba-cache-{os.getuid() if hasattr(os, 'getuid') else 0}"
    try:
        fallback.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return False
    if not _writable(fallback) or (hasattr(os, "getuid") and fallback.stat().st_uid != os.getuid()):
        return False  # another user's folder: never load code compiled by someone else
    numba.config.CACHE_DIR = str(fallback)
    return True


CACHE = choose_cache()
if CACHE:
    _stamp_kernels_with_all_sources()


def cache_folder() -> Path | None:
    """Return the folder where numba writes calibkit's cache, as numba chooses it (None: in memory).

    numba looks first at ``NUMBA_CACHE_DIR`` (``numba.config.CACHE_DIR``), then beside the
    sources, then in the user-wide folder; calibkit's warm-up markers
    (:mod:`calibkit.metrics.backends`) live in the same place, so that clearing the cache clears them.

    Returns
    -------
    pathlib.Path or None
    """
    if not CACHE:
        return None
    import numba

    configured = os.environ.get("NUMBA_CACHE_DIR") or numba.config.CACHE_DIR
    if configured:
        return Path(configured)
    if all(_writable(folder / "__pycache__") for folder in _KERNEL_FOLDERS):
        return _KERNEL_FOLDERS[0] / "__pycache__"
    return _user_wide()
