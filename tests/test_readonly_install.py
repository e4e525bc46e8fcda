"""`import calibkit` where numba cannot cache beside the package nor under $HOME (issue 14).

A read-only install run by a user without a writable home raised ``RuntimeError: cannot cache
function '_bin_index': no locator available`` at import. Root ignores file permissions, so the
unwritable places are made so for everyone: each is a path under (or equal to) a regular file,
where ``mkdir`` fails whoever asks. The package is a copy whose ``__pycache__`` folders are
regular files.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import calibkit

SCRIPT = (
    "import calibkit, numpy as np; print(calibkit.__file__); "
    "print(calibkit.ece(np.array([[0.9, 0.1], [0.3, 0.7]]), [0, 1]))"
)


@pytest.fixture(scope="module")
def readonly_copy(tmp_path_factory):
    root = tmp_path_factory.mktemp("readonly")
    source = Path(calibkit.__file__).parent
    package = root / "site" / "calibkit"
    shutil.copytree(source, package, ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    for folder in [package, *(p for p in package.rglob("*") if p.is_dir())]:
        (folder / "__pycache__").write_text("not a folder")  # numba's in-tree cache cannot be made
    blocker = root / "a-file"
    blocker.write_text("x")
    return root, blocker


def run(root: Path, **env: str) -> subprocess.CompletedProcess:
    """The script in a fresh interpreter that imports the copy (cwd is not the checkout)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    environment.update(PYTHONPATH=str(root / "site"), PYTHONDONTWRITEBYTECODE="1", **env)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env=environment,
        cwd=root,
        timeout=600,
        check=False,
    )
    assert proc.returncode != 0 or proc.stdout.startswith(str(root / "site")), proc.stdout
    return proc


def test_caches_in_a_private_temporary_folder(readonly_copy, tmp_path):
    root, blocker = readonly_copy
    proc = run(root, HOME=str(blocker / "home"), XDG_CACHE_HOME=str(blocker / "cache"), TMPDIR=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert float(proc.stdout.split()[-1]) == pytest.approx(0.2, abs=1e-15)
    cache = tmp_path / f"calibkit-numba-cache-{os.getuid()}"
    assert any(cache.rglob("*.nbi")), "the kernels were not cached in the temporary folder"
    assert (cache.stat().st_mode & 0o777) == 0o700


def test_compiles_in_memory_when_nothing_is_writable(readonly_copy):
    root, blocker = readonly_copy
    proc = run(root, HOME=str(blocker / "home"), XDG_CACHE_HOME=str(blocker / "cache"), TMPDIR=str(blocker / "tmp"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert float(proc.stdout.split()[-1]) == pytest.approx(0.2, abs=1e-15)
    assert "Warning" not in proc.stderr


def test_a_users_numba_cache_dir_is_used(readonly_copy, tmp_path):
    root, blocker = readonly_copy
    proc = run(root, HOME=str(blocker / "home"), TMPDIR=str(blocker / "tmp"), NUMBA_CACHE_DIR=str(tmp_path / "mine"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert any((tmp_path / "mine").rglob("*.nbi"))
