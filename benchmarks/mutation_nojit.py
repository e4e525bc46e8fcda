"""pytest plugin for ``benchmarks/mutation.py``: calibkit's kernels as plain Python (``NUMBA_DISABLE_JIT=1``).

numba's pure-Python mode cannot run ``@intrinsic`` or ``@overload`` functions; this plugin, loaded
with ``-p mutation_nojit`` before calibkit is imported, gives the two bit casts of
``calibkit._numba.fastmath`` and the one overload of ``calibkit.metrics._kernels.rows`` Python bodies.
It does nothing unless ``NUMBA_DISABLE_JIT=1``.
"""

from __future__ import annotations

import os
import sys

if os.environ.get("NUMBA_DISABLE_JIT") == "1":
    import numba
    import numba.core.extending as extending
    import numpy as np

    def _bits_of_float(value):
        return np.float64(value).view(np.int64)

    def _float_from_bits(bits):
        return np.int64(bits).view(np.float64)

    _CASTS = {"bits_of_float": _bits_of_float, "float_from_bits": _float_from_bits}

    def _intrinsic(func=None, **_kwargs):
        if func is None:
            return _intrinsic
        return _CASTS[func.__name__]

    def _overload(target, **_kwargs):
        def register(impl):
            def python_version(*args):
                return impl(*(numba.typeof(a) for a in args))(*args)

            sys.modules[target.__module__].__dict__[target.__name__] = python_version
            return impl

        return register

    extending.intrinsic = _intrinsic
    extending.overload = _overload
