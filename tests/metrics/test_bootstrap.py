"""Bootstrap intervals: equal to a brute-force Poisson bootstrap, and cover the truth at about the nominal rate."""

import warnings

import numpy as np
import pytest

import calibkit
from calibkit.metrics.bootstrap import bootstrap_intervals
from tests.conftest import make_data


def brute_force(probs, labels, n_boot, seed, confidence, **kwargs):
    """Replicate j = the rows repeated w_ij times (w ~ Poisson(1)), through calibration_report."""
    rng = np.random.default_rng(seed)
    weights = rng.poisson(1.0, size=(n_boot, len(labels)))
    reports = []
    for w in weights:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            reports.append(calibkit.calibration_report(np.repeat(probs, w, axis=0), np.repeat(labels, w), **kwargs))
    tail = 100 * (1 - confidence) / 2
    intervals = {}
    for name in [m for m in calibkit.METRICS if m not in ("subset_ece", "ace")] + ["accuracy"]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            intervals[name] = np.nanpercentile([r[name] for r in reports], [tail, 100 - tail])
    per_class = np.nanpercentile([r["subset_ece"] for r in reports], [tail, 100 - tail], axis=0)
    return intervals, per_class


@pytest.mark.parametrize(("kind", "from_logits"), [("multiclass", False), ("multiclass", True), ("binary", False)])
def test_equals_brute_force_poisson_bootstrap(kind, from_logits):
    probs, labels = make_data(3, kind, n=300, num_classes=4, from_logits=from_logits)
    ours = bootstrap_intervals(probs, labels, bootstrap=40, seed=7, level=0.9, from_logits=from_logits, theta=5)
    assert ours["n_blocks"] == 300  # one block per row: the plain Poisson bootstrap
    reference, per_class = brute_force(probs, labels, 40, 7, 0.9, from_logits=from_logits, theta=5)
    for name, (low, high) in reference.items():
        np.testing.assert_allclose(ours["intervals"][name], (low, high), rtol=1e-9, atol=1e-12, err_msg=name)
    np.testing.assert_allclose(ours["subset_ece"], per_class, rtol=1e-9, atol=1e-12)


def test_token_input_and_blocks():
    probs, labels = make_data(4, "token", n=200, num_classes=3)
    ci = bootstrap_intervals(probs, labels, bootstrap=100, max_blocks=50)
    assert ci["n_blocks"] == 50
    report = calibkit.calibration_report(probs, labels)
    low, high = ci["intervals"]["brier"]
    assert low < report["brier"] < high


def test_token_input_is_resampled_by_sequence():
    """A sequence is the unit: its tokens repeat one confident mistake or one right answer, and
    resampling tokens made the interval several times too narrow. The brute force repeats whole
    sequences with the same Poisson weights."""
    rng = np.random.default_rng(0)
    sequences, length = 30, 20
    conf = np.repeat(rng.uniform(0.5, 1, sequences), length).reshape(sequences, length)
    right = np.repeat(rng.random(sequences) < 0.5, length).reshape(sequences, length)
    probs = np.stack([conf, 1 - conf], axis=-1)
    labels = np.where(right, 0, 1)
    labels[:, -3:] = -100  # padding
    ci = bootstrap_intervals(probs, labels, bootstrap=60, seed=3, level=0.9)
    assert ci["n_blocks"] == sequences
    weights = np.random.default_rng(3).poisson(1.0, size=(60, sequences))
    values = []
    for w in weights:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            values.append(calibkit.ece(np.repeat(probs, w, axis=0), np.repeat(labels, w, axis=0)))
    np.testing.assert_allclose(ci["intervals"]["ece"], np.nanpercentile(values, [5, 95]), rtol=1e-9)
    blocks = bootstrap_intervals(probs, labels, bootstrap=60, max_blocks=7)
    assert blocks["n_blocks"] == 7


def test_coverage_on_calibrated_data():
    """Labels drawn from the probabilities: ESCE's truth is 0, Brier's is E[1 - sum p^2]; 90% intervals."""
    rng = np.random.default_rng(0)
    alpha = np.full(3, 0.7)
    true_brier = 1 - np.mean(np.sum(rng.dirichlet(alpha, 2_000_000) ** 2, axis=1))
    covered = {"esce": 0, "brier": 0}
    repeats = 60
    for r in range(repeats):
        p = rng.dirichlet(alpha, 1_500)
        y = (p.cumsum(axis=1) > rng.random((len(p), 1))).argmax(axis=1)
        ci = bootstrap_intervals(p, y, bootstrap=200, seed=r, level=0.9, metrics=("esce", "brier"), max_blocks=300)
        covered["esce"] += ci["intervals"]["esce"][0] <= 0 <= ci["intervals"]["esce"][1]
        covered["brier"] += ci["intervals"]["brier"][0] <= true_brier <= ci["intervals"]["brier"][1]
    for name, hits in covered.items():
        assert 0.78 <= hits / repeats <= 0.98, (name, hits)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"bootstrap": 0}, "`bootstrap` must be an integer >= 1"),
        ({"bootstrap": 10**6}, "`bootstrap` must be an integer in"),
        ({"level": 1.0}, "`level`"),
        ({"seed": -1}, "`seed`"),
        ({"max_blocks": -1}, "max_blocks"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bootstrap_intervals(np.eye(2), [0, 1], **kwargs)


def test_the_old_names_n_boot_and_confidence_still_work_with_a_future_warning():
    p, y = np.array([[0.8, 0.2], [0.3, 0.7], [0.6, 0.4], [0.1, 0.9]]), [0, 1, 1, 1]
    want = bootstrap_intervals(p, y, bootstrap=30, level=0.9, metrics=("ece",))
    with pytest.warns(FutureWarning, match="`n_boot` is renamed `bootstrap`"):
        old = bootstrap_intervals(p, y, n_boot=30, level=0.9, metrics=("ece",))
    with pytest.warns(FutureWarning, match="`confidence` is renamed `level`"):
        assert bootstrap_intervals(p, y, bootstrap=30, confidence=0.9, metrics=("ece",)) == want
    assert old == want and want["n_boot"] == 30 and want["confidence"] == 0.9  # the result's keys are unchanged
    with pytest.raises(ValueError, match="`n_boot=30` and `bootstrap=30`"):
        bootstrap_intervals(p, y, n_boot=30, bootstrap=30)


def test_the_sampling_settings_object_computes_as_the_keywords():
    from calibkit.metrics.sampling import SamplingSettings

    p, y = np.array([[0.8, 0.2], [0.3, 0.7], [0.6, 0.4], [0.1, 0.9]]), [0, 1, 1, 1]
    want = bootstrap_intervals(p, y, bootstrap=30, level=0.9, seed=4, metrics=("ece",))
    sampling = SamplingSettings(bootstrap=30, level=0.9, seed=4)
    assert bootstrap_intervals(p, y, sampling=sampling, metrics=("ece",)) == want
    with pytest.raises(ValueError, match=r"`seed=0` and `sampling\.seed=4`"):
        bootstrap_intervals(p, y, seed=0, sampling=SamplingSettings(seed=4))
