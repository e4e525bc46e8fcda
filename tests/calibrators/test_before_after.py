"""before_after_metrics: one function for the three model kinds, the numbers of the report on each side."""

import numpy as np
import pytest

import calibkit
from calibkit.calibrators import MultiLabelScaling, TemperatureScaling
from calibkit.calibrators.before_after import CARD_METRICS, before_after_metrics
from calibkit.calibrators.calibrated import calibration_metrics, multilabel_calibration_metrics, next_token_metrics

RNG = np.random.default_rng(3)


def same(a: dict, b: dict) -> bool:
    """Equal reports, NaN equal to NaN (RBECE on a few tokens)."""
    return a["n"] == b["n"] and all(
        a[side].keys() == b[side].keys()
        and np.array_equal(list(a[side].values()), list(b[side].values()), equal_nan=True)
        for side in ("before", "after")
    )


def test_a_classifier_before_and_after_are_the_reports_of_the_logits_and_the_calibrated_probabilities():
    labels = RNG.integers(0, 4, 300)
    logits = RNG.normal(size=(300, 4)) + 4 * np.eye(4)[labels]
    ts = TemperatureScaling().fit(logits, labels)
    out = before_after_metrics(logits, labels, ts)
    assert set(out["before"]) == set(CARD_METRICS) and out["n"] == 300
    assert out["before"]["ece"] == pytest.approx(calibkit.ece(logits, labels, from_logits=True))
    assert out["after"]["ece"] == pytest.approx(calibkit.ece(ts.predict_proba(logits), labels))
    assert out["after"]["ece"] < out["before"]["ece"]
    assert same(calibration_metrics(logits, labels, ts), out)


def test_next_tokens_take_a_calibrator_or_its_temperature():
    labels = RNG.integers(0, 12, (4, 9))
    logits = RNG.normal(size=(4, 9, 12)) * 3
    logits[:, :-1] += 5 * np.eye(12)[labels[:, 1:]]  # position t favours the label at t + 1, over-confidently
    labels[:, :2] = -100
    ts = TemperatureScaling().fit_batches(lambda: [(logits, labels)], next_token=True)
    out = before_after_metrics(logits, labels, ts, next_token=True)
    assert same(out, before_after_metrics(logits, labels, ts.temperature_, next_token=True))
    assert same(out, next_token_metrics(logits, labels, ts.temperature_))
    assert out["n"] == 4 * 7  # positions 0..7 scored against the labels at 1..8, of which the first ignored
    assert "ace" not in out["before"]  # left out over a vocabulary
    shifted = logits[:, :-1].reshape(-1, 12), labels[:, 1:].reshape(-1)
    keep = shifted[1] != -100
    assert out["after"]["ece"] == pytest.approx(
        calibkit.ece(shifted[0][keep] / ts.temperature_, shifted[1][keep], from_logits=True)
    )


def test_a_multilabel_head_gives_macro_metrics_and_cece():
    labels = (RNG.random((200, 3)) < 0.3).astype(int)
    logits = RNG.normal(size=(200, 3)) * 3 + 2 * labels
    ml = MultiLabelScaling("temperature").fit(logits, labels)
    out = before_after_metrics(logits, labels, ml, multilabel=True)
    assert "cece" in out["before"] and "ece_macro" in out["after"] and out["n"] == 600
    assert same(out, multilabel_calibration_metrics(logits, labels, ml))
