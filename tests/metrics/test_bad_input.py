"""Every public door of the functional core walked through one catalogue of bad inputs (issue 14).

Each case ends in a ``ValueError`` whose message names the argument, or, where the input is
legitimate after all, in the number a plain computation gives. The doors: each functional
metric, ``reliability_bins``, ``calibration_report``, the accumulator (constructor, ``update``,
``merge``) and the bootstrap.
"""

import pickle
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import calibkit
from calibkit.metrics import METRICS, CalibrationAccumulator
from calibkit.metrics.bootstrap import bootstrap_intervals
from calibkit.metrics.registry import HELD, metric
from calibkit.metrics.statistics import CalibrationStatistics

P = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.5, 0.25, 0.25]])
Y = np.array([0, 1, 2, 1])


def _report(probs, labels, **kw):
    return calibkit.calibration_report(probs, labels, **kw)


def _accumulate(probs, labels, **kw):
    return CalibrationAccumulator(**kw).update(probs, labels).compute()


def _bootstrap(probs, labels, **kw):
    return bootstrap_intervals(probs, labels, bootstrap=5, **kw)


# Every door that takes (probs, labels, from_logits=, ignore_index=).
DOORS = {name: getattr(calibkit, name) for name in METRICS}
DOORS.update(reliability_bins=calibkit.reliability_bins, calibration_report=_report)
DOORS.update(accumulator=_accumulate, bootstrap=_bootstrap, score_decomposition=calibkit.score_decomposition)
# asked for by name, rows held: smECE has its function; the Brier decomposition's columns are score_decomposition's
DOORS.update({name: getattr(calibkit, name) for name in HELD if hasattr(calibkit, name)})
assert all(hasattr(calibkit, name) or metric(name).module == "score_decomposition" for name in HELD)
DOORS.update(smooth_reliability=calibkit.smooth_reliability)

BAD_INPUT = {
    "nan": (np.array([[0.7, np.nan, 0.3], [0.1, 0.8, 0.1]]), [0, 1], {}, r"`probs` contains NaN or inf at position 0"),
    "inf": (np.array([[0.7, 0.3, 0.0], [np.inf, 0.0, 0.0]]), [0, 1], {}, r"`probs` contains NaN or inf at position 1"),
    "nan logits": (np.array([[2.0, np.nan]]), [0], {"from_logits": True}, r"`probs \(logits.*NaN"),
    "-inf logits": (np.array([[2.0, -np.inf]]), [0], {"from_logits": True}, r"`probs \(logits.*NaN or inf"),
    "above 1": (np.array([[1.2, -0.2], [0.5, 0.5]]), [0, 1], {}, r"`probs` has a value outside \[0, 1\]"),
    "row sum": (np.array([[0.6, 0.6], [0.5, 0.5]]), [0, 1], {}, r"`probs` rows must sum to 1"),
    "binary above 1": (np.array([1.5, 0.5]), [0, 1], {}, r"`probs` has a value outside \[0, 1\]"),
    "object probs": (np.array([[0.5, 0.5]], dtype=object), [0], {}, r"`probs` must be a float array"),
    "string probs": (np.array([["a", "b"]]), [0], {}, r"`probs` must be a float array"),
    "complex probs": (np.array([[0.5 + 0j, 0.5]]), [0], {}, r"`probs` must be a float array"),
    "ragged probs": ([[0.5, 0.5], [1.0]], [0, 1], {}, r"`probs` could not be read as an array"),
    "4-d probs": (np.zeros((2, 2, 2, 2)), np.zeros((2, 2, 2), int), {}, r"`probs` must have shape"),
    "one class": (np.ones((2, 1)), [0, 0], {}, r"`probs` has shape \(2, 1\): the last axis must hold >= 2"),
    "label range": (P, [0, 3, 1, 1], {}, r"`labels` must lie in \[0, 3\).*got 3 at position 1"),
    "negative label": (P, [0, -1, 1, 1], {}, r"`labels` must lie in \[0, 3\) or equal ignore_index=-100; got -1"),
    "uint64 label": (
        P,
        np.array([0, 2**64 - 100, 1, 1], dtype=np.uint64),
        {},
        r"`labels` has the value 18446744073709551516 at position 1",
    ),
    "1e20 label": (P, np.array([0.0, 1e20, 1.0, 1.0]), {}, r"`labels` has the value 1e\+20 at position 1"),
    "nan label": (P, np.array([0.0, np.nan, 1.0, 1.0]), {}, r"`labels` must be integers, got nan at position 1"),
    "fraction label": (P, [0.0, 1.5, 2.0, 1.0], {}, r"`labels` must be integers, got the value 1\.5"),
    "string labels": (P, ["a", "b", "c", "d"], {}, r"`labels` must be integers, got dtype"),
    "object labels": (P, np.array([0, None, 1, 1], dtype=object), {}, r"`labels` must be integers, got dtype object"),
    "big int labels": (P, [0, 2**70, 1, 1], {}, r"`labels` must be integers, got dtype object"),
    "label shape": (P, [0, 1], {}, r"`labels` has shape \(2,\) but `probs` of shape \(4, 3\) needs"),
    "token label shape": (np.full((2, 3, 2), 0.5), np.zeros((2, 2), int), {}, r"`labels` has shape \(2, 2\)"),
    "empty": (np.zeros((0, 3)), np.zeros(0, int), {}, r"`labels`: no sample to evaluate"),
    "all ignored": (P, [-100] * 4, {}, r"`labels`: no sample to evaluate"),
    "from_logits string": (P, Y, {"from_logits": "no"}, r"`from_logits` must be True or False, got 'no'"),
    "ignore_index huge": (P, Y, {"ignore_index": 2**70}, r"`ignore_index` must fit in int64"),
    "ignore_index string": (P, Y, {"ignore_index": "x"}, r"`ignore_index` must be an integer"),
    "ignore_index float": (P, Y, {"ignore_index": -100.0}, r"`ignore_index` must be an integer"),
    "ignore_index bool": (P, Y, {"ignore_index": True}, r"`ignore_index` must be an integer"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
@pytest.mark.parametrize("door", sorted(DOORS))
def test_every_door_refuses_bad_input_naming_the_argument(door, case):
    probs, labels, kwargs, pattern = BAD_INPUT[case]
    with pytest.raises(ValueError, match=pattern):
        DOORS[door](probs, labels, **kwargs)


# (door, setting, value, pattern): each door's own keyword arguments.
BAD_SETTINGS = [
    *[
        (d, "n_bins", v, r"`n_bins` must be an integer")
        for d in ("ece", "mce", "cece", "msece", "wsece")
        for v in (0, -1, "3", 2.5, True, 10**7)
    ],
    *[(d, "n_bins", 0, r"`n_bins` must be an integer") for d in ("subset_ece", "ece_variance", "reliability_bins")],
    *[(d, f"{d}_bins", 0, rf"`{d}_bins` must be an integer") for d in ("sce", "rbece", "fce", "esce")],
    ("ace", "ace_ranges", 0, r"`ace_ranges` must be an integer"),
    ("ace", "ace_ranges", "15", r"`ace_ranges` must be an integer"),
    ("rbece", "theta", -1, r"`theta` must be a number >= 0"),
    ("rbece", "theta", float("nan"), r"`theta` must be a number >= 0"),
    ("rbece", "theta", "40", r"`theta` must be a number >= 0"),
    ("nll", "eps", 0, r"`eps` must be a number in \(0, 1\)"),
    ("ecd", "eps", 2.0, r"`eps` must be a number in \(0, 1\)"),
    ("nll", "eps", -1, r"`eps` must be a number in \(0, 1\), got -1"),
    ("nll", "eps", "1e-6", r"`eps` must be a number in \(0, 1\)"),
    ("calibration_report", "num_threads", "2", r"`num_threads` must be an integer >= 1, got '2'"),
    ("calibration_report", "num_threads", 0, r"`num_threads` must be an integer >= 1"),
    ("calibration_report", "metrics", ["nope"], r"`metrics` has unknown names \['nope'\]"),
    ("calibration_report", "metrics", [], r"`metrics` is empty"),
    ("calibration_report", "metrics", 3, r"`metrics` must be a metric name or an iterable"),
    *[
        ("calibration_report", s, 0, rf"`{s}` must be an integer")
        for s in ("ace_ranges", "sce_bins", "rbece_bins", "fce_bins", "esce_bins")
    ],
    ("bootstrap", "bootstrap", 0, r"`bootstrap` must be an integer >= 1"),
    ("bootstrap", "bootstrap", 10**9, r"`bootstrap` must be an integer in \[0, 100000\]"),
    ("bootstrap", "bootstrap", "5", r"`bootstrap` must be an integer"),
    ("bootstrap", "level", 1.0, r"`level` must lie in \(0, 1\)"),
    ("bootstrap", "level", "0.9", r"`level` must be a number"),
    ("bootstrap", "seed", -1, r"`seed` must be an integer >= 0"),
    ("bootstrap", "seed", "x", r"`seed` must be an integer >= 0"),
    ("bootstrap", "max_blocks", 0, r"`max_blocks` must be an integer"),
]


@pytest.mark.parametrize("door, setting, value, pattern", BAD_SETTINGS)
def test_out_of_range_settings_name_the_argument(door, setting, value, pattern):
    call = bootstrap_intervals if door == "bootstrap" else DOORS[door]
    with pytest.raises(ValueError, match=pattern):
        call(P, Y, **{setting: value})


@pytest.mark.parametrize(
    "setting, value, pattern",
    [
        ("from_logits", "no", r"`from_logits` must be True or False"),
        ("ignore_index", 2**70, r"`ignore_index` must fit in int64"),
        ("num_threads", "2", r"`num_threads` must be an integer >= 1"),
        ("n_bins", 0, r"`n_bins`"),
        ("theta", -1, r"`theta`"),
        ("eps", 0, r"`eps`"),
        ("metrics", ["ece", "nope"], r"`metrics` has unknown names \['nope'\]"),
        ("metrics", [], r"`metrics` is empty"),
    ],
)
def test_accumulator_validates_settings_at_construction(setting, value, pattern):
    with pytest.raises(ValueError, match=pattern):
        CalibrationAccumulator(**{setting: value})


def test_a_metric_name_string_is_one_metric():
    """``metrics="ece"`` was read as the letters e, c, e."""
    assert CalibrationAccumulator(metrics="ece").metrics == ("ece",)
    assert set(calibkit.calibration_report(P, Y, metrics="cece")) >= {"cece", "accuracy", "n"}
    assert "ece" not in calibkit.calibration_report(P, Y, metrics="cece")


# -- legitimate input that looks odd: the number of a plain computation ---------------------------


def plain_ece(probs, labels, n_bins=15):
    """Top-label ECE by a loop, the obviously correct reference."""
    total, bins = len(labels), {}
    for p, y in zip(np.asarray(probs, dtype=np.float64), labels):
        conf = p.max()
        b = max(int(np.ceil(conf * n_bins)) - 1, 0)
        count, s_conf, s_acc = bins.get(b, (0, 0.0, 0.0))
        bins[b] = (count + 1, s_conf + conf, s_acc + float(np.argmax(p) == y))
    return sum(abs(a - c) for _, c, a in bins.values()) / total


@pytest.mark.parametrize(
    "labels",
    [
        np.array([0, 1, 2, 1], dtype=np.uint8),
        np.array([0, 1, 2, 1], dtype=np.uint64),
        np.array([0, 1, 2, 1], dtype=np.int16),
        np.array([0.0, 1.0, 2.0, 1.0]),
        np.array([0.0, 1.0, 2.0, 1.0], dtype=np.float32),
        [0, 1, 2, 1],
    ],
)
def test_label_dtypes_that_hold_integers_give_the_plain_number(labels):
    assert calibkit.ece(P, labels) == pytest.approx(plain_ece(P, [0, 1, 2, 1]), abs=1e-15)


def test_ignore_index_at_int64_edges_is_honoured():
    for ignore in (2**63 - 1, -(2**63)):
        labels = np.array([0, ignore, 2, 1], dtype=np.int64)
        expected = plain_ece(P[[0, 2, 3]], [0, 2, 1])
        assert calibkit.ece(P, labels, ignore_index=ignore) == pytest.approx(expected, abs=1e-15)
    with pytest.raises(ValueError, match=r"`labels` must lie in \[0, 3\).*got 9223372036854775807 at position 1"):
        calibkit.ece(P, np.array([0, 2**63 - 1, 2, 1]))


# -- the accumulator: nothing lost, nothing counted twice ----------------------------------------


def test_failed_update_leaves_the_state_unchanged():
    acc = CalibrationAccumulator(metrics=["ece"]).update(P, Y)
    before = acc.compute()
    for probs, labels in [(P * 2, Y), (P, [0, 5, 1, 1]), (np.full((2, 4), 0.25), [0, 1])]:
        with pytest.raises(ValueError):
            acc.update(probs, labels)
    assert acc.compute() == before


def test_merge_refuses_itself_and_other_settings():
    acc = CalibrationAccumulator(metrics=["ece"]).update(P, Y)
    with pytest.raises(ValueError, match=r"`other` is this accumulator"):
        acc.merge(acc)
    with pytest.raises(ValueError, match=r"`other` was built with different settings: \['n_bins'\]"):
        acc.merge(CalibrationAccumulator(metrics=["ece"], n_bins=10))
    with pytest.raises(ValueError, match=r"`other` must be a CalibrationAccumulator"):
        acc.merge({"n": 4})
    assert acc.compute()["n"] == 4
    copy = pickle.loads(pickle.dumps(acc))  # a snapshot merges correctly
    assert acc.merge(copy).compute()["n"] == 8


def test_concurrent_updates_lose_nothing(monkeypatch):
    """8 threads x 25 updates of 4,000 rows: n was 424,000 to 648,000 of 800,000 without a lock.
    A slow ``+`` (a sleep inside it) makes the read-add-write window wide enough to hit every time."""
    add = CalibrationStatistics.__add__

    def slow_add(self, other):
        time.sleep(0.001)
        return add(self, other)

    monkeypatch.setattr(CalibrationStatistics, "__add__", slow_add)
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(4), 4000)
    labels = rng.integers(0, 4, 4000)
    acc = CalibrationAccumulator(metrics=["ece", "cece"])
    reference = CalibrationAccumulator(metrics=["ece", "cece"])

    def work():
        for _ in range(25):
            acc.update(probs, labels)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for _ in range(200):
        reference.update(probs, labels)
    got, expected = acc.compute(), reference.compute()
    assert got["n"] == 800_000
    assert got["ece"] == pytest.approx(expected["ece"], rel=1e-12)
    assert got["cece"] == pytest.approx(expected["cece"], rel=1e-12)


# -- hypothesis: one bad value anywhere is found and reported where it is ------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 40),
    k=st.sampled_from([2, 3, 4, 12, 20]),  # short rows per class count, any count, long rows
    row=st.integers(0, 39),
    col=st.integers(0, 19),
    bad=st.sampled_from([np.nan, np.inf, -np.inf, -0.5, 1.5]),
    from_logits=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_one_bad_value_is_reported_at_its_row(n, k, row, col, bad, from_logits, seed):
    rng = np.random.default_rng(seed)
    row, col = row % n, col % k
    values = rng.normal(size=(n, k)) if from_logits else rng.dirichlet(np.ones(k), n)
    labels = rng.integers(0, k, n)
    values[row, col] = bad
    if from_logits and np.isfinite(bad):
        assert np.isfinite(calibkit.calibration_report(values, labels, from_logits=True)["nll"])
        return
    with pytest.raises(ValueError, match=rf"`probs.* at position {row}\b"):
        calibkit.calibration_report(values, labels, from_logits=from_logits)
    with pytest.raises(ValueError, match=rf"`probs.* at position {row}\b"):
        calibkit.ece(values, labels, from_logits=from_logits)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 30),
    position=st.integers(0, 29),
    label=st.one_of(st.integers(-(2**63), -101), st.integers(-99, -1), st.integers(3, 2**63 - 1)),
    dtype=st.sampled_from([np.int64, np.float64]),
)
def test_one_bad_label_is_reported_with_its_value_and_position(n, position, label, dtype):
    rng = np.random.default_rng(n)
    probs = rng.dirichlet(np.ones(3), n)
    labels = rng.integers(0, 3, n).astype(dtype)
    position %= n
    labels[position] = label
    shown = int(labels[position])  # float64 rounds a big integer: the value the array holds
    if dtype == np.float64 and not -(2.0**63) <= float(labels[position]) < 2.0**63:
        pattern = rf"`labels` has the value .* at position {position}, which does not fit in int64"
    else:
        pattern = rf"`labels` must lie in \[0, 3\).*got {shown} at position {position}\b"
    with pytest.raises(ValueError, match=pattern):
        calibkit.ece(probs, labels)


def test_a_bad_row_after_good_rows_is_refused_without_touching_memory():
    """sce() on a block whose second row holds inf scattered the first row with uninitialised bin
    indices: a segfault (one run in a few; 3000 calls crashed every time). In a fresh process so
    that a crash fails this test instead of killing the session."""
    import subprocess
    import sys

    script = """
import numpy as np, calibkit
cases = [
    (np.array([[0.7, 0.3, 0.0], [np.inf, 0.0, 0.0]]), [0, 1], {}),
    (np.array([[0.7, 0.3, 0.0]] * 50 + [[0.5, np.nan, 0.5]]), [0] * 51, {"n_bins": 7}),
    (np.array([[2.0, 0.0, 1.0]] * 9 + [[np.nan, 0.0, 0.0]]), [1] * 10, {"from_logits": True}),
]
for _ in range(1000):
    for probs, labels, kwargs in cases:
        try:
            calibkit.sce(probs, labels, **kwargs)
        except ValueError:
            pass
        else:
            raise SystemExit("no error")
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
