"""The torch engine against the compiled kernels, and the "auto" choice between them.

CI has no GPU: the torch code path that bins CUDA tensors in place runs here on CPU tensors and
numpy arrays, and must give every metric of every input kind to 1e-12 of the kernels.
"""

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest
import torch

import calibkit
from calibkit.metrics.accumulator import CalibrationAccumulator
from calibkit.metrics.backends import get_backend, set_backend, use_backend
from calibkit.metrics.bootstrap import bootstrap_intervals
from calibkit.metrics.engines import auto, fill_statistics
from calibkit.metrics.registry import plan
from calibkit.metrics.settings import CalibrationSettings
from calibkit.metrics.validation import prepare
from tests.conftest import make_data

KINDS = [
    ("multiclass", False, 4),
    ("multiclass", True, 4),
    ("multiclass", True, 20),  # long rows: the kernels' other code path
    ("token", True, 5),  # (N, L, K) with -100 labels and -100 padding
    ("token", False, 3),
    ("binary", False, 2),
    ("binary", True, 2),
]

FUNCTIONS = [
    "ece",
    "mce",
    "ece_l2",
    "ece_l2_debiased",
    "ace",
    "sce",
    "cece",
    "msece",
    "wsece",
    "ece_variance",
    "rbece",
    "fce",
    "overconfidence",
    "ecd",
    "esce",
    "brier",
    "nll",
]


def close(a, b, rtol=1e-12):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    both_nan = np.isnan(a) & np.isnan(b)
    return bool(np.all(both_nan | (np.abs(a - b) <= rtol * np.maximum(np.abs(b), 1e-300))))


def both(fn):
    with use_backend("torch"):
        a = fn()
    with use_backend("numba"):
        b = fn()
    return a, b


@pytest.mark.parametrize("kind,from_logits,k", KINDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_report_torch_equals_kernels(kind, from_logits, k, dtype):
    probs, labels = make_data(3, kind, n=3000, num_classes=k, from_logits=from_logits)
    probs = probs.astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, b = both(lambda: calibkit.calibration_report(probs, labels, from_logits=from_logits))
    assert a.keys() == b.keys()
    for key in b:
        assert close(a[key], b[key]), (key, a[key], b[key])
    assert a["ace_error_bound"] == 0.0


@pytest.mark.parametrize("kind,from_logits,k", KINDS)
def test_every_function_torch_equals_kernels(kind, from_logits, k):
    probs, labels = make_data(4, kind, n=800, num_classes=k, from_logits=from_logits)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in FUNCTIONS:
            fn = getattr(calibkit, name)
            a, b = both(lambda fn=fn: fn(probs, labels, from_logits=from_logits))
            assert close(a, b), (name, a, b)
        for settings in (CalibrationSettings(n_bins=7, ace_ranges=3, sce_bins=40, fce_bins=4), CalibrationSettings()):
            a, b = both(
                lambda s=settings: calibkit.calibration_report(
                    probs, labels, settings=s.replace(from_logits=from_logits)
                )
            )
            assert all(close(a[key], b[key]) for key in b)


def test_torch_tensors_and_exact_ace_ties():
    rng = np.random.default_rng(5)
    p = np.round(rng.random((4000, 3)), 1) + 0.1  # many ties: ACE boundaries split tie groups
    p = p / p.sum(axis=1, keepdims=True)
    y = rng.integers(0, 3, 4000)
    a, b = both(lambda: calibkit.ace(torch.from_numpy(p), torch.from_numpy(y), ace_ranges=7))
    assert close(a, b)
    # ties share their group's mean outcome: the order of the samples does not matter
    order = rng.permutation(4000)
    with use_backend("torch"):
        assert close(calibkit.ace(p[order], y[order], ace_ranges=7), a)


def test_bad_input_same_error_on_both_engines():
    cases = [
        (np.array([[0.5, 0.6], [0.5, 0.5]]), [0, 1], {}),
        (np.array([[0.5, 0.5], [np.nan, 1.0]]), [0, 1], {}),
        (np.array([[0.5, 0.5], [1.5, -0.5]]), [0, 1], {}),
        (np.array([[0.5, 0.5], [0.2, 0.8]]), [0, 7], {}),
        (np.array([[1.0, np.inf], [0.2, 0.8]]), [0, 1], {"from_logits": True}),
        (np.array([0.2, 1.2]), [0, 1], {}),
        (np.array([0.2, np.nan]), [0, 1], {"from_logits": True}),
    ]
    for probs, labels, kw in cases:
        messages = []
        for engine in ("torch", "numba"):
            with use_backend(engine), pytest.raises(ValueError) as info:
                calibkit.calibration_report(probs, labels, **kw)
            messages.append(str(info.value))
        assert messages[0] == messages[1]
    # masked rows are never read, whatever they hold
    probs = np.array([[np.nan, 7.0], [0.3, 0.7]])
    a, b = both(lambda: calibkit.ece(probs, [-100, 1]))
    assert a == b


def test_bootstrap_and_accumulator_on_torch():
    probs, labels = make_data(6, "token", n=300, num_classes=4, from_logits=True)
    settings = CalibrationSettings(from_logits=True)
    a, b = both(lambda: bootstrap_intervals(probs, labels, metrics=["ece", "sce"], settings=settings, bootstrap=20))
    assert a["n_blocks"] == b["n_blocks"] > 100
    assert all(close(a["intervals"][m], b["intervals"][m]) for m in b["intervals"])

    def stream():
        acc = CalibrationAccumulator(from_logits=True)
        for i in range(0, 300, 70):
            acc.update(probs[i : i + 70], labels[i : i + 70])
        return acc.compute()

    a, b = both(stream)
    assert all(close(a[key], b[key]) for key in b)


def test_device_resident_accumulator_state_adds_and_merges():
    """The streaming path for CUDA tensors, run on CPU tensors: the sums stay tensors until compute()."""
    probs, labels = make_data(7, "multiclass", n=600, num_classes=4, from_logits=True)
    settings = CalibrationSettings(from_logits=True)
    names = calibkit.METRICS
    device_acc = CalibrationAccumulator(settings=settings)
    for i in range(0, 600, 200):
        prep = prepare(
            torch.from_numpy(probs[i : i + 200]),
            torch.from_numpy(labels[i : i + 200]),
            from_logits=True,
            ignore_index=-100,
            next_token=False,
        )
        sums = plan(names, settings)
        device_acc.add_statistics(
            fill_statistics(prep, sums, ignore_index=-100, engine="torch", keep_on_device=True).statistics
        )
    assert isinstance(device_acc.statistics.scalars, torch.Tensor)
    host = CalibrationAccumulator(settings=settings).update(probs, labels)
    a, b = device_acc.compute(), host.compute()
    assert all(close(a[key], b[key]) for key in b)
    merged = CalibrationAccumulator(settings=settings).update(probs[:100], labels[:100]).merge(device_acc)
    twice = CalibrationAccumulator(settings=settings).update(probs[:100], labels[:100]).update(probs, labels)
    assert all(close(merged.compute()[key], twice.compute()[key]) for key in b)


def test_device_labels_checked_like_host_labels():
    from calibkit.metrics.validation import _device_labels

    assert _device_labels(torch.tensor([[1, 2]], dtype=torch.uint8), "cpu").dtype == torch.int64
    assert _device_labels(torch.tensor([1.0, 2.0]), "cpu").tolist() == [1, 2]
    with pytest.raises(ValueError, match="labels"):
        _device_labels(torch.tensor([1.0, 2.5]), "cpu")
    with pytest.raises(ValueError, match="labels"):
        _device_labels(torch.tensor([1.0, float("nan")]), "cpu")


def test_backend_choice_is_validated_and_scoped():
    assert get_backend() == "numba"  # tests/conftest.py
    with pytest.raises(ValueError, match="backend"):
        set_backend("gpu")
    with pytest.raises(ValueError, match="backend"):
        with use_backend("cuda"):
            pass
    with use_backend("torch"):
        assert get_backend() == "torch"
        with use_backend("auto"):
            assert get_backend() == "auto"
        assert get_backend() == "torch"
    assert get_backend() == "numba"


def test_auto_answers_on_torch_then_switches_to_the_compiled_kernels(tmp_path, monkeypatch):
    """A kind's first call runs on torch while a warm-up compiles in the background; then numba."""
    monkeypatch.setattr("calibkit._numba.cache.cache_folder", lambda: tmp_path)
    prep = prepare(np.array([[0.3, 0.7]]), [1], from_logits=False, ignore_index=-100, next_token=False)
    key = ("test-only", os.getpid(), id(tmp_path))
    ran = []
    with use_backend("auto"):
        assert auto.engine(prep, key, lambda: ran.append(get_backend())) == "torch"
        assert auto.wait_until_ready(timeout=30)
        assert ran == ["numba"]  # the warm-up itself runs the kernels
        assert auto.engine(prep, key, lambda: ran.append("again")) == "numba"
        assert ran == ["numba"]
    marker = auto._marker(key)
    assert marker is not None and marker.exists() and marker.parent == tmp_path
    auto._READY.discard(key)  # as in a new process: the marker says the cache holds them
    with use_backend("auto"):
        assert auto.engine(prep, key, lambda: ran.append("never")) == "numba"
    # a failing warm-up leaves torch answering, never the caller broken, and is not retried
    bad = ("test-only-failing", os.getpid())
    with use_backend("auto"):
        assert auto.engine(prep, bad, lambda: 1 / 0) == "torch"
        assert auto.wait_until_ready(timeout=30)
        assert auto.engine(prep, bad, lambda: 1 / 0) == "numba"  # compiles in the caller, as before auto
    with use_backend("numba"):
        assert auto.engine(prep, ("x",), lambda: None) == "numba"
    # on much data the compile pays for itself: no torch detour
    monkeypatch.setattr(auto, "COLD_TORCH_MAX_ENTRIES", 1)
    big = ("test-only-big", os.getpid())
    with use_backend("auto"):
        assert auto.engine(prep, big, lambda: ran.append("big")) == "numba"
    assert big not in auto._SCHEDULED


def test_auto_waits_for_a_compile_in_flight_when_that_is_quicker_than_torch(tmp_path, monkeypatch):
    """Ski rental: a call waits for the running compile when the compile ends before this call
    would on torch, or when its kind has already spent on torch what the compile still needs."""
    monkeypatch.setattr("calibkit._numba.cache.cache_folder", lambda: tmp_path)
    prep = prepare(
        np.full((1000, 2), 0.5), np.zeros(1000, dtype=np.int64), from_logits=False, ignore_index=-100, next_token=False
    )
    monkeypatch.setattr(auto, "_COMPILED_IN", [60.0])  # compiles seen so far took a minute
    with use_backend("auto"):
        for name, rate, spent, expected in [
            ("cheap-torch", 1e-9, 0.0, "torch"),  # a torch call costs 1 us, the compile a minute
            ("dear-torch", 1.0, 0.0, "numba"),  # a torch call would cost 1000 s
            ("spent-enough", 1e-9, 100.0, "numba"),  # 100 s already spent on torch for this kind
        ]:
            key = ("test-only-wait", name, os.getpid(), id(tmp_path))
            started, release = threading.Event(), threading.Event()

            def warm(started=started, release=release):
                started.set()
                release.wait(30)

            assert auto.engine(prep, key, warm) == "torch"  # the first call schedules the compile
            assert started.wait(30)
            monkeypatch.setitem(auto._TORCH_RATE, key, rate)
            monkeypatch.setitem(auto._TORCH_SPENT, key, spent)
            threading.Timer(0.3, release.set).start()  # the compile ends 0.3 s from now
            begin = time.monotonic()
            assert auto.engine(prep, key, warm) == expected, name
            waited = time.monotonic() - begin
            assert (waited >= 0.25) == (expected == "numba"), (name, waited)
            assert auto.wait_until_ready(timeout=30, keys={key})


EXIT_SCRIPT = """
import numpy as np, calibkit
from calibkit.metrics.engines import auto
chosen = []
engine = auto.engine
auto.engine = lambda *a: chosen.append(engine(*a)) or chosen[-1]
calibkit.ece(np.array([[0.2, 0.8], [0.6, 0.4]]), np.array([1, 1]))
print(chosen[0])
"""


@pytest.mark.slow  # processes of their own, each importing torch: the default run's time, in .ci/run's slow pass
def test_a_process_that_exits_during_its_compile_leaves_it_cached(tmp_path):
    """The first call of a short script runs on torch and the script ends at once: its exit waits
    for the compile, so the next process's first call runs on the kernels (never pays twice)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "CALIBKIT_BACKEND": "auto"}
    run = [sys.executable, "-c", EXIT_SCRIPT]
    first = subprocess.run(run, env=env, capture_output=True, text=True, check=True, timeout=600)
    second = subprocess.run(run, env=env, capture_output=True, text=True, check=True, timeout=600)
    assert (first.stdout.split()[-1], second.stdout.split()[-1]) == ("torch", "numba")


def edge_logits(seed: int = 0, n: int = 600, total: int = 15):
    """Logits ``log(counts)`` with counts summing to ``total``: every softmax value is k/total, on a
    bin edge of 15 bins (and of 5, 3; 0.6 = 9/15 also of 10), where the two engines' softmax
    arithmetic (SLEEF's exp in the kernels, torch's exp) differs by an ulp or two."""
    rng = np.random.default_rng(seed)
    first = rng.integers(1, total - 1, n)
    second = np.array([rng.integers(1, total - f) for f in first])  # one draw a row: small n
    counts = np.stack([first, second, total - first - second], axis=1).astype(np.float64)
    return np.log(counts), rng.integers(0, 3, n)


REPORT_SCRIPT = """
import json, numpy as np, calibkit
from calibkit.metrics.engines import auto
chosen = []
engine = auto.engine
auto.engine = lambda *a: chosen.append(engine(*a)) or chosen[-1]
z, y = np.load({path!r})["z"], np.load({path!r})["y"]
settings = dict(from_logits=True, n_bins=10, sce_bins=5, rbece_bins=15, theta=5, esce_bins=15)
first = calibkit.calibration_report(z, y, **settings)
assert auto.wait_until_ready(timeout=600)
second = calibkit.calibration_report(z, y, **settings)
print(json.dumps({{"engines": chosen, "first": first, "second": second}}, default=lambda v: np.asarray(v).tolist()))
"""


@pytest.mark.slow  # processes of their own, each importing torch: the default run's time, in .ci/run's slow pass
def test_cold_process_first_call_runs_on_torch_and_gives_the_kernels_numbers(tmp_path):
    """A fresh process with an empty numba cache: the first report runs on torch without waiting for
    a compile, the next on the kernels once compiled, and both give the same numbers, also for
    logits whose softmax lies on bin edges (MCE moved by 1.7e-2 across the switch before the
    engines decided edges alike). ACE is left out: see SPEC.md on near-ties."""
    z, y = edge_logits(5)
    np.savez(tmp_path / "data.npz", z=z, y=y)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "CALIBKIT_BACKEND": "auto"}
    script = REPORT_SCRIPT.format(path=str(tmp_path / "data.npz"))
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True, timeout=900
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["engines"][0] == "torch" and result["engines"][-1] == "numba"
    here = calibkit.calibration_report(
        z, y, from_logits=True, n_bins=10, sce_bins=5, rbece_bins=15, theta=5, esce_bins=15
    )
    for key in here:
        if key.startswith("ace"):
            continue
        assert close(result["first"][key], here[key]), (key, result["first"][key], here[key])
        assert close(result["second"][key], here[key]), (key, result["second"][key], here[key])


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_engines_give_the_same_numbers_on_bin_edges(dtype):
    z, y = edge_logits(5)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    for values, kw in ((z.astype(dtype), {"from_logits": True}), (p.astype(dtype), {})):
        for settings in ({}, {"n_bins": 10, "sce_bins": 5, "rbece_bins": 15, "theta": 5, "esce_bins": 15}):
            a, b = both(lambda v=values, k=kw, s=settings: calibkit.calibration_report(v, y, **k, **s))
            bad = {key: (a[key], b[key]) for key in b if not key.startswith("ace") and not close(a[key], b[key])}
            assert not bad, bad


def test_all_reduce_sums_the_statistics_of_every_process(tmp_path):
    """torch.distributed (gloo, 2 processes): all_reduce gives each the statistics of all the data."""
    script = textwrap.dedent(
        f"""
        import os, sys, json
        import numpy as np, torch, torch.distributed as dist
        import calibkit
        rank = int(sys.argv[1])
        dist.init_process_group("gloo", init_method="file://{tmp_path}/rendezvous", rank=rank, world_size=2)
        rng = np.random.default_rng(0)
        z = rng.normal(size=(400, 3)); y = rng.integers(0, 3, 400)
        acc = calibkit.CalibrationAccumulator(from_logits=True)
        part = slice(rank * 200, (rank + 1) * 200)
        acc.update(torch.from_numpy(z[part]), torch.from_numpy(y[part]))
        out = acc.all_reduce().compute()
        whole = calibkit.calibration_report(z, y, from_logits=True)
        ok = all(abs(out[k] - whole[k]) <= 1e-12 * abs(whole[k]) for k in ("ece", "sce", "cece", "brier", "nll", "n"))
        # multi-label: one statistics per label, all reduced in the same collective
        zz = rng.normal(size=(400, 3)); yy = (rng.uniform(size=(400, 3)) < 0.4).astype(np.float32)
        ml = calibkit.CalibrationAccumulator(from_logits=True, multilabel=True)
        ml.update(torch.from_numpy(zz[part]), torch.from_numpy(yy[part]))
        mo, mw = ml.all_reduce().compute(), calibkit.calibration_report(zz, yy, from_logits=True, multilabel=True)
        ok = ok and mo["n"] == mw["n"] and all(abs(mo["micro"][k] - mw["micro"][k]) <= 1e-12 for k in ("ece", "nll"))
        ok = ok and np.allclose(mo["per_label"]["brier"], mw["per_label"]["brier"], rtol=1e-12)
        print(json.dumps({{"ok": ok, "n": out["n"]}}))
        dist.destroy_process_group()
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(rank)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for rank in range(2)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    for (stdout, stderr), p in zip(outputs, procs):
        assert p.returncode == 0, stderr[-2000:]
        assert '"ok": true' in stdout and '"n": 400' in stdout, stdout


def test_a_bad_calibkit_backend_variable_is_a_clear_error(tmp_path):
    env = {**os.environ, "CALIBKIT_BACKEND": "gpu"}
    script = "import calibkit\ncalibkit.ece([[0.9, 0.1]], [0])"
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "ValueError: CALIBKIT_BACKEND must be one of ['auto', 'numba', 'torch'], got 'gpu'" in proc.stderr
    np.savez(tmp_path / "p.npz", probs=np.array([[0.9, 0.1]]), labels=np.array([0]))
    cli = [sys.executable, "-m", "calibkit.cli", "report", "--predictions", str(tmp_path / "p.npz")]
    proc = subprocess.run(cli, env=env, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr == "calibkit: error: CALIBKIT_BACKEND must be one of ['auto', 'numba', 'torch'], got 'gpu'\n"


@pytest.mark.parametrize("engine", ["torch", "numba"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_sum_tolerance_boundary(engine, dtype):
    # the tolerance is 1e-3: 1 + 5e-4 passes, 1 + 2e-3 and 1.01 are refused with the tolerance named
    rng = np.random.default_rng(0)
    good = softmax_rows(rng, 500, 4).astype(dtype)
    for delta, accepted in ((5e-4, True), (-5e-4, True), (2e-3, False), (-2e-3, False), (1e-2, False)):
        p = good.copy()
        p[17, 0] = p[17, 0] + dtype(delta) if p[17, 0] + delta <= 1 else p[17, 0] - dtype(abs(delta))
        if not accepted:
            p[17] = good[17]
            p[17, int(np.argmin(p[17]))] += dtype(delta) if delta > 0 else 0
            if delta < 0:
                p[17, int(np.argmax(p[17]))] += dtype(delta)
        labels = rng.integers(0, 4, 500)
        with use_backend(engine):
            if accepted:
                assert np.isfinite(calibkit.ece(p, labels))
            else:
                with pytest.raises(ValueError, match=r"rows must sum to 1 \(tolerance 0\.001\).*position 17"):
                    calibkit.ece(p, labels)


def test_row_sums_near_the_tolerance_decided_alike_by_both_engines():
    # rows whose float64 sum lies within 1e-7 of 1 +- 1e-3, where a float32 sum could decide otherwise
    rng = np.random.default_rng(1)
    p = softmax_rows(rng, 20000, 6)
    p[:, 0] += rng.choice([1, -1], 20000) * (1e-3 + rng.uniform(-1e-7, 1e-7, 20000))
    p = np.clip(p, 0, 1)
    for dtype in (np.float64, np.float32):
        q = p.astype(dtype)
        off = np.abs(q.astype(np.float64).sum(axis=1) - 1.0)
        inside, outside = q[off <= 1e-3], q[(off > 1e-3) & (off < 1e-3 + 1e-7)]
        assert len(inside) > 1000 and len(outside) > 1000
        for engine in ("torch", "numba"):
            with use_backend(engine):
                assert np.isfinite(calibkit.ece(inside, rng.integers(0, 6, len(inside))))
                clear = softmax_rows(rng, 1000, 6).astype(dtype)  # far from the tolerance in any precision
                for row in outside[:25]:  # each just outside, after 500 good rows
                    mixed = np.concatenate([clear[:500], row[None], clear[500:]])
                    with pytest.raises(ValueError, match="at position 500 sums"):
                        calibkit.ece(mixed, rng.integers(0, 6, len(mixed)))


def softmax_rows(rng, n, k):
    z = rng.normal(size=(n, k))
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)
