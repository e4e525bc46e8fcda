"""Every calibkit `evaluate` module through one catalogue of bad inputs and settings (issue 14):
each ends in a ``ValueError`` naming the argument (``predictions``, ``references`` or the
setting), and a failed ``compute`` keeps the batches added before it."""

import re

import numpy as np
import pytest

import calibkit
from calibkit.evaluate_modules import MODULE_NAMES

P = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.5, 0.25, 0.25]])
Y = np.array([0, 1, 2, 1])

INPUTS = {
    "nan": (np.where(P == 0.8, np.nan, P), Y, r"`predictions` contains NaN or inf at position 1"),
    "above 1": (np.where(P == 0.8, 1.8, P), Y, r"`predictions` has a value outside \[0, 1\]"),
    "row sum": (P * 1.2, Y, r"`predictions` rows must sum to 1"),
    "object": (P.astype(object), Y, r"`predictions` must be a float array"),
    "ragged": ([[0.5, 0.5], [1.0]], [0, 1], r"`predictions` could not be read as an array"),
    "uint64 label": (
        P,
        np.array([0, 2**64 - 100, 1, 1], dtype=np.uint64),
        r"`references` has the value 18446744073709551516",
    ),
    "1e20 label": (P, np.array([0, 1e20, 1, 1]), r"`references` has the value 1e\+20"),
    "label range": (P, [0, 3, 1, 1], r"`references` must lie in \[0, 3\)"),
    "string labels": (P, ["a", "b", "c", "d"], r"`references` must be integers"),
    "length": (P, Y[:3], r"Mismatch in the number of predictions \(4\) and references \(3\)"),
    "token shaped": (P[None], Y[None], r"look like token classification"),
    "all ignored": (P, [-100] * 4, r"`references`: no sample to evaluate"),
    "empty": (np.zeros((0, 3)), np.zeros(0, int), r"Nothing to compute"),
}

SETTINGS = {  # each module's own keyword arguments, out of range
    "n_bins": [0, "3", 2.5, 10**7],
    "ace_ranges": [0, "3"],
    "theta": [-1, float("nan")],
    "eps": [0, 2.0],
    "ignore_index": [2**70, "x"],
    "from_logits": ["no"],
}


@pytest.fixture(scope="module")
def modules(load):
    return {name: load(name) for name in MODULE_NAMES}


@pytest.mark.parametrize("case", sorted(INPUTS))
def test_every_module_refuses_bad_input(modules, case):
    predictions, references, pattern = INPUTS[case]
    for module in modules.values():
        with pytest.raises(ValueError, match=pattern):
            module.compute(predictions=predictions, references=references)


def _settings_of(module) -> list[str]:
    import inspect

    # Not the deprecated old names (default None): they are checked under their new names.
    parameters = inspect.signature(module._compute).parameters.values()
    return [p.name for p in parameters if p.name not in ("predictions", "references") and p.default is not None]


def test_every_module_refuses_out_of_range_settings(modules):
    checked = 0
    for module in modules.values():
        for setting in _settings_of(module):
            for value in SETTINGS.get(setting, [0] if setting.endswith(("_bins", "_ranges")) else []):
                with pytest.raises(ValueError, match=rf"`{setting}`"):
                    module.compute(predictions=P, references=Y, **{setting: value})
                checked += 1
    assert checked > 60


@pytest.mark.parametrize("name", ["ece", "cece", "calibration_report"])
def test_a_failed_compute_keeps_the_batches(modules, name):
    """evaluate's own modules forget every batch when compute fails; ours keep them until a compute
    succeeds ("Nothing to compute" on the retry, before)."""
    module = modules[name]
    rng = np.random.default_rng(0)
    batches = [(rng.dirichlet(np.ones(3), 50), rng.integers(0, 3, 50)) for _ in range(3)]
    for probs, labels in batches:
        module.add_batch(predictions=probs, references=labels)
    with pytest.raises(ValueError, match=r"`n_bins`"):
        module.compute(n_bins=0)
    with pytest.raises(ValueError, match=r"`ignore_index`"):
        module.compute(ignore_index="x")
    result = module.compute(n_bins=10)
    everything = np.concatenate([p for p, _ in batches]), np.concatenate([y for _, y in batches])
    key = "cece" if name == "cece" else "ece"
    expected = getattr(calibkit, key)(*everything, n_bins=10)
    assert result[key] == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match=r"Nothing to compute"):
        module.compute()  # a successful compute consumed them, as evaluate does


def test_compute_predictions_are_not_kept_after_a_failure(modules):
    module = modules["ece"]
    module.add_batch(predictions=P, references=Y)
    with pytest.raises(ValueError, match=r"`predictions` contains NaN"):
        module.compute(predictions=np.full((2, 3), np.nan), references=[0, 1])
    assert module.compute()["ece"] == pytest.approx(calibkit.ece(P, Y), rel=1e-12)  # only the added batch


def test_a_batch_with_nan_is_refused_at_add_batch_and_the_earlier_ones_are_kept(modules, load):
    """No setting of compute could use a NaN of a labelled row: stored, it made every later compute
    fail, and the batches before it were lost for good."""
    module = modules["ece"]
    module.add_batch(predictions=P, references=Y)
    with pytest.raises(ValueError, match=r"`predictions` contains NaN or inf at position 1 of this batch"):
        module.add_batch(predictions=np.where(P == 0.8, np.inf, P), references=Y)
    module.add_batch(predictions=np.full((2, 3), np.nan), references=[-100, -100])  # padding: anything
    assert module.compute()["ece"] == pytest.approx(calibkit.ece(P, Y), rel=1e-12)
    token = load("ece", "token")
    token.add_batch(predictions=P[None], references=Y[None])
    with pytest.raises(ValueError, match=r"position 2 of this batch \(reference 2\)"):
        token.add(prediction=np.where(P == 0.3, np.nan, P), reference=Y)
    assert token.compute()["ece"] == pytest.approx(calibkit.ece(P, Y), rel=1e-12)


def test_token_configuration_refuses_ragged_sequences(load):
    module = load("ece", "token")
    with pytest.raises(ValueError, match=r"`predictions` sequence 0 has shape \(2, 2\) but `references` sequence 0"):
        module.compute(predictions=[[[0.5, 0.5], [0.9, 0.1]]], references=[[0, 1, 1]])
    with pytest.raises(ValueError, match=r"`references` must lie in \[0, 2\)"):
        module.compute(predictions=[[[0.5, 0.5]]], references=[[7]])


@pytest.mark.parametrize("name", ["ece", "sce", "calibration_report"])
def test_next_token_configuration_names_references_and_their_own_position(load, name):
    """Issue 55: a label outside the vocabulary at position 3 was reported at position 2 (the shifted
    index), and a float label as `labels`; the default and token configurations name `references`."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=(1, 7, 6))
    y = np.array([[-100, -100, 1, 9, 2, 0, 4]])
    module = load(name, "next_token")
    with pytest.raises(ValueError, match=r"`references` must lie in \[0, 6\).* got 9 at position 3\b"):
        module.compute(predictions=z, references=y, from_logits=True)
    with pytest.raises(ValueError, match=r"`references` must be integers"):
        module.compute(predictions=z, references=y + 0.5, from_logits=True)
    with pytest.raises(ValueError, match=r"`references` must be integers"):
        module.add_batch(predictions=list(z), references=list(y + 0.5))  # per-sequence lists


NOTHING_TO_SCORE = {  # next_token: a sequence scores position t against the reference at t + 1
    "every reference -100": (np.zeros((2, 5, 4)), np.full((2, 5), -100)),
    "only position 0 labelled": (np.zeros((2, 5, 4)), np.array([[1, -100, -100, -100, -100], [2] + [-100] * 4])),
    "sequences of length 1": (np.zeros((2, 1, 4)), np.array([[1], [2]])),
}


@pytest.mark.parametrize("name", MODULE_NAMES)
@pytest.mark.parametrize("case", sorted(NOTHING_TO_SCORE))
def test_next_token_with_nothing_to_score_names_references(load, name, case):
    """Issue 62: with nothing left to score after the shift, ece, cece and ece_l2 said "labels[:, t + 1] ...
    give the labels unshifted" (the others "no sample to evaluate"): in the next_token configuration the argument
    is `references`, and every module says that the shift left nothing."""
    try:
        module = load(name, "next_token")
    except ValueError:
        pytest.skip(f"{name} has no next_token configuration")
    predictions, references = NOTHING_TO_SCORE[case]
    for add in (False, True):  # compute(predictions=...) and add_batch per sequence, then compute()
        with pytest.raises(ValueError) as raised:
            if add:
                module.add_batch(predictions=list(predictions), references=list(references))
                module.compute(from_logits=True)
            else:
                module.compute(predictions=predictions, references=references, from_logits=True)
        message = str(raised.value)
        assert not re.search(r"\blabels\b", message), message
        assert "no token to score" in message and "scored against `references[:, t + 1]`" in message, message
        assert "ignore_index=-100 (give `references` unshifted" in message, message
