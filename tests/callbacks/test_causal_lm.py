"""CalibrationCallback on a causal LM: next-token metrics streamed at every evaluation, TS/WTS fitted at the end."""

import warnings

import numpy as np
import pytest
import torch
from datasets import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer

import calibkit
from calibkit.calibrators import TemperatureScaling
from calibkit.callbacks import CalibrationCallback
from tests.callbacks.test_callback import training_args

VOCAB = 40
LENGTH = 12


def lm_data(n, seed):
    """Sequences with structure to learn: each token is the previous plus 1 or 2 (mod the vocabulary)."""
    rng = np.random.default_rng(seed)
    start = rng.integers(0, VOCAB, size=(n, 1))
    steps = rng.integers(1, 3, size=(n, LENGTH - 1))
    ids = np.concatenate([start, start + np.cumsum(steps, axis=1)], axis=1) % VOCAB
    labels = ids.copy()
    labels[:, :3] = -100  # a prompt the loss does not score
    return Dataset.from_dict({"input_ids": ids.tolist(), "labels": labels.tolist()})


def make_lm_trainer(tmp_path, callback=None, compute_metrics=None, **overrides):
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=VOCAB, n_positions=32, n_embd=16, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0
    )
    args = training_args(
        tmp_path, **{"per_device_eval_batch_size": 7, "eval_steps": 3, "logging_steps": 3, **overrides}
    )
    trainer = Trainer(
        model=GPT2LMHeadModel(config),
        args=args,
        train_dataset=lm_data(64, 0),
        eval_dataset=lm_data(30, 1),
        compute_metrics=compute_metrics,
    )
    callback = callback or CalibrationCallback(metrics=("ece", "cece", "nll", "brier"))
    callback.attach(trainer)
    return trainer, callback


def all_logits(trainer):
    dataset = trainer.eval_dataset
    ids = torch.tensor(dataset["input_ids"])
    with torch.no_grad():
        logits = trainer.model.eval()(ids).logits
    return logits, torch.tensor(dataset["labels"])


def test_every_evaluation_logs_next_token_metrics_streamed_and_equal_to_the_core(tmp_path):
    trainer, callback = make_lm_trainer(tmp_path)
    assert callback.settings.next_token  # found from the model's class
    assert callback.fit_methods == ("ts", "wts")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    logs = [entry for entry in trainer.state.log_history if "eval_loss" in entry]
    assert len(logs) == 2
    last = logs[-1]
    logits, labels = all_logits(trainer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = calibkit.calibration_report(logits, labels, from_logits=True, next_token=True)
    for name in ("ece", "cece", "nll", "brier"):
        assert last[f"eval_{name}"] == pytest.approx(want[name], abs=1e-5), name
    # the model's own evaluation loss is the next-token NLL
    assert last["eval_loss"] == pytest.approx(want["nll"], abs=1e-5)
    per_token = [key for key in last if key.startswith("eval_ece_class_")]
    assert 0 < len(per_token) <= 10  # the most frequent next tokens, never one key per vocabulary entry
    assert last["eval_next_tokens_seen"] == np.count_nonzero(
        np.bincount(labels[:, 1:][labels[:, 1:] >= 0], minlength=VOCAB)
    )
    # TS and WTS fitted at the end on the streamed evaluation set, saved as calibrated causal LMs
    assert set(callback.fitted) == {"ts", "wts"}
    expected = TemperatureScaling().fit_batches(lambda: [(logits, labels)], next_token=True).temperature_
    assert callback.fitted["ts"].temperature_ == pytest.approx(expected, rel=1e-6)
    reloaded = calibkit.CalibratedModelForCausalLM.from_pretrained(callback.calibrated_dirs["ts"]).eval()
    ids = torch.tensor(trainer.eval_dataset["input_ids"][:2])
    with torch.no_grad():
        np.testing.assert_allclose(
            reloaded(ids).logits.numpy(), trainer.model(ids).logits.numpy() / expected, rtol=1e-4, atol=1e-5
        )


def test_the_trainer_keeps_no_logits_and_the_users_metrics_see_a_placeholder(tmp_path):
    seen = {}

    def user_metrics(eval_pred):
        seen["shape"] = np.asarray(eval_pred.predictions).shape
        return {"mine": 1.0}

    trainer, _ = make_lm_trainer(tmp_path, compute_metrics=user_metrics, max_steps=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        metrics = trainer.evaluate()
    assert seen["shape"] == (30, 1)  # not (30, 12, VOCAB): the logits were reduced to sums batch by batch
    assert metrics["eval_mine"] == 1.0 and "eval_ece" in metrics


def test_rd_ts_asked_for_on_a_causal_lm_is_refused_with_its_reason(tmp_path):
    trainer, callback = make_lm_trainer(tmp_path, callback=CalibrationCallback(metrics=("ece",), fit=("rd-ts",)))
    with pytest.warns(RuntimeWarning, match="rd-ts is not fitted on a causal LM"):
        trainer.train()
    assert callback.fitted == {}
