"""Preference metrics (calibkit.metrics.preferences) against plain loops over pairs, orientation, ties,
the bootstrap's replicates redone by hand, and properties."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import calibkit
from calibkit.metrics.preferences import length_bias, preference_metrics, top_label_reading


def sigmoid(z):
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def softplus(x):
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def bin_of(c, n_bins):
    return min(max(math.ceil((c * n_bins) * (1 - 2**-40)) - 1, 0), n_bins - 1)


def plain_aurc(conf, right):
    """AURC over every order of tied confidences (small inputs only), most confident first."""
    n = len(conf)
    curves = []
    for order in itertools.permutations(range(n)):
        if any(conf[order[i]] < conf[order[i + 1]] for i in range(n - 1)):
            continue
        errors, curve = 0.0, []
        for k, i in enumerate(order, start=1):
            errors += 1.0 - right[i]
            curve.append(errors / k)
        curves.append(curve)
    return sum(sum(c[k] for c in curves) / len(curves) for k in range(n)) / n


def plain_aurc_groups(conf, right):
    """AURC, most confident first, the errors of equal confidences spread evenly over their ranks (SPEC.md)."""
    groups = {}
    for c, a in zip(conf, right):
        size, errors = groups.get(c, (0, 0.0))
        groups[c] = (size + 1, errors + 1.0 - a)
    total, before, k = 0.0, 0.0, 0
    for c in sorted(groups, reverse=True):
        size, errors = groups[c]
        for j in range(1, size + 1):
            total += (before + j * errors / size) / (k + j)
        before, k = before + errors, k + size
    return total / len(conf)


def plain(margins, temperature=1.0, n_bins=15, weights=None):
    """Every number of a set of pairs by a loop over pairs (a pair counted ``weights[i]`` times)."""
    weights = [1.0] * len(margins) if weights is None else list(weights)
    n = acc = conf_sum = brier = nll = 0.0
    count, conf_bin, right_bin = [0.0] * n_bins, [0.0] * n_bins, [0.0] * n_bins
    confs, rights = [], []
    for m, w in zip(margins, weights):
        c = sigmoid(abs(m) / temperature)  # confidence in the answer preferred
        a = 1.0 if m > 0 else 0.0  # a tie prefers neither: wrong
        b = bin_of(c, n_bins)
        count[b] += w
        conf_bin[b] += w * c
        right_bin[b] += w * a
        n += w
        acc += w * a
        conf_sum += w * c
        brier += w * (c - a) ** 2
        nll += w * softplus(-m / temperature)
        confs.append(c)
        rights.append(a)
    ece = sum(abs(right_bin[b] - conf_bin[b]) for b in range(n_bins)) / n
    out = {"accuracy": acc / n, "ece": ece, "brier": brier / n, "nll": nll / n, "mean_confidence": conf_sum / n}
    out["bins"] = (count, conf_bin, right_bin)
    out["rows"] = (confs, rights)
    return out


@pytest.mark.parametrize("temperature", [1.0, 0.7, 2.5])
def test_every_number_equals_a_plain_loop(temperature):
    rng = np.random.default_rng(3)
    margins = rng.normal(0.8, 2.0, 300)
    margins[:7] = 0.0  # ties
    margins[7] = 60.0  # beyond the binary report's eps clip: the NLL stays exact
    margins[8] = -45.0
    got = preference_metrics(margins, temperature=temperature)
    want = plain(margins.tolist(), temperature)
    for name in ("accuracy", "ece", "brier", "nll", "mean_confidence"):
        assert got[name] == pytest.approx(want[name], rel=1e-12, abs=1e-14), name
    assert got["pairs"] == 300 and got["ties"] == 7 and got["temperature"] == temperature
    confs, rights = want["rows"]
    assert got["aurc"] == pytest.approx(plain_aurc_groups(confs, rights), rel=1e-12)
    count, conf_bin, right_bin = want["bins"]
    rel = got["reliability"]
    assert rel["count"].tolist() == count
    full = [b for b in range(15) if count[b]]
    np.testing.assert_allclose(rel["confidence"][full], [conf_bin[b] / count[b] for b in full], rtol=1e-12)
    np.testing.assert_allclose(rel["accuracy"][full], [right_bin[b] / count[b] for b in full], rtol=1e-12)
    assert np.isnan(rel["confidence"][[b for b in range(15) if not count[b]]]).all()
    np.testing.assert_allclose(rel["edges"], np.linspace(0, 1, 16))


def test_ties_and_equal_confidences_in_aurc():
    margins = [0.0, 1.0, -1.0, 0.0, 2.0, 1.0]
    got = preference_metrics(margins)
    confs, rights = plain(margins)["rows"]
    assert got["aurc"] == pytest.approx(plain_aurc(confs, rights), rel=1e-12)
    assert got["aurc"] == pytest.approx(plain_aurc_groups(confs, rights), rel=1e-12)
    assert got["ties"] == 2 and got["accuracy"] == pytest.approx(3 / 6)


def test_accuracy_is_rewardbench_strict_greater():
    rng = np.random.default_rng(0)
    chosen = rng.integers(-3, 4, 500).astype(float)  # integer rewards: many ties
    rejected = rng.integers(-3, 4, 500).astype(float)
    got = preference_metrics(chosen - rejected)
    # RewardBench: results = score_chosen > score_rejected
    assert got["accuracy"] == sum(c > r for c, r in zip(chosen, rejected)) / 500
    assert got["ties"] == int((chosen == rejected).sum()) > 0
    assert got["brier"] == pytest.approx(plain((chosen - rejected).tolist())["brier"], rel=1e-12)


def test_a_pairs_orientation_never_changes_a_number():
    """A pair listed (a, b) or (b, a): the same numbers; the 2-D top-label report of [p(first), p(second)] agrees."""
    rng = np.random.default_rng(1)
    chosen, rejected = rng.normal(0.5, 1.5, 400), rng.normal(0.0, 1.5, 400)
    first_is_chosen = rng.random(400) < 0.5
    first = np.where(first_is_chosen, chosen, rejected)
    second = np.where(first_is_chosen, rejected, chosen)
    # margins from the listed order: the chosen minus the rejected, whichever is listed first
    listed = np.where(first_is_chosen, first - second, second - first)
    base = preference_metrics(chosen - rejected, n_bins=10)
    again = preference_metrics(listed, n_bins=10)
    for name in ("accuracy", "ece", "brier", "nll", "aurc", "mean_confidence"):
        assert again[name] == base[name]
    p_first = 1.0 / (1.0 + np.exp(-(first - second)))
    two = calibkit.calibration_report(
        np.stack([p_first, 1 - p_first], axis=1),
        np.where(first_is_chosen, 0, 1),
        metrics=["ece", "brier", "nll", "aurc"],
        n_bins=10,
    )
    assert base["ece"] == pytest.approx(two["ece"], rel=1e-12)
    assert base["accuracy"] == pytest.approx(two["accuracy"], rel=1e-12)
    assert base["nll"] == pytest.approx(two["nll"], rel=1e-12)
    assert base["brier"] == pytest.approx(two["brier"] / 2, rel=1e-12)  # the 2-D Brier sums both classes
    assert base["aurc"] == pytest.approx(two["aurc"], rel=1e-12)


def test_nll_is_the_binary_reports_and_the_bradley_terry_loss():
    rng = np.random.default_rng(2)
    margins = rng.normal(0.3, 3.0, 1000)
    conf, right = top_label_reading(margins)
    binary = calibkit.calibration_report(conf, right.astype(int), metrics=["nll", "brier", "ece"])
    got = preference_metrics(margins)
    assert got["nll"] == pytest.approx(binary["nll"], rel=1e-12)
    assert got["nll"] == pytest.approx(np.mean(-np.log(calibkit.preference_probability(margins))), rel=1e-12)
    assert got["ece"] == binary["ece"] and got["brier"] == binary["brier"]


def test_length_bias_equals_a_plain_loop():
    rng = np.random.default_rng(4)
    margins = rng.normal(0.5, 1.0, 200)
    margins[:3] = 0.0
    lc, lr = rng.integers(0, 50, 200), rng.integers(0, 50, 200)
    got = preference_metrics(margins, length_chosen=lc, length_rejected=lr)["length_bias"]
    longer = [m > 0 for m, a, b in zip(margins, lc, lr) if a > b]
    shorter = [m > 0 for m, a, b in zip(margins, lc, lr) if a < b]
    assert got["chosen_longer"] == len(longer) and got["chosen_shorter"] == len(shorter)
    assert got["equal_length"] == 200 - len(longer) - len(shorter)
    assert got["accuracy_chosen_longer"] == pytest.approx(sum(longer) / len(longer), rel=1e-12)
    assert got["accuracy_chosen_shorter"] == pytest.approx(sum(shorter) / len(shorter), rel=1e-12)
    d = [float(a - b) for a, b in zip(lc, lr)]
    mm, md = sum(margins) / 200, sum(d) / 200
    cov = sum((m - mm) * (x - md) for m, x in zip(margins, d))
    var = math.sqrt(sum((m - mm) ** 2 for m in margins) * sum((x - md) ** 2 for x in d))
    assert got["correlation"] == pytest.approx(cov / var, rel=1e-12)
    assert preference_metrics(margins)["length_bias"] is None
    none = length_bias([1.0, -1.0], [5, 5], [5, 5])
    assert none["accuracy_chosen_longer"] is None and none["correlation"] is None and none["equal_length"] == 2


def test_bootstrap_replicates_equal_weighted_plain_loops():
    """Redo the Poisson draws by hand (a block is one pair here): each replicate's numbers are a weighted loop."""
    rng = np.random.default_rng(5)
    margins = rng.normal(0.5, 1.5, 60)
    margins[0] = 0.0
    boot, level = 40, 0.9
    got = preference_metrics(margins, bootstrap=boot, level=level, seed=7)["intervals"]
    draw = np.random.default_rng(7)
    block = draw.permutation(60) % 60
    values = {k: [] for k in ("accuracy", "ece", "brier", "nll", "mean_confidence")}
    for w in draw.poisson(1.0, size=(boot, 60)):
        rep = plain(margins.tolist(), weights=w[block])
        for k in values:
            values[k].append(rep[k])
    for k, v in values.items():
        low, high = np.percentile(v, [5, 95])
        assert got[k] == pytest.approx((low, high), rel=1e-9), k
    assert got["aurc"][0] < preference_metrics(margins)["aurc"] < got["aurc"][1]
    assert preference_metrics(margins, bootstrap=boot, level=level, seed=7)["intervals"] == got


def test_bootstrap_blocks_on_many_pairs_cover_the_estimate():
    rng = np.random.default_rng(6)
    margins = rng.logistic(0.7, 1.0, 20_000)  # calibrated at T = 1
    got = preference_metrics(margins, bootstrap=200, max_blocks=500)
    for k, (low, high) in got["intervals"].items():
        assert low <= got[k] <= high, k


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-30, 30, allow_nan=False).map(lambda x: round(x, 2)), min_size=1, max_size=40),
    st.floats(0.1, 10),
    st.randoms(use_true_random=False),
)
def test_properties(margins, temperature, random):
    m = np.asarray(margins)
    got = preference_metrics(m, temperature=temperature, n_bins=7)
    scaled = preference_metrics(m / temperature, n_bins=7)
    for k in ("accuracy", "ece", "brier", "nll", "aurc", "mean_confidence"):
        assert got[k] == pytest.approx(scaled[k], rel=1e-9, abs=1e-12), k  # T only divides the margins
    order = list(range(m.size))
    random.shuffle(order)
    shuffled = preference_metrics(m[order], temperature=temperature, n_bins=7)
    for k in ("accuracy", "ece", "brier", "nll", "aurc", "mean_confidence"):
        assert shuffled[k] == pytest.approx(got[k], rel=1e-9, abs=1e-12), k  # pairs are exchangeable
    assert got["accuracy"] == np.mean(m > 0)
    assert 0 <= got["ece"] <= 1 and 0 <= got["brier"] <= 1 and 0.5 <= got["mean_confidence"] <= 1
    assert got["nll"] >= 0 and got["ties"] == int((m == 0).sum())
    want = plain(margins, temperature, n_bins=7)
    assert got["ece"] == pytest.approx(want["ece"], rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: preference_metrics([1.0, np.nan]), "`margins`: 1 margins are NaN or infinite \\(first at pair 1\\)"),
        (lambda: preference_metrics([np.inf]), "`margins`"),
        (lambda: preference_metrics([]), "`margins` must be a non-empty"),
        (lambda: preference_metrics([1.0], temperature=0.0), "`temperature`"),
        (lambda: preference_metrics([1.0], temperature=True), "`temperature`"),
        (lambda: preference_metrics([1.0], n_bins=0), "n_bins"),
        (lambda: preference_metrics([1.0, 2.0], length_chosen=[1, 2]), "`length_rejected` must be given"),
        (lambda: preference_metrics([1.0, 2.0], length_rejected=[1, 2]), "`length_chosen` must be given"),
        (lambda: preference_metrics([1.0, 2.0], length_chosen=[1], length_rejected=[1, 2]), "`length_chosen`"),
        (lambda: preference_metrics([1.0, 2.0], length_chosen=[1, -1], length_rejected=[1, 2]), "first at pair 1"),
        (lambda: preference_metrics([1.0], bootstrap=-1), "bootstrap"),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()
