"""Selective prediction: risk-coverage curve, AURC and selective accuracy against a brute force
that averages the plain definition over every order of tied confidences."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import calibkit
from tests.metrics import reference as ref


def brute_force(probs, labels, coverage=0.8):
    """Mean over every ranking consistent with the confidences (most confident first) of the plain loop."""
    rows, binary = ref.rows_of(probs, labels)
    pairs = (
        ref.top_pairs(rows, binary)
        if not binary
        else [(max(p), 1.0 if (p[1] > 0.5) == (y == 1) else 0.0) for p, y in rows]
    )
    n = len(pairs)
    curves = []
    for order in itertools.permutations(range(n)):
        if any(pairs[order[i]][0] < pairs[order[i + 1]][0] for i in range(n - 1)):
            continue  # not most confident first
        errors, curve = 0.0, []
        for k, i in enumerate(order, start=1):
            errors += 1.0 - pairs[i][1]
            curve.append(errors / k)
        curves.append(curve)
    risk = [sum(c[k] for c in curves) / len(curves) for k in range(n)]
    cut = max(1, math.ceil(coverage * n - 1e-9))
    return risk, sum(risk) / n, 1.0 - risk[cut - 1]


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 6),
    k=st.integers(2, 4),
    levels=st.integers(1, 4),
    coverage=st.sampled_from([0.1, 0.5, 0.8, 1.0]),
    seed=st.integers(0, 2**16),
)
def test_matches_the_brute_force_over_the_orders_of_ties(n, k, levels, coverage, seed):
    rng = np.random.default_rng(seed)
    top = rng.integers(0, levels, n) / (2 * levels) + 0.5  # few distinct confidences: many ties
    probs = np.empty((n, k))
    probs[:, 0] = top
    probs[:, 1:] = ((1 - top) / (k - 1))[:, None]
    probs = probs[:, rng.permutation(k)]
    labels = rng.integers(0, k, n)
    risk, area, accuracy = brute_force(probs, labels, coverage)
    coverage_axis, got = calibkit.risk_coverage(probs, labels)
    np.testing.assert_allclose(got, risk, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(coverage_axis, np.arange(1, n + 1) / n)
    assert calibkit.aurc(probs, labels) == pytest.approx(area, rel=1e-12, abs=1e-15)
    assert calibkit.selective_accuracy(probs, labels, coverage=coverage) == pytest.approx(
        accuracy, rel=1e-12, abs=1e-15
    )


def test_binary_logits_and_padding_read_as_every_metric_reads_them():
    rng = np.random.default_rng(1)
    z = rng.normal(size=(40, 6, 3))
    y = rng.integers(0, 3, (40, 6))
    y[:, 4:] = -100
    flat_p = np.exp(z[:, :4]) / np.exp(z[:, :4]).sum(-1, keepdims=True)
    want = calibkit.aurc(flat_p.reshape(-1, 3), y[:, :4].reshape(-1))
    assert calibkit.aurc(z, y, from_logits=True) == pytest.approx(want, rel=1e-12)
    p1 = rng.uniform(size=50)
    yb = rng.integers(0, 2, 50)
    two = np.stack([1 - p1, p1], axis=1)
    assert calibkit.aurc(p1, yb) == pytest.approx(calibkit.aurc(two, yb), rel=1e-12)
    logit = np.log(p1 / (1 - p1))
    assert calibkit.aurc(logit, yb, from_logits=True) == pytest.approx(calibkit.aurc(p1, yb), rel=1e-9)


def test_a_perfect_ranking_reaches_the_floor_and_the_order_of_rows_does_not_matter():
    rng = np.random.default_rng(2)
    conf = np.sort(rng.uniform(0.5, 1.0, 200))[::-1]
    probs = np.stack([conf, 1 - conf], axis=1)
    labels = np.r_[np.zeros(150, int), np.ones(50, int)]  # the 50 least confident are wrong
    floor = np.mean([max(0, k - 150) / k for k in range(1, 201)])
    assert calibkit.aurc(probs, labels) == pytest.approx(floor, rel=1e-12)
    assert calibkit.selective_accuracy(probs, labels, coverage=0.75) == 1.0
    shuffled = rng.permutation(200)
    assert calibkit.aurc(probs[shuffled], labels[shuffled]) == pytest.approx(floor, rel=1e-12)


@pytest.mark.parametrize("coverage", [0, -0.5, 1.5, "all", True, float("nan")])
def test_bad_coverage_and_bad_input_are_refused_by_name(coverage):
    with pytest.raises(ValueError, match="`coverage`"):
        calibkit.selective_accuracy([[0.6, 0.4]], [0], coverage=coverage)
    with pytest.raises(ValueError, match=r"`probs` contains NaN or inf at position 1"):
        calibkit.aurc([[0.6, 0.4], [np.nan, 0.5]], [0, 1])
