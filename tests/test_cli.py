import json
import subprocess
import sys

import numpy as np
import pytest

import calibkit
from calibkit.cli import main


def test_report_on_embedded_example_says_synthetic(capsys):
    assert main(["report"]) == 0
    out = capsys.readouterr().out
    assert "SYNTHETIC" in out
    for name in (*calibkit.METRICS, "accuracy", "ece_class_discussion"):
        if name != "subset_ece":
            assert f"| {name} |" in out


def test_report_on_predictions_file_matches_functional_api(tmp_path, capsys):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(500, 3))
    labels = rng.integers(0, 3, 500)
    path = tmp_path / "preds.npz"
    np.savez(path, logits=logits, labels=labels)
    assert main(["report", "--predictions", str(path), "--json", "--theta", "5"]) == 0
    got = json.loads(capsys.readouterr().out)
    expected = calibkit.calibration_report(logits, labels, from_logits=True, theta=5)
    for key in ("ece", "cece", "rbece", "fce", "ecd", "esce", "ace"):
        assert abs(got[key] - expected[key]) < 1e-12
    assert got["subset_ece"] == expected["subset_ece"].tolist()


def test_fce_variant_reaches_every_number_and_is_named(tmp_path, capsys):
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(400, 3)) * 2
    labels = rng.integers(0, 3, 400)
    path = tmp_path / "preds.npz"
    np.savez(path, logits=logits, labels=labels)
    args = ["report", "--predictions", str(path), "--json", "--bootstrap", "20"]
    assert main([*args, "--fce-variant", "authors"]) == 0
    authors = json.loads(capsys.readouterr().out)
    assert main(args) == 0
    paper = json.loads(capsys.readouterr().out)
    assert (authors["fce_variant"], paper["fce_variant"]) == ("authors", "paper")
    expected = calibkit.fce(logits, labels, from_logits=True, fce_variant="authors")
    assert abs(authors["fce"] - expected) < 1e-12
    assert abs(paper["fce"] - calibkit.fce(logits, labels, from_logits=True)) < 1e-12
    assert abs(authors["fce"] - paper["fce"]) > 1e-3  # the option changed the number
    low, high = authors["intervals"]["fce"]
    assert low <= expected <= high and (low, high) != tuple(paper["intervals"]["fce"])
    out = tmp_path / "out"
    assert main(["report", "--predictions", str(path), "--fce-variant", "authors", "--output", str(out)]) == 0
    assert "--fce-variant authors" in capsys.readouterr().out
    table = (out / "table.md").read_text()
    assert "--fce-variant authors" in table and f"{expected:.4f}" in table


def test_bad_input_exits_non_zero_with_one_line(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, probs=np.array([[0.6, 0.6]]), labels=np.array([0]))
    for args in (["--predictions", str(tmp_path / "missing.npz")], ["--predictions", str(path)]):
        proc = subprocess.run(
            [sys.executable, "-m", "calibkit.cli", "report", *args], capture_output=True, text=True, check=False
        )
        assert proc.returncode == 2
        assert proc.stderr.startswith("calibkit: error:") and proc.stderr.count("\n") == 1


def test_report_multilabel_predictions_table_json_bootstrap_and_shards(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(4)
    z = rng.normal(size=(600, 3)) * 2
    y = (rng.random((600, 3)) < 1 / (1 + np.exp(-z / 2))).astype(np.float32)
    path = tmp_path / "ml.parquet"
    pq.write_table(pa.table({"logits": [r.tolist() for r in z], "labels": [r.tolist() for r in y]}), path)
    want = calibkit.calibration_report(z, y, from_logits=True, multilabel=True, theta=5)
    assert main(["multilabel", "--predictions", str(path), "--json", "--theta", "5"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["micro"]["ece"] == pytest.approx(want["micro"]["ece"], rel=1e-12)
    assert got["per_label"]["brier"] == pytest.approx(want["per_label"]["brier"].tolist(), rel=1e-12)
    assert main(["multilabel", "--predictions", str(path), "--bootstrap", "50"]) == 0
    table = capsys.readouterr().out
    assert "| ece | " in table and "macro 95% interval" in table and "Over the labels' ECEs: cece" in table
    shards = tmp_path / "shards"
    shards.mkdir()
    np.savez(shards / "a.npz", logits=z[:300], labels=y[:300])
    np.savez(shards / "b.npz", logits=z[300:], labels=y[300:])
    assert main(["multilabel", "--predictions", str(shards), "--json", "--quiet", "--theta", "5"]) == 0
    streamed = json.loads(capsys.readouterr().out)
    assert streamed["micro"]["brier"] == pytest.approx(want["micro"]["brier"], rel=1e-12)
    with pytest.raises(SystemExit) as stop:  # no files yet: the command has no --output
        main(["multilabel", "--predictions", str(path), "--output", str(tmp_path / "o")])
    assert stop.value.code == 2 and "unrecognized arguments: --output" in capsys.readouterr().err
