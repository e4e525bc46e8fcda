"""Every calibrator's doors (constructor, ``fit``, ``predict_proba``, ``transform``, ``calibrate``)
through one catalogue of bad inputs (issue 14): a ``ValueError`` naming the argument, or the
number a plain computation gives (NaN logits give NaN probabilities, as for every calibrator)."""

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

import calibkit
from calibkit.calibrators import make_calibrator

METHODS = ("ts", "wts", "rd-ts", "vs", "ms", "ir", "hb")
RNG = np.random.default_rng(0)
Z = RNG.normal(size=(120, 3)) * 2
Y = RNG.integers(0, 3, 120)
Z[np.arange(120), Y] += 1.5  # informative logits: every method can be fitted


@pytest.fixture(scope="module")
def fitted():
    return {m: make_calibrator(m).fit(Z, Y) for m in METHODS}


FIT_CASES = {
    "nan logits": (np.where(np.arange(360).reshape(120, 3) == 7, np.nan, Z), Y, r"`logits` contains NaN or inf"),
    "inf logits": (np.where(np.arange(360).reshape(120, 3) == 7, np.inf, Z), Y, r"`logits` contains NaN or inf"),
    "object logits": (Z.astype(object), Y, r"`logits` must be a float array"),
    "string logits": (np.array([["a", "b"]]), [0], r"`logits` must be a float array"),
    "ragged logits": ([[1.0, 2.0], [1.0]], [0, 1], r"`logits` could not be read as an array"),
    "1-d logits": (Z[:, 0], Y, r"`logits` must have shape \(N, K\) or \(N, L, K\)"),
    "one class": (Z[:, :1], Y, r"`logits` has shape \(120, 1\): the last axis must hold >= 2 classes"),
    "label shape": (Z, Y[:-1], r"`labels` has shape \(119,\) but `logits`"),
    "token label shape": (Z.reshape(40, 3, 3), Y.reshape(40, 3)[:, :2], r"`labels` has shape \(40, 2\)"),
    "label range": (Z, np.where(np.arange(120) == 5, 3, Y), r"`labels` must lie in \[0, 3\)"),
    "negative label": (Z, np.where(np.arange(120) == 5, -1, Y), r"`labels` must lie in \[0, 3\)"),
    "uint64 label": (
        Z,
        np.where(np.arange(120) == 5, 2**64 - 100, Y).astype(np.uint64),
        r"`labels` has the value 18446744073709551516",
    ),
    "1e20 label": (Z, np.where(np.arange(120) == 5, 1e20, Y), r"`labels` has the value 1e\+20"),
    "fraction label": (Z, np.where(np.arange(120) == 5, 0.5, Y), r"`labels` must be integers, got the value 0\.5"),
    "object labels": (Z, Y.astype(object), r"`labels` must be integers, got dtype object"),
    "empty": (np.zeros((0, 3)), np.zeros(0, int), r"`labels` holds no sample to fit on"),
    "all ignored": (Z, np.full(120, -100), r"`labels` holds no sample to fit on"),
}


@pytest.mark.parametrize("case", sorted(FIT_CASES))
@pytest.mark.parametrize("method", METHODS)
def test_fit_refuses_bad_input(method, case):
    logits, labels, pattern = FIT_CASES[case]
    with pytest.raises(ValueError, match=pattern):
        make_calibrator(method).fit(logits, labels)


SETTINGS = [
    *[(m, {"ignore_index": v}, r"`ignore_index`") for m in METHODS for v in (2**70, "x", True, -100.0)],
    *[
        (m, {"num_threads": v}, r"`num_threads` must be an integer >= 1")
        for m in ("ts", "wts", "rd-ts")
        for v in (0, "2")
    ],
    ("rd-ts", {"rule": "median"}, r"`rule` must be one of"),
    *[(m, {"max_iter": v}, r"`max_iter` must be an integer") for m in ("vs", "ms") for v in (0, -1, "5", 2.5)],
    *[("hb", {"n_bins": v}, r"`n_bins` must be an integer") for v in (0, -1, "3", 1.5, True, 10**7)],
]


@pytest.mark.parametrize("method, settings, pattern", SETTINGS)
def test_settings_are_refused_at_construction(method, settings, pattern):
    with pytest.raises(ValueError, match=pattern):
        make_calibrator(method, **settings)


@pytest.mark.parametrize("method", METHODS)
def test_apply_refuses_bad_input(method, fitted):
    calibrator = fitted[method]
    for call in (calibrator.predict_proba, calibrator.transform):
        with pytest.raises(ValueError, match=r"`logits` has 4 classes, the calibrator was fitted on 3"):
            call(np.zeros((2, 4)))
        with pytest.raises(ValueError, match=r"`logits` must be a float array"):
            call(np.array([["a", "b", "c"]]))
        with pytest.raises(ValueError, match=r"`logits` must have shape"):
            call(np.zeros(3))
    with pytest.raises(ValueError, match=r"not fitted yet"):
        make_calibrator(method).predict_proba(Z)
    with pytest.raises(ValueError, match=r"`method` must be one of"):
        make_calibrator("platt")


@pytest.mark.parametrize("method", METHODS)
def test_non_finite_logits_give_what_every_calibrator_gives(method, fitted):
    """NaN (or +inf) in a row: that row's probabilities are NaN, the others untouched. IR and HB
    turned NaN into a uniform row before (``[[1/3, 1/3, 1/3]]``)."""
    rows = np.array([[np.nan, 0.0, 1.0], [np.inf, 0.0, 0.0], [1.0, 0.5, -2.0], [0.0, 3.0, 1.0]])
    probs = fitted[method].predict_proba(rows)
    assert np.isnan(probs[:2]).all()
    np.testing.assert_allclose(probs[2:], fitted[method].predict_proba(rows[2:]), rtol=1e-12)
    assert np.isfinite(probs[2:]).all() and np.allclose(probs[2:].sum(axis=1), 1)
    # calibrated logits (TS: z / T) keep the non-finite entry; IR/HB's log-probabilities are NaN rows
    assert (~np.isfinite(fitted[method].transform(rows)[:2])).any(axis=1).all()


@pytest.mark.parametrize("method", ["ir", "hb", "ts"])
def test_calibrated_model_keeps_nan_logits_nan(method, fitted):
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37, num_labels=3
    )
    model = calibkit.calibrate(BertForSequenceClassification(config).eval(), fitted[method], report=False)
    head = model.calibration_head if hasattr(model, "calibration_head") else fitted[method].head()
    logits = torch.tensor([[float("nan"), 0.0, 1.0], [1.0, 0.5, -2.0]], dtype=torch.float32)
    out = head(logits)
    assert torch.isnan(out[0]).any() and torch.isfinite(out[1]).all()
    assert torch.isnan(torch.softmax(out, dim=-1)[0]).all()
    with torch.no_grad():
        ids = torch.tensor([[2, 5, 7, 3]])
        assert torch.isfinite(model(input_ids=ids).logits).all()


def test_calibrate_refuses_what_it_cannot_wrap(fitted):
    with pytest.raises(ValueError, match=r"`model` must be a sequence- or token-classification model"):
        calibkit.calibrate(torch.nn.Linear(2, 2), fitted["ts"])
