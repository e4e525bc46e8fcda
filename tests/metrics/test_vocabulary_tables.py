"""Over a vocabulary the label-split tables hold a row per label that occurs (SPEC.md).

From ``COMPACT_CLASSES`` classes on, the top-label table split by true label and the class-wise
table of SCE keep rows for the labels seen, and SCE takes the other classes from their columns'
mass. Every number must equal the dense layout's (the same statistics with a row per class,
forced here by raising the threshold), at every door that adds statistics: one call, batches
with different labels, merged accumulators, bootstrap, both engines, and a bad label still named.
"""

import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import calibkit
from calibkit.metrics import _kernels as kernels
from calibkit.metrics import accumulator, validation
from calibkit.metrics.accumulator import CalibrationAccumulator
from calibkit.metrics.backends import use_backend
from calibkit.metrics.bootstrap import bootstrap_intervals
from calibkit.metrics.registry import METRICS, NEXT_TOKEN_METRICS, WIDE_CLASSES, metric_names

V = 2500  # above COMPACT_CLASSES: the compact layout


def vocabulary_batch(n=120, seed=0, labels_from=None):
    """Peaked logits over V tokens; the labels drawn from a few hundred of them (a vocabulary's look)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, V)) * 2.0
    pool = np.arange(V) if labels_from is None else labels_from
    labels = rng.choice(pool, size=n)
    logits[np.arange(n), labels] += rng.uniform(0, 9, size=n)  # often right, often confident
    labels[:5] = -100
    return logits.astype(np.float32), labels


@pytest.fixture
def dense(monkeypatch):
    """Run a function with a row per class (the layout below COMPACT_CLASSES)."""

    def run(fn):
        with monkeypatch.context() as m:
            m.setattr(kernels, "COMPACT_CLASSES", 10**9)
            return fn()

    return run


def assert_same(got, want, rtol=1e-12):
    for name in (m for m in METRICS if m in want):
        np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=1e-15, err_msg=name)


def report(logits, labels, metrics=METRICS, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return calibkit.calibration_report(logits, labels, from_logits=True, metrics=list(metrics), **kw)


@pytest.mark.parametrize("next_token", [False, True])
@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_compact_tables_give_the_dense_numbers(dense, next_token, engine):
    logits, labels = vocabulary_batch(labels_from=np.arange(0, V, 7))
    if next_token:
        logits, labels = logits[None], labels[None]
    with use_backend(engine):
        got = report(logits, labels, next_token=next_token)
        want = dense(lambda: report(logits, labels, next_token=next_token))
    assert_same(got, want)
    assert np.isnan(got["subset_ece"]).sum() == np.isnan(want["subset_ece"]).sum() > V // 2  # the unseen tokens


def test_probabilities_and_the_classwise_metrics_alone(dense):
    logits, labels = vocabulary_batch(seed=1)
    probs = torch.softmax(torch.from_numpy(logits).double(), dim=1).numpy()
    for metrics in (["sce"], ["cece", "wsece", "subset_ece"], ["ece", "sce", "ace"]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = calibkit.calibration_report(probs, labels, metrics=metrics)
            want = dense(lambda m=metrics: calibkit.calibration_report(probs, labels, metrics=m))
        assert_same(got, want)


def test_the_tables_grow_with_the_labels_not_the_vocabulary():
    logits, labels = vocabulary_batch(labels_from=np.array([3, 50, 2000]))
    acc = CalibrationAccumulator(from_logits=True).update(logits, labels)
    stats = acc.statistics
    assert stats.top_classes.tolist() == [3, 50, 2000]
    assert stats.top.shape[1] == 3
    # class-wise rows: the labelled columns and those with a value above 1/15 (at most 14 a row)
    rows = stats.classwise_classes
    assert {3, 50, 2000} <= set(rows.tolist()) and 3 < len(rows) <= 3 + 14 * len(labels)
    assert stats.classwise.shape[0] == len(rows) and stats.column_first.shape == (V, 2)
    assert stats.label_counts().shape == (V,) and stats.label_counts()[[3, 50, 2000]].sum() == stats.n


def test_the_default_report_over_many_classes_asks_for_ace_by_name():
    """Issue 55: ACE's sums are K x 1,026 buckets, so a 16,000-label head's default report cost 12.9x
    a 1,000-class one's on the same entries (benchmarks/vocabulary_cost.py). From WIDE_CLASSES classes
    on the default one-shot report leaves ACE out, as over a vocabulary, and computes it by name."""
    assert WIDE_CLASSES <= V
    logits, labels = vocabulary_batch(labels_from=np.arange(0, V, 7))
    narrow_logits = np.ascontiguousarray(logits[:, : WIDE_CLASSES - 1])
    narrow_labels = np.where(labels < WIDE_CLASSES - 1, labels, -100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wide = calibkit.calibration_report(logits, labels, from_logits=True)
        asked = calibkit.calibration_report(logits, labels, from_logits=True, metrics=["ece", "ace"])
        narrow = calibkit.calibration_report(narrow_logits, narrow_labels, from_logits=True)
    assert "ace" not in wide and "ace_error_bound" not in wide
    assert [m for m in wide if m in METRICS] == list(NEXT_TOKEN_METRICS)
    assert asked["ace"] > 0 and asked["ace_error_bound"] == 0 and asked["ece"] == wide["ece"]
    assert "ace" in narrow  # one class fewer: the report as before
    assert metric_names(None, num_classes=WIDE_CLASSES) == NEXT_TOKEN_METRICS
    assert metric_names(None, num_classes=WIDE_CLASSES - 1) == METRICS
    assert metric_names(["ace"], num_classes=10**6) == ("ace",)


def test_batches_with_other_labels_add_up_to_one_call(dense):
    """The accumulator's sum of batches whose labels differ takes the union of their rows.

    (ACE is left out: a stream's ACE is the bucketed estimate, within its stated bound.)
    """
    first, y1 = vocabulary_batch(seed=2, labels_from=np.arange(0, 1000))
    second, y2 = vocabulary_batch(seed=3, labels_from=np.arange(900, V))
    metrics = [m for m in METRICS if m != "ace"]
    acc = CalibrationAccumulator(from_logits=True, metrics=metrics).update(first, y1).update(second, y2)
    other = CalibrationAccumulator(from_logits=True, metrics=metrics).update(second, y2)
    merged = CalibrationAccumulator(from_logits=True, metrics=metrics).update(first, y1).merge(other)
    whole = np.concatenate([first, second]), np.concatenate([y1, y2])
    want = dense(lambda: report(*whole, metrics=metrics))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(acc.compute(), want, rtol=1e-9)
        assert_same(merged.compute(), want, rtol=1e-9)
    assert acc.statistics.top_classes.tolist() == np.unique(whole[1][whole[1] >= 0]).tolist()


def test_torch_sums_kept_on_the_device_add_up(dense, monkeypatch):
    """A stream of CUDA tensors keeps its sums as tensors: their union of rows is taken there.

    CPU tensors play the device tensors (CI has no GPU): the same code path.
    """
    first, y1 = vocabulary_batch(seed=4, labels_from=np.arange(0, 300))
    second, y2 = vocabulary_batch(seed=5, labels_from=np.arange(200, 700))
    metrics = [m for m in METRICS if m != "ace"]  # a stream's ACE is the bucketed estimate
    is_tensor = lambda array: isinstance(array, torch.Tensor)  # noqa: E731
    monkeypatch.setattr(accumulator, "on_device", is_tensor)
    monkeypatch.setattr(validation, "_device_tensor", lambda array: getattr(array, "device", None))
    with use_backend("torch"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        acc = CalibrationAccumulator(from_logits=True, metrics=metrics)
        for z, y in ((first, y1), (second, y2)):
            acc.update(torch.from_numpy(z), torch.from_numpy(y))
        assert isinstance(acc.statistics.top, torch.Tensor)  # the sums stayed tensors
        got = acc.compute()
    monkeypatch.undo()
    want = dense(lambda: report(np.concatenate([first, second]), np.concatenate([y1, y2]), metrics=metrics))
    assert_same(got, want, rtol=1e-9)


def test_bootstrap_intervals_match(dense):
    logits, labels = vocabulary_batch(n=60, seed=6)
    kw = {"from_logits": True, "bootstrap": 40, "metrics": ("ece", "sce", "cece", "subset_ece"), "seed": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = bootstrap_intervals(logits, labels, **kw)
        want = dense(lambda: bootstrap_intervals(logits, labels, **kw))
    assert got["n_blocks"] == want["n_blocks"] > 50  # the blocks' tables are small: no fewer blocks
    for name in ("ece", "sce", "cece"):
        np.testing.assert_allclose(got["intervals"][name], want["intervals"][name], rtol=1e-12, err_msg=name)
    for side in (0, 1):  # per class: kept for the labelled tokens only, NaN elsewhere as in the dense run
        np.testing.assert_array_equal(got["subset_ece"][side], want["subset_ece"][side])
    assert got["subset_ece"][0].shape == (V,)


def test_a_bad_label_is_still_named():
    logits, labels = vocabulary_batch(seed=7)
    labels[17] = V
    with pytest.raises(ValueError, match=r"labels.*17"):
        calibkit.calibration_report(logits, labels, from_logits=True)


def test_all_reduce_takes_the_union_of_every_process_rows(tmp_path):
    """torch.distributed (gloo, 2 processes) whose batches hold different labels: each gets the sums of all."""
    script = textwrap.dedent(
        f"""
        import json, sys, warnings
        import numpy as np, torch, torch.distributed as dist
        import calibkit
        from tests.metrics.test_vocabulary_tables import vocabulary_batch
        rank = int(sys.argv[1])
        dist.init_process_group("gloo", init_method="file://{tmp_path}/rendezvous", rank=rank, world_size=2)
        parts = [vocabulary_batch(seed=8, labels_from=np.arange(0, 900))]
        parts.append(vocabulary_batch(seed=9, labels_from=np.arange(800, 2500)))
        metrics = ["ece", "sce", "cece", "wsece", "nll"]
        warnings.simplefilter("ignore")
        acc = calibkit.CalibrationAccumulator(from_logits=True, metrics=metrics).update(*parts[rank])
        out = acc.all_reduce().compute()
        z, y = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        whole = calibkit.calibration_report(z, y, from_logits=True, metrics=metrics)
        ok = all(abs(out[k] - whole[k]) <= 1e-9 * abs(whole[k]) for k in metrics)
        print(json.dumps({{"ok": ok, "rows": int(acc.statistics.top.shape[1])}}))
        dist.destroy_process_group()
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(rank)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        for rank in range(2)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    for (stdout, stderr), p in zip(outputs, procs):
        assert p.returncode == 0, stderr[-2000:]
        assert '"ok": true' in stdout, stdout
