"""One settings object, one name per setting, the old names kept for one release (issue 16).

``CalibrationSettings`` is validated once; every door (functional API, report, accumulator,
bootstrap, callback) accepts it instead of keywords and gives the same numbers; the keyword
names that some doors used before still work, with a ``FutureWarning``, and give the same value.
"""

import dataclasses
import warnings

import numpy as np
import pytest

import calibkit
from calibkit.callbacks import CalibrationCallback
from calibkit.metrics import CalibrationAccumulator, CalibrationSettings
from calibkit.metrics.bootstrap import bootstrap_intervals
from calibkit.metrics.settings import DEFAULTS, names
from tests.conftest import softmax

RNG = np.random.default_rng(0)
P = softmax(RNG.normal(size=(600, 4)) * 2)
Y = RNG.integers(0, 4, 600)
CUSTOM = CalibrationSettings(
    n_bins=9, ace_ranges=7, sce_bins=11, rbece_bins=13, theta=3, fce_bins=6, fce_variant="authors", esce_bins=5
)
KEYWORDS = {k: v for k, v in CUSTOM.as_dict().items() if v != getattr(DEFAULTS, k)}


def test_settings_are_frozen_validated_and_normalised():
    s = CalibrationSettings(n_bins=np.int64(7), theta=np.float32(2))
    assert s.n_bins == 7 and type(s.n_bins) is int
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.n_bins = 3
    for field, bad in [("n_bins", 0), ("ace_ranges", "5"), ("theta", -1), ("fce_variant", "x"), ("eps", 0)]:
        with pytest.raises(ValueError, match=f"`{field}`"):
            CalibrationSettings(**{field: bad})
    with pytest.raises(ValueError, match=r"unknown settings \['n_ranges'\]"):
        s.replace(n_ranges=3)
    assert s.replace(theta=5).theta == 5.0 and s.theta == 2.0
    assert set(s.as_dict()) == set(names())


def test_every_door_takes_the_settings_object_and_agrees_with_the_keywords():
    by_keywords = calibkit.calibration_report(P, Y, **KEYWORDS)
    by_object = calibkit.calibration_report(P, Y, settings=CUSTOM)
    assert by_object.keys() == by_keywords.keys()
    for key in by_keywords:
        np.testing.assert_array_equal(by_object[key], by_keywords[key])
    assert by_keywords["fce"] != calibkit.calibration_report(P, Y)["fce"]  # the settings did reach FCE
    streamed = CalibrationAccumulator(settings=CUSTOM).update(P[:250], Y[:250]).update(P[250:], Y[250:]).compute()
    for key in ("ece", "sce", "rbece", "fce", "esce", "cece"):
        assert streamed[key] == pytest.approx(by_keywords[key], abs=1e-12)
    boot_kw = bootstrap_intervals(P, Y, bootstrap=20, metrics=("fce", "rbece"), **KEYWORDS)["intervals"]
    boot_obj = bootstrap_intervals(P, Y, bootstrap=20, metrics=("fce", "rbece"), settings=CUSTOM)["intervals"]
    assert boot_kw == boot_obj


def test_settings_and_keywords_together_are_refused():
    with pytest.raises(ValueError, match="not both"):
        calibkit.calibration_report(P, Y, settings=CUSTOM, n_bins=5)
    with pytest.raises(ValueError, match="not both"):
        CalibrationAccumulator(settings=CUSTOM, theta=1)
    # A keyword at its default value contradicts the object as much as any other: was ignored.
    both = r"`fce_variant='paper'` and `settings.fce_variant='authors'`.*not both"
    with pytest.raises(ValueError, match=both):
        calibkit.calibration_report(P, Y, settings=CUSTOM, fce_variant="paper")
    with pytest.raises(ValueError, match=both):
        CalibrationAccumulator(settings=CUSTOM, fce_variant="paper")
    with pytest.raises(ValueError, match=r"`n_bins=15` and `settings.n_bins=9`"):
        bootstrap_intervals(P, Y, bootstrap=5, settings=CUSTOM, n_bins=15)
    with pytest.raises(ValueError, match=r"`from_logits=False` and `settings.from_logits=True`"):
        calibkit.calibration_report(P, Y, settings=CUSTOM.replace(from_logits=True), from_logits=False)
    with pytest.raises(ValueError, match=r"`ignore_index=-100` and `settings.ignore_index=-1`"):
        CalibrationCallback(settings=CUSTOM.replace(ignore_index=-1), ignore_index=-100)
    with pytest.raises(ValueError, match="`settings` must be a CalibrationSettings"):
        calibkit.calibration_report(P, Y, settings={"n_bins": 5})


def test_merge_refuses_other_settings_by_name():
    a = CalibrationAccumulator(settings=CUSTOM).update(P, Y)
    b = CalibrationAccumulator(settings=CUSTOM.replace(esce_bins=6)).update(P, Y)
    with pytest.raises(ValueError, match=r"different settings: \['esce_bins'\]"):
        a.merge(b)


OLD_NAMES = [
    # (function, old keyword, value, new keyword)
    (calibkit.ace, "n_ranges", 7, "ace_ranges"),
    (calibkit.sce, "n_bins", 11, "sce_bins"),
    (calibkit.rbece, "n_bins", 13, "rbece_bins"),
    (calibkit.fce, "n_bins", 6, "fce_bins"),
    (calibkit.fce, "variant", "authors", "fce_variant"),
    (calibkit.esce, "n_bins", 5, "esce_bins"),
]


@pytest.mark.parametrize("fn,old,value,new", OLD_NAMES, ids=lambda x: getattr(x, "__name__", str(x)))
def test_old_keyword_names_warn_and_give_the_same_value(fn, old, value, new):
    extra = {"theta": 0} if fn is calibkit.rbece else {}
    with pytest.warns(FutureWarning, match=rf"`{old}` is renamed `{new}`"):
        got = fn(P, Y, **{old: value}, **extra)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        want = fn(P, Y, **{new: value}, **extra)
    assert got == want
    if fn is calibkit.esce:  # signed and weighted by n_b / N: its value does not move with the bins
        with pytest.warns(FutureWarning):
            assert len(fn(P, Y, **{old: value}, return_bins=True)[1]["count"]) == value
    else:
        assert got != fn(P, Y, **extra)  # the old name was not ignored
    with pytest.raises(ValueError, match=rf"`{old}` is the old name of `{new}`"):
        fn(P, Y, **{old: value, new: value}, **extra)
    default = getattr(DEFAULTS, new)  # the new name at its default: was silently overridden by the old
    with pytest.raises(ValueError, match=rf"`{old}={value!r}` and `{new}={default!r}`"):
        fn(P, Y, **{old: value, new: default}, **extra)
