"""``calibkit warmup``: compile and cache the kernels of the common input kinds ahead of time."""

from __future__ import annotations

import time
import warnings

import numpy as np

from calibkit.metrics import _kernels as kernels
from calibkit.metrics.accumulator import CalibrationAccumulator
from calibkit.metrics.backends import use_backend
from calibkit.metrics.engines.auto import scheduled_count, synthetic_like, wait_until_ready
from calibkit.metrics.functional import calibration_report, ece
from calibkit.metrics.validation import PreparedInput


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
    dtypes = ("float32", "float64")
    kinds = [(m, d, k) for k in num_classes for m in (kernels.MODE_PROBS, kernels.MODE_LOGITS) for d in dtypes]
    kinds += [(m, d, 2) for m in (kernels.MODE_BINARY_PROBS, kernels.MODE_BINARY_LOGITS) for d in dtypes]
    before = scheduled_count()
    with use_backend("auto"):
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
    return scheduled_count() - before
