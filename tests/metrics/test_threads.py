"""The kept thread pool: results do not depend on it, and a forked child does not wait on it."""

import multiprocessing
import os

import numpy as np
import pytest

import calibkit
from calibkit.metrics.engines import threads


def _data(n=140_000, k=5):  # two row ranges of at least _MIN_ROWS_PER_THREAD: the pool is used
    rng = np.random.default_rng(0)
    return rng.dirichlet(np.ones(k), n), rng.integers(0, k, n)


def _report_in_child(probs, labels, expected, queue):
    queue.put(calibkit.calibration_report(probs, labels, num_threads=2)["ace"] == expected)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_a_forked_child_runs_the_report_with_its_own_threads():
    probs, labels = _data()
    expected = calibkit.calibration_report(probs, labels, num_threads=2)["ace"]  # the parent's pool exists now
    assert any(key[0] == os.getpid() for key in threads._POOL) or threads._default_threads() == 1
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_report_in_child, args=(probs, labels, expected, queue))
    child.start()
    child.join(timeout=120)
    if child.is_alive():  # waiting on the parent's (absent) threads
        child.kill()
        pytest.fail("the report hung in a forked child")
    assert child.exitcode == 0
    assert queue.get(timeout=5) is True


def test_thread_count_does_not_change_the_report():
    probs, labels = _data()
    one = calibkit.calibration_report(probs, labels, num_threads=1)
    two = calibkit.calibration_report(probs, labels, num_threads=2)
    for name in ("ece", "ace", "sce", "ecd", "brier", "nll", "fce"):
        assert one[name] == pytest.approx(two[name], rel=1e-12, abs=1e-15), name
