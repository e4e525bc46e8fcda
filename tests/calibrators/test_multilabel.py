"""Multi-label calibrators (a sigmoid per label): temperature, per-label temperature and Platt
scaling fitted by Newton's method, against scipy's optimiser on the same loss and the optimum's
first-order condition."""

import numpy as np
import pytest
from scipy.optimize import minimize

import calibkit
from calibkit.calibrators.multilabel import MultiLabelScaling

RNG = np.random.default_rng(0)
Z = RNG.normal(size=(6000, 4)) * 3
TRUE_A, TRUE_B = np.array([1 / 3, 1 / 2, 1.0, 2.0]), np.array([0.5, -1.0, 0.0, 0.3])
Y = (RNG.random(Z.shape) < 1 / (1 + np.exp(-(TRUE_A * Z + TRUE_B)))).astype(np.float32)
Y[:500, 1] = -100  # ignored entries


def bce(a, b, z, y):
    keep = y != -100
    s = a * z[keep] + b
    t = y[keep]
    return np.sum(t * np.logaddexp(0, -s) + (1 - t) * np.logaddexp(0, s))


def scipy_fit(method):
    k = Z.shape[1]
    if method == "temperature":
        result = minimize(
            lambda x: sum(bce(x[0], 0.0, Z[:, j], Y[:, j]) for j in range(k)),
            [1.0],
            method="BFGS",
            options={"gtol": 1e-9},
        )
        return np.full(k, result.x[0]), np.zeros(k)
    a, b = np.empty(k), np.zeros(k)
    for j in range(k):
        if method == "platt":
            result = minimize(
                lambda x, j=j: bce(x[0], x[1], Z[:, j], Y[:, j]), [1.0, 0.0], method="BFGS", options={"gtol": 1e-9}
            )
            a[j], b[j] = result.x
        else:
            result = minimize(
                lambda x, j=j: bce(x[0], 0.0, Z[:, j], Y[:, j]), [1.0], method="BFGS", options={"gtol": 1e-9}
            )
            a[j] = result.x[0]
    return a, b


@pytest.mark.parametrize("method", ["temperature", "label_temperature", "platt"])
def test_the_fit_is_the_optimum_of_the_binary_cross_entropy(method):
    fitted = MultiLabelScaling(method).fit(Z, Y)
    a, b = scipy_fit(method)
    np.testing.assert_allclose(fitted.scale_, a, atol=1e-6)
    np.testing.assert_allclose(fitted.bias_, b, atol=1e-6)
    # first-order condition: no step of 1e-4 in any free direction lowers the loss
    for j in range(Z.shape[1]):
        here = bce(fitted.scale_[j], fitted.bias_[j], Z[:, j], Y[:, j])
        for da, db in ((1e-4, 0), (-1e-4, 0)) + (((0, 1e-4), (0, -1e-4)) if method == "platt" else ()):
            if method == "temperature":
                continue  # one shared scale: checked on the sum below
            assert bce(fitted.scale_[j] + da, fitted.bias_[j] + db, Z[:, j], Y[:, j]) >= here - 1e-9
    if method == "platt":
        np.testing.assert_allclose(fitted.scale_, TRUE_A, rtol=0.1)  # and near the truth it was drawn from


def test_calibrated_probabilities_lower_the_per_label_ece():
    fitted = MultiLabelScaling("platt").fit(Z, Y)
    before = calibkit.multilabel_report(1 / (1 + np.exp(-Z)), Y, metrics=["ece"])["macro"]["ece"]
    after = calibkit.multilabel_report(fitted.predict_proba(Z), Y, metrics=["ece"])["macro"]["ece"]
    assert after < before / 3


def test_bad_input_is_refused_by_name():
    with pytest.raises(ValueError, match="`method` must be one of"):
        MultiLabelScaling("isotonic")
    with pytest.raises(ValueError, match="cannot fit a positive scale for label 0"):
        MultiLabelScaling("label_temperature").fit(-Z[:, :1], Y[:, :1].clip(0, 1))  # logits backwards
    with pytest.raises(ValueError, match=r"`logits` contains NaN or inf at position \(1, 0\)"):
        MultiLabelScaling().fit(np.array([[0.0], [np.nan]]), np.array([[0.0], [1.0]]))
    with pytest.raises(ValueError, match="multi-hot"):
        MultiLabelScaling().fit(Z[:2], np.full((2, 4), 2.0))
    with pytest.raises(ValueError, match="`logits` must hold numbers, got dtype <U1"):
        MultiLabelScaling().fit(np.array([["a"], ["b"]]), np.array([[0.0], [1.0]]))
    with pytest.raises(ValueError, match="`labels` must hold numbers, got dtype object"):
        MultiLabelScaling().fit(np.zeros((2, 1)), np.array([[0], [None]], dtype=object))
    with pytest.raises(ValueError, match="call fit"):
        MultiLabelScaling().predict_proba(Z)


def test_weighted_temperature_is_the_optimum_of_wts_weights_per_label():
    """A plain loop builds WTS's weights (1 - n_kc / N_k per decision of class c of label k) and
    scipy minimises the weighted BCE over one temperature: the fit is that optimum."""
    k = Z.shape[1]
    weights = np.zeros(Z.shape)
    for j in range(k):
        counted = [i for i in range(len(Y)) if Y[i, j] != -100]
        positives = sum(1 for i in counted if Y[i, j] == 1)
        for i in counted:
            same = positives if Y[i, j] == 1 else len(counted) - positives
            weights[i, j] = 1 - same / len(counted)
    y = np.where(Y == -100, 0.0, Y)

    def loss(x):
        s = x[0] * Z
        return np.sum(weights * (y * np.logaddexp(0, -s) + (1 - y) * np.logaddexp(0, s)))

    want = minimize(loss, [1.0], method="BFGS", options={"gtol": 1e-9}).x[0]
    fitted = MultiLabelScaling("weighted_temperature").fit(Z, Y)
    np.testing.assert_allclose(fitted.scale_, np.full(k, want), atol=1e-6)
    plain = MultiLabelScaling("temperature").fit(Z, Y).scale_[0]
    assert abs(fitted.scale_[0] - plain) > 1e-3  # the weights matter on labels of unequal frequency
    assert fitted.calibration_block() == {
        "method": "multilabel", "mode": "weighted_temperature", "scale": fitted.scale_.tolist(), "bias": [0.0] * k,
    }  # fmt: skip


def test_isotonic_per_label_equals_scikit_learn():
    from sklearn.isotonic import IsotonicRegression

    from calibkit.calibrators.multilabel import MultiLabelIsotonic

    fitted = MultiLabelIsotonic().fit(Z, Y)
    probe = RNG.normal(size=(500, 4)) * 4  # beyond the fitted range too: clipped
    got = fitted.predict_proba(probe)
    for j in range(Z.shape[1]):
        keep = Y[:, j] != -100
        sk = IsotonicRegression(out_of_bounds="clip").fit(1 / (1 + np.exp(-Z[keep, j])), Y[keep, j])
        np.testing.assert_allclose(got[:, j], sk.predict(1 / (1 + np.exp(-probe[:, j]))), atol=1e-12)
    block = fitted.calibration_block()
    assert block["method"] == "multilabel-ir" and len(block["thresholds"]) == 4
    with pytest.raises(ValueError, match="label 1 has no entry to fit on"):
        MultiLabelIsotonic().fit(Z[:, :2], np.where(np.arange(2) == 1, -100, Y[:, :2].clip(0, 1)))


def test_a_label_with_one_outcome_is_left_unchanged_with_a_warning():
    z, y = Z[:, :3].copy(), np.clip(Y[:, :3], 0, 1).copy()
    y[:, 2] = 1  # always present in the calibration data
    for method in ("platt", "label_temperature"):
        with pytest.warns(RuntimeWarning, match=r"labels \[2\] have one outcome only"):
            fitted = MultiLabelScaling(method).fit(z, y)
        assert fitted.scale_[2] == 1.0 and fitted.bias_[2] == 0.0
        np.testing.assert_allclose(fitted.scale_[:2], MultiLabelScaling(method).fit(z[:, :2], y[:, :2]).scale_)
    with pytest.raises(ValueError, match="every label has one outcome only"):
        MultiLabelScaling("platt").fit(z, np.ones_like(y))
