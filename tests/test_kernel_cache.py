"""numba's cache must not serve a kernel compiled from an older version of a file it calls,
nor one that computes other bits than the kernel compiled in the process.

numba stamps a cached kernel with its own source file only; calibkit stamps every kernel with
all kernel sources (calibkit._numba.cache.sources_stamp), so an edit of ``_numba/fastmath.py`` (or an
upgrade that changes only it) recompiles the kernels of ``metrics/_kernels/`` that inline it.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import calibkit
from calibkit._numba import cache as _numba_cache

PACKAGE = Path(calibkit.__file__).parent

SCRIPT = """
import numpy as np
from calibkit.metrics._kernels import rows
P = np.full(8, 0.25); L = np.log(P); sq = np.zeros(2); ent = np.zeros(2)
rows._square_and_entropy(P, L, 2, 4, sq, ent)
stats = rows._square_and_entropy.stats
print(rows.__file__, sq[0], sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))
"""


def test_every_file_with_a_compiled_kernel_is_in_the_stamp():
    jitted = {p.resolve() for p in PACKAGE.rglob("*.py") if re.search(r"@(nb\.|numba\.)?n?jit\b", p.read_text())}
    assert jitted, "the scan found no kernel at all"
    assert jitted <= {p.resolve() for p in _numba_cache.kernel_sources()}
    stamped = {name for name, _, _ in _numba_cache.sources_stamp()}
    assert {str(p.relative_to(PACKAGE.resolve())) for p in jitted} <= stamped


def copy_package(tmp_path: Path) -> Path:
    """A copy of the package without compiled files: the site its scripts run from."""
    site = tmp_path / "site"
    shutil.copytree(PACKAGE, site / "calibkit", ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    return site


def run_script(script: str, site: Path, cache: Path) -> list[str]:
    """Run ``script`` in a new process on the copy at ``site`` with the compile cache ``cache``: its output's words."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    environment.update(PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1", NUMBA_CACHE_DIR=str(cache))
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=environment, cwd=site, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.split()


def run(site: Path, cache: Path) -> tuple[int, int]:
    path, value, hits, misses = run_script(SCRIPT, site, cache)
    assert path.startswith(str(site)) and float(value) == 0.25
    return int(hits), int(misses)


def test_an_edit_of_a_called_file_recompiles_the_kernels_of_other_files(tmp_path):
    site = copy_package(tmp_path)
    cache = tmp_path / "cache"
    assert run(site, cache) == (0, 1)  # compiled
    assert run(site, cache) == (1, 0)  # loaded from the cache
    fastmath = site / "calibkit" / "_numba" / "fastmath.py"
    fastmath.write_text(fastmath.read_text() + "\n# an edit\n")
    assert run(site, cache) == (0, 1)  # rows.py is unchanged, but the cached copy is stale
    assert run(site, cache) == (1, 0)


REPRODUCE = """
import numpy as np
import calibkit
from calibkit.calibrators import TemperatureScaling
from calibkit.metrics import _kernels
from calibkit.metrics.backends import set_backend
set_backend("numba")
rng = np.random.default_rng(2026)
out = []
for k, n in ((4, 3000), (20, 1500), (66, 400)):  # the inputs of benchmarks/golden.py
    z = rng.normal(size=(n, k)) * 2.5
    y = rng.integers(0, k, n)
    if k == 4:
        continue
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    for x, kw in ((z, {"from_logits": True}), (p, {})):
        for dtype in (np.float32, np.float64):
            out += [f(x.astype(dtype), y, **kw) for f in (calibkit.ecd, calibkit.brier, calibkit.nll)]
    fit = np.argmax(z / 1.7 + np.random.default_rng(k).gumbel(size=z.shape), axis=1)
    out += [TemperatureScaling().fit(z.astype(dtype), fit).temperature_ for dtype in (np.float32, np.float64)]
stats = _kernels.ACCUMULATE[_kernels.MODE_LOGITS].stats
print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()), *(float(v).hex() for v in out))
"""


@pytest.mark.slow  # two processes that compile or load every kernel they call: about 35 s
def test_a_process_that_compiles_and_one_that_loads_the_cache_agree_to_the_bit(tmp_path):
    # A sum reassociated by fast-math was vectorised differently in the two (the ECD of float32
    # logits of 66 classes differed in the last bit); every reduction must keep its order.
    site = copy_package(tmp_path)
    hits, misses, *compiled = run_script(REPRODUCE, site, tmp_path / "cache")
    hits_after, misses_after, *loaded = run_script(REPRODUCE, site, tmp_path / "cache")
    assert (int(hits), int(misses_after)) == (0, 0) and int(misses) > 0 and int(hits_after) > 0
    assert len(compiled) == 2 * (12 + 2)
    assert compiled == loaded
