"""Every bad input of SPEC.md raises ValueError naming the argument."""

import warnings

import numpy as np
import pytest
import torch

import calibkit

GOOD = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])
LABELS = np.array([0, 1, 2])


@pytest.mark.parametrize(
    "probs,labels,kwargs,pattern",
    [
        (np.array([[0.7, np.nan, 0.3], [0.1, 0.8, 0.1]]), [0, 1], {}, r"`probs` contains NaN or inf at position 0"),
        (np.array([[0.7, 0.3], [np.inf, 0.0]]), [0, 1], {}, r"`probs` contains NaN or inf at position 1"),
        (np.array([[1.2, -0.2], [0.5, 0.5]]), [0, 1], {}, r"`probs` has a value outside \[0, 1\].*from_logits=True"),
        (np.array([[0.6, 0.6], [0.5, 0.5]]), [0, 1], {}, r"`probs` rows must sum to 1.*sums to 1\.2.*from_logits=True"),
        (np.array([1.5, 0.5]), [0, 1], {}, r"`probs` has a value outside \[0, 1\]"),
        (np.array([np.nan, 0.5]), [0, 1], {}, r"`probs` contains NaN"),
        (np.array([[2.0, np.inf]]), [0], {"from_logits": True}, r"`probs \(logits, from_logits=True\)` contains NaN"),
        (GOOD, [0, 3, 1], {}, r"`labels` must lie in \[0, 3\).*got 3 at position 1"),
        (GOOD, [0, -1, 1], {}, r"`labels` must lie in \[0, 3\) or equal ignore_index=-100; got -1"),
        (np.array([0.2, 0.9]), [0, 2], {}, r"`labels` must lie in \[0, 2\)"),
        (GOOD, [0, 1], {}, r"`labels` has shape \(2,\) but `probs` of shape \(3, 3\) needs labels of shape \(3,\)"),
        (GOOD, [0.0, 1.5, 2.0], {}, r"`labels` must be integers, got the value 1\.5"),
        (GOOD, [-100, -100, -100], {}, r"`labels`: no sample to evaluate"),
        (np.zeros((0, 3)), np.zeros(0, int), {}, r"`labels`: no sample to evaluate"),
        (GOOD, LABELS, {"n_bins": 0}, r"`n_bins` must be an integer >= 1, got 0"),
        (GOOD, LABELS, {"n_bins": 2.5}, r"`n_bins` must be an integer >= 1, got 2\.5"),
        (np.array([[1.0]]), [0], {}, r"`probs` has shape \(1, 1\): the last axis must hold >= 2 classes"),
        (
            np.zeros((2, 2, 2, 2)),
            np.zeros((2, 2, 2), int),
            {},
            r"`probs` must have shape \(N,\), \(N, K\) or \(N, L, K\)",
        ),
        (GOOD, LABELS, {"from_logits": "yes"}, r"`from_logits` must be True or False"),
    ],
)
def test_bad_input_raises_value_error_naming_the_argument(probs, labels, kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        calibkit.ece(probs, labels, **kwargs)


def test_token_positions_reported_as_sequence_and_token():
    probs = np.full((2, 3, 2), 0.5)
    probs[1, 2] = [0.9, 0.9]
    with pytest.raises(ValueError, match=r"position \(1, 2\)"):
        calibkit.ece(probs, np.zeros((2, 3), int))


def test_bad_input_is_rejected_for_every_metric():
    bad = np.array([[0.6, 0.6], [0.5, 0.5]])
    for name in calibkit.METRICS:
        with pytest.raises(ValueError, match="`probs` rows must sum to 1"):
            getattr(calibkit, name)(bad, [0, 1])


@pytest.mark.parametrize(
    "kwargs,name", [({"theta": -1}, "theta"), ({"eps": 0}, "eps"), ({"ace_ranges": 0}, "ace_ranges")]
)
def test_bad_settings(kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        calibkit.calibration_report(GOOD, LABELS, **kwargs)


def test_masked_positions_may_hold_anything():
    # Trainer pads logits with -100; a masked row may even be NaN: only kept rows are checked.
    probs = np.array([[[0.7, 0.3], [np.nan, np.nan]], [[0.2, 0.8], [-100.0, -100.0]]])
    labels = np.array([[0, -100], [1, -100]])
    assert calibkit.ece(probs, labels) == pytest.approx(0.25)


def test_absent_class_warns_and_is_nan():
    with pytest.warns(calibkit.MissingClassWarning, match=r"classes \[2\]"):
        per_class = calibkit.subset_ece(GOOD[:2], [0, 1])
    assert np.isnan(per_class[2]) and not np.isnan(per_class[:2]).any()
    with pytest.warns(calibkit.MissingClassWarning):
        assert calibkit.msece(GOOD[:2], [0, 1]) == pytest.approx(np.mean(per_class[:2]))


def test_rbece_without_dense_bin_is_nan_with_warning():
    with pytest.warns(calibkit.EmptyRegionWarning, match="theta=40"):
        assert np.isnan(calibkit.rbece(GOOD, LABELS))


def test_overconfidence_without_a_wrong_prediction_is_nan_with_warning():
    probs = np.array([[0.9, 0.1], [0.2, 0.8]])
    with pytest.warns(calibkit.NoWrongPredictionWarning, match="every prediction is right"):
        assert np.isnan(calibkit.overconfidence(probs, [0, 1]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", calibkit.NoWrongPredictionWarning)  # one wrong: defined, no warning
        assert calibkit.overconfidence(probs, [0, 0]) == pytest.approx(0.8)


def test_torch_tensors_and_dtypes_give_the_same_result():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(500, 5))
    y = rng.integers(0, 5, 500)
    expected = calibkit.calibration_report(z, y, from_logits=True)
    for values in (torch.tensor(z), torch.tensor(z, dtype=torch.float32), z.astype(np.float32)):
        for labels in (torch.tensor(y), y.astype(np.int32), y.tolist()):
            got = calibkit.calibration_report(values, labels, from_logits=True)
            tol = 1e-12 if values.dtype in (torch.float64, np.float64) else 1e-5
            for key in ("ece", "ace", "sce", "cece", "nll", "brier", "ecd", "fce"):
                assert got[key] == pytest.approx(expected[key], abs=tol), key
    half = torch.tensor(z, dtype=torch.bfloat16)
    assert calibkit.nll(half, y, from_logits=True) == pytest.approx(expected["nll"], abs=0.02)


def test_input_is_not_modified():
    probs = GOOD.copy()
    calibkit.calibration_report(probs, LABELS)
    np.testing.assert_array_equal(probs, GOOD)


def test_a_masked_array_is_read_only_without_masked_entries():
    # np.asarray drops a mask: the masked rows would count as data
    expected = calibkit.ece(GOOD, LABELS)
    unmasked = np.ma.masked_array(GOOD, mask=np.zeros(GOOD.shape, bool))
    assert calibkit.ece(unmasked, np.ma.masked_array(LABELS, mask=False)) == expected
    masked = unmasked.copy()
    masked[1] = np.ma.masked
    with pytest.raises(ValueError, match="`probs` is a masked array with masked entries"):
        calibkit.ece(masked, LABELS)
    with pytest.raises(ValueError, match="`labels` is a masked array with masked entries"):
        calibkit.calibration_report(GOOD, np.ma.masked_array(LABELS, mask=[0, 1, 0]))


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_sparse_and_meta_tensors_are_refused_naming_the_argument(backend):
    from calibkit.metrics.backends import get_backend, set_backend

    before = get_backend()
    set_backend(backend)
    try:
        with pytest.raises(ValueError, match=r"`probs` is a torch.sparse_coo tensor"):
            calibkit.ece(torch.tensor(GOOD).to_sparse(), LABELS)
        with pytest.raises(ValueError, match="`probs` is on the meta device"):
            calibkit.ece(torch.empty(3, 3, device="meta"), LABELS)
        with pytest.raises(ValueError, match=r"`labels` is a torch.sparse_coo tensor"):
            calibkit.ece(torch.tensor(GOOD), torch.tensor(LABELS).to_sparse())
    finally:
        set_backend(before)


def test_rounded_probabilities_are_not_told_to_pass_from_logits_alone():
    # bfloat16 softmax rows miss 1 by up to ~0.4%: read as logits they would give a wrong number
    # with no error, so the message says what they are
    probs = torch.tensor([[0.9, 0.1], [0.3, 0.7]]).to(torch.bfloat16)
    with pytest.raises(ValueError, match=r"sums to 0\.998.*rounded to a low precision.*softmax in float32"):
        calibkit.ece(probs, [0, 1])


@pytest.mark.parametrize("backend", ["torch", "auto"])
def test_a_tensor_kept_where_it_lives_goes_through_the_torch_engine(monkeypatch, backend):
    """CUDA tensors stay on their device for the torch engine; CI has no GPU, so a CPU tensor plays
    one here. The engine read the tensor's ``.size`` (a method on tensors) as its entry count and
    every CUDA call raised a TypeError, unseen without a GPU."""
    import calibkit.metrics.validation as validation
    from calibkit.metrics.backends import use_backend

    monkeypatch.setattr(validation, "on_device", lambda array: isinstance(array, torch.Tensor))
    probs = torch.tensor(GOOD)
    with use_backend(backend):
        assert calibkit.ece(probs, torch.tensor(LABELS)) == pytest.approx(calibkit.ece(GOOD, LABELS), abs=1e-12)
