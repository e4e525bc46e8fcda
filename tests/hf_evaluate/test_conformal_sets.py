"""The `conformal_sets` evaluate module: the coverage and size of prediction sets, equal to calibkit's functions."""

import doctest
import sys

import numpy as np
import pytest

import calibkit
from calibkit.calibrators import SplitConformal
from calibkit.evaluate_modules import evaluate_module_path, modules_root


@pytest.fixture(scope="module")
def sets_and_labels():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(900, 6)) * 2
    labels = (logits + rng.gumbel(size=logits.shape)).argmax(axis=1)
    conformal = SplitConformal(score="aps", confidence_level=0.9).fit(logits[:400], labels[:400])
    return conformal.predict_sets(logits[400:]), labels[400:]


def test_loaded_by_path_it_equals_coverage_and_set_size(modules_cache, sets_and_labels):
    import evaluate

    sets, labels = sets_and_labels
    for metric in (
        evaluate.load(str(modules_root() / "conformal_sets")),
        evaluate.load(evaluate_module_path("conformal_sets")),
    ):
        result = metric.compute(predictions=sets, references=labels, per_class=True)
        assert list(result) == ["coverage", "set_size", "coverage_per_class"]
        assert result["coverage"] == calibkit.coverage(sets, labels)
        assert result["set_size"] == calibkit.set_size(sets)
        np.testing.assert_array_equal(result["coverage_per_class"], calibkit.coverage(sets, labels, per_class=True))
    assert set(metric.compute(predictions=sets.tolist(), references=labels.tolist())) == {"coverage", "set_size"}


def test_batches_tokens_and_ignored_rows(load, sets_and_labels):
    sets, labels = sets_and_labels
    metric = load("conformal_sets")
    edges = [0, 7, 7, 200, 500]  # uneven batches, one empty
    for start, stop in zip(edges[:-1], edges[1:]):
        metric.add_batch(predictions=sets[start:stop], references=labels[start:stop])
    assert metric.compute() == {"coverage": calibkit.coverage(sets, labels), "set_size": calibkit.set_size(sets)}
    token_sets, token_labels = sets.reshape(50, 10, 6), labels.reshape(50, 10).copy()
    token_labels[:, 7:] = -100  # padding: its sets are not counted
    want = {
        "coverage": calibkit.coverage(token_sets, token_labels),
        "set_size": calibkit.set_size(token_sets, token_labels),
    }
    assert want["set_size"] == calibkit.set_size(token_sets[:, :7])
    assert load("conformal_sets", "token").compute(predictions=token_sets, references=token_labels) == want
    short = [s[:7].tolist() for s in token_sets]  # per-sequence lists, padding cut off
    assert load("conformal_sets", "token").compute(predictions=short, references=[y[:7] for y in token_labels]) == want
    with pytest.raises(ValueError, match=r"`config_name` must be one of \['default', 'token'\]"):
        load("conformal_sets", "multilabel")


@pytest.mark.parametrize(
    ("predictions", "message"),
    [
        ([[0, 2], [1]], r"`predictions` must be prediction sets as boolean masks.*rows of different lengths"),
        ([[0, 2], [1, 2]], r"`predictions` must be prediction sets as boolean masks.*got dtype int64"),
        (np.array([[1, 0, 1], [0, 1, 0]]), r"lists of class indices are not read, nor 0/1 integers"),
        ([[0.5, 0.5, 0.0], [0.1, 0.8, 0.1]], r"`predictions` must be .* boolean masks.*got dtype float64"),
    ],
)
def test_sets_that_are_not_boolean_masks_are_refused(load, predictions, message):
    with pytest.raises(ValueError, match=message):
        load("conformal_sets").compute(predictions=predictions, references=[0, 1])


def test_bad_labels_and_settings_name_the_module_arguments(load):
    sets = [[True, False], [True, True]]
    with pytest.raises(ValueError, match=r"`references` must lie in \[0, 2\)"):
        load("conformal_sets").compute(predictions=sets, references=[0, 2])
    with pytest.raises(ValueError, match=r"`references` holds no sample"):
        load("conformal_sets").compute(predictions=sets, references=[-100, -100])
    with pytest.raises(ValueError, match="`per_class`"):
        load("conformal_sets").compute(predictions=sets, references=[0, 1], per_class="yes")


def test_doctest_examples(load):
    script = sys.modules[type(load("conformal_sets")).__module__]
    result = doctest.testmod(script, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 10 and result.failed == 0
