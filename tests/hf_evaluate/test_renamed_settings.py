"""The `evaluate` modules take each setting by its one name; the old names warn for one release (issue 16)."""

import numpy as np
import pytest

from tests.conftest import softmax

RNG = np.random.default_rng(0)
P = softmax(RNG.normal(size=(600, 4)) * 2)
Y = RNG.integers(0, 4, 600)


@pytest.mark.parametrize(
    "module,old,value,new",
    [
        ("ace", "n_ranges", 7, "ace_ranges"),
        ("sce", "n_bins", 11, "sce_bins"),
        ("rbece", "n_bins", 13, "rbece_bins"),
        ("fce", "variant", "authors", "fce_variant"),
    ],
)
def test_evaluate_modules_keep_the_old_names_for_one_release(load, module, old, value, new):
    metric = load(module)
    extra = {"theta": 0} if module == "rbece" else {}
    with pytest.warns(FutureWarning, match=rf"`{old}` is renamed `{new}`"):
        got = metric.compute(predictions=P, references=Y, **{old: value}, **extra)
    assert got == metric.compute(predictions=P, references=Y, **{new: value}, **extra)
    assert got != metric.compute(predictions=P, references=Y, **extra)


@pytest.mark.parametrize(
    "module,given",
    [
        ("fce", {"variant": "authors", "fce_variant": "paper"}),  # the new name at its default: was silently the old
        ("fce", {"n_bins": 10, "fce_bins": 15}),
        ("ace", {"n_ranges": 7, "ace_ranges": 15}),
        ("esce", {"n_bins": 5, "esce_bins": 10}),
    ],
)
def test_an_old_and_a_new_name_together_are_refused_naming_both(load, module, given):
    (old, old_value), (new, new_value) = given.items()
    with pytest.raises(ValueError, match=rf"`{old}={old_value!r}` and `{new}={new_value!r}`"):
        load(module).compute(predictions=P, references=Y, **given)
