"""calibkit.metrics.judges: each estimator against a plain-loop or closed-form reference, and against
ppi-python 0.2.3 and judgy 0.1.0 on the same numbers."""

import math

import numpy as np
import pytest

from calibkit.metrics import judges as J

Z95 = 1.959963984540054


def simulated(seed, n=80, big_n=600, theta=0.7, tpr=0.9, tnr=0.8, scores=False):
    rng = np.random.default_rng(seed)
    y = (rng.random(n + big_n) < theta).astype(float)
    f = np.where(y == 1, rng.random(y.size) < tpr, rng.random(y.size) >= tnr).astype(float)
    if scores:
        f = np.clip(0.6 * f + 0.4 * rng.random(y.size), 0, 1)
        y = np.clip(0.7 * y + 0.3 * rng.random(y.size), 0, 1)
    return y[:n], f[:n], f[n:]


# ----- references, one sample at a time


def loop_ppi(y, f, u, level=0.95):
    n, big_n = len(y), len(u)
    my, mf = sum(y) / n, sum(f) / n
    cov = sum((a - my) * (b - mf) for a, b in zip(y, f)) / n
    allf = list(f) + list(u)
    m = sum(allf) / len(allf)
    var = sum((v - m) ** 2 for v in allf) / (len(allf) - 1)
    lam = min(max(cov / ((1 + n / big_n) * var), 0.0), 1.0)
    lu = [lam * v for v in u]
    r = [a - lam * b for a, b in zip(y, f)]
    mu, mr = sum(lu) / big_n, sum(r) / n
    se = math.sqrt(sum((v - mu) ** 2 for v in lu) / big_n / big_n + sum((v - mr) ** 2 for v in r) / n / n)
    return mu + mr, se, lam


def loop_counts(f, y):
    cells = {"tp": 0, "fn": 0, "fp": 0, "tn": 0}
    for a, b in zip(f, y):
        cells[{(1, 1): "tp", (0, 1): "fn", (1, 0): "fp", (0, 0): "tn"}[(int(a), int(b))]] += 1
    return cells


# ----- PPI++


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("scores", [False, True])
def test_ppi_mean_equals_ppi_python_to_1e9(seed, scores):
    ppi = pytest.importorskip("ppi_py")
    y, f, u = simulated(seed, n=30 + 40 * seed, scores=scores)
    ours = J.ppi_mean(y, f, u)
    lower, upper = ppi.ppi_mean_ci(y, f, u, alpha=0.05)
    point = ppi.ppi_mean_pointestimate(y, f, u)
    assert ours["estimate"] == pytest.approx(float(np.ravel(point)[0]), abs=1e-9)
    assert ours["ci_lower"] == pytest.approx(float(np.ravel(lower)[0]), abs=1e-9)
    assert ours["ci_upper"] == pytest.approx(float(np.ravel(upper)[0]), abs=1e-9)
    lower90, _ = ppi.ppi_mean_ci(y, f, u, alpha=0.1)
    assert J.ppi_mean(y, f, u, level=0.9)["ci_lower"] == pytest.approx(float(np.ravel(lower90)[0]), abs=1e-9)


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
def test_ppi_mean_with_a_fixed_lambda_equals_ppi_python(lam):
    ppi = pytest.importorskip("ppi_py")
    y, f, u = simulated(7)
    lower, upper = ppi.ppi_mean_ci(y, f, u, alpha=0.05, lam=lam)
    ours = J.ppi_mean(y, f, u, lam=lam)
    assert (ours["ci_lower"], ours["ci_upper"]) == pytest.approx((float(lower[0]), float(upper[0])), abs=1e-9)


def test_ppi_mean_equals_a_plain_loop():
    y, f, u = simulated(3, scores=True)
    estimate, se, lam = loop_ppi(y.tolist(), f.tolist(), u.tolist())
    ours = J.ppi_mean(y, f, u)
    assert ours["estimate"] == pytest.approx(estimate, abs=1e-12)
    assert ours["se"] == pytest.approx(se, abs=1e-12)
    assert ours["lam"] == pytest.approx(lam, abs=1e-12)
    assert ours["ci_upper"] - ours["estimate"] == pytest.approx(Z95 * se, abs=1e-12)


def test_ppi_mean_of_a_stack_equals_each_data_set_alone():
    sets = [simulated(s) for s in range(5)]
    stacked = J.ppi_mean(*(np.stack([s[i] for s in sets]) for i in range(3)))
    for k, s in enumerate(sets):
        alone = J.ppi_mean(*s)
        for key in ("estimate", "ci_lower", "ci_upper", "lam"):
            assert stacked[key][k] == pytest.approx(alone[key], abs=1e-14)


def test_ppi_lambda_is_zero_when_the_judge_says_the_same_everywhere():
    # ppi-python divides 0 by 0 here (NaN); a constant judge carries no information: the labels' mean
    y = np.array([1.0, 0.0, 1.0, 1.0])
    out = J.ppi_mean(y, np.ones(4), np.ones(10))
    assert out["lam"] == 0.0
    assert out["estimate"] == pytest.approx(0.75)


def test_ppi_mean_refuses_a_single_label_and_values_outside_the_unit_interval():
    with pytest.raises(ValueError, match="`labels` needs at least 2"):
        J.ppi_mean([1.0], [1.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="`unlabelled` must be in"):
        J.ppi_mean([1.0, 0.0], [1.0, 0.0], [1.5, 0.0])
    with pytest.raises(ValueError, match="`level`"):
        J.ppi_mean([1.0, 0.0], [1.0, 0.0], [1.0], level=95)


def test_classical_mean_equals_ppi_python_classical_mean_ci():
    ppi = pytest.importorskip("ppi_py.baselines")
    y, _, _ = simulated(2)
    lower, upper = ppi.classical_mean_ci(y, alpha=0.05)
    ours = J.classical_mean(y)
    assert (ours["ci_lower"], ours["ci_upper"]) == pytest.approx((lower, upper), abs=1e-12)
    m = sum(y) / len(y)
    assert ours["se"] == pytest.approx(math.sqrt(sum((v - m) ** 2 for v in y) / len(y)) / math.sqrt(len(y)))


# ----- the judge against people


def test_counts_and_agreement_equal_a_loop_and_sklearn():
    sklearn = pytest.importorskip("sklearn.metrics")
    y, f, _ = simulated(4, n=150)
    cells = loop_counts(f, y)
    counts = J.confusion_counts(f, y)
    assert dict(zip(J.COUNT_CELLS, counts.tolist())) == cells
    out = J.agreement_from_counts(counts)
    assert out["agreement"] == pytest.approx(np.mean(f == y))
    assert out["kappa"] == pytest.approx(sklearn.cohen_kappa_score(y, f), abs=1e-12)
    assert out["tpr"] == pytest.approx(cells["tp"] / (cells["tp"] + cells["fn"]))
    assert out["fpr"] == pytest.approx(cells["fp"] / (cells["fp"] + cells["tn"]))


def test_agreement_rates_are_nan_without_a_class_and_kappa_without_variation():
    out = J.agreement_from_counts([3, 1, 0, 0])  # no labelled fail
    assert np.isnan(out["fpr"]) and out["tpr"] == 0.75
    assert np.isnan(J.agreement_from_counts([4, 0, 0, 0])["kappa"])


def test_judge_agreement_intervals_are_seeded_and_hold_the_point():
    y, f, _ = simulated(5, n=60)
    a = J.judge_agreement(f, y, bootstrap=500, seed=3)
    b = J.judge_agreement(f, y, bootstrap=500, seed=3)
    assert a == b
    for k in ("agreement", "kappa", "tpr", "fpr"):
        lower, upper = a["intervals"][k]
        assert lower <= a[k] <= upper and upper > lower
    assert a["intervals"] != J.judge_agreement(f, y, bootstrap=500, seed=4)["intervals"]


def test_judge_agreement_bootstrap_matches_resampling_the_samples():
    # multinomial counts of the table are the bootstrap of the samples: same percentiles, to noise
    y, f, _ = simulated(6, n=100)
    rng = np.random.default_rng(0)
    idx = rng.integers(0, y.size, size=(4000, y.size))
    direct = J.agreement_from_counts(J.confusion_counts(f[idx], y[idx]))["kappa"]
    ours = J.judge_agreement(f, y, bootstrap=4000, seed=1)["intervals"]["kappa"]
    assert ours == pytest.approx(np.percentile(direct, [2.5, 97.5]).tolist(), abs=0.02)


# ----- Rogan-Gladen


@pytest.mark.parametrize("seed", range(5))
def test_rogan_gladen_point_equals_judgy(seed):
    judgy = pytest.importorskip("judgy")
    y, f, u = simulated(seed, n=40 + 20 * seed, tpr=0.85, tnr=0.75)
    np.random.seed(0)  # judgy's interval draws from numpy's global state; its point estimate does not
    theirs, _, _ = judgy.estimate_success_rate(y, f, u, bootstrap_iterations=20)
    ours = J.rogan_gladen(y, f, u, bootstrap=50)
    assert ours["estimate"] == pytest.approx(theirs, abs=1e-12)


def test_rogan_gladen_equals_the_closed_form_and_clips():
    tpr, tnr, q = 0.9, 0.8, 0.65
    assert float(J.rogan_gladen_point(q, tpr, tnr)) == pytest.approx((q + tnr - 1) / (tpr + tnr - 1))
    assert float(J.rogan_gladen_point(0.1, 0.9, 0.8)) == 0.0
    assert float(J.rogan_gladen_point(0.99, 0.9, 0.95)) == 1.0
    assert np.isnan(J.rogan_gladen_point(0.5, 0.5, 0.5))


def test_rogan_gladen_delta_interval_equals_its_formula():
    y, f, u = simulated(8, n=120)
    out = J.rogan_gladen(y, f, u, method="delta")
    c = loop_counts(f, y)
    tpr, tnr, q = c["tp"] / (c["tp"] + c["fn"]), c["tn"] / (c["tn"] + c["fp"]), u.mean()
    youden = tpr + tnr - 1
    theta = (q + tnr - 1) / youden
    var = (
        q * (1 - q) / u.size
        + theta**2 * tpr * (1 - tpr) / (c["tp"] + c["fn"])
        + (1 - theta) ** 2 * tnr * (1 - tnr) / (c["tn"] + c["fp"])
    )
    se = math.sqrt(var) / youden
    assert out["ci_lower"] == pytest.approx(max(theta - Z95 * se, 0), abs=1e-12)
    assert out["ci_upper"] == pytest.approx(min(theta + Z95 * se, 1), abs=1e-12)


def test_rogan_gladen_bootstrap_carries_the_unlabelled_rates_noise():
    # a perfect judge on the labels: judgy's interval (labelled set only) has width 0; the truth's
    # noise is then all in q, whose binomial interval our bootstrap must reproduce
    y = np.array([1.0] * 30 + [0.0] * 20)
    rng = np.random.default_rng(0)
    u = (rng.random(400) < 0.6).astype(float)
    out = J.rogan_gladen(y, y, u, bootstrap=4000, seed=0)
    q = u.mean()
    assert out["estimate"] == pytest.approx(q)
    assert out["ci_upper"] - out["ci_lower"] == pytest.approx(2 * Z95 * math.sqrt(q * (1 - q) / u.size), rel=0.1)


def test_rogan_gladen_is_seeded():
    y, f, u = simulated(9)
    assert J.rogan_gladen(y, f, u, seed=2) == J.rogan_gladen(y, f, u, seed=2)
    assert J.rogan_gladen(y, f, u, seed=2)["ci_lower"] != J.rogan_gladen(y, f, u, seed=3)["ci_lower"]


def test_rogan_gladen_refuses_a_judge_no_better_than_chance_and_one_class_labels():
    with pytest.raises(ValueError, match=r"TPR \+ TNR = 1.000 <= 1"):
        J.rogan_gladen([1, 1, 0, 0], [1, 0, 1, 0], [1, 0])
    with pytest.raises(ValueError, match="both passes and fails"):
        J.rogan_gladen([1, 1, 1], [1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="`verdicts` must hold 0 or 1"):
        J.rogan_gladen([1, 0], [0.7, 0], [1, 0])


def test_rogan_gladen_from_counts_of_a_stack_equals_each_alone_and_nan_where_undefined():
    counts = np.array([[40, 5, 6, 20], [10, 10, 10, 10]])  # the second: TPR + TNR = 1
    out = J.rogan_gladen_from_counts(counts, np.array([300, 200]), np.array([500, 400]), bootstrap=300)
    alone = J.rogan_gladen_from_counts(counts[0], 300, 500, method="delta")
    assert out["estimate"][0] == pytest.approx(float(alone["estimate"]))
    assert np.isnan(out["estimate"][1]) and np.isnan(out["ci_lower"][1])


# ----- two models


def test_difference_paired_equals_ppi_python_on_the_differences():
    ppi = pytest.importorskip("ppi_py")
    a, b = simulated(10), simulated(11)
    ours = J.ppi_mean_difference(a, b, paired=True)
    d = [a[i] - b[i] for i in range(3)]
    lower, upper = ppi.ppi_mean_ci(*d, alpha=0.05)
    point = ppi.ppi_mean_pointestimate(*d)
    assert ours["estimate"] == pytest.approx(float(np.ravel(point)[0]), abs=1e-9)
    assert (ours["ci_lower"], ours["ci_upper"]) == pytest.approx((float(lower[0]), float(upper[0])), abs=1e-9)
    assert ours["construction"] == "paired"


def test_difference_independent_adds_the_variances():
    a, b = simulated(12), simulated(13, n=50, big_n=300)
    ours = J.ppi_mean_difference(a, b)
    pa, pb = J.ppi_mean(*a), J.ppi_mean(*b)
    assert ours["estimate"] == pytest.approx(pa["estimate"] - pb["estimate"])
    assert ours["se"] == pytest.approx(math.hypot(pa["se"], pb["se"]))
    with pytest.raises(ValueError, match="`paired`"):
        J.ppi_mean_difference(a, b, paired=True)


# ----- coverage, small and seeded


def test_coverage_of_ppi_and_rogan_gladen_in_a_seeded_simulation():
    # 200 repeats, 60 labelled and 540 unlabelled each; seeded, so the result is fixed and cannot fail
    # at random. The band [0.90, 0.99] is the nominal 0.95 plus or minus about 3 binomial standard
    # deviations of a 200-repeat coverage (sqrt(0.95 * 0.05 / 200) = 0.015): a wrong standard error
    # (a factor 0.7 or 1.5 gives 0.83 or 0.997) falls outside it. benchmarks/judges_coverage.py measures
    # it at 1,000 repeats.
    rng = np.random.default_rng(2026)
    reps, n, big_n, theta = 200, 60, 540, 0.7
    y = (rng.random((reps, n + big_n)) < theta).astype(float)
    f = np.where(y == 1, rng.random(y.shape) < 0.9, rng.random(y.shape) >= 0.6).astype(float)  # lenient: q = 0.75
    ppi = J.ppi_mean(y[:, :n], f[:, :n], f[:, n:])
    rg = J.rogan_gladen_from_counts(J.confusion_counts(f[:, :n], y[:, :n]), f[:, n:].sum(-1), big_n, bootstrap=500)
    naive = J.classical_mean(f)
    for out in (ppi, rg):
        covered = np.mean((out["ci_lower"] <= theta) & (theta <= out["ci_upper"]))
        assert 0.90 <= covered <= 0.99
    assert np.mean((naive["ci_lower"] <= theta) & (theta <= naive["ci_upper"])) < 0.5  # the judge is lenient
