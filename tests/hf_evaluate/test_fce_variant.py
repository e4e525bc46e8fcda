"""The `fce` and `calibration_report` modules pass the authors' FCE variant on (issue 19)."""

import numpy as np
import pytest

import calibkit


def test_fce_module_variant_equals_functional_core(load, data):
    probs, labels = data(7, "multiclass", n=300)
    metric = load("fce")
    for variant in ("paper", "authors"):
        got = metric.compute(predictions=probs, references=labels, fce_bins=11, fce_variant=variant)
        assert got == {"fce": calibkit.fce(probs, labels, fce_bins=11, fce_variant=variant)}
    assert metric.compute(predictions=probs, references=labels)["fce"] == calibkit.fce(probs, labels)


def test_fce_module_variant_on_tokens_and_batches(load, data):
    logits, labels = data(8, "token", n=30, length=7, from_logits=True)
    want = calibkit.fce(logits, labels, from_logits=True, fce_variant="authors")
    metric = load("fce", "token")
    metric.add_batch(predictions=logits[:11], references=labels[:11])
    metric.add_batch(predictions=logits[11:], references=labels[11:])
    assert metric.compute(from_logits=True, fce_variant="authors")["fce"] == pytest.approx(want, abs=1e-15)


def test_calibration_report_module_fce_variant(load, data):
    probs, labels = data(9, "multiclass", n=300)
    got = load("calibration_report").compute(predictions=probs, references=labels, fce_variant="authors", theta=3)
    want = calibkit.calibration_report(probs, labels, fce_variant="authors", theta=3)
    assert got["fce"] == want["fce"] == calibkit.fce(probs, labels, fce_variant="authors")


@pytest.mark.parametrize("name", ["fce", "calibration_report"])
def test_fce_variant_setting_refused_and_batches_kept(load, data, name):
    setting = "fce_variant"
    probs, labels = data(10, "multiclass", n=50)
    metric = load(name)
    extra = {"theta": 0} if name == "calibration_report" else {}  # no RBECE warning on 50 samples
    metric.add_batch(predictions=probs, references=labels)
    with pytest.raises(ValueError, match=rf"`{setting}` must be one of \['paper', 'authors'\], got 'author'"):
        metric.compute(**{setting: "author"}, **extra)
    result = metric.compute(**{setting: "authors"}, **extra)  # the batch was kept
    assert np.isclose(result["fce"], calibkit.fce(probs, labels, fce_variant="authors"), rtol=0, atol=1e-15)
