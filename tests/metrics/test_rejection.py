"""The rejection metrics (calibkit.metrics.rejection) against plain loops, scikit-learn and the field's references.

References: LM-Polygraph 0.7.0's ``PredictionRejectionArea`` (and its 1,000-shuffle random
baseline) and torch-uncertainty 0.13.0's ``AUGRC``, ``RiskAtxCov``, ``CovAtxRisk``. Neither is in the
test extras (their wheels pull spaCy, COMET, torchvision): their numbers on fixed inputs are kept in
``tests/data/rejection_references/rejection_references.json`` beside the script that wrote them,
compared here on every run; the slow test reruns the script where ``.ci/run`` installs both with
``--no-deps`` and checks that the file is current. Both compute in float64 here (torch-uncertainty
with float64 inputs and the default dtype set to float64), so the equality is to 1e-9.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from calibkit.metrics.bootstrap import rejection_intervals
from calibkit.metrics.ranking import selective_from_rows
from calibkit.metrics.rejection import (
    prediction_rejection_area,
    rank_rows,
    rejection_from_weights,
    rejection_metrics,
)
from calibkit.metrics.sampling import SamplingSettings

DATA = Path(__file__).parents[1] / "data" / "rejection_references"
REFERENCES = json.loads((DATA / "rejection_references.json").read_text())
CASES = sorted(REFERENCES["inputs"])


def case(name):
    data = REFERENCES["inputs"][name]
    return np.array(data["confidence"]), np.array(data["quality"])


# --- plain loops: one rank at a time, in the order of the confidence (no ties) ---------------------------


def loop_curves(c, q):
    """Quality and loss of the k most confident, k = 1..n, summed one answer at a time."""
    order = sorted(range(len(c)), key=lambda i: -c[i])
    good, loss, goods, losses = 0.0, 0.0, [], []
    for i in order:
        good += q[i]
        loss += 1 - q[i]
        goods.append(good)
        losses.append(loss)
    return goods, losses


def loop_pra(c, q, share):
    n = len(q)
    rejected = int(share * n)
    goods, _ = loop_curves(c, q)
    return sum(goods[k - 1] / k for k in range(n - rejected + 1, n + 1)) / rejected


def loop_prr(c, q, share):
    random = sum(q) / len(q)
    return (loop_pra(c, q, share) - random) / (loop_pra(q, q, share) - random)


def loop_metrics(c, q, coverage=0.8, risk=0.1):
    n = len(q)
    _, losses = loop_curves(c, q)
    aurc = sum(losses[k - 1] / k for k in range(1, n + 1)) / n
    augrc = sum((losses[k - 1] + losses[k]) / 2 / n for k in range(1, n)) / n / (1 - 1 / n)  # the trapezoid
    k = int(np.ceil(round(coverage * n, 9)))
    covered = [k for k in range(1, n + 1) if losses[k - 1] / k <= risk]
    wrong = [q[i] < 0.5 for i in range(n)]
    pairs = [
        1.0 if c[i] > c[j] else 0.5 if c[i] == c[j] else 0.0
        for i in range(n)
        for j in range(n)
        if not wrong[i] and wrong[j]
    ]
    constant = min(q) == max(q)
    return {
        "prr": float("nan") if constant else loop_prr(c, q, 1.0),
        "prr_at": float("nan") if constant else loop_prr(c, q, 0.5),
        "roc_auc": sum(pairs) / len(pairs) if pairs else float("nan"),
        "aurc": aurc,
        "augrc": augrc,
        "risk_at_coverage": losses[k - 1] / k,
        "coverage_at_risk": max(covered) / n if covered else float("nan"),
    }


@pytest.mark.parametrize("name", CASES)
def test_every_metric_equals_a_plain_loop(name):
    c, q = case(name)
    got = rejection_metrics(c, q)
    for metric, want in loop_metrics(c, q).items():
        assert got[metric] == pytest.approx(want, abs=1e-12, nan_ok=True), metric


@pytest.mark.parametrize("seed", range(6))
def test_ties_are_the_mean_over_the_orders_of_the_tied_answers(seed):
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 3, 7).astype(float)  # three values over seven answers: runs of ties
    q = rng.random(7).round(1)
    got = rejection_metrics(c, q)
    orders = []
    for perm in itertools.permutations(range(7)):  # every order of the answers that keeps the confidence's
        rank = np.empty(7)
        rank[list(perm)] = np.arange(7)
        key = c * 10 - rank / 10  # ties broken by the permutation
        if all((c[i] > c[j]) <= (key[i] > key[j]) for i in range(7) for j in range(7)):
            orders.append(key)
    keys = {tuple(np.argsort(-k)) for k in orders}
    assert len(keys) > 1
    broken = [loop_metrics(k, q) for k in orders]
    for metric in ("prr", "prr_at", "aurc", "augrc", "risk_at_coverage"):
        want = np.mean([b[metric] for b in broken])
        assert got[metric] == pytest.approx(want, abs=1e-12), metric
    wrong = (q < 0.5).astype(int)
    if 0 < wrong.sum() < 7:
        assert got["roc_auc"] == pytest.approx(roc_auc_score(wrong, -c), abs=1e-12)
        assert got["pr_auc"] == pytest.approx(average_precision_score(wrong, -c), abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_roc_auc_and_average_precision_equal_scikit_learn_with_ties_and_weights(seed):
    rng = np.random.default_rng(seed)
    c = rng.random(300).round(2)  # many ties
    q = (rng.random(300) < c).astype(float)
    got = rejection_metrics(c, q)
    wrong = (q < 0.5).astype(int)  # the positive class: a wrong answer, scored by the uncertainty -confidence
    assert got["roc_auc"] == pytest.approx(roc_auc_score(wrong, -c), abs=1e-12)
    assert got["pr_auc"] == pytest.approx(average_precision_score(wrong, -c), abs=1e-12)
    weights = rng.poisson(1.0, 300).astype(float)
    rows = rank_rows(c, q)
    weighted = rejection_from_weights(rows, weights[None, :])
    assert weighted["roc_auc"][0] == pytest.approx(roc_auc_score(wrong, -c, sample_weight=weights), abs=1e-12)
    assert weighted["pr_auc"][0] == pytest.approx(average_precision_score(wrong, -c, sample_weight=weights), abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_a_replicates_weights_are_the_answers_repeated(seed):
    rng = np.random.default_rng(seed)
    c, q = rng.random(80), rng.random(80)
    weights = rng.poisson(1.0, (3, 80)).astype(float)
    got = rejection_from_weights(rank_rows(c, q), weights)
    for r in range(3):
        rows = np.repeat(np.arange(80), weights[r].astype(int))
        want = rejection_metrics(c[rows], q[rows])
        for metric, values in got.items():
            assert values[r] == pytest.approx(want[metric], abs=1e-10, nan_ok=True), metric


def test_aurc_and_risk_at_coverage_over_right_and_wrong_are_calibkits_selective_metrics():
    rng = np.random.default_rng(5)
    c = rng.random(400).round(2)
    right = (rng.random(400) < c).astype(float)
    got = rejection_metrics(c, right, coverage=0.7)
    exact = selective_from_rows(c, 1 - right, 0.7)
    assert got["aurc"] == pytest.approx(exact["aurc"][0], abs=1e-12)
    assert got["risk_at_coverage"] == pytest.approx(1 - exact["selective_accuracy"][0], abs=1e-12)


# --- the references' own numbers, stored ---------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_prr_equals_lm_polygraphs_prediction_rejection_area(name):
    c, q = case(name)
    lmp = REFERENCES["lm_polygraph"][name]
    low, high = q.min(), q.max()
    for share, key in ((1.0, "prr"), (0.5, "prr_at")):
        ref = lmp[str(share)]
        mine = prediction_rejection_area(c, q, max_rejection=share)
        # LM-Polygraph rescales the quality to [0, 1] by its minimum and maximum: an affine map of every area
        assert (mine["area"] - low) / (high - low) == pytest.approx(ref["area"], abs=1e-9)
        assert (mine["oracle"] - low) / (high - low) == pytest.approx(ref["oracle"], abs=1e-9)
        assert (mine["random"] - low) / (high - low) == pytest.approx(ref["normalized_quality_mean"], abs=1e-9)
        exact = (ref["area"] - ref["normalized_quality_mean"]) / (ref["oracle"] - ref["normalized_quality_mean"])
        assert rejection_metrics(c, q)[key] == pytest.approx(exact, abs=1e-9)


@pytest.mark.parametrize("name", CASES)
def test_lm_polygraphs_shuffled_random_baseline_has_a_monte_carlo_error_the_closed_form_has_not(name):
    c, q = case(name)
    for share, key in ((1.0, "prr"), (0.5, "prr_at")):
        ref = REFERENCES["lm_polygraph"][str(name)][str(share)]
        closed = ref["normalized_quality_mean"]  # the random area in closed form: the mean (rescaled) quality
        error = ref["random_shuffled"] - closed
        standard_error = ref["random_shuffles_sd"] / np.sqrt(1000)
        assert ref["random_shuffled"] == ref["random_shuffled_again"]  # the stored spread is of those shuffles
        assert 0 < abs(error) < 4 * standard_error  # a Monte-Carlo error: nonzero, of the size the spread says
        # what it does to PRR: the published (shuffled) value is off the exact one by the baseline's error,
        # scaled by d PRR / d random = (area - oracle) / (oracle - random)^2
        shift = ref["prr"] - rejection_metrics(c, q)[key]
        slope = (ref["area"] - ref["oracle"]) / (ref["oracle"] - closed) ** 2
        assert shift == pytest.approx(slope * error, rel=0.05)


@pytest.mark.parametrize("name", CASES)
def test_aurc_roc_auc_and_pr_auc_equal_lm_polygraphs(name):
    c, q = case(name)
    lmp = REFERENCES["lm_polygraph"][name]
    got = rejection_metrics(c, q)
    low, high = q.min(), q.max()
    # its RiskCoverageCurveAUC: the loss of the rescaled quality, so AURC over the quality as given rescales
    assert (got["aurc"] - (1 - high)) / (high - low) == pytest.approx(lmp["rcc_auc"], abs=1e-9)
    assert got["roc_auc"] == pytest.approx(lmp["roc_auc"], abs=1e-12)
    assert got["pr_auc"] == pytest.approx(lmp["pr_auc"], abs=1e-12)


@pytest.mark.parametrize("name", CASES)
def test_augrc_risk_at_coverage_and_coverage_at_risk_equal_torch_uncertaintys(name):
    c, q = case(name)
    tu = REFERENCES["torch_uncertainty"][name]
    got = rejection_metrics(c, q, coverage=0.8, risk=0.1)
    assert got["augrc"] == pytest.approx(tu["augrc"], abs=1e-9)
    assert got["augrc"] == pytest.approx(tu.get("augrc_update", tu["augrc"]), abs=1e-9)
    assert got["risk_at_coverage"] == pytest.approx(tu["risk_at_coverage"], abs=1e-9)
    assert got["coverage_at_risk"] == pytest.approx(tu["coverage_at_risk"], abs=1e-9, nan_ok=True)


def test_the_stored_references_cover_continuous_quality_and_correctness():
    qualities = [set(np.unique(case(name)[1])) for name in CASES]
    assert any(len(q) > 2 for q in qualities) and any(q == {0.0, 1.0} for q in qualities)


@pytest.mark.slow
def test_the_stored_references_are_current():
    """Rerun the script where LM-Polygraph and torch-uncertainty are installed (.ci/run's slow stage, --no-deps)."""
    for package in ("lm_polygraph", "torch_uncertainty"):
        assert importlib.util.find_spec(package) is not None, f"{package} is not installed: see .ci/run"
    done = subprocess.run(
        [sys.executable, str(DATA / "make.py"), "--check"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr


# --- intervals, undefined values, bad input --------------------------------------------------------------


def test_intervals_are_seeded_and_hold_the_estimate():
    c, q = case("binary")
    a = rejection_intervals(c, q, bootstrap=300, seed=4)
    assert a == rejection_intervals(c, q, sampling=SamplingSettings(bootstrap=300, seed=4))
    assert a != rejection_intervals(c, q, bootstrap=300, seed=5)
    point = rejection_metrics(c, q)
    for metric, (low, high) in a["intervals"].items():
        assert low <= point[metric] <= high, metric
    assert a["n_boot"] == 300 and a["confidence"] == 0.95


def test_intervals_narrow_with_more_questions():
    rng = np.random.default_rng(0)
    widths = []
    for n in (200, 3200):
        c = rng.random(n)
        right = (rng.random(n) < c).astype(float)
        low, high = rejection_intervals(c, right, bootstrap=200)["intervals"]["prr"]
        widths.append(high - low)
    assert widths[1] < widths[0] / 2.5  # about 1/sqrt(16)


def test_undefined_values_are_nan_and_said():
    got = rejection_metrics([0.9, 0.5, 0.1], [1.0, 1.0, 1.0])
    assert np.isnan(got["prr"]) and np.isnan(got["roc_auc"]) and np.isnan(got["pr_auc"])  # oracle = random
    assert got["aurc"] == 0.0 and got["coverage_at_risk"] == 1.0
    one = rejection_metrics([0.3], [0.0])
    assert np.isnan(one["augrc"]) and np.isnan(one["prr"])
    with pytest.raises(ValueError, match="`max_rejection`: 0.1 of 3 answers rejects none"):
        prediction_rejection_area([0.9, 0.5, 0.1], [1, 0, 1], max_rejection=0.1)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"quality": [0.5, 1.2]}, r"`quality` must be in \[0, 1\].*row 1 is 1.2"),
        ({"confidence": [0.5, np.nan]}, r"`confidence` must be finite; row 1 is nan"),
        ({"confidence": [0.5]}, r"`confidence` has 1 values and `quality` 2"),
        ({"confidence": []}, r"`confidence` must be a non-empty 1-D array"),
        ({"confidence": "ab"}, r"`confidence` must be numbers"),
        ({"max_rejection": 0.0}, r"`max_rejection` must be in \(0, 1\]"),
        ({"risk": 1.5}, r"`risk` must be in \[0, 1\]"),
        ({"coverage": 0.0}, r"`coverage`"),
        ({"threshold": 0.0}, r"`threshold` must be a number in \(0, 1\]"),
    ],
)
def test_bad_input_names_the_argument(kwargs, message):
    args = {"confidence": [0.5, 0.4], "quality": [1.0, 0.0], **kwargs}
    with pytest.raises(ValueError, match=message):
        rejection_metrics(args.pop("confidence"), args.pop("quality"), **args)
