"""Where the compiled kernels are cached, decided once at import: ``CACHE`` for ``njit(cache=...)``.

numba's ``cache=True`` raises at decoration time ("cannot cache function ...: no locator
available") when it can write neither beside the source (``__pycache__``) nor in its user-wide
cache under ``$HOME`` nor in ``NUMBA_CACHE_DIR``: a read-only install run by a user without a
writable home (a container's non-root user), where ``import calibkit`` then failed. The order
here is numba's own, plus one more place: a per-user folder in the system's temporary
directory, which numba is pointed to (``numba.config.CACHE_DIR``) only when nothing else is
writable, so a working setup is never changed. With no writable place at all, the kernels are
compiled in memory (``CACHE = False``): slower first calls, same results.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
# numba caches a function beside its source file: every folder holding compiled kernels
# (_fastmath.py at the top, the metric kernels' package, the calibrators').
_KERNEL_FOLDERS = (_PACKAGE, _PACKAGE / "metrics", _PACKAGE / "metrics" / "_kernels", _PACKAGE / "calibrators")


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
