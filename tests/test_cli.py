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
    out = tmp_path / "o"
    assert main(["multilabel", "--predictions", str(shards), "--quiet", "--theta", "5", "--output", str(out)]) == 0
    assert f"html: {out / 'report.html'}" in capsys.readouterr().out
    assert json.loads((out / "report.json").read_text())["micro"]["brier"] == streamed["micro"]["brier"]
    assert (out / "table.md").read_text().startswith("# calibkit report (multi-label): ")
    assert "| ece | " in (out / "table.md").read_text() and (out / "reliability.png").stat().st_size > 0


def test_every_setting_of_the_reported_metrics_is_a_flag(tmp_path, capsys):
    rng = np.random.default_rng(5)
    logits, labels = rng.normal(size=(300, 4)) * 2, rng.integers(0, 4, 300)
    path = tmp_path / "p.npz"
    np.savez(path, logits=logits, labels=labels)
    flags = ["--ace-ranges", "5", "--sce-bins", "7", "--esce-bins", "3", "--fce-bins", "4", "--rbece-bins", "6"]
    assert main(["report", "--predictions", str(path), "--json", "--theta", "2", "--eps", "1e-6", *flags]) == 0
    got = json.loads(capsys.readouterr().out)
    settings = dict(ace_ranges=5, sce_bins=7, esce_bins=3, fce_bins=4, rbece_bins=6, theta=2, eps=1e-6)
    want = calibkit.calibration_report(logits, labels, from_logits=True, **settings)
    default = calibkit.calibration_report(logits, labels, from_logits=True, theta=2)
    for key in ("ace", "sce", "esce", "fce", "rbece"):  # each flag changed its number
        assert got[key] == pytest.approx(want[key], rel=1e-12) and want[key] != default[key], key
    assert got["nll"] == pytest.approx(want["nll"], rel=1e-12)  # logits: eps clips nothing here
    # the written report comes from the comparison, which takes fewer settings: refused, not written otherwise
    assert main(["report", "--predictions", str(path), "--sce-bins", "7", "--output", str(tmp_path / "o")]) == 2
    assert "--sce-bins: --output writes its report with the default" in capsys.readouterr().err


def test_next_token_predictions(tmp_path, capsys):
    rng = np.random.default_rng(6)
    logits, labels = rng.normal(size=(3, 10, 6)), rng.integers(0, 6, (3, 10))
    labels[:, :2] = -100  # the prompt
    path = tmp_path / "lm.npz"
    np.savez(path, logits=logits, labels=labels)
    assert main(["report", "--predictions", str(path), "--next-token", "--json", "--theta", "0"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = calibkit.calibration_report(logits, labels, from_logits=True, next_token=True, theta=0)
    assert got["n"] == want["n"] == 3 * 8 and got["ece"] == pytest.approx(want["ece"], rel=1e-12)
    assert main(["report", "--predictions", str(path), "--next-token", "--theta", "0"]) == 0
    table = capsys.readouterr().out
    assert "| ace | nan |" in table and "leaves them out): ace" in table
    assert main(["report", "--predictions", str(path), "--next-token", "--theta", "0", "--output", str(tmp_path)]) == 0
    written = (tmp_path / "table.md").read_text()  # the positions shifted as the model's loss shifts them
    assert "\n24 predictions.\n" in written and f"| **{want['ece']:.4f}** |" in written
