"""CI's warm-up before README's test line: compile the kernels the default suite uses, once.

A clean clone has no numba cache: the suite's first call of each kernel signature compiles it
(about 15 s a kind of input, 3-4 s a further class count on 2 cores), several minutes in all.
CI compiles them here instead, outside the timed test line, into the same cache (``__pycache__``
beside the kernel sources), where every test process then finds them. Nothing here checks
anything: the tests do.
"""

import os
import time
import warnings

os.environ.setdefault("CALIBKIT_BACKEND", "numba")  # as tests/conftest.py runs them

import numpy as np

from calibkit.metrics.functional import calibration_report, multilabel_report
from calibkit.metrics.warmup import warmup
from calibkit.verdicts.comparison import compare_calibrators

start = time.perf_counter()
# Every short-row class count (a top-label kernel per K up to 8, one for 9-15; 3 is the tiny models'), a long row.
warmup(num_classes=(2, 3, 4, 5, 6, 7, 8, 12, 20), verbose=True)
rng = np.random.default_rng(0)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # random input: empty regions and the like say nothing here
    # Read-only arrays are another signature: what datasets, Arrow and parquet files hand over.
    for k in (3, 4, 20):
        for dtype in ("float32", "float64"):
            for from_logits in (False, True):
                z = rng.normal(size=(64, k)).astype(dtype)
                values = z if from_logits else np.exp(z) / np.exp(z).sum(axis=1, keepdims=True, dtype=dtype)
                labels = rng.integers(0, k, 64)
                labels.setflags(write=False)
                calibration_report(values, labels, from_logits=from_logits)
                values.setflags(write=False)
                calibration_report(values, labels, from_logits=from_logits)
    for dtype in ("float32", "float64"):
        z = (rng.normal(size=(200, 3)) * 3).astype(dtype)
        y = rng.integers(0, 3, 200)
        compare_calibrators(z[:100], y[:100], z[100:], y[100:])  # every calibrator's fit and report
        multi = (rng.normal(size=(200, 4)) * 3).astype(dtype)
        hits = rng.integers(0, 2, (200, 4))
        multilabel_report(multi, hits, from_logits=True)
        multilabel_report(1 / (1 + np.exp(-multi)), hits)
print(f"calibkit kernels warmed in {time.perf_counter() - start:.0f} s", flush=True)
