"""Dirichlet, beta and Venn-Abers calibration against their reference libraries.

References: ``venn_abers`` (the package ``probmetrics`` wraps) for Venn-Abers; ``netcal``'s
``BetaCalibration`` and ``betacal`` for beta calibration, their optimisers run to convergence
(netcal's bounded L-BFGS-B with scipy's default tolerances, and betacal's scikit-learn
LogisticRegression with tol=1e-4, stop ~1e-5 short of the optimum they define); ``dirichletcal``
(what ``probmetrics``' ``DirichletCalibrator`` runs) needs jax and is not installable here, so its
objective is written out below, verbatim in torch, and minimised by scipy's BFGS.
"""

import functools
import json
import sys

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from scipy.special import softmax

from calibkit.calibrators import calibrate, make_calibrator
from calibkit.calibrators.beyond import BetaCalibration, DirichletCalibration, VennAbersCalibration, head_probabilities
from calibkit.calibrators.modeling_calibkit import CalibrationHead
from tests.calibrators.test_models import ARCHITECTURES, inputs, logits_of

TINY, EPS = np.finfo(np.float64).tiny, np.finfo(np.float64).eps


def problem(seed, n, k, temperature=2.0, shift=0.0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 2
    z[:, -1] += shift
    y = (softmax(z / temperature, axis=1).cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return z, y


# -- Venn-Abers --------------------------------------------------------------------------------
VA_CASES = [(0, 200, 2), (1, 2000, 2), (2, 20000, 2), (3, 1000, 4), (4, 5000, 3), (5, 20000, 5)]


@pytest.mark.parametrize("seed,n,k", VA_CASES)
@pytest.mark.parametrize("ties", [False, True])
def test_venn_abers_equals_the_venn_abers_package(seed, n, k, ties):
    va_module = pytest.importorskip("venn_abers.venn_abers")
    z, y = problem(seed, n, k)
    test, _ = problem(seed + 100, 1000, k)
    if ties:  # few distinct scores: test scores equal to calibration scores, tied groups
        z, test = np.round(z, 1), np.concatenate([np.round(test, 1), z[:200]])
    p_cal, p_test = head_probabilities(z), head_probabilities(test)  # the same bits: ties stay ties
    va = VennAbersCalibration().fit(z, y)
    got = va.predict_proba(test)
    if k == 2:
        expected, p0p1 = va_module.VennAbers().fit(p_cal, y).predict_proba(p_test)
        low, high = va.predict_interval(test)
        np.testing.assert_allclose(low[:, 1], p0p1[:, 0], atol=1e-12)
        np.testing.assert_allclose(high[:, 1], p0p1[:, 1], atol=1e-12)
        np.testing.assert_allclose(low[:, 0], 1 - p0p1[:, 1], atol=1e-12)
    else:
        expected, _ = va_module.predict_proba_prefitted_va(p_cal, y, p_test, va_tpe="one_vs_rest")
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_venn_abers_tables_equal_isotonic_fits_with_the_test_point_added():
    # The definition, by scikit-learn's isotonic regression refitted for each test score.
    from sklearn.isotonic import IsotonicRegression

    # Integer logits: tied scores are equal to the bit (scikit-learn also ties scores 1e-15 apart).
    rng = np.random.default_rng(7)
    z, y = rng.integers(-3, 4, (60, 2)).astype(np.float64), rng.integers(0, 2, 60)
    va = VennAbersCalibration().fit(z, y)
    s_cal = head_probabilities(z)[:, 1]
    test = np.concatenate([rng.normal(size=(40, 2)) * 3, rng.integers(-4, 5, (20, 2))])
    low, high = va.predict_interval(test)
    for i, s in enumerate(head_probabilities(test)[:, 1]):
        for label, got in ((0, low[i, 1]), (1, high[i, 1])):
            fit = IsotonicRegression().fit(np.append(s_cal, s), np.append(y, label))
            assert got == pytest.approx(fit.predict([s])[0], abs=1e-12)


# -- beta --------------------------------------------------------------------------------------
BETA_CASES = [(0, 200, 2.0, 0.0), (1, 2000, 2.0, 0.0), (2, 20000, 2.0, 0.0), (3, 1000, 0.5, 0.0), (4, 3000, 1.0, 3.0)]


@pytest.fixture
def converged_netcal(monkeypatch):
    netcal_scaling = pytest.importorskip("netcal.scaling")
    module = sys.modules["netcal.scaling.AbstractLogisticRegression"]
    options = {"ftol": 1e-16, "gtol": 1e-11, "maxiter": 10_000}
    monkeypatch.setattr(module, "minimize", functools.partial(minimize, method="L-BFGS-B", options=options))
    return netcal_scaling.BetaCalibration


@pytest.fixture
def converged_betacal(monkeypatch):
    betacal = pytest.importorskip("betacal")
    from sklearn.linear_model import LogisticRegression

    module = sys.modules["betacal.beta_calibration"]
    monkeypatch.setattr(module, "LogisticRegression", lambda C: LogisticRegression(C=C, tol=1e-12, max_iter=10_000))
    return betacal.BetaCalibration


@pytest.mark.parametrize("seed,n,temperature,shift", [*BETA_CASES, (5, 500, -3.0, 0.0)])
def test_beta_equals_netcal(converged_netcal, seed, n, temperature, shift):
    z, y = problem(seed, n, 2, temperature, shift)
    test, _ = problem(seed + 100, 1000, 2)
    beta = BetaCalibration().fit(z, y)
    reference = converged_netcal(method="mle")
    reference.fit(softmax(z, axis=1)[:, 1], y)
    np.testing.assert_allclose([beta.a_[0], beta.b_[0]], reference._sites["weights"]["values"], atol=1e-6)
    np.testing.assert_allclose(beta.c_, reference._sites["bias"]["values"], atol=1e-6)
    expected = reference.transform(softmax(test, axis=1)[:, 1])
    np.testing.assert_allclose(beta.predict_proba(test)[:, 1], expected, atol=1e-6)


@pytest.mark.parametrize("seed,n,temperature,shift", BETA_CASES)
def test_beta_equals_betacal_where_no_coefficient_is_negative(converged_betacal, seed, n, temperature, shift):
    z, y = problem(seed, n, 2, temperature, shift)
    test, _ = problem(seed + 100, 1000, 2)
    beta = BetaCalibration().fit(z, y)
    reference = converged_betacal("abm").fit(softmax(z, axis=1)[:, 1], y)
    np.testing.assert_allclose([beta.a_[0], beta.b_[0]], reference.calibrator_.map_[:2], atol=1e-6)
    np.testing.assert_allclose(
        beta.predict_proba(test)[:, 1], reference.predict(softmax(test, axis=1)[:, 1]), atol=1e-6
    )


def test_beta_keeps_a_and_b_non_negative_where_betacal_does_not(converged_netcal, converged_betacal):
    z, y = problem(5, 500, 2, temperature=-3.0)  # anti-calibrated scores: both coefficients want to be < 0
    beta = BetaCalibration().fit(z, y)
    assert beta.a_[0] == 0 and beta.b_[0] == 0
    assert converged_betacal("abm").fit(softmax(z, axis=1)[:, 1], y).calibrator_.map_[1] < 0  # its refit


@pytest.mark.parametrize("seed,n,k", [(6, 1000, 3), (7, 5000, 5), (8, 20000, 4)])
def test_beta_one_vs_rest_equals_betacal_per_class_renormalised(converged_betacal, seed, n, k):
    # probmetrics' MulticlassOneVsRestCalibrator(BetacalCalibrator()), in float64 (probmetrics casts to float32)
    z, y = problem(seed, n, k)
    test, _ = problem(seed + 100, 1000, k)
    p_cal, p_test = softmax(z, axis=1), softmax(test, axis=1)
    columns = [converged_betacal("abm").fit(p_cal[:, c], y == c).predict(p_test[:, c]) for c in range(k)]
    expected = np.clip(np.stack(columns, axis=1), 1e-30, None)
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(BetaCalibration().fit(z, y).predict_proba(test), expected, atol=1e-6)


# -- Dirichlet ---------------------------------------------------------------------------------
def dirichletcal_fit(probs, y, k, reg_lambda=0.0, reg_mu=None, return_objective=False):
    """dirichletcal's FullDirichletCalibrator (ref_row=True): its objective verbatim, all k(k+1) raw weights."""
    x = torch.from_numpy(np.hstack([np.log(np.clip(probs, TINY, 1 - TINY)), np.ones((len(probs), 1))]))
    target = torch.from_numpy(np.eye(k)[y])

    def weights_of(params):
        raw = params.reshape(-1, k + 1)
        return raw - raw[-1:].repeat(k, 1)

    def objective(params):
        weights = weights_of(params)
        outputs = torch.softmax(x @ weights.T, dim=1).clamp(EPS, 1 - EPS)
        loss = torch.mean(-torch.log(torch.sum(target * outputs, dim=1)))
        if reg_mu is None:
            return loss + reg_lambda * torch.sum(weights**2)
        eye = torch.hstack([torch.eye(k, dtype=torch.float64), torch.zeros(k, 1, dtype=torch.float64)])
        hat = weights - weights * eye
        return loss + reg_lambda * torch.sum(hat[:, :-1] ** 2) + reg_mu * torch.sum(hat[:, -1] ** 2)

    def value_and_gradient(w):
        t = torch.tensor(w, requires_grad=True)
        value = objective(t)
        value.backward()
        return value.item(), t.grad.numpy().copy()

    start = np.hstack([np.eye(k), np.zeros((k, 1))]).ravel()
    result = minimize(value_and_gradient, start, jac=True, method="BFGS", options={"gtol": 1e-11, "maxiter": 20_000})
    w = weights_of(torch.tensor(result.x)).numpy()
    if return_objective:
        return (
            w[:, :-1],
            w[:, -1],
            lambda weight, bias: objective(torch.from_numpy(np.hstack([weight, bias[:, None]]))).item(),
        )
    return w[:, :-1], w[:, -1]


DIRICHLET_CASES = [
    (0, 200, 2, 0.0, None),
    (1, 2000, 3, 1e-3, 1e-3),
    (2, 20000, 4, 1e-2, None),
    (3, 1000, 5, 1e-2, 1e-1),
    (4, 5000, 10, 1e-3, 1e-4),
    (5, 20000, 3, 0.0, None),
]


@pytest.mark.parametrize("seed,n,k,reg_lambda,reg_mu", DIRICHLET_CASES)
def test_dirichlet_equals_dirichletcals_objective_at_its_optimum(seed, n, k, reg_lambda, reg_mu):
    z, y = problem(seed, n, k)
    test, _ = problem(seed + 100, 1000, k)
    fitted = DirichletCalibration(reg_lambda=reg_lambda, reg_mu=reg_mu).fit(z, y)
    weight, bias = dirichletcal_fit(softmax(z, axis=1), y, k, reg_lambda, reg_mu)
    expected = softmax(np.log(softmax(test, axis=1)) @ weight.T + bias, axis=1)
    np.testing.assert_allclose(fitted.predict_proba(test), expected, atol=1e-6)
    np.testing.assert_allclose(fitted.weight_, weight, atol=1e-5)  # BFGS's own stop is ~1e-6 off at K = 10
    assert not fitted.weight_[-1].any() and fitted.bias_[-1] == 0  # the reference row


@pytest.mark.slow  # the reference's BFGS on 1599 parameters: a minute and a half
def test_dirichlet_with_many_classes_takes_lbfgs_near_the_same_optimum():
    # Above 36 classes L-BFGS (as dirichletcal's fmin_l_bfgs_b there): both optimisers stop on a
    # flat valley of 1599 parameters, ~1e-5 apart in probabilities, at objectives 1e-9 apart.
    z, y = problem(9, 3000, 40)
    fitted = DirichletCalibration(reg_lambda=1e-2, reg_mu=1e-2).fit(z, y)
    weight, bias, objective = dirichletcal_fit(softmax(z, axis=1), y, 40, 1e-2, 1e-2, return_objective=True)
    expected = softmax(np.log(softmax(z, axis=1)) @ weight.T + bias, axis=1)
    np.testing.assert_allclose(fitted.predict_proba(z), expected, atol=1e-4)
    assert objective(fitted.weight_, fitted.bias_) <= objective(weight, bias) + 1e-9


def test_dirichlet_with_probmetrics_where_dirichletcal_is_installed():
    pytest.importorskip("dirichletcal")
    pytest.importorskip("probmetrics")
    from probmetrics.calibrators.logistic import DirichletCalibrator

    z, y = problem(1, 2000, 3)
    expected = DirichletCalibrator(reg_lambda=1e-3, reg_mu=1e-3).fit(softmax(z, axis=1), y)
    got = DirichletCalibration(reg_lambda=1e-3, reg_mu=1e-3).fit(z, y).predict_proba(z)
    np.testing.assert_allclose(got, expected.predict_proba(softmax(z, axis=1)), atol=1e-6)


# -- heads, round trips, bad input -------------------------------------------------------------
def binary_bert(seed=0):
    torch.manual_seed(seed)
    config, seq_cls, _ = ARCHITECTURES["bert"]
    settings = {k: v for k, v in config.to_dict().items() if k not in ("id2label", "label2id")}
    model = seq_cls(config.__class__(**settings, num_labels=2)).eval()
    with torch.no_grad():
        model.classifier.weight.mul_(2.0 / logits_of(model, inputs(seed=99)).std())
    return model


@pytest.mark.parametrize("method", ["dirichlet", "beta", "venn-abers"])
def test_a_calibrated_binary_bert_survives_save_and_load(tmp_path, method):
    base = binary_bert()
    z = logits_of(base, inputs(seed=1, n=64)).numpy()
    y = np.where(np.random.default_rng(1).random(64) < 0.8, z.argmax(axis=1), 1 - z.argmax(axis=1))
    calibrator = make_calibrator(method).fit(z, y)
    model = calibrate(base, calibrator).eval()
    batch = inputs(seed=2)
    out = logits_of(model, batch)
    np.testing.assert_allclose(out.numpy(), calibrator.transform(logits_of(base, batch).numpy()), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        softmax(out.numpy(), axis=1), calibrator.predict_proba(logits_of(base, batch).numpy()), atol=1e-6
    )
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["calibration"]["method"] == method
    np.testing.assert_array_equal(logits_of(type(model).from_pretrained(tmp_path).eval(), batch).numpy(), out.numpy())


def test_none_of_them_folds_into_the_classifier():
    assert not any(cls.affine for cls in (DirichletCalibration, BetaCalibration, VennAbersCalibration))


@pytest.mark.parametrize(
    "method,params,match",
    [
        ("dirichlet", {"reg_lambda": -1.0}, "`reg_lambda`"),
        ("dirichlet", {"reg_lambda": float("nan")}, "`reg_lambda`"),
        ("dirichlet", {"reg_mu": "x"}, "`reg_mu`"),
        ("dirichlet", {"max_iter": 0}, "`max_iter`"),
        ("beta", {"max_iter": True}, "`max_iter`"),
        ("venn-abers", {"n_bins": 3}, "`n_bins` is not a parameter"),
    ],
)
def test_bad_settings_are_refused(method, params, match):
    with pytest.raises(ValueError, match=match):
        make_calibrator(method, **params)


@pytest.mark.parametrize(
    "block,match",
    [
        ({"method": "beta", "a": [-1.0], "b": [1.0], "c": [0.0]}, "must be >= 0"),
        ({"method": "beta", "a": [1.0, 1.0], "b": [1.0], "c": [0.0]}, "`a` must have shape"),
        ({"method": "dirichlet", "weight": [[1.0, 0.0]], "bias": [0.0, 0.0]}, "`weight` must have shape"),
        ({"method": "venn-abers", "scores": [[0.2, 0.1]], "p0": [[0, 0, 0]], "p1": [[1, 1, 1]]}, "strictly increasing"),
        ({"method": "venn-abers", "scores": [[0.1, 0.2]], "p0": [[0, 0]], "p1": [[1, 1, 1]]}, "one longer"),
        ({"method": "venn-abers", "scores": [[0.1]], "p0": [[0, 2]], "p1": [[1, 1]]}, "must lie in"),
    ],
)
def test_bad_blocks_are_refused(block, match):
    with pytest.raises(ValueError, match=match):
        CalibrationHead(block, 2)


def test_nan_logits_stay_nan_and_fits_refuse_them():
    z, y = problem(0, 300, 3)
    for method in ("dirichlet", "beta", "venn-abers"):
        fitted = make_calibrator(method).fit(z, y)
        bad = z[:4].copy()
        bad[1, 0] = np.nan
        assert np.isnan(fitted.predict_proba(bad)[1]).all() and np.isfinite(fitted.predict_proba(bad)[[0, 2, 3]]).all()
        z_bad = z.copy()
        z_bad[5, 1] = np.inf
        with pytest.raises(ValueError, match="`logits` contains NaN or inf"):
            make_calibrator(method).fit(z_bad, y)
