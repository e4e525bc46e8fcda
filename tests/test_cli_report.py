"""`calibkit report` end to end: a tiny random model and dataset saved to a temp dir, saved predictions, errors."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from datasets import Dataset, DatasetDict
from transformers import BertConfig, BertForSequenceClassification, BertForTokenClassification

import calibkit
from calibkit.calibrators.registry import NAMES as CALIBRATORS
from calibkit.cli import main
from tests.conftest import TINY_WORDS, tiny_tokenizer


def save_tiny(tmp_path, task):
    tokenizer = tiny_tokenizer(tmp_path)
    torch.manual_seed(0)
    names = {0: "neutral", 1: "hostile", 2: "critical"}
    config = BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37,
        num_labels=3, id2label=names, label2id={v: k for k, v in names.items()},
    )  # fmt: skip
    model = (BertForSequenceClassification if task == "sequence" else BertForTokenClassification)(config)
    with torch.no_grad():
        model.classifier.weight.mul_(100)  # confident, hence miscalibrated, logits
    folder = tmp_path / f"model-{task}"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    rng = np.random.default_rng(0)
    words = [list(rng.choice(TINY_WORDS, rng.integers(2, 9))) for _ in range(240)]
    if task == "sequence":
        rows = {"text": [" ".join(w) for w in words], "label": rng.choice(["neutral", "hostile", "critical"], 240)}
    else:
        rows = {"text": words, "label": [rng.integers(0, 3, len(w)).tolist() for w in words]}
    data = DatasetDict({"train": Dataset.from_dict(rows), "test": Dataset.from_dict(rows)})
    data.save_to_disk(tmp_path / f"data-{task}")
    return folder, tmp_path / f"data-{task}"


def image_shape(path):
    import matplotlib.image

    image = matplotlib.image.imread(path)
    assert image[..., :3].std() > 0.05  # not blank
    return image.shape


@pytest.mark.parametrize("task", ["sequence", "token"])
def test_report_on_a_model_and_a_dataset(tmp_path, capsys, task):
    model, data = save_tiny(tmp_path, task)
    out = tmp_path / "out"
    argv = ["compare", "--model", str(model), "--dataset", str(data), "--task", task, "--theta", "5"]
    assert main([*argv, "--output", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["methods"]) == {"uncalibrated", *CALIBRATORS} - set(report["errors"])
    assert {"brier_miscalibration", "brier_discrimination"} <= set(report["methods"]["uncalibrated"])
    assert set(report["conformal_sets"]["methods"]) == set(report["methods"])
    assert set(report["per_class_ece"]["uncalibrated"]) == {"neutral", "hostile", "critical"}
    if task == "sequence":
        assert report["n_validation"] + report["n_test"] == 240
    for name in ("table.md", "table.csv", "report.json"):
        assert (out / name).stat().st_size > 200
    assert "| Uncalibrated |" in (out / "table.md").read_text()
    # Figures: overall (2 panels side by side), per class (3 panels in a row), regions.
    h, w, _ = image_shape(out / "reliability.png")
    assert w > 1.5 * h
    h3, w3, _ = image_shape(out / "reliability_per_class.png")
    assert w3 > 2.5 * h3 * 0.9
    image_shape(out / "regions.png")
    # The uncalibrated row equals the functional core on the evaluation half.
    table = (out / "table.csv").read_text().splitlines()
    assert table[0].startswith("method,accuracy,macro_f1,ece")


def test_a_token_model_is_split_and_resampled_by_sentence(tmp_path, capsys, monkeypatch):
    """The tokens of a sentence go together to one half, and the bootstrap resamples sentences:
    compare_calibrators and the re-splits get (S, L, K) logits, as the guide says (they got each
    half's tokens flattened, which split sentences and made the intervals several times too narrow)."""
    import calibkit.verdicts.comparison

    model, data = save_tiny(tmp_path, "token")
    seen = []
    real = calibkit.verdicts.comparison.compare_calibrators

    def spy(*arrays, **kwargs):
        seen.append([np.shape(a) for a in arrays])
        return real(*arrays, **kwargs)

    monkeypatch.setattr(calibkit.verdicts.comparison, "compare_calibrators", spy)
    argv = ["compare", "--model", str(model), "--dataset", str(data), "--task", "token", "--theta", "5"]
    assert main([*argv, "--bootstrap", "20", "--resplits", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    val, y_val, test, y_test = seen[0]
    assert len(val) == 3 and val[:2] == y_val and test[:2] == y_test and val[0] + test[0] == 240  # sentences
    assert report["resplits"]["unit"] == "sequences"  # the re-splits move whole sentences too
    labelled = sum(len(w) for w in load_words(data))  # first sub-token of every word
    assert report["n_validation"] + report["n_test"] == labelled


def load_words(folder):
    from datasets import load_from_disk

    return load_from_disk(str(folder))["test"]["text"]


def test_report_table_text_and_bootstrap(tmp_path, capsys):
    model, data = save_tiny(tmp_path, "sequence")
    assert main(["compare", "--model", str(model), "--dataset", str(data), "--bootstrap", "30", "--theta", "5"]) == 0
    text = capsys.readouterr().out
    assert "| method | accuracy |" in text and "[" in text  # intervals in the cells


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".json"])
def test_report_on_saved_predictions_in_table_formats(tmp_path, capsys, suffix):
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(300, 3)) * 2
    labels = rng.integers(0, 3, 300)
    path = tmp_path / f"preds{suffix}"
    if suffix == ".csv":
        Dataset.from_dict({**{f"logits_{k}": logits[:, k] for k in range(3)}, "labels": labels}).to_csv(path)
    elif suffix == ".parquet":
        Dataset.from_dict({"logits": logits.tolist(), "labels": labels}).to_parquet(path)
    else:
        Dataset.from_dict({"logits": logits.tolist(), "labels": labels}).to_json(path)
    assert main(["report", "--predictions", str(path), "--json", "--theta", "5", "--bootstrap", "50"]) == 0
    got = json.loads(capsys.readouterr().out)
    expected = calibkit.calibration_report(logits, labels, from_logits=True, theta=5)
    for key in ("ece", "cece", "rbece", "ace", "nll"):
        assert got[key] == pytest.approx(expected[key], rel=1e-6)  # files may hold float32
    low, high = got["intervals"]["nll"]
    assert low < expected["nll"] < high


def test_report_on_token_predictions_with_figures(tmp_path, capsys):
    rng = np.random.default_rng(2)
    rows = [rng.normal(size=(int(n), 4)).tolist() for n in rng.integers(2, 7, 80)]
    labels = [rng.integers(0, 4, len(r)).tolist() for r in rows]
    path = tmp_path / "tokens.parquet"
    Dataset.from_dict({"logits": rows, "labels": labels}).to_parquet(path)
    assert main(["report", "--predictions", str(path), "--output", str(tmp_path / "fig"), "--theta", "2"]) == 0
    assert "| ece |" in capsys.readouterr().out
    flat_z = np.concatenate([np.asarray(r) for r in rows])
    flat_y = np.concatenate(labels)
    expected = calibkit.ece(flat_z, flat_y, from_logits=True)
    row = [line for line in (tmp_path / "fig" / "table.md").read_text().splitlines() if "| Uncalibrated |" in line][0]
    assert f"{np.mean(flat_z.argmax(1) == flat_y):.4f}" in row and f"{expected:.4f}" in row
    image_shape(tmp_path / "fig" / "reliability_per_class.png")


def test_bad_input_exits_with_one_line(tmp_path, capsys):
    model, data = save_tiny(tmp_path, "sequence")
    big = tmp_path / "big"
    rows = {"text": ["w1 w2"] * 4, "label": [0, 1, 5, 2]}
    DatasetDict({"test": Dataset.from_dict(rows)}).save_to_disk(big)
    cases = {
        "no such file": ["report", "--predictions", str(tmp_path / "missing.parquet")],
        "no column 'sentence'": ["compare", "--model", str(model), "--dataset", str(data), "--text-column", "sentence"],
        "label count mismatch": ["compare", "--model", str(model), "--dataset", str(big)],
        "cannot load": ["compare", "--model", str(tmp_path / "nothing"), "--dataset", str(data)],
        "--split": ["compare", "--model", str(model), "--dataset", str(data), "--split", "dev"],
    }
    capsys.readouterr()
    for expected, args in cases.items():
        assert main(args) == 2, expected
        err = capsys.readouterr().err
        assert err.startswith("calibkit: error:") and err.count("\n") == 1 and expected in err, err
    # The console script's exit code, in a fresh process.
    proc = subprocess.run(
        [sys.executable, "-m", "calibkit.cli", "compare", "--model", str(model), "--dataset", str(big)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2 and proc.stderr.startswith("calibkit: error: label count mismatch")
    assert proc.stderr.count("\n") == 1


def test_a_vocabulary_shows_its_largest_classes_not_a_line_each(tmp_path, capsys):
    """2,100 classes: the table and the HTML report's per-class table show the 20 classes of largest
    support and say how many more there are, never one line per class."""
    rng = np.random.default_rng(3)
    vocab = 2100
    labels = np.concatenate([np.full(40, 7), np.full(30, 2099), rng.integers(0, vocab, 130)])
    logits = rng.normal(size=(200, vocab)).astype(np.float32)
    logits[np.arange(200), labels] += 4
    path = tmp_path / "vocab.parquet"
    Dataset.from_dict({"logits": logits.tolist(), "labels": labels}).to_parquet(path)
    assert main(["report", "--predictions", str(path), "--output", str(tmp_path / "out")]) == 0
    text = capsys.readouterr().out
    rows = [line for line in text.splitlines() if line.startswith("| ece_class_")]
    assert len(rows) == 21  # 20 classes and one line of the rest
    assert rows[0].startswith("| ece_class_7 |") and rows[1].startswith("| ece_class_2099 |")
    labelled = len(np.unique(labels))
    assert f"| ece_class_* | {vocab - 20:,} more ({labelled:,} with a label): see --json |" in text
    html_table = (tmp_path / "out" / "table.md").read_text()
    assert html_table.count("\n| ") < 60 and f"{vocab - 20:,} more" in html_table


def test_the_interval_table_of_a_vocabulary_shows_its_largest_classes():
    from calibkit.cli.common import interval_lines

    support = np.zeros(3000)
    support[[5, 9, 2999]] = [50, 70, 60]
    low = np.linspace(0, 1, 3000)
    ci = {"confidence": 0.95, "n_boot": 10, "intervals": {"ece": (0.1, 0.2)}, "subset_ece": (low, low + 0.1)}
    rows = [line for line in interval_lines(ci, None, support).splitlines() if line.startswith("| ece_class")]
    assert len(rows) == 21 and rows[0].startswith("| ece_class_9 |") and rows[1].startswith("| ece_class_2999 |")
    assert rows[-1] == "| ece_class_* | 2,980 more (3 with a label): see --json |"
    assert len(interval_lines(ci, None).splitlines()) == 2 + 1 + 1  # support unknown: one line for all classes


def test_the_html_report_of_a_file_shows_the_smooth_diagram_beside_the_binned_one(tmp_path, capsys):
    """The rows of a predictions file are held, so the page also draws the smooth reliability
    diagram (its bandwidth needs them), right after the binned reliability diagram."""
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(400, 3)) * 3
    labels = (logits / 2 + rng.gumbel(size=logits.shape)).argmax(axis=1)  # over-confident logits
    path = tmp_path / "preds.parquet"
    Dataset.from_dict({"logits": logits.tolist(), "labels": labels}).to_parquet(path)
    assert main(["report", "--predictions", str(path), "--output", str(tmp_path / "out")]) == 0
    assert "reliability_smooth: " in capsys.readouterr().out
    page = (tmp_path / "out" / "index.html").read_text()
    captions = re.findall(r"<figcaption>.*?([a-z_]+\.png)", page)
    assert captions[:2] == ["reliability.png", "reliability_smooth.png"]
    pair = re.search(r'<div class="row pair">(.*?)</div>', page, flags=re.S).group(1)  # one row, side by side
    assert pair.count("<img alt=") == 2 and "reliability_smooth.png" in pair
    assert page.count("<img ") == len(captions) == 5  # the page is written once, with every figure
    image_shape(tmp_path / "out" / "reliability_smooth.png")
