"""The calibrators' kernels and fits on small inputs, against plain loops and scipy's bounded search.

Small on purpose (a few hundred rows): each test takes well under a second, also with the kernels
run as plain Python (``NUMBA_DISABLE_JIT=1``, as benchmarks/mutation.py runs them).
"""

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from calibkit.calibrators import (
    HistogramBinning,
    IsotonicCalibration,
    RegionDependentTemperatureScaling,
    TemperatureScaling,
    VectorScaling,
    WeightedTemperatureScaling,
)
from calibkit.calibrators import _kernels as ck
from calibkit.calibrators.temperature import fit_inverse_temperature, minimise_1d
from calibkit.metrics import _kernels as metric_kernels


def logits_and_labels(seed=0, n=300, k=4, temperature=2.0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 3.0 + rng.normal(size=k)
    p = np.exp(z / temperature - (z / temperature).max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = (p.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    y[::7] = -100  # ignored rows
    return z.astype(dtype), y


def row_terms(z, y, b):
    """Loss, d loss / d b and d2 loss / d b2 of one row at inverse temperature b, by plain loops."""
    z = [float(v) for v in z]
    top = max(z)
    e = [math.exp(b * (v - top)) for v in z]
    s = sum(e)
    p = [v / s for v in e]
    mean = sum(pk * v for pk, v in zip(p, z))
    var = sum(pk * (v - mean) ** 2 for pk, v in zip(p, z))
    loss = math.log(s) - b * (z[y] - top)
    return loss, mean - z[y], var


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("region", [False, True])
def test_nll_derivatives_match_plain_loops(dtype, region):
    z, y = logits_and_labels(1, n=60, k=5, dtype=dtype)
    weight = np.array([0.5, 1.0, 2.0, 0.25, 1.5])
    beta, slope = 0.7, 0.4
    h = np.random.default_rng(2).uniform(0.2, 1.0, len(y))
    out = np.zeros(ck.N_OUT)
    ck.nll_derivatives(z, y, 3, 57, -100, weight, beta, slope, h, region, out)
    expected = np.zeros(ck.N_OUT)
    for i in range(3, 57):
        if y[i] == -100:
            continue
        w = weight[y[i]]
        b = 1.0 / (slope * h[i] + 1.0) if region else beta
        loss, grad, var = row_terms(z[i], y[i], b)
        if region:  # chain rule through b(m) = 1 / (m h + 1)
            d1, d2 = -h[i] * b * b, 2.0 * h[i] ** 2 * b**3
            grad, var = grad * d1, var * d1 * d1 + grad * d2
        expected[ck.O_WEIGHT] += w
        expected[ck.O_LOSS] += w * loss
        expected[ck.O_GRAD] += w * grad
        expected[ck.O_HESS] += w * var
        expected[ck.O_SLOPE0] += w * (float(np.mean(z[i].astype(np.float64))) - float(z[i, y[i]]))
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-10)


def test_nll_derivatives_are_the_derivatives_of_the_loss():
    z, y = logits_and_labels(3, n=40, k=3)
    weight = np.ones(3)

    def at(beta):
        out = np.zeros(ck.N_OUT)
        ck.nll_derivatives(z, y, 0, len(y), -100, weight, beta, 0.0, np.empty(0), False, out)
        return out

    step = 1e-5
    mid, up, down = at(0.8), at(0.8 + step), at(0.8 - step)
    assert mid[ck.O_GRAD] == pytest.approx((up[ck.O_LOSS] - down[ck.O_LOSS]) / (2 * step), rel=1e-6)
    assert mid[ck.O_HESS] == pytest.approx((up[ck.O_GRAD] - down[ck.O_GRAD]) / (2 * step), rel=1e-5)


def test_nll_derivatives_count_rows_with_nan_or_inf_and_skip_them():
    z = np.array([[1.0, 2.0], [np.nan, 0.0], [0.0, np.inf], [3.0, 1.0]])
    y = np.array([1, 0, 1, -100])
    out = np.zeros(ck.N_OUT)
    ck.nll_derivatives(z, y, 0, 4, -100, np.ones(2), 1.0, 0.0, np.empty(0), False, out)
    loss, grad, var = row_terms(z[0], 1, 1.0)
    assert out[ck.O_NONFINITE] == 2.0
    np.testing.assert_allclose(out[[ck.O_WEIGHT, ck.O_LOSS, ck.O_GRAD, ck.O_HESS]], [1.0, loss, grad, var])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_max_softmax_matches_plain_loops_and_skips_ignored_rows(dtype):
    z, y = logits_and_labels(4, n=30, k=6, dtype=dtype)
    z[5] = [-50.0, -60.0, -55.0, -70.0, -80.0, -51.0]  # all negative: the maximum starts at -inf
    y[5] = 0
    h = np.full(len(y), -1.0)
    ck.max_softmax(z, y, 2, 28, -100, h)
    for i in range(len(y)):
        if 2 <= i < 28 and y[i] != -100:
            row = [float(v) for v in z[i]]
            assert h[i] == pytest.approx(1.0 / sum(math.exp(v - max(row)) for v in row), rel=1e-12)
        else:
            assert h[i] == -1.0


def plain_isotonic(y, w):
    """Weighted isotonic fit by repeatedly merging the first adjacent pair that is not increasing."""
    blocks = [[float(v), float(u), 1] for v, u in zip(y, w)]
    merged = True
    while merged:
        merged = False
        for j in range(len(blocks) - 1):
            if blocks[j][0] >= blocks[j + 1][0]:
                (a, wa, na), (b, wb, nb) = blocks[j], blocks[j + 1]
                blocks[j : j + 2] = [[(a * wa + b * wb) / (wa + wb), wa + wb, na + nb]]
                merged = True
                break
    return [v for v, _, _ in blocks], list(np.cumsum([n for _, _, n in blocks]))


@pytest.mark.parametrize("seed", range(4))
def test_pool_adjacent_violators_matches_a_plain_merge_loop(seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, 25).astype(float)  # ties: equal neighbours merge into one block
    w = rng.uniform(0.5, 2.0, 25)
    values, ends = metric_kernels.pool_adjacent_violators(y, w)
    expected_values, expected_ends = plain_isotonic(y, w)
    np.testing.assert_allclose(values, expected_values, rtol=1e-12)
    np.testing.assert_array_equal(ends, expected_ends)
    assert np.all(np.diff(values) > 0)


def brute_force_temperature(z, y, weight):
    keep = y != -100
    z, y = z[keep].astype(np.float64), y[keep]

    def nll(t):
        s = z / t
        s = s - s.max(axis=1, keepdims=True)
        losses = np.log(np.exp(s).sum(axis=1)) - s[np.arange(len(y)), y]
        return float(np.sum(weight[y] * losses) / np.sum(weight[y]))

    return minimize_scalar(nll, bounds=(0.05, 20), method="bounded", options={"xatol": 1e-12}).x


@pytest.mark.parametrize("true_t", [0.5, 2.0, 6.0])
def test_temperature_scaling_on_small_data_matches_scipy(true_t):
    z, y = logits_and_labels(5, temperature=true_t)
    ts = TemperatureScaling().fit(z, y)
    assert ts.temperature_ == pytest.approx(brute_force_temperature(z, y, np.ones(4)), rel=1e-6)
    assert ts.n_iter_ <= 12
    wts = WeightedTemperatureScaling().fit(z, y)
    kept = y[y != -100]
    weight = 1.0 - np.bincount(kept, minlength=4) / len(kept)
    np.testing.assert_allclose(wts.class_weight_, weight)
    assert wts.temperature_ == pytest.approx(brute_force_temperature(z, y, weight), rel=1e-6)


def test_temperature_scaling_from_far_off_scales_matches_scipy():
    z, y = logits_and_labels(6, temperature=1.0)
    for scale in (1e-4, 1e4):
        ts = TemperatureScaling().fit(z * scale, y)
        assert ts.temperature_ == pytest.approx(scale * brute_force_temperature(z, y, np.ones(4)), rel=1e-6)
        assert ts.n_iter_ <= 25


@pytest.mark.parametrize("true_t", [0.6, 2.5])
def test_region_dependent_slope_minimises_the_nll(true_t):
    # T < 1 (under-confident logits) puts the best slope below 0, inside the bracket (-1, inf)
    z, y = logits_and_labels(7, temperature=true_t)
    rd = RegionDependentTemperatureScaling(rule="nll").fit(z, y)
    keep = y != -100
    zk, yk = z[keep], y[keep]
    e = np.exp(zk - zk.max(axis=1, keepdims=True))
    h = e.max(axis=1) / e.sum(axis=1)

    def nll(m):
        s = zk / (m * h + 1.0)[:, None]
        s = s - s.max(axis=1, keepdims=True)
        return float(np.mean(np.log(np.exp(s).sum(axis=1)) - s[np.arange(len(yk)), yk]))

    best = minimize_scalar(nll, bounds=(-0.99, 20), method="bounded", options={"xatol": 1e-12}).x
    assert rd.slope_ == pytest.approx(best, rel=1e-6)


def test_minimise_1d_finds_the_minimum_of_a_quadratic_and_a_scale():
    calls = []

    def quadratic(x):
        calls.append(x)
        return (x - 0.3) ** 2, 2 * (x - 0.3), 2.0

    x, n = minimise_1d(quadratic, 5.0, -10.0, 10.0)
    assert x == pytest.approx(0.3, abs=1e-12) and n == len(calls) <= 3
    # f(x) = x - 2 log x: minimum at 2, Newton on log x from far above
    x, n = minimise_1d(lambda x: (x - 2 * math.log(x), 1 - 2 / x, 2 / x**2), 50.0, 1e-9, 100.0, log_scale=True)
    assert x == pytest.approx(2.0, rel=1e-9) and n <= 8
    # negative curvature: bisection of the bracket instead of a Newton step
    x, n = minimise_1d(lambda x: (0.0, x - 1.0, -1.0), 0.0, -3.0, 4.0, rtol=1e-12)
    assert x == pytest.approx(1.0, abs=1e-9)


def test_fit_inverse_temperature_brackets_from_far_below_and_refuses_uninformative_logits():
    # f(beta) = beta - 5 log beta: minimum at beta = 5; slope at 0 is -inf in truth, -5 here
    def f(beta):
        return beta - 5 * math.log(beta), 1 - 5 / beta, 5 / beta**2, -5.0

    assert fit_inverse_temperature(f, start=0.01) == pytest.approx(5.0, rel=1e-9)
    assert fit_inverse_temperature(f, start=400.0) == pytest.approx(5.0, rel=1e-9)
    with pytest.raises(ValueError, match="do not favour"):
        fit_inverse_temperature(lambda b: (0.0, 1.0, 1.0, 0.0))


def test_histogram_binning_and_isotonic_on_a_handmade_set():
    # binary logits as two columns; class-1 probability p, bins of width 1/2
    p = np.array([0.1, 0.2, 0.3, 0.6, 0.7, 0.9, 0.95, 0.4])
    y = np.array([0, 1, 0, 1, 1, 1, 0, 0])
    z = np.log(np.stack([1 - p, p], axis=1))
    hb = HistogramBinning(n_bins=2).fit(z, y)
    out = hb.predict_proba(z)
    # class 1, bin (0, 0.5]: labels of p = .1 .2 .3 .4 -> 1/4; bin (0.5, 1]: .6 .7 .9 .95 -> 3/4
    got = out[:, 1] / out.sum(axis=1)
    assert got[0] == pytest.approx(got[7]) and got[3] == pytest.approx(got[6])
    assert got[0] < got[3]
    iso = IsotonicCalibration().fit(z, y)
    q = iso.predict_proba(z)
    assert np.all(np.isfinite(q)) and np.allclose(q.sum(axis=1), 1.0)


def test_histogram_binning_values_are_bin_frequencies_and_centres_of_empty_bins():
    # two classes, 4 bins of the class-1 probability: bin 0 holds one sample, bin 2 none
    p = np.array([0.1, 0.3, 0.4, 0.45, 0.8, 0.9, 0.95])
    y = np.array([1, 0, 1, 1, 1, 0, 1])
    z = np.log(np.stack([1 - p, p], axis=1))
    hb = HistogramBinning(n_bins=4).fit(z, y)
    bins_of = [min(max(math.ceil(q * 4) - 1, 0), 3) for q in p]
    for b in range(4):
        members = [label for label, bb in zip(y, bins_of) if bb == b]
        expected = sum(members) / len(members) if members else (b + 0.5) / 4
        assert hb.values_[1, b] == pytest.approx(expected, abs=1e-12)


def test_vector_scaling_reports_its_iterations_and_slopes_above_minus_one_are_accepted():
    z, y = logits_and_labels(8, n=200, k=3)
    vs = VectorScaling().fit(z, y)
    assert 1 <= vs.n_iter_ <= 500
    for slope in (-0.5, 0.0, 0.5, 1.0, 3.0):
        rd = RegionDependentTemperatureScaling.from_slope(slope, num_classes=3)
        assert rd.slope_ == slope
    with pytest.raises(ValueError, match="slope"):
        RegionDependentTemperatureScaling.from_slope(-1.0, num_classes=3)
