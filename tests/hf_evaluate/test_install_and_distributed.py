"""Installing into evaluate's module cache, the CLI, and distributed use with two processes."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import calibkit
from calibkit.cli import main
from calibkit.evaluate_modules import NAMESPACES, evaluate_module_path, hf_modules_cache


def test_install_writes_evaluates_cache_layout_and_stays_newest(tmp_path):
    scripts = calibkit.install_evaluate_modules(["cece"], modules_cache=tmp_path)
    assert len(scripts) == len(NAMESPACES)
    for namespace in NAMESPACES:
        folder = tmp_path / "evaluate_modules" / "metrics" / f"{namespace}--cece"
        (digest,) = [h for h in os.listdir(folder) if len(h) == 64]
        names = {p.name for p in (folder / digest).iterdir()}
        assert {"cece.py", "README.md", "app.py", "requirements.txt", "__init__.py"} <= names
        # An older version left in the cache must not win after a reinstall (newest mtime wins).
        stale = folder / ("0" * 64)
        stale.mkdir()
        (stale / "cece.py").write_text("stale")
    calibkit.install_evaluate_modules(["cece"], modules_cache=tmp_path)
    for namespace in NAMESPACES:
        folder = tmp_path / "evaluate_modules" / "metrics" / f"{namespace}--cece"
        newest = max(
            (h for h in os.listdir(folder) if len(h) == 64), key=lambda h: (folder / h / "cece.py").stat().st_mtime
        )
        assert newest != "0" * 64
    for package in ("", "evaluate_modules", "evaluate_modules/metrics"):
        assert (tmp_path / package / "__init__.py").is_file()


def test_install_rejects_unknown_names(tmp_path):
    with pytest.raises(ValueError, match="`name` must be one of"):
        calibkit.install_evaluate_modules(["accuracy"], modules_cache=tmp_path)
    with pytest.raises(ValueError, match="`namespaces` must be plain names"):
        calibkit.install_evaluate_modules(["ece"], modules_cache=tmp_path, namespaces=["a/b"])


def test_cli_install_modules(tmp_path, capsys):
    assert main(["install-modules", "--modules-cache", str(tmp_path), "ece", "nll"]) == 0
    out = capsys.readouterr().out
    assert "evaluate-metric--ece" in out and "calibkit--nll" in out and "installed 2 evaluate modules" in out


def test_hf_modules_cache_follows_evaluates_rule(monkeypatch, tmp_path):
    monkeypatch.delitem(sys.modules, "evaluate.config", raising=False)  # as before `import evaluate`
    monkeypatch.delenv("HF_MODULES_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hf_modules_cache() == tmp_path / "home" / "modules"
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "mods"))
    assert hf_modules_cache() == tmp_path / "mods"


WORKER = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import evaluate

    path, pid, cache_dir, data_file = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    with np.load(data_file) as data:
        probs, labels = data["probs"], data["labels"]
    metric = evaluate.load(path, num_process=2, process_id=pid, experiment_id="calibkit-two", cache_dir=cache_dir)
    rows = np.array_split(np.arange(len(labels)), 2)[pid]
    for batch in np.array_split(rows, [7, 60, 61]):  # uneven batches, one of them of one row
        metric.add_batch(predictions=probs[batch], references=labels[batch])
    result = metric.compute(n_bins=10, theta=2)
    print(json.dumps(result))
    """
)


@pytest.mark.slow  # processes of their own, each importing torch: the default run's time, in .ci/run's slow pass
def test_two_processes_give_the_one_process_result(tmp_path, data):
    probs, labels = data(7, "multiclass", n=500)
    np.savez(tmp_path / "data.npz", probs=probs, labels=labels)
    repo = str(Path(calibkit.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")]),
        "HF_MODULES_CACHE": str(tmp_path / "modules"),
        "HF_EVALUATE_OFFLINE": "1",
    }
    args = [evaluate_module_path("calibration_report"), str(tmp_path / "shared"), str(tmp_path / "data.npz")]
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, args[0], str(pid), *args[1:]],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for pid in (0, 1)
    ]
    outputs = [worker.communicate(timeout=300) for worker in workers]
    for worker, (_, err) in zip(workers, outputs):
        assert worker.returncode == 0, err[-3000:]
    result, other = (json.loads(out.strip().splitlines()[-1]) for out, _ in outputs)
    assert other is None  # only process 0 returns the result, as in evaluate
    want = calibkit.calibration_report(probs, labels, n_bins=10, theta=2)
    assert list(result) == list(want)
    for key, value in want.items():
        assert np.allclose(result[key], value, rtol=0, atol=1e-12, equal_nan=True), key
