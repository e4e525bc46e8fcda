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


@pytest.mark.parametrize("kind", ["probs", "logits", "torch"])
def test_a_binary_probability_of_one_half_predicts_class_0_in_the_top_label_rows(kind):
    # 1-D binary input: class 1 only when p > 0.5, as every metric reads it; p >= 0.5 would count
    # the two rows at 0.5 right, selective accuracy at coverage 1 would be 1 and AURC 0
    p, y = np.array([0.5, 0.5, 0.9, 0.2]), np.array([1, 1, 1, 0])
    values = np.log(p / (1 - p)) if kind == "logits" else p  # logit 0 gives p = 0.5 exactly
    if kind == "torch":
        torch = pytest.importorskip("torch")
        values, y = torch.tensor(values), torch.tensor(y)
    from_logits = kind == "logits"
    risk, area, accuracy = brute_force(p, np.asarray(y), coverage=1.0)
    assert accuracy == 0.5 and area == pytest.approx(5 / 24)
    report = calibkit.calibration_report(values, y, from_logits=from_logits, metrics=["accuracy"])
    assert report["accuracy"] == accuracy  # at coverage 1 the selective accuracy is the accuracy
    assert calibkit.selective_accuracy(values, y, coverage=1.0, from_logits=from_logits) == pytest.approx(accuracy)
    assert calibkit.aurc(values, y, from_logits=from_logits) == pytest.approx(area, rel=1e-12)
    np.testing.assert_allclose(calibkit.risk_coverage(values, y, from_logits=from_logits)[1], risk, rtol=1e-12)


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


# ------------------------------------------------------------------------------------------
# The streaming doors: fine buckets of the confidence, with a bound


def bucket_reference(table, coverage):
    """Plain loops over every rank of every bucket: errors spread evenly, all first, all last."""
    even = first = last = 0.0
    curves = {"even": [], "first": [], "last": []}
    rank = errors_before = 0
    for m, e in table:
        m, e = int(m), int(e)
        for j in range(1, m + 1):
            k = rank + j
            for name, inside in (("even", j * e / m), ("first", min(j, e)), ("last", max(0, j - (m - e)))):
                curves[name].append((errors_before + inside) / k)
        rank += m
        errors_before += e
    n = rank
    even, first, last = (sum(curves[c]) / n for c in ("even", "first", "last"))
    cut = max(1, math.ceil(coverage * n - 1e-9)) - 1
    risks = [curves[c][cut] for c in ("even", "first", "last")]
    return (even, max(first - even, even - last)), (1 - risks[0], max(risks[1] - risks[0], risks[0] - risks[2]))


@settings(max_examples=40, deadline=None)
@given(
    counts=st.lists(st.tuples(st.integers(0, 30), st.floats(0, 1)), min_size=1, max_size=12),
    coverage=st.sampled_from([0.05, 0.3, 0.8, 1.0]),
)
def test_the_bucket_formulas_equal_plain_loops_over_the_ranks(counts, coverage):
    from calibkit.metrics.ranking import selective_from_buckets

    table = np.array([(m, round(m * share)) for m, share in counts], dtype=np.float64)
    if table[:, 0].sum() == 0:
        table[0] = (3, 1)
    got = selective_from_buckets(table, coverage)
    full = table[table[:, 0] > 0]
    aurc_ref, accuracy_ref = bucket_reference(full, coverage)
    assert got["aurc"] == pytest.approx(aurc_ref, rel=1e-10, abs=1e-12)
    assert got["selective_accuracy"] == pytest.approx(accuracy_ref, rel=1e-10, abs=1e-12)


def test_harmonic_numbers_are_exact_on_both_sides_of_the_table():
    from calibkit.metrics import ranking

    x = np.array([0, 1, 2, 4095, 4096, 4097, 10**6, 10**9])
    plain = [math.fsum(1 / j for j in range(1, int(v) + 1)) for v in x[:-1]]
    np.testing.assert_allclose(ranking._harmonic(x[:-1]), plain, rtol=1e-14)
    assert ranking._harmonic(np.array([1e9]))[0] == pytest.approx(np.log(1e9) + 0.5772156649015329 + 5e-10, rel=1e-15)


def test_buckets_follow_the_confidence_down_to_the_last_ulp():
    import torch

    from calibkit.metrics.ranking import SELECTIVE_BUCKETS, selective_bucket

    rng = np.random.default_rng(3)
    near_one = 1.0 - np.logspace(-17, -0.31, 400)  # down to 1 - 0.49: every octave of 1 - c
    conf = np.sort(np.r_[near_one, rng.uniform(0.0001, 1.0, 2000), 1.0, np.nextafter(1.0, 0.0)])[::-1].copy()
    bucket = selective_bucket(conf)
    assert bucket.min() == 0 and bucket.max() < SELECTIVE_BUCKETS
    assert np.all(np.diff(bucket) >= 0)  # less confident, never an earlier bucket
    assert bucket[conf == 1.0].max() == 0
    assert np.array_equal(selective_bucket(torch.from_numpy(conf)).numpy(), bucket)  # both engines, same buckets
    spread = selective_bucket(1.0 - np.geomspace(2.0**-40, 0.49, 20000))  # 39 octaves, 64 buckets each
    hit = np.unique(spread)
    assert len(hit) >= 38 * 64 and np.array_equal(hit, np.arange(hit[0], hit[-1] + 1))  # every bucket on the way


def stream(probs, labels, pieces, **kwargs):
    acc = calibkit.CalibrationAccumulator(["aurc", "selective_accuracy"], **kwargs)
    for part in np.array_split(np.arange(len(labels)), pieces):
        acc.update(probs[part], labels[part])
    return acc.compute()


@pytest.mark.parametrize("kind", ["probs", "logits", "binary", "tokens"])
def test_the_accumulator_is_within_its_bound_of_the_exact_values(kind):
    rng = np.random.default_rng(4)
    if kind == "binary":
        probs, labels, kw = rng.uniform(size=5000), rng.integers(0, 2, 5000), {}
    elif kind == "tokens":
        probs, labels, kw = rng.normal(size=(300, 12, 5)) * 3, rng.integers(0, 5, (300, 12)), {"from_logits": True}
        labels[:, 9:] = -100
    else:
        z = rng.normal(size=(5000, 7)) * 3
        probs = z if kind == "logits" else np.exp(z) / np.exp(z).sum(1, keepdims=True)
        labels, kw = np.where(rng.uniform(size=5000) < 0.6, z.argmax(1), rng.integers(0, 7, 5000)), {}
        kw = {"from_logits": kind == "logits"}
    exact = calibkit.calibration_report(probs, labels, metrics=["aurc", "selective_accuracy"], coverage=0.7, **kw)
    assert exact["aurc_error_bound"] == 0 and exact["selective_accuracy_error_bound"] == 0
    got = stream(probs, labels, 7, coverage=0.7, **kw)
    for name in ("aurc", "selective_accuracy"):
        bound = got[f"{name}_error_bound"]
        assert 0 < bound < 5e-3, name
        assert abs(got[name] - exact[name]) <= bound + 1e-12, name
    assert got == stream(probs, labels, 1, coverage=0.7, **kw)  # the batching does not matter


def test_equal_confidences_in_a_bucket_give_the_exact_value():
    rng = np.random.default_rng(5)
    levels = np.array([0.55, 0.7, 0.85, 0.97])  # one value a bucket: the estimate is the tie convention
    top = levels[rng.integers(0, 4, 3000)]
    probs = np.stack([top, 1 - top], axis=1)
    labels = (rng.uniform(size=3000) > top).astype(int)
    exact = calibkit.calibration_report(probs, labels, metrics=["aurc", "selective_accuracy"])
    got = stream(probs, labels, 5)
    assert got["aurc"] == pytest.approx(exact["aurc"], rel=1e-12)
    assert got["selective_accuracy"] == pytest.approx(exact["selective_accuracy"], rel=1e-12)


def test_the_torch_engine_fills_the_same_buckets():
    import torch

    from calibkit.metrics.backends import use_backend

    rng = np.random.default_rng(6)
    z = rng.normal(size=(3000, 6)) * 2
    y = rng.integers(0, 6, 3000)
    want = stream(z, y, 3, from_logits=True)
    with use_backend("torch"):
        assert stream(torch.from_numpy(z), torch.from_numpy(y), 3, from_logits=True) == want
        one = calibkit.calibration_report(z, y, from_logits=True, metrics=["aurc"])
    assert one["aurc"] == pytest.approx(calibkit.aurc(z, y, from_logits=True), rel=1e-12)


def test_the_bootstrap_gives_intervals_around_the_value():
    rng = np.random.default_rng(7)
    z = rng.normal(size=(4000, 4)) * 2
    y = np.where(rng.uniform(size=4000) < 0.5, z.argmax(1), rng.integers(0, 4, 4000))
    from calibkit.metrics.bootstrap import bootstrap_intervals

    out = bootstrap_intervals(
        z, y, metrics=["aurc", "selective_accuracy"], from_logits=True, bootstrap=200, max_blocks=400
    )
    value = calibkit.aurc(z, y, from_logits=True)
    low, high = out["intervals"]["aurc"]
    assert low < value < high and high - low < 0.1
    low, high = out["intervals"]["selective_accuracy"]
    assert low < calibkit.selective_accuracy(z, y, from_logits=True) < high
