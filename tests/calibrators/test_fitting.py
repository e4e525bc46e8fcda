"""Calibrator fits against brute-force references, the papers' numbers, invariants and bad input."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, softmax
from sklearn.isotonic import IsotonicRegression

import calibkit
from calibkit.calibrators import (
    CALIBRATORS,
    HistogramBinning,
    IsotonicCalibration,
    MatrixScaling,
    RegionDependentTemperatureScaling,
    TemperatureScaling,
    VectorScaling,
    WeightedTemperatureScaling,
    make_calibrator,
)


def overconfident(seed=0, n=20_000, k=4, temperature=2.0, scale=3.0, dtype=np.float64):
    """Logits whose labels are drawn from softmax(z / temperature): the true temperature is known."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * scale + rng.normal(size=k)
    p = softmax(z / temperature, axis=1)
    y = (p.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return z.astype(dtype), y


def weighted_nll(z, y, beta, weight):
    z = z.astype(np.float64)
    losses = -log_softmax(beta * z, axis=1)[np.arange(len(y)), y]
    w = weight[y]
    return float(np.sum(w * losses) / np.sum(w))


def brute_force_temperature(z, y, weight=None):
    """Minimise the (weighted) NLL over T with scipy's bounded scalar search: slow, obviously right."""
    weight = np.ones(z.shape[1]) if weight is None else weight
    res = minimize_scalar(
        lambda t: weighted_nll(z, y, 1.0 / t, weight), bounds=(0.05, 20), method="bounded", options={"xatol": 1e-12}
    )
    return res.x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("true_t", [0.5, 2.0])
def test_ts_matches_brute_force_and_recovers_the_temperature(dtype, true_t):
    z, y = overconfident(seed=1, temperature=true_t, dtype=dtype)
    ts = TemperatureScaling().fit(z, y)
    assert ts.temperature_ == pytest.approx(brute_force_temperature(z, y), rel=1e-6)
    assert ts.temperature_ == pytest.approx(true_t, rel=0.05)
    assert ts.n_iter_ <= 12


def test_wts_matches_weighted_brute_force_and_weights_rare_classes():
    rng = np.random.default_rng(3)
    z, y = overconfident(seed=2, n=30_000, k=3)
    # Make class 0 dominant: drop most samples of the other classes.
    keep = (y == 0) | (rng.random(len(y)) < 0.2)
    z, y = z[keep], y[keep]
    counts = np.bincount(y, minlength=3)
    wts = WeightedTemperatureScaling().fit(z, y)
    np.testing.assert_allclose(wts.class_weight_, 1 - counts / counts.sum())
    assert wts.temperature_ == pytest.approx(brute_force_temperature(z, y, wts.class_weight_), rel=1e-6)
    assert wts.temperature_ != pytest.approx(TemperatureScaling().fit(z, y).temperature_, rel=1e-3)


def test_token_input_skips_ignore_index_rows_and_padded_logits():
    z, y = overconfident(seed=4, n=3_000, k=5)
    tokens = np.full((300, 14, 5), -100.0)  # Trainer pads logits with -100
    labels = np.full((300, 14), -100)
    slots = np.random.default_rng(0).permutation(300 * 14)[:3_000]
    tokens.reshape(-1, 5)[slots] = z
    labels.reshape(-1)[slots] = y
    for method in CALIBRATORS:
        flat = make_calibrator(method).fit(z, y)
        token = make_calibrator(method).fit(tokens, labels)
        np.testing.assert_allclose(token.predict_proba(z), flat.predict_proba(z), rtol=1e-5, atol=1e-6, err_msg=method)
        assert token.predict_proba(tokens).shape == tokens.shape


def test_torch_input_is_accepted():
    torch = pytest.importorskip("torch")
    z, y = overconfident(seed=5, n=2_000)
    a = TemperatureScaling().fit(torch.from_numpy(z), torch.from_numpy(y)).temperature_
    assert a == TemperatureScaling().fit(z, y).temperature_


def test_rd_ts_paper_rule_reproduces_the_papers_table():
    # Region-balanced paper: T = 1.28 -> m = .426, 1.39 -> .550, 1.29 -> .439 (rounded there).
    for t, m in [(1.28, 0.426), (1.39, 0.550), (1.29, 0.439)]:
        rd = RegionDependentTemperatureScaling.from_temperature(t, num_classes=3)
        assert rd.slope_ == pytest.approx(m, abs=2e-3)
        assert rd.slope_ == pytest.approx((t - 0.9) / 0.89)


def test_rd_ts_rules_against_references():
    z, y = overconfident(seed=6, n=10_000, k=3)
    t = TemperatureScaling().fit(z, y).temperature_
    paper = RegionDependentTemperatureScaling().fit(z, y)
    assert paper.temperature_ == t and paper.slope_ == pytest.approx((t - 0.9) / 0.89)
    h = softmax(z, axis=1).max(axis=1)
    mean = RegionDependentTemperatureScaling(rule="mean").fit(z, y)
    assert mean.slope_ == pytest.approx((t - 1) / h.mean(), rel=1e-9)

    def nll_of_slope(m):
        beta = 1.0 / (m * h + 1.0)
        return float(np.mean(-log_softmax(beta[:, None] * z, axis=1)[np.arange(len(y)), y]))

    best = minimize_scalar(nll_of_slope, bounds=(-0.99, 20), method="bounded", options={"xatol": 1e-12}).x
    direct = RegionDependentTemperatureScaling(rule="nll").fit(z, y)
    assert direct.slope_ == pytest.approx(best, rel=1e-6)
    assert nll_of_slope(direct.slope_) <= nll_of_slope(paper.slope_) + 1e-12
    # The calibrated logits are z / (m h + 1).
    np.testing.assert_allclose(direct.transform(z), z / (direct.slope_ * h + 1)[:, None], rtol=1e-5)


def test_vector_and_matrix_scaling_reach_a_stationary_point_and_beat_ts():
    torch = pytest.importorskip("torch")
    z, y = overconfident(seed=7, n=5_000, k=3)
    z = z * np.array([1.0, 0.5, 2.0])  # per-class miscalibration that TS cannot fix
    nll_ts = calibkit.nll(TemperatureScaling().fit(z, y).predict_proba(z), y)
    for cls in (VectorScaling, MatrixScaling):
        model = cls().fit(z, y)
        params = [
            torch.tensor(p, requires_grad=True)
            for p in ((model.scale_, model.bias_) if cls is VectorScaling else (model.weight_, model.bias_))
        ]
        zt = torch.from_numpy(z)
        logits = zt * params[0] + params[1] if cls is VectorScaling else zt @ params[0].T + params[1]
        torch.nn.functional.cross_entropy(logits, torch.from_numpy(y)).backward()
        assert max(float(p.grad.abs().max()) for p in params) < 1e-5, cls.__name__
        assert calibkit.nll(model.predict_proba(z), y) < nll_ts - 1e-3


def test_isotonic_matches_scikit_learn_per_class():
    z, y = overconfident(seed=8, n=4_000, k=3)
    # Exact ties: every row twice (scikit-learn also merges values within 1e-15, a convention
    # we do not copy, so the test keeps distinct values far apart).
    z, y = np.concatenate([z[:2_000], z[:2_000]]), np.concatenate([y[:2_000], y[2_000:]])
    model = IsotonicCalibration().fit(z, y)
    p = softmax(z, axis=1)
    expected = np.stack(
        [IsotonicRegression(out_of_bounds="clip").fit(p[:, k], y == k).predict(p[:, k]) for k in range(3)],
        axis=1,
    )
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(model.predict_proba(z), expected, atol=2e-6)


def test_histogram_binning_matches_a_loop():
    z, y = overconfident(seed=9, n=3_000, k=3)
    model = HistogramBinning(n_bins=10).fit(z, y)
    p = softmax(z, axis=1)
    values = np.zeros((3, 10))
    for k in range(3):
        for b in range(10):
            lo, hi = b / 10, (b + 1) / 10
            inside = [i for i in range(len(y)) if (lo < p[i, k] <= hi) or (b == 0 and p[i, k] == 0)]
            values[k, b] = np.mean([y[i] == k for i in inside]) if inside else (b + 0.5) / 10
    np.testing.assert_allclose(model.values_, values, atol=1e-12)
    mapped = np.stack([values[k][np.clip(np.ceil(p[:, k] * 10).astype(int) - 1, 0, 9)] for k in range(3)], axis=1)
    np.testing.assert_allclose(model.predict_proba(z), mapped / mapped.sum(axis=1, keepdims=True), atol=2e-6)


def slope_at_infinite_temperature(z, y, weight):
    """d/dbeta of the weighted NLL of softmax(beta z) at beta = 0: mean_k z - z_y, weighted by class."""
    w = weight[y]
    return float(np.sum(w * (z.mean(axis=1) - z[np.arange(len(y)), y])) / np.sum(w))


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    k=st.integers(2, 7),
    method=st.sampled_from(["ts", "wts", "rd-ts"]),
    scale=st.floats(0.1, 30),
)
@example(seed=4621, k=3, method="wts", scale=0.125)  # uninformative logits: WTS's weighted NLL has no minimum
def test_temperature_methods_never_change_the_argmax(seed, k, method, scale):
    """The fitted map keeps the argmax; where no T > 0 lowers the (weighted) NLL the fit refuses, and
    only there. The NLL of softmax(beta z) is convex in beta, so it has a minimum at some beta > 0
    exactly when its slope at beta = 0 is negative: with logits this close to uninformative (scale
    0.1-0.2, n = 400) WTS's class weights can make that slope positive while TS's is negative."""
    z, y = overconfident(seed=seed, n=400, k=k, scale=scale, temperature=1.5)
    y[:k] = np.arange(k)  # every class present (WTS needs two)
    counts = np.bincount(y, minlength=k)
    weight = 1 - counts / counts.sum() if method == "wts" else np.ones(k)
    if method != "rd-ts" and not slope_at_infinite_temperature(z, y, weight) < 0:
        with pytest.raises(ValueError, match="the logits do not favour the labels"):
            make_calibrator(method).fit(z, y)
        return
    calibrated = make_calibrator(method).fit(z, y).transform(z)
    np.testing.assert_array_equal(calibrated.argmax(axis=1), z.argmax(axis=1))


def test_get_params_and_repr_follow_scikit_learn():
    rd = RegionDependentTemperatureScaling(rule="mean")
    assert rd.get_params() == {"rule": "mean", "ignore_index": -100, "num_threads": None}
    assert rd.set_params(rule="nll").rule == "nll"
    assert repr(HistogramBinning(n_bins=5)) == "HistogramBinning(n_bins=5, ignore_index=-100)"
    with pytest.raises(ValueError, match="not a parameter"):
        rd.set_params(temperature=2)


# ----------------------------------------------------------------------------------------------
# Fits that cannot succeed


def test_wts_with_one_class_present():
    z, _ = overconfident(n=100)
    with pytest.raises(ValueError, match="at least two classes"):
        WeightedTemperatureScaling().fit(z, np.zeros(100, dtype=int))


@pytest.mark.parametrize("method", sorted(CALIBRATORS))
def test_nan_logits_are_refused(method):
    z, y = overconfident(n=200)
    z[17, 2] = np.nan
    with pytest.raises(ValueError, match="`logits` contains NaN"):
        make_calibrator(method).fit(z, y)


def test_slopes_at_or_below_minus_one_are_refused():
    with pytest.raises(ValueError, match="slope"):
        RegionDependentTemperatureScaling.from_slope(-1.0, num_classes=3)
    with pytest.raises(ValueError, match="slope"):
        RegionDependentTemperatureScaling.from_temperature(0.01, num_classes=3)  # m = -1.0 exactly
    with pytest.raises(ValueError, match="temperature"):
        TemperatureScaling.from_temperature(0.0, num_classes=3)


@pytest.mark.parametrize(
    ("logits", "labels", "match"),
    [
        (np.zeros((4,)), np.zeros(4, dtype=int), "`logits` must have shape"),
        (np.zeros((4, 1)), np.zeros(4, dtype=int), "`logits` has shape"),
        (np.zeros((4, 3)), np.zeros(5, dtype=int), "`labels` has shape"),
        (np.zeros((4, 3)), np.array([0, 1, 3, 0]), r"`labels` must lie in \[0, 3\)"),
        (np.zeros((4, 3)), np.full(4, -100), "no sample"),
        (np.array([["a", "b"]]), np.zeros(1, dtype=int), "`logits` must be a float array"),
    ],
)
def test_bad_input(logits, labels, match):
    with pytest.raises(ValueError, match=match):
        TemperatureScaling().fit(logits, labels)


def test_logits_that_point_away_from_the_labels():
    z, y = overconfident(n=2_000, scale=5, temperature=0.5)
    with pytest.raises(ValueError, match="do not favour the labels"):
        TemperatureScaling().fit(-z, y)


def test_separable_data_warns_and_stops():
    z = np.array([[5.0, 0.0], [0.0, 5.0]] * 10)
    with pytest.warns(RuntimeWarning, match="separable"):
        ts = TemperatureScaling().fit(z, np.array([0, 1] * 10))
    assert ts.temperature_ <= 1e-6


def test_unfitted_and_wrong_width():
    with pytest.raises(ValueError, match="not fitted"):
        TemperatureScaling().predict_proba(np.zeros((2, 3)))
    ts = TemperatureScaling().fit(*overconfident(n=500, k=4))
    with pytest.raises(ValueError, match="4"):
        ts.transform(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="`method` must be one of"):
        make_calibrator("platt")
    with pytest.raises(ValueError, match="`rule`"):
        RegionDependentTemperatureScaling(rule="exact").fit(*overconfident(n=500))
