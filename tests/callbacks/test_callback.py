"""CalibrationCallback inside a real Trainer: logged keys, values, integrations, fits, failures."""

import glob
import json
import math
import os
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from datasets import Dataset
from transformers import (
    AutoModelForSequenceClassification,
    BertConfig,
    BertForSequenceClassification,
    BertForTokenClassification,
    DataCollatorForTokenClassification,
    Trainer,
    TrainingArguments,
)

import calibkit
from calibkit.calibrators import CalibratedModelForSequenceClassification, WeightedTemperatureScaling
from calibkit.callbacks import CalibrationCallback
from calibkit.callbacks.calibration import DEFAULT_METRICS
from tests.conftest import tiny_tokenizer

HERE = Path(__file__).parent
NUM_LABELS = 3
TINY = dict(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37)


def sequence_data(n, seed=0, length=8):
    """Labels are readable from the first token 70% of the time: learnable, never separable."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, NUM_LABELS, n)
    ids = rng.integers(10, 64, (n, length))
    ids[:, 0] = 5 + np.where(rng.random(n) < 0.7, labels, rng.integers(0, NUM_LABELS, n))
    return Dataset.from_dict(
        {"input_ids": ids.tolist(), "attention_mask": np.ones_like(ids).tolist(), "labels": labels}
    )


def token_data(n, seed=0):
    """Variable-length sequences; the first word position is -100, as for a [CLS]-like token."""
    rng = np.random.default_rng(seed)
    rows = {"input_ids": [], "attention_mask": [], "labels": []}
    for length in rng.integers(3, 12, n):
        ids = rng.integers(10, 64, length)
        labels = np.where(rng.random(length) < 0.7, ids % NUM_LABELS, rng.integers(0, NUM_LABELS, length))
        labels[0] = -100
        rows["input_ids"].append(ids.tolist())
        rows["attention_mask"].append([1] * int(length))
        rows["labels"].append(labels.tolist())
    return Dataset.from_dict(rows)


def accuracy(eval_pred):
    predictions, labels = eval_pred.predictions, eval_pred.label_ids
    predictions = predictions.argmax(-1) if predictions.ndim == labels.ndim + 1 else predictions
    keep = labels != -100
    return {"accuracy": float((predictions[keep] == labels[keep]).mean())}


def training_args(tmp_path, **overrides) -> TrainingArguments:
    """The tests' TrainingArguments: a few CPU steps, an evaluation every 2, no saving or reporting."""
    settings = dict(
        output_dir=str(tmp_path / "out"),
        max_steps=6,
        per_device_train_batch_size=8,
        per_device_eval_batch_size=16,
        learning_rate=5e-3,
        eval_strategy="steps",
        eval_steps=2,
        logging_steps=2,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
    )
    settings.update(overrides)
    return TrainingArguments(**settings)


def make_trainer(tmp_path, task="sequence", callback=None, compute_metrics=accuracy, **overrides):
    torch.manual_seed(0)
    config = BertConfig(num_labels=NUM_LABELS, **TINY)
    model = (BertForSequenceClassification if task == "sequence" else BertForTokenClassification)(config)
    args = training_args(tmp_path, **overrides)
    if task == "sequence":
        train, evaluation, collator = sequence_data(64), sequence_data(45, seed=1), None
    else:
        collator = DataCollatorForTokenClassification(tiny_tokenizer(tmp_path))
        train, evaluation = token_data(64), token_data(45, seed=1)
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=train,
        eval_dataset=evaluation,
        data_collator=collator,
        compute_metrics=compute_metrics,
    )
    callback = callback or CalibrationCallback(fit=("wts", "rd-ts"))
    callback.attach(trainer)
    return trainer, callback


def eval_logs(trainer):
    return [entry for entry in trainer.state.log_history if "eval_loss" in entry]


def check_against_functional(trainer, logs, tol=1e-6, skip=()):
    """The last evaluation's logged values equal calibkit.metrics recomputed on trainer.predict()."""
    out = trainer.predict(trainer.eval_dataset)
    logits, labels = out.predictions, out.label_ids
    last = logs[-1]
    for name in ("cece", "rbece", "fce", "ecd", "esce", "ece"):
        if name in skip:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = getattr(calibkit, name)(logits, labels, from_logits=True)
        assert last[f"eval_{name}"] == pytest.approx(expected, abs=tol, nan_ok=True), name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        per_class = calibkit.subset_ece(logits, labels, from_logits=True)
    for k in range(NUM_LABELS):
        assert last[f"eval_ece_class_LABEL_{k}"] == pytest.approx(per_class[k], abs=tol, nan_ok=True)
    return logits, labels


def test_sequence_every_evaluation_logs_the_metrics_to_tensorboard_and_fits(tmp_path, monkeypatch):
    tb = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path / "tb"))
    trainer, cb = make_trainer(
        tmp_path,
        report_to=["tensorboard"],
        save_strategy="steps",
        save_steps=2,
        metric_for_best_model="cece",
        greater_is_better=False,
        load_best_model_at_end=True,
    )
    trainer.train()
    logs = eval_logs(trainer)
    assert [entry["step"] for entry in logs] == [2, 4, 6]
    for entry in logs:
        assert {"eval_accuracy", "eval_cece", "eval_rbece", "eval_fce", "eval_ecd", "eval_esce", "eval_ece"} <= set(
            entry
        )
        assert {f"eval_ece_class_LABEL_{k}" for k in range(NUM_LABELS)} <= set(entry)
    # metric_for_best_model works on a calibkit key.
    assert trainer.state.best_metric == min(entry["eval_cece"] for entry in logs)
    best_step = min(logs, key=lambda e: e["eval_cece"])["step"]
    assert trainer.state.best_model_checkpoint.endswith(f"checkpoint-{best_step}")
    # TensorBoard event files hold the scalars of every evaluation.
    events = tb.EventAccumulator(glob.glob(str(tmp_path / "tb"))[0])
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"eval/cece", "eval/rbece", "eval/ece_class_LABEL_0", "eval/accuracy"} <= set(tags)
    assert [e.step for e in events.Scalars("eval/cece")] == [2, 4, 6]
    # Calibrated models are saved, reload, and equal a direct fit on the kept logits (those of the
    # model load_best_model_at_end reloaded: test_the_best_checkpoint_is_calibrated_on_its_own_logits).
    logits, labels = cb.last_predictions
    direct = WeightedTemperatureScaling().fit(logits, labels)
    folder = tmp_path / "out" / "calibrated-wts"
    assert (folder / "README.md").exists() and (folder / "modeling_calibkit.py").exists()
    reloaded = CalibratedModelForSequenceClassification.from_pretrained(folder)
    assert reloaded.config.calibration["temperature"] == pytest.approx(direct.temperature_, rel=1e-9)
    assert (tmp_path / "out" / "calibrated-rd-ts" / "config.json").exists()
    fit_log = [e for e in trainer.state.log_history if "calibration/wts/temperature" in e][0]
    assert fit_log["calibration/wts/temperature"] == pytest.approx(direct.temperature_, rel=1e-9)
    assert "calibration/rd-ts/slope" in fit_log and "calibration/wts/after_ece" in fit_log


def test_the_best_checkpoint_is_calibrated_on_its_own_logits(tmp_path):
    """load_best_model_at_end reloads the best checkpoint before on_train_end: the calibrators must
    be fitted on that model's logits (they were fitted on the last evaluation's, another model's,
    and the saved folder paired the best weights with that temperature)."""
    calls = []

    def first_is_best(eval_pred):  # the first evaluation scores best: the best checkpoint is not the last
        calls.append(1)
        return {"order": -float(len(calls))}

    trainer, cb = make_trainer(
        tmp_path, compute_metrics=first_is_best, save_strategy="steps", save_steps=2,
        metric_for_best_model="order", greater_is_better=True, load_best_model_at_end=True,
    )  # fmt: skip
    trainer.train()
    assert trainer.state.best_model_checkpoint.endswith("checkpoint-2") and eval_logs(trainer)[-1]["step"] == 6
    logits, labels = cb.last_predictions
    loaded = trainer.predict(trainer.eval_dataset)  # the model now in the trainer: the best one
    np.testing.assert_allclose(logits, loaded.predictions, rtol=1e-6, atol=1e-6)
    reloaded = CalibratedModelForSequenceClassification.from_pretrained(tmp_path / "out" / "calibrated-wts")
    direct = WeightedTemperatureScaling().fit(loaded.predictions, loaded.label_ids)
    assert reloaded.config.calibration["temperature"] == pytest.approx(direct.temperature_, rel=1e-6)


@pytest.mark.parametrize("task", ["sequence", "token"])
@pytest.mark.parametrize("streamed", [False, True])
def test_eval_do_concat_batches_false_is_read_as_the_whole_set(tmp_path, task, streamed):
    """The Trainer then hands over lists of per-batch arrays (45 rows in batches of 16): the
    callback took the first batch as the logits (NaN metrics) and its fit stopped training."""
    from calibkit.callbacks.calibration import _concat_batches

    trainer, cb = make_trainer(
        tmp_path, task=task, max_steps=2, eval_do_concat_batches=False, per_device_eval_batch_size=16,
        compute_metrics=None, batch_eval_metrics=streamed,  # streamed: each call one batch, as always
    )  # fmt: skip
    trainer.train()
    out = trainer.predict(trainer.eval_dataset)
    logits, labels = _concat_batches(out.predictions, 0.0), _concat_batches(out.label_ids, -100)
    assert len(out.predictions) == 3 and len(logits) == 45
    assert eval_logs(trainer)[-1]["eval_ece"] == pytest.approx(calibkit.ece(logits, labels, from_logits=True))
    assert (tmp_path / "out" / "calibrated-wts" / "config.json").exists()


def test_values_equal_the_functional_core_sequence(tmp_path):
    trainer, _ = make_trainer(tmp_path, max_steps=2)
    trainer.train()
    check_against_functional(trainer, eval_logs(trainer))


def test_token_classification_masks_padding(tmp_path):
    trainer, cb = make_trainer(tmp_path, task="token", max_steps=4)
    trainer.train()
    logs = eval_logs(trainer)
    assert len(logs) == 2 and all("eval_cece" in entry for entry in logs)
    logits, labels = check_against_functional(trainer, logs)
    assert logits.ndim == 3 and (labels == -100).any()  # Trainer padded across batches
    assert (tmp_path / "out" / "calibrated-wts").exists()


def test_batch_eval_metrics_streams_with_user_metrics_intact(tmp_path):
    seen = []

    def streaming_accuracy(eval_pred, compute_result):
        seen.append(compute_result)
        if compute_result:
            return {"accuracy": 0.5}
        return {}

    callback = CalibrationCallback(metrics=(*DEFAULT_METRICS, "ace"), fit=("wts", "rd-ts"))
    trainer, cb = make_trainer(
        tmp_path, callback=callback, max_steps=2, batch_eval_metrics=True, compute_metrics=streaming_accuracy
    )
    trainer.train()
    logs = eval_logs(trainer)
    assert logs[-1]["eval_accuracy"] == 0.5 and seen[-1] is True and seen.count(False) == 2  # 45 rows / 16
    logits, labels = check_against_functional(trainer, logs)
    # streamed, ACE is an estimate: logged with its bound, which holds the exact value
    exact = calibkit.ace(logits, labels, from_logits=True)
    assert abs(logs[-1]["eval_ace"] - exact) <= logs[-1]["eval_ace_error_bound"] + 1e-12
    assert cb.evaluation._accumulator is None  # reset after every evaluation
    assert len(cb.last_predictions[1]) == 45


def test_user_preprocess_logits_keeps_working(tmp_path):
    received = []

    def user_metrics(eval_pred):
        received.append(eval_pred.predictions.shape)
        return accuracy(eval_pred)

    def argmax(logits, labels):
        return logits.argmax(-1)

    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(num_labels=NUM_LABELS, **TINY))
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=2,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        per_device_eval_batch_size=16,
    )
    evaluation = sequence_data(45, seed=1)
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=sequence_data(64),
        eval_dataset=evaluation,
        compute_metrics=user_metrics,
        preprocess_logits_for_metrics=argmax,
    )
    cb = CalibrationCallback(fit=()).attach(trainer)
    cb.fit_methods = ("ts",)  # keep the raw logits to check the values against
    trainer.train()
    assert received == [(45,)]  # the user's compute_metrics saw the user's argmax
    last = eval_logs(trainer)[-1]
    logits, labels = cb.last_predictions
    assert logits.shape == (45, NUM_LABELS)
    assert last["eval_cece"] == pytest.approx(calibkit.cece(logits, labels, from_logits=True), abs=1e-9)
    assert last["eval_accuracy"] == pytest.approx(float((logits.argmax(-1) == labels).mean()))
    # predict() returns the user's preprocessed predictions, as without calibkit.
    out = trainer.predict(evaluation)
    assert out.predictions.shape == (45,) and "test_cece" not in out.metrics and "test_accuracy" in out.metrics


def test_nan_logits_do_not_stop_training(tmp_path):
    trainer, _ = make_trainer(tmp_path, max_steps=4)

    def poison(module, args, output):
        return output if module.training else output * float("nan")

    trainer.model.classifier.register_forward_hook(poison)
    with pytest.warns(RuntimeWarning, match="NaN"):
        trainer.train()
    logs = eval_logs(trainer)
    assert len(logs) == 2 and all(math.isnan(entry["eval_cece"]) for entry in logs)
    assert trainer.state.global_step == 4


def test_empty_evaluation_set_logs_nan(tmp_path):
    trainer, _ = make_trainer(tmp_path, max_steps=2)
    with pytest.warns(RuntimeWarning, match="no predictions"):
        metrics = trainer.evaluate(eval_dataset=sequence_data(0))
    assert math.isnan(metrics["eval_cece"])


def test_resume_from_checkpoint(tmp_path):
    trainer, _ = make_trainer(tmp_path, max_steps=4, save_strategy="steps", save_steps=2)
    trainer.train()
    resumed, _ = make_trainer(tmp_path, max_steps=6, save_strategy="steps", save_steps=2)
    resumed.train(resume_from_checkpoint=True)
    logs = eval_logs(resumed)
    assert logs[-1]["step"] == 6 and "eval_cece" in logs[-1]


def test_attach_is_idempotent_and_checks_arguments(tmp_path):
    trainer, cb = make_trainer(tmp_path, max_steps=1)
    cb.attach(trainer)
    assert sum(isinstance(c, CalibrationCallback) for c in trainer.callback_handler.callbacks) == 1
    with pytest.raises(ValueError, match="`metrics`"):
        CalibrationCallback(metrics=("cece", "sharpness"))
    with pytest.raises(ValueError, match="`method`"):
        CalibrationCallback(fit=("bayesian-binning",))
    with pytest.raises(ValueError, match="`max_fit_rows`"):
        CalibrationCallback(max_fit_rows=0)


def test_push_to_hub_uploads_the_calibrated_folder(tmp_path, monkeypatch):
    import huggingface_hub

    calls = []
    monkeypatch.setattr(
        huggingface_hub.HfApi, "upload_folder", lambda self, **kwargs: calls.append(kwargs), raising=True
    )
    trainer, cb = make_trainer(tmp_path, max_steps=2)
    trainer.train()  # push_to_hub is off: nothing uploaded
    assert calls == []
    trainer.args.push_to_hub = True
    trainer.args.hub_model_id = "someone/tiny"
    cb.fitting._save("wts", cb.fitting._fit_one("wts", trainer.model, *cb.last_predictions), trainer.args)
    assert calls and calls[0]["repo_id"] == "someone/tiny" and calls[0]["path_in_repo"] == "calibrated-wts"


@pytest.mark.slow  # processes of their own, each importing torch: the default run's time, in .ci/run's slow pass
def test_two_processes_equal_one(tmp_path):
    """torchrun --nproc_per_node 2 (gloo, CPU) gives the single-process numbers: Trainer gathers first."""
    script = HERE / "ddp_evaluate.py"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    single = tmp_path / "single.json"
    double = tmp_path / "double.json"
    run = subprocess.run([sys.executable, str(script), str(single)], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    # A free port, not a fixed one: the suite runs in parallel workers, and another run may hold any given port.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", port]
    run = subprocess.run([*torchrun, str(script), str(double)], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    one, two = json.loads(single.read_text()), json.loads(double.read_text())
    assert two["world_size"] == 2 and one["world_size"] == 1
    # calibkit's keys only: the Trainer's own eval_loss differs under DDP (it is not ours to fix).
    ours = {f"eval_{name}" for name in calibkit.METRICS} | {f"eval_ece_class_LABEL_{k}" for k in range(3)}
    keys = [k for k in one["metrics"] if k in ours]
    assert len(keys) == len(calibkit.METRICS) - 1 + 3 and not math.isnan(one["metrics"]["eval_rbece"])
    for key in keys:
        assert two["metrics"][key] == pytest.approx(one["metrics"][key], abs=1e-6, nan_ok=True), key


# ------------------------------------------------------------------------------------------
# Multi-label models (problem_type="multi_label_classification")


def multilabel_data(n, seed=0, length=8):
    """Each label present with probability 0.25, readable from its own token 70% of the time."""
    rng = np.random.default_rng(seed)
    labels = (rng.random((n, NUM_LABELS)) < 0.25).astype(np.float32)
    ids = rng.integers(10, 64, (n, length))
    shown = np.where(rng.random((n, NUM_LABELS)) < 0.7, labels, 1 - labels)
    ids[:, :NUM_LABELS] = np.where(shown == 1, 5 + np.arange(NUM_LABELS), 9)
    return Dataset.from_dict(
        {"input_ids": ids.tolist(), "attention_mask": np.ones_like(ids).tolist(), "labels": labels.tolist()}
    )


def make_multilabel_trainer(tmp_path, callback, **overrides):
    torch.manual_seed(0)
    config = BertConfig(num_labels=NUM_LABELS, problem_type="multi_label_classification", **TINY)
    settings = dict(
        output_dir=str(tmp_path / "out"), max_steps=80, per_device_train_batch_size=8, per_device_eval_batch_size=16,
        learning_rate=1e-2, eval_strategy="steps", eval_steps=40, logging_steps=40, save_strategy="no", report_to=[],
        use_cpu=True, seed=0, disable_tqdm=True,
    )  # fmt: skip
    args = TrainingArguments(**{**settings, **overrides})
    trainer = Trainer(
        model=BertForSequenceClassification(config),
        args=args,
        train_dataset=multilabel_data(192),
        eval_dataset=multilabel_data(45, seed=1),
    )
    callback.attach(trainer)
    return trainer


@pytest.mark.parametrize("batch_eval_metrics", [False, True])
def test_multilabel_model_logs_label_metrics_and_fits_the_multilabel_scalings(tmp_path, batch_eval_metrics):
    callback = CalibrationCallback(metrics=("ece", "cece", "brier", "ace"), fit=("wts", "ts", "rd-ts"))
    trainer = make_multilabel_trainer(tmp_path, callback, batch_eval_metrics=batch_eval_metrics)
    assert callback.settings.multilabel  # found from the model's problem_type
    with pytest.warns(RuntimeWarning, match="rd-ts could not be fitted: rd-ts has no multi-label form"):
        trainer.train()
    logs = eval_logs(trainer)[-1]
    out = trainer.predict(trainer.eval_dataset)
    want = calibkit.multilabel_report(out.predictions, out.label_ids, from_logits=True)
    for name in ("ece", "brier"):
        assert logs[f"eval_{name}"] == pytest.approx(want["macro"][name], abs=1e-6)
        assert logs[f"eval_{name}_micro"] == pytest.approx(want["micro"][name], abs=1e-6)
    assert logs["eval_cece"] == pytest.approx(want["cece"], abs=1e-6)
    if batch_eval_metrics:  # streamed ACE: within the logged bounds (macro, and micro)
        assert abs(logs["eval_ace"] - want["macro"]["ace"]) <= logs["eval_ace_error_bound"] + 1e-12
        assert abs(logs["eval_ace_micro"] - want["micro"]["ace"]) <= logs["eval_ace_error_bound_micro"] + 1e-12
    for k in range(NUM_LABELS):
        assert logs[f"eval_ece_label_LABEL_{k}"] == pytest.approx(want["per_label"]["ece"][k], abs=1e-6)
    assert sorted(callback.calibrated_dirs) == ["ts", "wts"]
    reloaded = AutoModelForSequenceClassification.from_pretrained(callback.calibrated_dirs["wts"])
    assert reloaded.config.problem_type == "multi_label_classification"
    assert reloaded.config.calibration["mode"] == "weighted_temperature"
    fit_logs = [e for e in trainer.state.log_history if any(k.startswith("calibration/ts/") for k in e)]
    assert fit_logs and "calibration/ts/after_ece_macro" in fit_logs[-1]


def test_a_multilabel_setting_that_contradicts_the_model_is_refused(tmp_path):
    with pytest.raises(
        ValueError, match="`multilabel=False` but the model's problem_type is 'multi_label_classification'"
    ):
        make_multilabel_trainer(tmp_path, CalibrationCallback(multilabel=False))
    trainer, _ = make_trainer(tmp_path, callback=CalibrationCallback(fit=("platt",)), max_steps=2)
    with pytest.warns(RuntimeWarning, match="platt could not be fitted: platt is a multi-label calibrator"):
        trainer.train()


def test_multilabel_with_settings_and_metrics_that_are_not_per_label(tmp_path):
    settings = calibkit.CalibrationSettings(n_bins=10)
    callback = CalibrationCallback(metrics=("brier", "sce"), fit=(), settings=settings)
    trainer = make_multilabel_trainer(tmp_path, callback, max_steps=2, eval_steps=2, logging_steps=2)
    assert callback.settings.multilabel and callback.settings.n_bins == 10  # from the model, settings kept
    trainer.train()
    logs = eval_logs(trainer)[-1]
    assert "eval_brier" in logs and "eval_brier_micro" in logs and "eval_ece_label_LABEL_0" in logs
    assert "eval_sce" not in logs  # not defined per label: never logged, not even as NaN
