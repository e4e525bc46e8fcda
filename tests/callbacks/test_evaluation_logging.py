"""EvaluationLogger alone, without a Trainer: what the callback logs at each evaluation, from fake
evaluation predictions (the Trainer's EvalPrediction is a plain record of arrays)."""

import math
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

import calibkit
from calibkit.callbacks.evaluation_logging import EvaluationLogger, concat_batches
from calibkit.metrics.settings import CalibrationSettings

RNG = np.random.default_rng(0)
LOGITS = RNG.normal(size=(60, 3)) * 2
LABELS = RNG.integers(0, 3, 60)


def prediction(logits, labels):
    return SimpleNamespace(predictions=logits, label_ids=labels)


def test_the_whole_set_gives_the_functional_cores_numbers_and_keeps_the_logits():
    logger = EvaluationLogger(("ece", "cece"), per_class=True)
    out = logger.compute_metrics(prediction(LOGITS, LABELS))
    assert out["ece"] == pytest.approx(calibkit.ece(LOGITS, LABELS, from_logits=True), abs=1e-12)
    assert out["cece"] == pytest.approx(calibkit.cece(LOGITS, LABELS, from_logits=True), abs=1e-12)
    per_class = calibkit.subset_ece(LOGITS, LABELS, from_logits=True)
    assert [out[f"ece_class_{k}"] for k in range(3)] == pytest.approx(list(per_class), abs=1e-12)
    logits, labels = logger.last_predictions
    assert logits is LOGITS and labels is LABELS  # kept by reference, not copied


def test_streamed_batches_report_on_the_last_and_keep_the_bounded_rows():
    logger = EvaluationLogger(("ece",), per_class=False, max_fit_rows=50)
    for start in (0, 20):
        part = slice(start, start + 20)
        assert logger.compute_metrics(prediction(LOGITS[part], LABELS[part]), compute_result=False) == {}
    out = logger.compute_metrics(prediction(LOGITS[40:], LABELS[40:]), compute_result=True)
    assert out["ece"] == pytest.approx(calibkit.ece(LOGITS, LABELS, from_logits=True), abs=1e-9)
    assert logger._accumulator is None  # reset for the next evaluation
    logits, labels = logger.last_predictions
    np.testing.assert_array_equal(logits, LOGITS[:50])
    np.testing.assert_array_equal(labels, LABELS[:50])


def test_nothing_is_kept_when_nothing_is_fitted():
    logger = EvaluationLogger(("ece",), keep_fit_rows=False)
    logger.compute_metrics(prediction(LOGITS, LABELS))
    assert logger.last_predictions is None


def test_the_users_metrics_are_kept_and_win_a_clash():
    logger = EvaluationLogger(("ece",), per_class=False)
    trainer = SimpleNamespace(
        compute_metrics=lambda p: {"ece": -1.0, "mine": 2.0},
        preprocess_logits_for_metrics=None,
        evaluation_loop=lambda *a, **k: None,
    )
    logger.attach(trainer)
    assert trainer.compute_metrics == logger.compute_metrics
    with pytest.warns(UserWarning, match="already returns"):
        out = trainer.compute_metrics(prediction(LOGITS, LABELS))
    assert out == {"ece": -1.0, "mine": 2.0}


def test_an_evaluation_without_predictions_logs_the_keys_as_nan():
    """compute_metrics is never called on an empty evaluation set: the patched loop fills the keys in."""
    logger = EvaluationLogger(("ece", "cece"), per_class=False)
    trainer = SimpleNamespace(
        compute_metrics=None,
        preprocess_logits_for_metrics=None,
        evaluation_loop=lambda *args, **kwargs: SimpleNamespace(metrics={"eval_loss": 1.0}),
    )
    logger.attach(trainer)
    with pytest.warns(RuntimeWarning, match="no predictions with labels"):
        output = trainer.evaluation_loop(None, "Evaluation", metric_key_prefix="eval")
    assert math.isnan(output.metrics["eval_ece"]) and math.isnan(output.metrics["eval_cece"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # predict() runs the loop too: nothing filled in, nothing said
        assert "eval_ece" not in trainer.evaluation_loop(None, "Prediction").metrics


def test_nan_logits_give_nan_metrics_with_a_warning():
    logger = EvaluationLogger(("ece",), per_class=False)
    bad = LOGITS.copy()
    bad[3, 1] = np.nan
    with pytest.warns(RuntimeWarning, match="set to NaN"):
        out = logger.compute_metrics(prediction(bad, LABELS))
    assert math.isnan(out["ece"])


def test_multilabel_logs_macro_and_micro():
    logits = RNG.normal(size=(40, 4))
    labels = (RNG.random((40, 4)) < 0.4).astype(int)
    logger = EvaluationLogger(("ece",), per_class=True, settings=CalibrationSettings(multilabel=True))
    out = logger.compute_metrics(prediction(logits, labels))
    report = calibkit.calibration_report(logits, labels, from_logits=True, multilabel=True, metrics=("ece",))
    assert out["ece"] == pytest.approx(report["macro"]["ece"]) and out["ece_micro"] == pytest.approx(
        report["micro"]["ece"]
    )
    assert {f"ece_label_{k}" for k in range(4)} <= set(out)


def test_concat_batches_pads_tokens_with_the_value_given():
    joined = concat_batches([np.zeros((2, 3)), np.ones((1, 5))], -100)
    assert joined.shape == (3, 5) and (joined[:2, 3:] == -100).all() and (joined[2] == 1).all()
