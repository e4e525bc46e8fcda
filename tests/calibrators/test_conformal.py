"""Split-conformal prediction sets: set by set against MAPIE 1.6 and against plain loops, coverage
on exchangeable data, token and torch input, bad input."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import calibkit
from calibkit.calibrators import SplitConformal
from calibkit.calibrators.base import softmax_rows
from calibkit.calibrators.conformal import conformal_quantile

mapie_classification = pytest.importorskip("mapie.classification")
from sklearn.base import BaseEstimator, ClassifierMixin  # noqa: E402

LEVELS = (0.8, 0.9, 0.95)


# --------------------------------------------------------------------------------------------
# MAPIE fed the same probabilities


class GivenRows(ClassifierMixin, BaseEstimator):
    """A fitted classifier whose predict_proba returns the given rows: X holds row indices."""

    def __init__(self, probs=None):
        self.probs = probs

    def fit(self, X, y):  # pragma: no cover - prefit
        return self

    def predict_proba(self, X):
        return self.probs[np.asarray(X)[:, 0].astype(int)]

    def predict(self, X):
        return self.predict_proba(X).argmax(axis=1)


def given_rows(probs):
    est = GivenRows(probs)
    est.classes_, est.n_features_in_ = np.arange(probs.shape[1]), 1
    return est


class NoDraws(np.random.RandomState):
    """MAPIE randomises the APS and RAPS calibration scores (``s - u * p_y``) whatever include_last_label:
    uniform draws of 0 give the non-randomised scores that calibkit computes."""

    def uniform(self, low=0.0, high=1.0, size=None):
        return np.zeros(size)


def mapie_sets(probs, cal, y_cal, test, level, score):
    """MAPIE's sets on rows ``test`` after conformalizing on rows ``cal``, and its score object."""
    mapie = mapie_classification.SplitConformalClassifier(
        estimator=given_rows(probs), confidence_level=level, conformity_score=score, prefit=True,
        random_state=NoDraws(0),
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fewer labels in a calibration set than classes
        mapie.conformalize(cal[:, None], y_cal)
        _, sets = mapie.predict_set(test[:, None])
    return sets[:, :, 0], mapie._mapie_classifier.conformity_score_function_


def problem(seed, k, n_cal, n_test=300, ties=False):
    """Probabilities (rows of n_cal + n_test) and labels drawn from them; with ties: multiples of 1/20, zeros too."""
    rng = np.random.default_rng(seed)
    n = n_cal + n_test
    if ties:
        counts = np.stack([rng.multinomial(20, w) for w in rng.dirichlet(np.full(k, 0.5), size=n)])
        probs = counts / 20.0
    else:
        probs = softmax_rows(rng.normal(size=(n, k)) * rng.uniform(0.5, 3))
    with np.errstate(divide="ignore"):
        labels = (np.log(probs) + rng.gumbel(size=probs.shape)).argmax(axis=1)
    labels[: 2 * k] = np.tile(np.arange(k), 2)  # every class at least twice (RAPS's stratified split)
    return probs, labels


PROBLEMS = [  # (seed, K, n_cal, ties)
    (0, 3, 50, False),
    (1, 3, 400, True),
    (2, 5, 120, True),
    (3, 7, 1000, False),
    (4, 10, 300, True),
    (5, 12, 5000, False),
    (6, 20, 200, True),
    (7, 20, 2000, False),
]


def compared(seed, k, n_cal, ties, level, score):
    """(calibkit's sets, MAPIE's sets) on one problem, fitted on the same calibration rows."""
    probs, labels = problem(seed, k, n_cal, ties=ties)
    cal, test = np.arange(n_cal), np.arange(n_cal, len(probs))
    theirs, cs = mapie_sets(probs, cal, labels[cal], test, level, score)
    options = {}
    if score == "raps":  # MAPIE tunes k and lambda on a held-out tenth and scores the rest
        held_out = np.asarray(cs.X_raps)[:, 0].astype(int)
        cal = np.setdiff1d(cal, held_out)
        options = {"k_reg": int(cs.k_star[0]), "lambda_reg": float(cs.lambda_star)}
    ours = SplitConformal(score=score, confidence_level=level, inputs="probs", **options)
    ours.fit(probs[cal], labels[cal])
    if score == "lac":
        assert ours.quantile_ == cs.quantiles_[0]
    return ours.predict_sets(probs[test]), theirs


def _mapie_cases():
    for seed, k, n_cal, ties in PROBLEMS:
        for level in LEVELS:
            for score in ("lac", "aps", "raps"):
                if score == "raps" and math.ceil(n_cal * 0.1) < 1 / (1 - level):
                    continue  # MAPIE refuses: its held-out tenth is too small for the level
                yield seed, k, n_cal, ties, level, score


MAPIE_CASES = list(_mapie_cases())


@pytest.mark.parametrize(("seed", "k", "n_cal", "ties", "level", "score"), MAPIE_CASES)
def test_sets_equal_mapie_set_by_set(seed, k, n_cal, ties, level, score):
    ours, theirs = compared(seed, k, n_cal, ties, level, score)
    assert ours.shape == theirs.shape
    assert np.array_equal(ours, theirs), f"{int((ours != theirs).any(axis=1).sum())} sets differ"


def test_the_mapie_comparison_covers_every_score_level_and_ties():
    assert len(MAPIE_CASES) >= 60
    assert {c[5] for c in MAPIE_CASES} == {"lac", "aps", "raps"} and {c[4] for c in MAPIE_CASES} == set(LEVELS)
    assert {c[3] for c in MAPIE_CASES if c[5] == "raps"} == {False, True}


CONDITIONAL_PROBLEMS = [(1, 3, 400, True), (3, 7, 1000, False), (6, 5, 600, True)]


@pytest.mark.parametrize(("seed", "k", "n_cal", "ties"), CONDITIONAL_PROBLEMS)
def test_class_conditional_lac_sets_are_mapie_sets_of_each_class(seed, k, n_cal, ties):
    """Class j's column is MAPIE's column j conformalized on the calibration rows labelled j alone
    (MAPIE refuses APS and RAPS on calibration labels of one class: "binary target")."""
    probs, labels = problem(seed, k, n_cal, ties=ties)
    cal, test = np.arange(n_cal), np.arange(n_cal, len(probs))
    ours = SplitConformal(conditional=True, confidence_level=0.9, inputs="probs")
    sets = ours.fit(probs[cal], labels[cal]).predict_sets(probs[test])
    for j in range(k):
        rows = cal[labels[cal] == j]
        theirs, cs = mapie_sets(probs, rows, labels[rows], test, 0.9, "lac")
        assert ours.quantile_[j] == cs.quantiles_[0]
        assert np.array_equal(sets[:, j], theirs[:, j]), j


@pytest.mark.parametrize(("score", "options"), [("aps", {}), ("raps", {"k_reg": 2, "lambda_reg": 0.02})])
@pytest.mark.parametrize(("seed", "k", "n_cal", "ties"), CONDITIONAL_PROBLEMS)
def test_class_conditional_sets_are_marginal_sets_of_each_class(seed, k, n_cal, ties, score, options):
    """APS and RAPS: class j's column is the marginal set's column j fitted on the rows labelled j
    (the marginal sets are MAPIE's above)."""
    probs, labels = problem(seed, k, n_cal, ties=ties)
    cal, test = labels[:n_cal], probs[n_cal:]
    ours = SplitConformal(score=score, conditional=True, inputs="probs", **options)
    sets = ours.fit(probs[:n_cal], cal).predict_sets(test)
    for j in range(k):
        marginal = SplitConformal(score=score, inputs="probs", **options).fit(probs[:n_cal][cal == j], cal[cal == j])
        assert ours.quantile_[j] == marginal.quantile_
        assert np.array_equal(sets[:, j], marginal.predict_sets(test)[:, j]), j


# --------------------------------------------------------------------------------------------
# Plain loops


def reference_quantile(scores, alpha):
    k = math.ceil((len(scores) + 1) * (1 - alpha))
    return sorted(scores)[k - 1]


def test_quantile_is_the_order_statistic_of_a_plain_loop():
    rng = np.random.default_rng(3)
    for n in (11, 20, 50, 99, 100, 101, 1000, 4999):
        scores = rng.uniform(size=n).round(2)  # ties
        for alpha in (0.2, 0.1, 0.05, 0.01):
            if n >= max(1 / alpha, 1 / (1 - alpha)):
                assert conformal_quantile(scores, alpha) == reference_quantile(list(scores), alpha)


def reference_score(p, y, score, k_reg, lam):
    if score == "lac":
        return 1 - p[y]
    order = list(np.argsort(p)[::-1])  # numpy's order of equal probabilities, as MAPIE
    total = 0.0
    for rank, j in enumerate(order, start=1):
        total += p[j]
        if j == y:
            return total + (max(lam * (rank - k_reg), 0) if score == "raps" else 0)


def reference_set(p, q, score, k_reg, lam):
    """The set of one row, by walking the classes in decreasing probability."""
    if score == "lac":
        return [1 - p[j] - q <= 1e-8 for j in range(len(p))]
    order = list(np.argsort(p)[::-1])
    total, last = 0.0, None
    for rank, j in enumerate(order, start=1):
        total += p[j] + (lam if score == "raps" and rank > k_reg else 0)
        if total - q >= -1e-8:
            last = p[j]
            break
    if last is None or last <= 1e-8:  # (no such class; a class of probability 0 reached it)
        return None  # not exercised by the data below
    return [p[j] - last >= -1e-8 for j in range(len(p))]


@pytest.mark.parametrize("conditional", [False, True])
@pytest.mark.parametrize(("score", "k_reg", "lam"), [("lac", None, None), ("aps", None, None), ("raps", 2, 0.05)])
def test_sets_equal_a_plain_loop(score, k_reg, lam, conditional):
    probs, labels = problem(11, 4, 600, n_test=200)
    cal, test = slice(0, 600), slice(600, None)
    ours = SplitConformal(score=score, conditional=conditional, inputs="probs", k_reg=k_reg, lambda_reg=lam)
    sets = ours.fit(probs[cal], labels[cal]).predict_sets(probs[test])
    scores = [reference_score(p, y, score, k_reg, lam) for p, y in zip(probs[cal], labels[cal])]
    assert np.allclose(ours.conformity_scores_, scores, rtol=0, atol=1e-12)
    if conditional:
        q = [reference_quantile([s for s, y in zip(scores, labels[cal]) if y == j], 0.1) for j in range(4)]
    else:
        q = [reference_quantile(scores, 0.1)] * 4
    assert np.allclose(ours.quantile_, q, rtol=0, atol=1e-12)
    for i, p in enumerate(probs[test]):
        for j in range(4):
            expected = reference_set(p, q[j], score, k_reg or 0, lam or 0.0)
            assert expected is not None and sets[i, j] == expected[j], (i, j)


# --------------------------------------------------------------------------------------------
# Coverage on exchangeable data


def exchangeable(rng, n, k, temperature):
    logits = rng.normal(size=(n, k)) * 2
    labels = (logits * temperature + rng.gumbel(size=(n, k))).argmax(axis=1)  # miscalibrated by 1/temperature
    return logits, labels


@settings(max_examples=12, deadline=None)
@given(
    score=st.sampled_from(["lac", "aps", "raps"]),
    conditional=st.booleans(),
    level=st.sampled_from(LEVELS),
    k=st.integers(3, 6),
    n_cal=st.integers(100, 400),
    temperature=st.floats(0.5, 2.0),
)
def test_coverage_is_at_least_the_level_on_average(score, conditional, level, k, n_cal, temperature):
    """Over 100 seeds, the mean held-out coverage is >= 1 - alpha (within 4 standard errors); for
    marginal LAC without ties it is also <= 1 - alpha + 1/(n + 1)."""
    rng = np.random.default_rng(n_cal * 7 + k)
    options = {"k_reg": 1, "lambda_reg": 0.05} if score == "raps" else {}
    covered, per_class = [], []
    for _ in range(100):
        z, y = exchangeable(rng, n_cal + 200, k, temperature)
        conformal = SplitConformal(score=score, confidence_level=level, conditional=conditional, **options)
        try:
            conformal.fit(z[:n_cal], y[:n_cal])
        except ValueError:  # a class too rare for conditional=True at this level
            continue
        sets = conformal.predict_sets(z[n_cal:])
        covered.append(calibkit.coverage(sets, y[n_cal:]))
        per_class.append(calibkit.coverage(sets, y[n_cal:], per_class=True))
    assert len(covered) >= 50
    mean, se = np.mean(covered), np.std(covered) / np.sqrt(len(covered))
    assert mean >= level - 4 * se - 1e-12
    if conditional:
        class_means = np.nanmean(per_class, axis=0)
        class_se = np.nanstd(per_class, axis=0) / np.sqrt(len(per_class))
        assert (class_means >= level - 4 * class_se - 1e-12).all()
    if score == "lac" and not conditional:
        assert mean <= level + 1 / (n_cal + 1) + 4 * se


# --------------------------------------------------------------------------------------------
# Token input, torch, the metrics


def test_token_input_skips_ignored_rows_and_keeps_the_shape():
    rng = np.random.default_rng(5)
    z = rng.normal(size=(30, 20, 6)) * 2
    y = (z + rng.gumbel(size=z.shape)).argmax(axis=-1)
    y[:, 15:] = -100
    z[:, 15:] = 1e3 * rng.normal(size=(30, 5, 6))  # padding rows: never read by the fit
    flat = SplitConformal(score="aps").fit(z[:, :15].reshape(-1, 6), y[:, :15].reshape(-1))
    token = SplitConformal(score="aps").fit(z, y)
    assert token.quantile_ == flat.quantile_ and token.n_calibration_ == 450
    sets = token.predict_sets(z)
    assert sets.shape == (30, 20, 6)
    assert np.array_equal(sets[:, :15].reshape(-1, 6), flat.predict_sets(z[:, :15].reshape(-1, 6)))
    expected = flat.predict_sets(z[:, :15].reshape(-1, 6))[np.arange(450), y[:, :15].reshape(-1)].mean()
    assert calibkit.coverage(sets, y) == expected
    assert calibkit.set_size(sets, y) == flat.predict_sets(z[:, :15].reshape(-1, 6)).sum(axis=1).mean()


@pytest.mark.parametrize(("score", "options"), [("lac", {}), ("aps", {}), ("raps", {"k_reg": 2, "lambda_reg": 0.1})])
def test_torch_tensors_give_the_same_sets_as_a_tensor(score, options):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    z, y = exchangeable(rng, 700, 5, 1.0)
    for conditional in (False, True):
        arrays = SplitConformal(score=score, conditional=conditional, **options).fit(z[:500], y[:500])
        tensors = SplitConformal(score=score, conditional=conditional, **options)
        tensors.fit(torch.from_numpy(z[:500]).float(), torch.from_numpy(y[:500]))
        sets = tensors.predict_sets(torch.from_numpy(z[500:]).float())
        assert isinstance(sets, torch.Tensor) and sets.dtype == torch.bool and sets.device.type == "cpu"
        assert np.array_equal(arrays.predict_sets(torch.from_numpy(z[500:])).numpy(), arrays.predict_sets(z[500:]))
        # float32 tensors: the softmax (in float64) of the float32 values, as for a float32 array
        same = SplitConformal(score=score, conditional=conditional, **options).fit(z[:500].astype(np.float32), y[:500])
        assert np.array_equal(sets.numpy(), same.predict_sets(z[500:].astype(np.float32)))
        assert calibkit.coverage(sets, torch.from_numpy(y[500:])) == calibkit.coverage(sets.numpy(), y[500:])


def test_metrics_against_plain_loops():
    rng = np.random.default_rng(9)
    sets = rng.uniform(size=(200, 4)) < 0.4
    y = rng.integers(0, 4, size=200)
    y[::7] = -100
    kept = [i for i in range(200) if y[i] != -100]
    assert calibkit.coverage(sets, y) == pytest.approx(sum(sets[i, y[i]] for i in kept) / len(kept), abs=1e-15)
    assert calibkit.set_size(sets, y) == pytest.approx(sum(sets[i].sum() for i in kept) / len(kept), abs=1e-15)
    assert calibkit.set_size(sets) == pytest.approx(sets.sum() / 200, abs=1e-15)
    per_class = calibkit.coverage(sets, y, per_class=True)
    for j in range(4):
        rows = [i for i in kept if y[i] == j]
        assert per_class[j] == pytest.approx(sum(sets[i, j] for i in rows) / len(rows), abs=1e-15)


# --------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({"confidence_level": 1.0}, "confidence_level"),
        ({"confidence_level": 0}, "confidence_level"),
        ({"confidence_level": -0.1}, "confidence_level"),
        ({"confidence_level": True}, "confidence_level"),
        ({"confidence_level": "0.9"}, "confidence_level"),
        ({"score": "naive"}, "score"),
        ({"inputs": "probabilities"}, "inputs"),
        ({"conditional": 1}, "conditional"),
        ({"score": "raps", "lambda_reg": 0.1}, "k_reg"),
        ({"score": "raps", "k_reg": 1}, "lambda_reg"),
        ({"score": "raps", "k_reg": -1, "lambda_reg": 0.1}, "k_reg"),
        ({"score": "raps", "k_reg": 1, "lambda_reg": -0.1}, "lambda_reg"),
        ({"score": "aps", "k_reg": 1}, "k_reg"),
        ({"ignore_index": 1.5}, "ignore_index"),
    ],
)
def test_bad_settings_name_the_argument(options, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        SplitConformal(**options)
    with pytest.raises(ValueError, match=f"`{name}`"):  # set_params checks as the constructor does
        SplitConformal().set_params(**options)


def test_too_few_calibration_rows_for_the_level():
    """MAPIE refuses n < max(1/alpha, 1/(1 - alpha)) at predict_set ("Number of samples of the score is too
    low"); calibkit refuses at fit, with the same rule (alpha = 1 - level in decimal: 10 rows at 0.9)."""
    rng = np.random.default_rng(0)
    z, y = exchangeable(rng, 11, 3, 1.0)
    SplitConformal(confidence_level=0.9).fit(z[:10], y[:10])
    with pytest.raises(ValueError, match="`labels`: 9 calibration rows.*needs at least 10"):
        SplitConformal(confidence_level=0.9).fit(z[:9], y[:9])
    with pytest.raises(ValueError, match="needs at least 20"):
        SplitConformal(confidence_level=0.95).fit(z, y)
    with pytest.raises(ValueError, match="needs at least 11"):  # 1/(1 - alpha) = 1/0.09999999999999998 at 0.1
        SplitConformal(confidence_level=0.1).fit(z[:10], y[:10])
    labels = np.r_[np.zeros(30, int), np.ones(30, int), np.full(5, 2)]
    with pytest.raises(ValueError, match="5 calibration rows of class 2"):
        SplitConformal(conditional=True).fit(rng.normal(size=(65, 3)), labels)
    probs, labels = problem(0, 3, 10)
    cal = np.arange(9)
    with pytest.raises(ValueError, match="Number of samples of the score is too low"):
        mapie_sets(probs, cal, labels[cal], np.arange(10, 20), 0.9, "lac")


def test_bad_predictions_and_labels_name_the_argument():
    rng = np.random.default_rng(0)
    z, y = exchangeable(rng, 100, 3, 1.0)
    probs = softmax_rows(z)
    with pytest.raises(ValueError, match="`predictions`.*row 3 sums to"):
        bad = probs.copy()
        bad[3] *= 1.01
        SplitConformal(inputs="probs").fit(bad, y)
    with pytest.raises(ValueError, match="`predictions`"):
        SplitConformal(inputs="probs").fit(z, y)  # logits given as probabilities
    SplitConformal(inputs="probs").fit(probs * (1 + 5e-6), y)  # within MAPIE's 1e-5
    with pytest.raises(ValueError, match="`labels` has shape"):
        SplitConformal().fit(z, y[:-1])
    with pytest.raises(ValueError, match="`labels` must lie in"):
        SplitConformal().fit(z, np.r_[y[:-1], 3])
    with pytest.raises(ValueError, match="`predictions` must have shape"):
        SplitConformal().fit(z[:, 0], y)
    nan = z.copy()
    nan[5, 1] = np.nan
    with pytest.raises(ValueError, match="`predictions` contains NaN"):
        SplitConformal().fit(nan, y)
    with pytest.raises(ValueError, match="not fitted yet"):
        SplitConformal().predict_sets(z)
    fitted = SplitConformal().fit(z, y)
    with pytest.raises(ValueError, match="`predictions` has 4 classes"):
        fitted.predict_sets(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="`predictions` contains NaN"):
        fitted.predict_sets(nan)
    with pytest.raises(ValueError, match="`sets`"):
        calibkit.coverage(np.full((3, 3), 0.5), np.zeros(3, int))
    with pytest.raises(ValueError, match="`labels` has shape"):
        calibkit.coverage(np.ones((3, 3), bool), np.zeros(4, int))
    with pytest.raises(ValueError, match="`labels` holds no sample"):
        calibkit.set_size(np.ones((3, 3), bool), np.full(3, -100))
    with pytest.raises(ValueError, match="`per_class`"):
        calibkit.coverage(np.ones((3, 3), bool), np.zeros(3, int), per_class="yes")


def test_not_in_the_calibrators_registry():
    from calibkit.calibrators.registry import REGISTRY

    assert all("conformal" not in entry.class_path.lower() for entry in REGISTRY)
    assert "not a probability calibrator" in SplitConformal.__doc__
