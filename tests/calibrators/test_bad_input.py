"""Every calibrator's doors (constructor, ``fit``, ``predict_proba``, ``transform``, ``calibrate``)
through one catalogue of bad inputs (issue 14): a ``ValueError`` naming the argument, or the
number a plain computation gives (NaN logits give NaN probabilities, as for every calibrator)."""

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification, BertForTokenClassification

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
    "1-d logits": (Z[:, 0], Y, r"`logits` must have shape \(N, K\) or \(N, L, K\).*np\.stack\(\[np\.zeros_like"),
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


# -- more of the catalogue ---------------------------------------------------------------------

MORE_FIT_CASES = {
    "-inf logits": (np.where(np.arange(360).reshape(120, 3) == 7, -np.inf, Z), Y, r"`logits` contains NaN or inf"),
    "float32 nan logits": (np.where(np.arange(360).reshape(120, 3) == 7, np.nan, Z).astype(np.float32), Y, "`logits`"),
    "torch nan logits": (torch.tensor(np.where(np.arange(360).reshape(120, 3) == 7, np.nan, Z)), Y, "`logits`"),
    "bool logits": (Z > 0, Y, r"`logits` must be a float array, got dtype bool"),
    "complex logits": (Z.astype(complex), Y, r"`logits` must be a float array"),
    "no logits": (None, Y, r"`logits` must be a float array"),
    "0-d logits": (np.float64(1.0), 0, r"`logits` must have shape"),
    "4-d logits": (Z.reshape(10, 2, 6, 3), Y.reshape(10, 2, 6), r"`logits` must have shape"),
    "no class": (np.zeros((120, 0)), Y, r"`logits` has shape \(120, 0\)"),
    "ragged labels": (Z[:2], [[0, 1], [0]], r"`labels` could not be read as an array"),
    "string labels": (Z[:2], ["0", "1"], r"`labels` must be integers"),
    "no labels": (Z, None, r"`labels` has shape \(\)"),
    "column labels": (Z, Y.reshape(120, 1), r"`labels` has shape \(120, 1\)"),
    "token labels flat": (Z.reshape(40, 3, 3), Y, r"`labels` has shape \(120,\)"),
    "token label range": (Z.reshape(40, 3, 3), np.where(np.arange(120) == 5, 7, Y).reshape(40, 3), r"`labels`.*7"),
    "negative float label": (Z, np.where(np.arange(120) == 5, -1.0, Y), r"`labels` must lie in \[0, 3\)"),
    "nan label": (Z, np.where(np.arange(120) == 5, np.nan, Y), r"`labels`.*nan"),
    "uint64 2**63 label": (
        Z,
        np.where(np.arange(120) == 5, 2**63, Y).astype(np.uint64),
        r"`labels`.*9223372036854775808",
    ),
    "token all ignored": (Z.reshape(40, 3, 3), np.full((40, 3), -100), r"`labels` holds no sample to fit on"),
    "empty tokens": (np.zeros((4, 0, 3)), np.zeros((4, 0), int), r"`labels` holds no sample to fit on"),
}


@pytest.mark.parametrize("case", sorted(MORE_FIT_CASES))
@pytest.mark.parametrize("method", METHODS)
def test_fit_refuses_more_bad_input(method, case):
    logits, labels, pattern = MORE_FIT_CASES[case]
    with pytest.raises(ValueError, match=pattern):
        make_calibrator(method).fit(logits, labels)


LEGIT_LABELS = {
    "uint64": Y.astype(np.uint64),
    "uint8 tensor": torch.tensor(Y, dtype=torch.uint8),
    "int32": Y.astype(np.int32),
    "integer floats": Y.astype(np.float64),
    "list": Y.tolist(),
    "big-endian": Y.astype(">i8"),
}


@pytest.mark.parametrize("kind", sorted(LEGIT_LABELS))
@pytest.mark.parametrize("method", METHODS)
def test_any_integer_label_dtype_is_the_same_labels(method, kind, fitted):
    calibrator = make_calibrator(method).fit(Z, LEGIT_LABELS[kind])
    np.testing.assert_array_equal(calibrator.predict_proba(Z[:5]), fitted[method].predict_proba(Z[:5]))


MORE_SETTINGS = [
    *[(m, {"ignore_index": v}, r"`ignore_index`") for m in METHODS for v in (None, np.uint64(2**64 - 1), 2**63)],
    *[(m, {"num_threads": v}, r"`num_threads`") for m in ("ts", "wts", "rd-ts") for v in (-1, True, 2.0)],
    *[("rd-ts", {"rule": v}, r"`rule` must be one of") for v in (None, "Paper", ["paper"], 1)],
    *[(m, {"max_iter": v}, r"`max_iter` must be an integer") for m in ("vs", "ms") for v in (None, True, np.int64(0))],
    *[("hb", {"n_bins": v}, r"`n_bins` must be an integer") for v in (None, np.int64(0), np.float64(3.0))],
    *[(m, {"foo": 1}, r"`foo` is not a parameter of") for m in METHODS],
    *[(m, {"n_bins": 3}, r"`n_bins` is not a parameter of") for m in METHODS if m != "hb"],
]


@pytest.mark.parametrize("method, settings, pattern", MORE_SETTINGS)
def test_more_settings_are_refused_at_construction(method, settings, pattern):
    """``make_calibrator`` passes on what the constructor refuses; an unknown name is a ValueError, not a TypeError."""
    with pytest.raises(ValueError, match=pattern):
        make_calibrator(method, **settings)


@pytest.mark.parametrize("method, settings, pattern", SETTINGS + MORE_SETTINGS)
def test_set_params_checks_as_the_constructor_does(method, settings, pattern):
    """``set_params`` used to store any value (``num_threads=0`` reached TS's fit and was ignored there)."""
    calibrator = make_calibrator(method)
    before = calibrator.get_params()
    with pytest.raises(ValueError, match=pattern):
        calibrator.set_params(**settings)
    assert calibrator.get_params() == before  # nothing was set


@pytest.mark.parametrize(
    "method, settings, pattern",
    [case for case in SETTINGS + MORE_SETTINGS if "is not a parameter" not in case[2]],
)
def test_a_setting_assigned_directly_is_caught_at_fit(method, settings, pattern):
    calibrator = make_calibrator(method)
    for name, value in settings.items():
        setattr(calibrator, name, value)
    with pytest.raises(ValueError, match=pattern):
        calibrator.fit(Z, Y)


FROM_CASES = [
    *[
        (cls, "from_temperature", (1.5, k), {}, r"`num_classes` must be an integer >= 2")
        for cls in ("TemperatureScaling", "WeightedTemperatureScaling", "RegionDependentTemperatureScaling")
        for k in (0, 1, "3", 3.7, True, None)
    ],
    *[
        (cls, "from_temperature", (t, 3), {}, r"`temperature`")
        for cls in ("TemperatureScaling", "RegionDependentTemperatureScaling")
        for t in (None, "1.5", np.nan, np.inf, 0.0, -1.0, True)
    ],
    ("RegionDependentTemperatureScaling", "from_temperature", (0.01, 3), {}, r"`temperature` must be > 0\.01"),
    *[
        ("RegionDependentTemperatureScaling", "from_slope", (m, 3), {}, r"`slope`")
        for m in (None, "x", True, np.nan, np.inf, -1.0, -2)
    ],
    ("RegionDependentTemperatureScaling", "from_slope", (0.5, 1), {}, r"`num_classes`"),
    ("TemperatureScaling", "from_temperature", (1.5, 3), {"foo": 1}, r"`foo` is not a parameter"),
    ("TemperatureScaling", "from_temperature", (1.5, 3), {"num_threads": 0}, r"`num_threads`"),
    ("RegionDependentTemperatureScaling", "from_slope", (0.5, 3), {"rule": "x"}, r"`rule`"),
]


@pytest.mark.parametrize("cls, name, args, params, pattern", FROM_CASES)
def test_calibrators_built_without_data_check_their_arguments(cls, name, args, params, pattern):
    """``from_temperature(1.5, num_classes="3")`` used to give a working 3-class calibrator, ``3.7`` one
    of 3 classes, ``from_slope(None, 3)`` a TypeError."""
    with pytest.raises(ValueError, match=pattern):
        getattr(getattr(calibkit.calibrators, cls), name)(*args, **params)


APPLY_CASES = {
    "more classes": (np.zeros((2, 4)), r"`logits` has 4 classes, the calibrator was fitted on 3"),
    "fewer classes": (np.zeros((2, 2)), r"`logits` has 2 classes, the calibrator was fitted on 3"),
    "token more classes": (np.zeros((2, 5, 4)), r"`logits` has 4 classes"),
    "one class": (np.zeros((2, 1)), r"`logits` has shape \(2, 1\): the last axis must hold >= 2 classes"),
    "0-d": (np.float64(0.0), r"`logits` must have shape"),
    "4-d": (np.zeros((1, 1, 1, 3)), r"`logits` must have shape"),
    "object": (Z.astype(object), r"`logits` must be a float array, got dtype object"),
    "bool": (Z > 0, r"`logits` must be a float array, got dtype bool"),
    "complex": (Z.astype(complex), r"`logits` must be a float array"),
    "none": (None, r"`logits` must be a float array"),
    "ragged": ([[1.0, 2.0, 3.0], [1.0]], r"`logits` could not be read as an array"),
}


@pytest.mark.parametrize("case", sorted(APPLY_CASES))
@pytest.mark.parametrize("method", METHODS)
def test_apply_refuses_more_bad_input(method, case, fitted):
    logits, pattern = APPLY_CASES[case]
    for call in (fitted[method].predict_proba, fitted[method].transform):
        with pytest.raises(ValueError, match=pattern):
            call(logits)


@pytest.mark.parametrize("method", METHODS)
def test_apply_takes_what_is_legitimate(method, fitted):
    calibrator = fitted[method]
    for call in (calibrator.predict_proba, calibrator.transform):
        assert call(np.zeros((0, 3))).shape == (0, 3)  # nothing in, nothing out
        assert call(np.zeros((2, 0, 3))).shape == (2, 0, 3)
        np.testing.assert_array_equal(call(np.array([[3, 1, 0]])), call(np.array([[3.0, 1.0, 0.0]])))
        np.testing.assert_array_equal(call(torch.tensor(Z[:4])), call(Z[:4]))
        np.testing.assert_array_equal(call(Z[:12].reshape(3, 4, 3)), call(Z[:12]).reshape(3, 4, 3))
        np.testing.assert_array_equal(call(Z[:4].astype(np.float16)), call(Z[:4].astype(np.float16).astype(float)))


def _plain(method: str, calibrator, z: np.ndarray) -> np.ndarray:
    """The calibrated logits as the formula gives them, in numpy, NaN and inf included."""
    with np.errstate(all="ignore"):
        if method in ("ts", "wts"):
            return z / calibrator.temperature_
        if method == "rd-ts":
            e = np.exp(z - z.max(axis=1, keepdims=True))
            h = (e / e.sum(axis=1, keepdims=True)).max(axis=1, keepdims=True)
            return z / (calibrator.slope_ * h + 1)
        if method == "vs":
            return z * calibrator.scale_ + calibrator.bias_
        return z @ calibrator.weight_.T + calibrator.bias_


def _softmax(z: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)


NON_FINITE_ROWS = np.array(
    [
        [np.nan, 0.0, 1.0],
        [np.nan] * 3,
        [np.inf, 0.0, 0.0],
        [np.inf, -np.inf, 0.0],
        [-np.inf] * 3,
        [-np.inf, 0.0, 1.0],
        [0.0, -np.inf, -np.inf],
        [1.0, 0.5, -2.0],
        [1e300, -1e300, 0.0],
    ]
)


@pytest.mark.parametrize("method", ["ts", "wts", "rd-ts", "vs", "ms"])
def test_non_finite_logits_give_the_plain_formula(method, fitted):
    """What the logit-based calibrators give for NaN, +inf and -inf logits is the formula computed
    plainly: z / T, v z + b, W z + b, then softmax (a NaN or +inf anywhere: a NaN row)."""
    calibrator = fitted[method]
    expected = _plain(method, calibrator, NON_FINITE_ROWS)
    np.testing.assert_allclose(calibrator.transform(NON_FINITE_ROWS), expected, rtol=1e-12)
    np.testing.assert_allclose(calibrator.predict_proba(NON_FINITE_ROWS), _softmax(expected), rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("method", METHODS)
def test_non_finite_logits_row_by_row(method, fitted):
    """Every calibrator, IR and HB included: a row whose softmax is NaN (a NaN or +inf logit, or
    every logit -inf) is a NaN row; a -inf logit is a probability-0 class (as -1e300); every other
    row is what it is alone."""
    calibrator = fitted[method]
    probs = calibrator.predict_proba(NON_FINITE_ROWS)
    nan_rows = np.isnan(_softmax(NON_FINITE_ROWS)).any(axis=1)
    assert nan_rows.tolist() == [True] * 5 + [False] * 4
    if method in ("vs", "ms"):  # -inf times a scale or weight: the formula's own answer, above
        nan_rows = np.isnan(_softmax(_plain(method, calibrator, NON_FINITE_ROWS))).any(axis=1)
    assert np.isnan(probs[nan_rows]).all()
    assert np.isfinite(probs[~nan_rows]).all()
    np.testing.assert_allclose(probs[~nan_rows].sum(axis=1), 1, rtol=1e-12)
    for i in np.flatnonzero(~nan_rows):
        np.testing.assert_array_equal(probs[i], calibrator.predict_proba(NON_FINITE_ROWS[i : i + 1])[0])
    if method not in ("vs", "ms"):
        minus_inf = NON_FINITE_ROWS[[5, 6]]
        np.testing.assert_array_equal(
            probs[[5, 6]], calibrator.predict_proba(np.where(minus_inf == -np.inf, -1e300, minus_inf))
        )


@pytest.mark.parametrize("method", ["ts", "wts", "vs", "ms"])
@pytest.mark.parametrize("scale", [1e-300, 2.0**-40, 1e-6, 1e3, 1e8, 1e20, 1e100])
def test_logits_far_from_unit_scale_give_the_scale_free_answer(method, scale, fitted):
    """These maps commute with rescaling the logits, so fitting and predicting on ``s z`` must give
    the probabilities of ``z``. Before: TS on logits of 1e20 stopped at a T 140x too small (an
    absolute 1e-12 floor in the Newton stopping rule), at 1e-12 it warned of separable data;
    matrix scaling on logits of 1e8 stopped at a uniform map, vector scaling at 1e-6 was 2e-2
    off, at 1e100 its parameters were NaN (a fit that 'succeeded' and a predict_proba that
    raised), and the head rounded a fitted scale of 1e-100 to float32 0. (RD-TS is not
    scale-free: its T(h) reads softmax(z).)"""
    calibrator = make_calibrator(method).fit(Z * scale, Y)
    np.testing.assert_allclose(calibrator.predict_proba(Z * scale), fitted[method].predict_proba(Z), atol=1e-6)


# -- the torch side: CalibrationHead, the calibrated models, calibrate(), collect_logits() ------------

BERT = dict(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37)
IDS = torch.tensor([[2, 5, 7, 3], [2, 9, 11, 3], [2, 4, 4, 3]])


@pytest.fixture(scope="module")
def tiny_models():
    torch.manual_seed(0)
    config = BertConfig(**BERT, num_labels=3)
    return {
        "sequence": BertForSequenceClassification(config).eval(),
        "token": BertForTokenClassification(config).eval(),
    }


@pytest.mark.parametrize("task", ["sequence", "token"])
@pytest.mark.parametrize("method", METHODS)
def test_calibrated_model_keeps_a_nan_row_nan_and_the_others_untouched(method, task, fitted, tiny_models):
    """The model path: the base model's logits get a NaN in one prediction (one sample, or one
    token); the calibrated model's probabilities are NaN for that prediction only, every other
    prediction is unchanged, and the numpy path agrees. IR and HB gave a valid-looking uniform row
    for it before."""
    base = tiny_models[task]
    model = calibkit.calibrate(base, fitted[method], report=False)
    with torch.no_grad():
        clean = model(input_ids=IDS).logits.reshape(-1, 3)

    def poison(module, args, output):
        output = output.clone()
        output[(0, 1, 0) if output.ndim == 3 else (0, 0)] = float("nan")
        return output

    hook = calibkit.calibrators.classifier_layer(base)[1].register_forward_hook(poison)
    try:
        with torch.no_grad():
            z = base(input_ids=IDS).logits
            out = model(input_ids=IDS).logits.reshape(-1, 3)
    finally:
        hook.remove()
    probs = torch.softmax(out, dim=-1)
    bad = torch.zeros(probs.shape[0], dtype=torch.bool)
    bad[1 if task == "token" else 0] = True
    assert torch.isnan(probs[bad]).all() and torch.isfinite(probs[~bad]).all()
    torch.testing.assert_close(out[~bad], clean[~bad], rtol=0, atol=0)
    np.testing.assert_allclose(
        fitted[method].predict_proba(z).reshape(-1, 3), probs.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True
    )
