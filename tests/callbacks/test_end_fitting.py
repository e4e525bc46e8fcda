"""EndFitter alone, without a Trainer: what the callback fits, saves and logs at the end of
training, from fake args, state and kept predictions."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from calibkit.callbacks.end_fitting import DEFAULT_FITS, EndFitter, block_logs, fit_method

TINY = dict(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37)


def fake_run(tmp_path, predictions, *, fit=("wts", "ts"), world_zero=True):
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(num_labels=3, **TINY))
    logs = []
    evaluation = SimpleNamespace(
        last_predictions=predictions, no_fit_reason="no evaluation ran", user_preprocess=None, class_counts=None
    )
    fitter = EndFitter(fit, evaluation=evaluation)
    fitter.trainer = SimpleNamespace(model=model, log=logs.append, processing_class=None)
    args = SimpleNamespace(output_dir=str(tmp_path), push_to_hub=False, load_best_model_at_end=False)
    state = SimpleNamespace(is_world_process_zero=world_zero, best_model_checkpoint=None, log_history=[])
    return fitter, args, state, logs


def predictions(n=80, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    logits = rng.normal(size=(n, 3)) + 3 * np.eye(3)[labels]  # over-confident: T > 1
    return logits, labels


def test_each_method_is_fitted_saved_and_logged(tmp_path):
    fitter, args, state, logs = fake_run(tmp_path, predictions())
    fitter.on_train_end(args, state)
    assert sorted(fitter.fitted) == ["ts", "wts"]
    for method in ("ts", "wts"):
        folder = tmp_path / f"calibrated-{method}"
        assert fitter.calibrated_dirs[method] == str(folder)
        block = json.loads((folder / "config.json").read_text())["calibration"]
        assert block["method"] == method
    (entry,) = logs
    assert entry["calibration/ts/temperature"] == pytest.approx(fitter.fitted["ts"].temperature_)
    assert "calibration/wts/before_ece" in entry and "calibration/wts/after_ece" in entry


def test_only_the_main_process_saves(tmp_path):
    fitter, args, state, logs = fake_run(tmp_path, predictions(), world_zero=False)
    fitter.on_train_end(args, state)
    assert sorted(fitter.fitted) == ["ts", "wts"] and fitter.calibrated_dirs == {} and logs
    assert not list(tmp_path.iterdir())


def test_without_kept_predictions_it_says_why(tmp_path):
    fitter, args, state, logs = fake_run(tmp_path, None)
    with pytest.warns(RuntimeWarning, match="no calibrator fitted: no evaluation ran"):
        fitter.on_train_end(args, state)
    assert fitter.fitted == {} and logs == []


def test_a_method_that_fails_is_skipped_with_a_warning(tmp_path):
    logits, labels = predictions()
    fitter, args, state, logs = fake_run(tmp_path, (logits[:, :2], labels % 2), fit=("ts",))  # 2 classes, 3 labels
    with pytest.warns(RuntimeWarning, match="ts could not be fitted"):
        fitter.on_train_end(args, state)
    assert logs == [] and not fitter.calibrated_dirs


def test_names_and_logs():
    assert fit_method("TEMPERATURE") == "ts" and fit_method("platt") == "platt"
    with pytest.raises(ValueError, match="`method` must be one of"):
        fit_method("nope")
    assert EndFitter(evaluation=None).fit_methods == DEFAULT_FITS
    block = {"method": "ts", "temperature": 2.0, "metrics": {"before": {"ece": 0.3}, "after": {"ece": 0.1}}}
    assert block_logs("ts", block) == {
        "calibration/ts/temperature": 2.0,
        "calibration/ts/before_ece": 0.3,
        "calibration/ts/after_ece": 0.1,
    }
