"""Abstention with a guarantee (Learn then Test): the binomial tail, the threshold, its face in the generations report.

The threshold is checked against MAPIE's ``BinaryClassificationController`` (1.6.0) on the same
problems, against a plain loop of the procedure written here, and by a property test of its
p-value chain; the binomial tails (SciPy's) against exact sums of fractions.
"""

import json
import math
import warnings
from fractions import Fraction
from math import comb

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from calibkit.cli import main
from calibkit.lm.generations import abstention_resplits, abstention_summary, generations_report, read_generations
from calibkit.metrics.abstention import (
    GRID,
    abstention_threshold,
    binomial_pmf,
    binomial_tail,
    binomial_upper_tail,
    chosen_threshold,
    selective_counts,
)
from calibkit.metrics.settings import CalibrationSettings
from tests.test_generations import answers, write_jsonl


def problem(seed, n=None, decimals=None):
    """Confidences (rounded: ties) and correctness that rises with the confidence."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 400)) if n is None else n
    c = np.round(rng.beta(3, 1.5, n), int(rng.integers(1, 4)) if decimals is None else decimals)
    y = (rng.uniform(size=n) < c ** rng.uniform(0.3, 1.5)).astype(int)
    return c, y


# -- the binomial tail ----------------------------------------------------------------------------


def exact_pmf(k, n, p):
    """``P(Binomial(n, p) = k)`` in exact rational arithmetic (``p`` the float's exact binary value)."""
    p = Fraction(p)
    return comb(n, k) * p**k * (1 - p) ** (n - k)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 30, 100])
@pytest.mark.parametrize("p", [1e-3, 0.05, 0.1, 0.3, 0.5, 0.9, 0.999])
def test_binomial_tails_and_pmf_equal_exact_fractions(n, p):
    """Against sums of math.comb terms in Fractions: no float in the reference, so no shared rounding with SciPy."""
    pmf = [exact_pmf(k, n, p) for k in range(n + 1)]
    lower = [float(sum(pmf[: k + 1])) for k in range(n + 1)]
    upper = [float(sum(pmf[k:])) for k in range(n + 2)]  # P(X >= n + 1) = 0
    k = np.arange(n + 1)
    want = np.array([float(x) for x in pmf])
    kept = want > 1e-300  # the smallest terms underflow a double
    np.testing.assert_allclose(binomial_pmf(k, n, p)[kept], want[kept], rtol=1e-12, atol=0)
    np.testing.assert_allclose(binomial_tail(k, n, p), lower, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(binomial_upper_tail(np.arange(n + 2), n, p), upper, rtol=1e-12, atol=1e-300)


def test_the_upper_tail_counts_from_k_itself():
    """Significantly above alpha, 2 wrong of 10 answered at alpha 0.1: P(X >= 2) = 0.264, not P(X > 2) = 0.070."""
    assert binomial_upper_tail(2, 10, 0.1)[()] == pytest.approx(1 - 0.9**10 - 10 * 0.1 * 0.9**9, rel=1e-13)
    assert binomial_upper_tail(2, 10, 0.1)[()] == pytest.approx(0.2639010709, rel=1e-9)
    assert binomial_upper_tail(0, 10, 0.1)[()] == 1.0 and binomial_upper_tail(11, 10, 0.1)[()] == 0.0
    tiny = binomial_upper_tail(60, 100, 0.1)[()]  # computed directly, not as 1 - P(X <= 59), which rounds to 0
    assert tiny == pytest.approx(float(sum(exact_pmf(j, 100, 0.1) for j in range(60, 101))), rel=1e-12)


def test_binomial_tail_edges():
    assert binomial_tail(5, 5, 0.3)[()] == 1.0 and binomial_tail(0, 0, 0.3)[()] == 1.0
    assert binomial_tail(0, 10, 0.1)[()] == pytest.approx(0.9**10, rel=1e-14)
    for bad, message in [({"p": 0.0}, "`p`"), ({"p": 1.0}, "`p`"), ({"k": -1}, "`k`"), ({"n": 2.5}, "`n`")]:
        args = {"k": 1, "n": 3, "p": 0.5, **bad}
        with pytest.raises(ValueError, match=message):
            binomial_tail(**args)


def test_the_p_values_equal_mapies_hoeffding_bentkus_for_a_binary_loss():
    """MAPIE takes min(Hoeffding, binomial tail); the Chernoff bound is never below the tail, so they are one."""
    from mapie.risk_control.methods import compute_hoeffding_bentkus_p_value

    rng = np.random.default_rng(3)
    n = rng.integers(1, 3000, 400)
    k = np.floor(rng.uniform(size=400) * (n + 1)).astype(int)
    for alpha in (0.05, 0.1, 0.3):
        r_hat = k / n  # MAPIE ceils n * r_hat; test only the counts that survive its float product
        exact = np.ceil(n * r_hat) == k
        theirs = compute_hoeffding_bentkus_p_value(r_hat[exact], n[exact].astype(float), alpha, binary=True)[:, 0]
        np.testing.assert_allclose(binomial_tail(k[exact], n[exact], alpha), theirs, rtol=1e-10, atol=1e-300)


# -- the threshold against MAPIE's controller ---------------------------------------------------------


def mapie_controller(c, y, alpha, delta, grid):
    from mapie.risk_control import BinaryClassificationController

    probs = np.column_stack([1 - c, c])
    controller = BinaryClassificationController(
        predict_function=lambda x: probs[x[:, 0]],
        risk="precision",
        target_level=1 - alpha,
        confidence_level=1 - delta,
        list_predict_params=grid,
        fwer_method="fixed_sequence",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "the risk is not monotonic": selective error seldom is
        controller.calibrate(np.arange(len(c))[:, None], y)
    return controller


def against_mapie(c, y, alpha, delta, grid):
    """Run both on one problem: "same" threshold ("neither": none), or "count" where MAPIE's float count explains it.

    MAPIE counts the errors as ceil(n * (1 - precision)) in floats, one too many for about a fifth of
    the (n, k) pairs (n=10, k=3: 3.0000000000000004): a larger p-value. Its p-values are this module's
    tail wherever its count is exact, and our walk on its p-values gives its threshold.
    """
    controller = mapie_controller(c, y, alpha, delta, grid)
    mine = abstention_threshold(c, y, abstention_alpha=alpha, abstention_delta=delta, thresholds=grid)
    answered, wrong = selective_counts(c.astype(float), y, grid[::-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        counted = np.ceil(answered * (1 - (answered - wrong) / answered))  # MAPIE's float count
    theirs = controller.p_values[::-1, 0]  # NaN where nothing is answered
    exact = (answered > 0) & (counted == wrong)
    np.testing.assert_allclose(theirs[exact], binomial_tail(wrong[exact], answered[exact], alpha), rtol=1e-10)
    j = chosen_threshold(answered, np.nan_to_num(theirs, nan=1.0), alpha, delta)  # our walk on MAPIE's p-values
    assert controller.best_predict_param == (None if j is None else grid[::-1][j])
    if controller.best_predict_param == mine["threshold"]:
        return "same" if mine["threshold"] is not None else "neither"
    assert (~exact & (answered > 0)).any()  # only MAPIE's count can explain it
    best = controller.best_predict_param
    assert mine["threshold"] is not None and (best is None or mine["threshold"] < best)
    return "count"


def test_the_threshold_is_mapies_where_both_apply():
    """Same confidences, labels, grid, alpha and delta; MAPIE walks a grid downward when its selective
    error at the top is below the one at the bottom (else upward from 0: another procedure), so the
    problems keep that."""
    rng = np.random.default_rng(7)
    found = []
    for seed in range(80):
        c, y = problem(seed)
        alpha, delta = float(rng.choice([0.05, 0.1, 0.2, 0.3])), float(rng.choice([0.05, 0.1, 0.2]))
        top = np.quantile(c, rng.uniform(0.5, 0.95))  # where the first test may pass
        grid = np.unique(np.round(np.linspace(0, top, int(rng.integers(10, 200))), 6))
        downward = (1 - y[c >= grid[-1]].mean()) < (1 - y[c >= grid[0]].mean())  # else MAPIE walks upward
        if downward and (1 - alpha) ** np.sum(c >= grid[-1]) <= delta:  # else MAPIE stops at its first test
            found.append(against_mapie(c, y, alpha, delta, grid))
    assert len(found) == 70 and found.count("same") >= 25 and found.count("count") <= 10  # measured: 28, 7


def test_on_the_default_grid_mapie_differs_only_by_its_float_count():
    """A long walk (1001 thresholds) meets MAPIE's rounded-up count somewhere: here it stops MAPIE early
    on every problem (7.000000000000002 errors read as 8), and our walk on its p-values is its threshold."""
    found = []
    for seed in range(5):
        rng = np.random.default_rng(seed)
        c = np.concatenate([np.ones(40), np.round(rng.uniform(0.3, 1, 400), 3)])
        y = np.concatenate([np.ones(40, int), (rng.uniform(size=400) < c[40:] ** 2).astype(int)])
        assert 0.5 < abstention_threshold(c, y)["threshold"] < 1
        found.append(against_mapie(c, y, 0.1, 0.1, GRID[::-1].copy()))
    assert found == ["count"] * 5


# -- the threshold against a plain loop -------------------------------------------------------------


def loop_threshold(c, y, alpha, delta, grid):
    """Learn then Test written out: down the grid, count, test, stop; then the highest of the same answers."""
    grid = sorted(set(float(t) for t in grid), reverse=True)
    counts, lowest = [], None
    for t in grid:
        n = sum(1 for ci in c if ci >= t)
        k = sum(1 for ci, yi in zip(c, y) if ci >= t and yi == 0)
        counts.append(n)
        if (1 - alpha) ** n > delta:
            continue  # too few answered to pass even without an error: not tested
        if scipy_stats.binom.cdf(k, n, alpha) > delta:
            break
        lowest = t
    if lowest is None:
        return None
    same = sum(1 for ci in c if ci >= lowest)
    return max(t for t, n in zip(grid, counts) if n == same)


@pytest.mark.parametrize("seed", range(12))
def test_the_threshold_equals_a_plain_loop(seed):
    c, y = problem(100 + seed)
    alpha, delta = (0.1, 0.1) if seed % 2 else (0.25, 0.05)
    grid = None if seed % 3 else np.random.default_rng(seed).uniform(0, 1, 57)
    got = abstention_threshold(c, y, abstention_alpha=alpha, abstention_delta=delta, thresholds=grid)
    assert got["threshold"] == loop_threshold(c, y, alpha, delta, GRID if grid is None else grid)
    if got["threshold"] is not None:
        answered = c >= got["threshold"]
        assert got["n_answered"] == answered.sum() and got["answered"] == answered.mean()
        assert got["selective_error"] == pytest.approx(1 - y[answered].mean(), abs=1e-15)


# -- edge cases ------------------------------------------------------------------------------------


def test_no_threshold_passes_says_so():
    c, y = np.linspace(0.5, 1, 30), np.tile([0, 1], 15)  # half wrong at every confidence
    got = abstention_threshold(c, y, abstention_alpha=0.1, abstention_delta=0.1)
    assert got["threshold"] is None and got["answered"] == 0.0 and got["selective_error"] is None
    summary = abstention_summary(c, y.astype(float))
    assert summary["threshold"] is None
    assert (
        summary["sentence"]
        == "no threshold: no confidence threshold shows error <= 10% with 90% confidence on these 30 answers"
    )


def test_ties_and_all_right_and_all_wrong():
    tied = np.full(60, 0.7)
    got = abstention_threshold(tied, np.ones(60, int), abstention_alpha=0.1, abstention_delta=0.1)
    assert got["threshold"] == 0.7 and got["answered"] == 1.0 and got["selective_error"] == 0.0  # 0.9**60 < 0.1
    assert abstention_threshold(tied, np.zeros(60, int))["threshold"] is None
    few = abstention_threshold(tied[:5], np.ones(5, int), abstention_alpha=0.1, abstention_delta=0.1)
    assert few["threshold"] is None  # 0.9**5 = 0.59: five right answers show nothing at 90%
    c = np.array([0.9] * 30 + [0.6] * 30)  # a tie block of right answers, then one with a third wrong
    y = np.array([1] * 30 + [1, 1, 0] * 10)
    got = abstention_threshold(c, y, abstention_alpha=0.1, abstention_delta=0.1)
    assert got["threshold"] == 0.9 and got["n_answered"] == 30  # the 0.6 block is answered whole or not at all


def test_the_report_sentence():
    c, y = problem(5, n=300, decimals=2)
    summary = abstention_summary(c, y.astype(float), abstention_alpha=0.2, abstention_delta=0.05)
    assert summary["sentence"] == (
        f"answer above {summary['threshold']:.4g}: {summary['answered']:.0%} answered, error <= 20% with 95% confidence"
    )
    nan = abstention_summary(np.full(4, np.nan), np.ones(4))
    assert nan["answers"] == 0 and nan["sentence"].startswith("no threshold: no answer has a confidence")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"abstention_alpha": 0.0}, "`abstention_alpha` must lie in"),
        ({"abstention_alpha": True}, "`abstention_alpha` must be a number"),
        ({"abstention_delta": 1.0}, "`abstention_delta` must lie in"),
        ({"confidence": [0.5, np.nan, 0.2]}, "`confidence` must be finite"),
        ({"confidence": [0.5, 1.2, 0.2]}, "`confidence` must be finite and lie in"),
        ({"right": [1, 2, 0]}, "`right` must be 0/1"),
        ({"right": [1, 0]}, "`right` has 2 values for 3"),
        ({"confidence": [], "right": []}, "`confidence` holds no input"),
        ({"thresholds": [[0.5]]}, "`thresholds` must be a non-empty 1-D"),
        ({"thresholds": [0.5, 1.5]}, "`thresholds` must lie in"),
    ],
)
def test_bad_input_names_the_argument(change, message):
    args = {"confidence": [0.5, 0.9, 0.2], "right": [1, 1, 0], **change}
    with pytest.raises(ValueError, match=message):
        abstention_threshold(args.pop("confidence"), args.pop("right"), **args)


def test_the_old_names_alpha_and_delta_still_work_with_a_future_warning():
    c, y = [0.9, 0.8, 0.7, 0.6] * 30, [1, 1, 1, 0] * 30
    want = abstention_threshold(c, y, abstention_alpha=0.3, abstention_delta=0.2)
    with pytest.warns(FutureWarning, match="`alpha` is renamed `abstention_alpha`"):
        got = abstention_threshold(c, y, alpha=0.3, abstention_delta=0.2)
    assert got["threshold"] == want["threshold"] and got["alpha"] == 0.3
    with pytest.warns(FutureWarning, match="`delta` is renamed `abstention_delta`"):
        assert abstention_threshold(c, y, abstention_alpha=0.3, delta=0.2)["threshold"] == want["threshold"]
    with pytest.raises(ValueError, match="`alpha=0.3` and `abstention_alpha=0.3`"):
        abstention_threshold(c, y, alpha=0.3, abstention_alpha=0.3)


def test_the_settings_are_checked_by_name():
    for name in ("abstention_alpha", "abstention_delta"):
        for bad in (0, 1, 1.5, "0.1", True):
            with pytest.raises(ValueError, match=f"`{name}`"):
                CalibrationSettings(**{name: bad})
    assert CalibrationSettings(abstention_alpha=0.05).abstention_alpha == 0.05


# -- the property: the returned threshold's p-value chain is valid ------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 20), st.booleans()), min_size=1, max_size=120),
    st.sampled_from([0.05, 0.1, 0.2, 0.4]),
    st.sampled_from([0.01, 0.1, 0.3]),
)
def test_the_p_value_chain_of_the_threshold_is_valid(rows, alpha, delta):
    c = np.array([r[0] / 20 for r in rows])  # confidences on 21 levels: ties
    y = np.array([int(r[1]) for r in rows])
    got = abstention_threshold(c, y, abstention_alpha=alpha, abstention_delta=delta)
    grid, p = got["thresholds"], got["p_values"]
    answered, wrong = selective_counts(c, y, grid)
    some = answered > 0
    np.testing.assert_allclose(p[some], scipy_stats.binom.cdf(wrong[some], answered[some], alpha), rtol=1e-9)
    can_pass = (1 - alpha) ** answered <= delta * (1 + 1e-12)
    start = int(np.argmax(can_pass)) if can_pass.any() else len(grid)
    assert (p[:start] > delta).all()  # the thresholds skipped could not pass
    if got["threshold"] is None:
        assert start == len(grid) or p[start] > delta
        return
    j = int(np.flatnonzero(grid == got["threshold"])[0])
    lowest = start + int(np.argmin(p[start:] <= delta)) - 1 if (p[start:] > delta).any() else len(grid) - 1
    assert (p[start : lowest + 1] <= delta).all()  # every threshold from the first tested to the lowest passed
    assert lowest == len(grid) - 1 or p[lowest + 1] > delta  # and the walk stopped at the first failure
    assert answered[j] == answered[lowest] and (j == start or answered[j - 1] < answered[j])  # the highest alike
    assert got["threshold"] <= c[c >= got["threshold"]].min()
    assert got["selective_error"] == wrong[j] / answered[j]


# -- the generations report, the re-splits, the command line -------------------------------------------


def test_the_generations_report_has_a_threshold_per_source_task_and_pooled(tmp_path):
    data = read_generations(write_jsonl(tmp_path / "gen.jsonl", answers(600)))
    report = generations_report(data, abstention_alpha=0.3, abstention_delta=0.1)
    right = data.correct >= 0.5
    for group, rows in [("pooled", np.ones(len(data), bool)), *((t, data.task == t) for t in ("math", "trivia"))]:
        entry = report["pooled"] if group == "pooled" else report["tasks"][group]
        for source in ("judge", "overconfident"):
            p = data.confidence[source][rows]
            has = ~np.isnan(p)
            want = abstention_threshold(p[has], right[rows][has], abstention_alpha=0.3, abstention_delta=0.1)
            got = entry["sources"][source]["abstention"]
            assert got["threshold"] == want["threshold"] and got["answered"] == want["answered"]
            assert got["answers"] == has.sum()
    assert report["pooled"]["sources"]["judge"]["abstention"]["threshold"] is not None
    with pytest.raises(ValueError, match="`abstention_delta`"):
        generations_report(data, abstention_delta=0)


def test_the_threshold_holds_out_of_sample_over_resplits(tmp_path):
    data = read_generations(write_jsonl(tmp_path / "gen.jsonl", answers(800)))
    held = abstention_resplits(data, resplits=20, abstention_alpha=0.2, abstention_delta=0.1, seed=1)
    judge = held["sources"]["judge"]
    assert judge["fitted"] == 20 and judge["verdict"] == "holds" and judge["holds"] >= 0.9
    r = int(np.flatnonzero(~np.isnan(judge["thresholds"]))[0])  # one re-split, by hand
    rng = np.random.default_rng(1)
    fit = np.zeros(len(data), bool)
    for _ in range(r + 1):
        fit[:] = False
        fit[rng.permutation(len(data))[: len(data) // 2]] = True
    p, right = data.confidence["judge"], (data.correct >= 0.5).astype(int)
    train, test = fit & ~np.isnan(p), ~fit & ~np.isnan(p)
    t = abstention_threshold(p[train], right[train], abstention_alpha=0.2, abstention_delta=0.1)["threshold"]
    assert judge["thresholds"][r] == t
    answered = right[test][p[test] >= t]
    assert judge["held_error"][r] == pytest.approx(1 - answered.mean(), abs=1e-15)
    wrong = int((1 - answered).sum())  # significantly above alpha on the held half: a one-sided binomial test
    assert judge["above"][r] == (scipy_stats.binom.sf(wrong - 1, answered.size, 0.2) <= 0.1)
    assert judge["significantly_above"] == np.mean(judge["above"]) <= 0.1
    # a source that carries no information: no threshold on any half, said so
    coin = data.with_source("coin", np.full(len(data), 0.5), "given")
    none = abstention_resplits(coin, sources=["coin"], resplits=3, abstention_alpha=0.05)
    assert none["sources"]["coin"]["verdict"] == "no threshold" and none["sources"]["coin"]["holds"] is None
    with pytest.raises(ValueError, match="`sources`"):
        abstention_resplits(data, sources=["nope"])


def test_significantly_above_alpha_is_the_upper_tail_from_the_held_count_itself(tmp_path):
    """Each re-split's ``above``: k wrong of n answered on the held half, P(Binomial(n, alpha) >= k) <= delta.

    Checked against exact fractions on every re-split, among which some lie between the tails from k and
    from k + 1 (P(X > k) <= delta < P(X >= k)): there the one-off tail would call the error significant.
    """
    data = read_generations(write_jsonl(tmp_path / "gen.jsonl", answers(60)))  # "overconfident": no answer without
    alpha, delta, size = 0.3, 0.3, 60 - 60 // 2
    row = abstention_resplits(
        data, sources=["overconfident"], resplits=20, abstention_alpha=alpha, abstention_delta=delta
    )["sources"]["overconfident"]

    def upper(k, n):
        return sum(exact_pmf(j, n, alpha) for j in range(k, n + 1))

    between = 0
    for r in np.flatnonzero(~np.isnan(row["held_error"])):
        n = round(row["held_answered"][r] * size)
        k = round(row["held_error"][r] * n)
        assert row["above"][r] == (upper(k, n) <= delta), (r, k, n)
        between += upper(k + 1, n) <= delta < upper(k, n)
    assert between >= 2  # the test tells the two tails apart
    assert row["significantly_above"] == np.nansum(row["above"]) / row["fitted"]


def test_the_command_takes_the_levels_and_prints_the_sentence(tmp_path, capsys):
    file = write_jsonl(tmp_path / "gen.jsonl", answers(400))
    argv = ["generations", "--answers", str(file), "--confidence", "judge", "--abstention-alpha", "0.25"]
    assert main([*argv, "--resplits", "4"]) == 0
    text = capsys.readouterr().out
    assert "Abstention with a guarantee" in text and "error <= 25% with 90% confidence" in text
    assert "- judge, held out: error <= 25% on the other half in" in text
    pooled = next(line for line in text.splitlines() if line.startswith("| pooled | judge |"))
    entry = generations_report(read_generations(file), sources=["judge"], abstention_alpha=0.25)
    entry = entry["pooled"]["sources"]["judge"]["abstention"]
    assert pooled.endswith(f"| {entry['threshold']:g} | {entry['answered']:.0%} |")  # beside AURC, in the table
    assert main([*argv, "--resplits", "0", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["pooled"]["sources"]["judge"]["abstention"]["alpha"] == 0.25 and "abstention_resplits" not in got
    assert main([*argv, "--abstention-delta", "1"]) == 2
    assert "--abstention-delta must lie in (0, 1)" in capsys.readouterr().err


def test_the_default_grid_is_fixed_and_fine():
    assert GRID[0] == 1.0 and GRID[-1] == 0.0 and len(GRID) == 1001 and math.isclose(GRID[1], 0.999)
