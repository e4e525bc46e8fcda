"""Smooth ECE (Blasiok & Nakkiran 2024): equal to the authors' relplot 1.0.3, and to a plain kernel sum.

relplot is a test extra (setup.py); calibkit never imports it.
"""

import math

import numpy as np
import pytest

import calibkit
from calibkit.metrics import CalibrationAccumulator
from calibkit.metrics.bootstrap import bootstrap_intervals

relplot = pytest.importorskip("relplot")

TOL = 1e-6


def _problems():
    rng = np.random.default_rng(48)
    out = {}
    for n in (50, 1000, 100_000, 1_000_000):
        f = rng.uniform(size=n)
        out[f"calibrated {n}"] = (f, rng.uniform(size=n) < f)
    f = rng.uniform(size=1000)
    out["over-confident"] = (f, rng.uniform(size=1000) < 0.5 + (f - 0.5) / 2)
    out["under-confident"] = (f, rng.uniform(size=1000) < np.clip(0.5 + (f - 0.5) * 2, 0, 1))
    f = np.round(rng.uniform(size=500), 1)  # ties, 0 and 1 included
    out["ties"] = (f, rng.uniform(size=500) < f)
    out["a single value"] = (np.full(200, 0.7), rng.uniform(size=200) < 0.4)
    f = rng.uniform(0.5, 1.0, size=300)
    out["all correct"] = (f, np.ones(300, bool))
    out["all wrong"] = (f, np.zeros(300, bool))
    out["one sample"] = (np.array([0.3]), np.array([True]))
    return out


PROBLEMS = _problems()


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_binary_input_equals_relplot(name):
    f, y = PROBLEMS[name]
    want, width = relplot.smECE(f, y.astype(float), return_width=True)
    got, sigma = calibkit.smece(f, y.astype(int), return_bandwidth=True)
    assert sigma == width
    assert abs(got - want) <= TOL


def test_fixed_bandwidth_equals_relplot_smece_sigma():
    f, y = PROBLEMS["calibrated 1000"]
    for sigma in (0.001, 0.01, 0.05, 0.3, 1.0):
        want = relplot.smECE_sigma(f, y.astype(float), sigma)
        assert abs(calibkit.smece(f, y.astype(int), bandwidth=sigma) - want) <= TOL


def test_top_label_of_logits_equals_relplot():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(2000, 5)) * 3
    labels = rng.integers(0, 5, 2000)
    f, y = relplot.multiclass_logits_to_confidences(logits, labels)
    want, width = relplot.smECE(f, y, return_width=True)
    got, sigma = calibkit.smece(logits, labels, from_logits=True, return_bandwidth=True)
    assert sigma == width and abs(got - want) <= TOL
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    assert abs(calibkit.smece(probs, labels) - want) <= TOL


def test_tokens_with_ignore_index_and_torch_equal_relplot_on_the_kept_rows():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    probs = rng.dirichlet(np.ones(4), size=(30, 20))
    labels = rng.integers(0, 4, (30, 20))
    labels[:, 15:] = -100
    kept = labels != -100
    f, y = relplot.multiclass_logits_to_confidences(probs[kept], labels[kept], probs=True)
    want = relplot.smECE(f, y)
    assert abs(calibkit.smece(probs, labels) - want) <= TOL
    assert abs(calibkit.smece(torch.tensor(probs), torch.tensor(labels)) - want) <= TOL


def test_binary_logits_and_the_report():
    f, y = PROBLEMS["over-confident"]
    want = relplot.smECE(f, y.astype(float))
    logit = np.log(f / (1 - f))
    assert abs(calibkit.smece(logit, y.astype(int), from_logits=True) - want) <= TOL
    report = calibkit.calibration_report(f, y.astype(int), metrics=["ece", "smece", "aurc"])
    assert abs(report["smece"] - want) <= TOL
    assert report["smece_bandwidth"] == calibkit.smece(f, y.astype(int), return_bandwidth=True)[1]
    assert "smece" not in calibkit.calibration_report(f, y.astype(int))  # asked for by name only


def _plain_smece(f, y, sigma, points=200):
    """The smooth ECE at sigma as an exact kernel sum, one sample and one point at a time, reflected at 0 and 1."""

    def k(d):  # relplot's kernel lives on the grid's span: cut at |d| = 1/2
        return 0.0 if abs(d) > 0.5 else math.exp(-d * d / (2 * sigma * sigma)) / (math.sqrt(2 * math.pi) * sigma)

    num = den = 0.0
    for j in range(points):
        t = j / (points - 1)
        r = d = 0.0
        for fi, yi in zip(f, y):
            w = k(t - fi) + k(t + fi) + k(t - (2 - fi))  # the sample and its mirror images
            r += w * (fi - yi)
            d += w
        num += abs(r / (d + 1e-4)) * (d + 1e-4)
        den += d + 1e-4
    return num / den


@pytest.mark.parametrize("sigma", [0.05, 0.1, 0.3])
def test_a_plain_kernel_sum_agrees_to_the_grid_s_discretisation(sigma):
    f, y = PROBLEMS["calibrated 50"]
    want = _plain_smece(f, y.astype(float), sigma)
    got = calibkit.smece(f, y.astype(int), bandwidth=sigma)
    # the grid (1,001 points), its interpolation, and where sigma is wide the cut kernel's jump at 1/2
    assert abs(got - want) <= 1e-3 * want


def test_smooth_reliability_equals_relplot_diagram():
    f, y = PROBLEMS["under-confident"]
    want = relplot.prepare_rel_diagram(f, y.astype(float), plot_confidence_band=False, report_CE_std=False)
    got = calibkit.smooth_reliability(f, y.astype(int))
    assert got["bandwidth"] == want["sigma"] and abs(got["smece"] - want["ce"]) <= TOL
    np.testing.assert_array_equal(got["grid"], want["mesh"])
    np.testing.assert_allclose(got["accuracy"], want["mu"], rtol=0, atol=TOL)
    np.testing.assert_allclose(got["density"], want["density"], rtol=0, atol=TOL)


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        ({"bandwidth": 0}, r"`bandwidth` must be a number in \(0, 1\]"),
        ({"bandwidth": 1.5}, r"`bandwidth` must be a number in \(0, 1\]"),
        ({"bandwidth": float("nan")}, r"`bandwidth` must be a number"),
        ({"bandwidth": "0.1"}, r"`bandwidth` must be a number"),
        ({"bandwidth": True}, r"`bandwidth` must be a number"),
    ],
)
def test_bad_bandwidth_names_the_argument(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        calibkit.smece([0.2, 0.8], [0, 1], **kwargs)
    with pytest.raises(ValueError, match=pattern):
        calibkit.smooth_reliability([0.2, 0.8], [0, 1], **kwargs)


@pytest.mark.parametrize("points", [1, 0, 2.5, "200", True])
def test_bad_points_names_the_argument(points):
    with pytest.raises(ValueError, match=r"`points` must be an integer"):
        calibkit.smooth_reliability([0.2, 0.8], [0, 1], points=points)


@pytest.mark.parametrize(
    "door",
    [
        lambda: CalibrationAccumulator(["ece", "smece"]),
        lambda: bootstrap_intervals(np.array([0.2, 0.8]), [0, 1], metrics=["smece"], bootstrap=5),
        lambda: calibkit.CalibrationCallback(metrics=["ece", "smece"]),
    ],
    ids=["accumulator", "bootstrap", "callback"],
)
def test_streaming_doors_refuse_it_and_name_where_it_is_given(door):
    with pytest.raises(ValueError, match=r"`metrics`: smece needs every row at once.*calibkit\.smece"):
        door()
