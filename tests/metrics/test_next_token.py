"""next_token=True: causal-LM logits (N, T, V) scored at position t against the label at t + 1.

Checked against a plain loop over the shifted tokens, against the model's own loss, at every door
that reads arrays (functions, report, accumulator, bootstrap), on both engines and on the torch
path that CUDA tensors take (run here with CPU tensors), and for the bad inputs the shift adds.
"""

import numpy as np
import pytest
import torch

import calibkit
from calibkit.metrics import validation
from calibkit.metrics.accumulator import CalibrationAccumulator
from calibkit.metrics.backends import use_backend
from calibkit.metrics.bootstrap import bootstrap_intervals
from calibkit.metrics.registry import METRICS

IGNORE = -100


def causal_batch(n=4, t=12, v=9, seed=0, masked=True):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, t, v)) * 2.0
    labels = rng.integers(0, v, size=(n, t))
    if masked:
        labels[0, :3] = IGNORE  # a prompt
        labels[n - 1, t - 4 :] = IGNORE  # padding
    return logits, labels


def assert_same_report(got, want, rtol=1e-12):
    assert set(got) >= set(want) - {"passes", "shards", "skipped", "partitions"}
    for name in (m for m in METRICS if m in want):
        np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=1e-15, err_msg=name)


def shifted_by_loop(logits, labels):
    """The tokens a causal LM's loss scores, one by one: logits at t, label at t + 1."""
    rows, targets = [], []
    for b in range(logits.shape[0]):
        for t in range(logits.shape[1] - 1):
            if labels[b, t + 1] != IGNORE:
                rows.append(logits[b, t])
                targets.append(labels[b, t + 1])
    return np.array(rows), np.array(targets)


@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_every_metric_equals_the_report_on_the_tokens_a_loop_shifts(engine):
    logits, labels = causal_batch()
    rows, targets = shifted_by_loop(logits, labels)
    with use_backend(engine):
        shifted = calibkit.calibration_report(
            logits, labels, from_logits=True, next_token=True, theta=0, metrics=METRICS
        )
        reference = calibkit.calibration_report(rows, targets, from_logits=True, theta=0)
    assert shifted["n"] == len(targets) == 4 * 11 - 2 - 4
    for name in (*METRICS, "accuracy"):
        np.testing.assert_allclose(shifted[name], reference[name], rtol=1e-12, atol=1e-15, err_msg=name)


def test_the_default_report_over_a_vocabulary_leaves_ace_to_be_asked_for():
    """ACE's sums are V x 1,026 buckets where every other metric's grow with the tokens (NEXT_TOKEN_METRICS)."""
    from calibkit.metrics.registry import NEXT_TOKEN_METRICS

    logits, labels = causal_batch()
    report = calibkit.calibration_report(logits, labels, from_logits=True, next_token=True)
    assert "ace" not in report and "ace_error_bound" not in report
    assert set(NEXT_TOKEN_METRICS) == set(METRICS) - {"ace"} and set(NEXT_TOKEN_METRICS) <= set(report)
    assert "ace" not in CalibrationAccumulator(from_logits=True, next_token=True).metrics
    asked = calibkit.calibration_report(logits, labels, from_logits=True, next_token=True, metrics=["ace"])
    assert asked["ace"] == pytest.approx(calibkit.ace(logits, labels, from_logits=True, next_token=True))


def test_the_one_metric_functions_take_next_token():
    logits, labels = causal_batch(seed=1)
    rows, targets = shifted_by_loop(logits, labels)
    for fn in (calibkit.ece, calibkit.nll, calibkit.brier, calibkit.cece, calibkit.ace, calibkit.fce):
        assert fn(logits, labels, from_logits=True, next_token=True) == pytest.approx(
            fn(rows, targets, from_logits=True), rel=1e-12
        ), fn.__name__
    assert calibkit.ece(logits, labels, from_logits=True) != pytest.approx(
        calibkit.ece(logits, labels, from_logits=True, next_token=True)
    )  # the shift changes what is scored


def tiny_gpt2(vocab=40, seed=0):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=vocab, n_positions=32, n_embd=16, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0
    )
    return GPT2LMHeadModel(config).eval()


def test_nll_equals_the_causal_lms_own_loss():
    model = tiny_gpt2()
    ids = torch.randint(0, 40, (3, 14), generator=torch.Generator().manual_seed(2))
    labels = ids.clone()
    labels[0, :5] = IGNORE
    labels[2, 9:] = IGNORE
    with torch.no_grad():
        out = model(ids, labels=labels)
    ours = calibkit.nll(out.logits, labels, from_logits=True, next_token=True)
    assert ours == pytest.approx(out.loss.item(), rel=1e-6)  # the model sums its loss in float32
    streamed = CalibrationAccumulator(metrics=["nll"], from_logits=True, next_token=True)
    for b in range(3):
        streamed.update(out.logits[b : b + 1], labels[b : b + 1])
    assert streamed.compute()["nll"] == pytest.approx(ours, rel=1e-12)


def test_the_accumulator_in_batches_equals_one_pass():
    logits, labels = causal_batch(n=6, seed=3)
    acc = CalibrationAccumulator(METRICS, from_logits=True, next_token=True, theta=0)
    acc.update(logits[:2], labels[:2]).update(logits[2:5], labels[2:5]).update(logits[5:], labels[5:])
    streamed = acc.compute()
    exact = calibkit.calibration_report(logits, labels, from_logits=True, next_token=True, theta=0, metrics=METRICS)
    for name in METRICS:
        if name != "ace":  # streamed ACE lies within its bound
            assert streamed[name] == pytest.approx(exact[name], rel=1e-12, abs=1e-15), name
    assert abs(streamed["ace"] - exact["ace"]) <= streamed["ace_error_bound"] + 1e-15


def test_the_bootstrap_resamples_sequences():
    logits, labels = causal_batch(n=8, seed=4)
    ci = bootstrap_intervals(logits, labels, from_logits=True, next_token=True, metrics=["nll"], bootstrap=50)
    assert ci["n_blocks"] == 8
    low, high = ci["intervals"]["nll"]
    point = calibkit.nll(logits, labels, from_logits=True, next_token=True)
    assert low <= point <= high


def test_the_device_path_shifts_on_the_tensors_device(monkeypatch):
    """CUDA tensors are binned where they are, labels shifted there: the same code on CPU tensors."""
    logits, labels = causal_batch(seed=5)
    monkeypatch.setattr(validation, "_device_tensor", lambda array: getattr(array, "device", None))
    prep = validation.prepare(
        torch.from_numpy(logits), torch.from_numpy(labels), from_logits=True, ignore_index=IGNORE, next_token=True
    )
    assert isinstance(prep.labels, torch.Tensor)
    expected = validation.shift_labels(labels, IGNORE)
    np.testing.assert_array_equal(prep.labels.numpy(), expected)
    with use_backend("torch"):
        on_path = calibkit.calibration_report(
            torch.from_numpy(logits), torch.from_numpy(labels), from_logits=True, next_token=True, theta=0
        )
    monkeypatch.undo()
    host = calibkit.calibration_report(logits, labels, from_logits=True, next_token=True, theta=0)
    assert_same_report(on_path, host, rtol=1e-9)


def test_shift_labels_leaves_the_last_position_unscored():
    labels = np.array([[5, 6, 7], [IGNORE, 1, 2]])
    np.testing.assert_array_equal(validation.shift_labels(labels, IGNORE), [6, 7, IGNORE, 1, 2, IGNORE])
    assert validation.shift_labels(np.zeros((2, 0), np.int64), IGNORE).shape == (0,)


def test_bf16_logits_are_read_as_they_are():
    logits, labels = causal_batch(seed=6)
    half = torch.from_numpy(logits).to(torch.bfloat16)
    got = calibkit.nll(half, labels, from_logits=True, next_token=True)
    want = calibkit.nll(half.float().numpy(), labels, from_logits=True, next_token=True)
    assert got == want


# -- bad input -----------------------------------------------------------------------------------


def test_a_label_outside_the_vocabulary_is_named_where_the_caller_put_it():
    logits, labels = causal_batch(v=9, seed=7)
    labels[1, 4] = 9
    with pytest.raises(
        ValueError,
        match=r"got 9 at position \(1, 4\) \(next_token=True: the label of the logits one position earlier\)",
    ):
        calibkit.calibration_report(logits, labels, from_logits=True, next_token=True)


def test_logits_and_labels_of_different_lengths_are_refused():
    logits, labels = causal_batch()
    with pytest.raises(
        ValueError, match=r"needs labels of shape \(4, 11\); with next_token=True give `labels` unshifted"
    ):
        calibkit.calibration_report(logits[:, :-1], labels, from_logits=True, next_token=True)


def test_rows_without_a_sequence_axis_are_refused():
    logits, labels = causal_batch()
    with pytest.raises(ValueError, match=r"shape \(N, T, V\).*probs\[None\]"):
        calibkit.calibration_report(logits[0], labels[0], from_logits=True, next_token=True)


def test_multilabel_and_next_token_together_are_refused():
    with pytest.raises(ValueError, match="`multilabel=True` and `next_token=True`"):
        calibkit.CalibrationSettings(multilabel=True, next_token=True)


def test_a_batch_with_nothing_to_score_is_named():
    logits, labels = causal_batch()
    acc = CalibrationAccumulator(from_logits=True, next_token=True)
    acc.update(logits, labels)
    only_first = np.full_like(labels, IGNORE)
    only_first[:, 0] = 3  # a label at position 0 is never scored: nothing predicts it
    with pytest.raises(ValueError, match=r"batch 1 \(counting from 0\) has no token to score"):
        acc.update(logits, only_first)


def test_a_vocabulary_that_changes_between_batches_is_named_before_the_labels_are_read():
    logits, labels = causal_batch(v=9)
    acc = CalibrationAccumulator(from_logits=True, next_token=True)
    acc.update(logits, labels)
    with pytest.raises(
        ValueError, match=r"`probs` of batch 1 \(counting from 0\) has 6 classes but earlier batches had 9"
    ):
        acc.update(logits[:, :, :6], np.minimum(labels, 5))


def test_a_nan_bf16_logit_is_named_with_its_batch_and_position():
    logits, labels = causal_batch(seed=8)
    half = torch.from_numpy(logits).to(torch.bfloat16)
    acc = CalibrationAccumulator(from_logits=True, next_token=True)
    acc.update(half, labels)
    half[2, 5, 1] = float("nan")
    with pytest.raises(ValueError, match=r"NaN or inf at position \(2, 5\) of batch 1 \(counting from 0\)"):
        acc.update(half, labels)


# -- shards and Dask ---------------------------------------------------------------------------------


def test_shards_read_npz_sequences_and_table_token_rows_as_the_report_does(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from calibkit.io.shards import stream_report

    logits, labels = causal_batch(n=5, t=7, v=6, seed=9)
    want = calibkit.calibration_report(logits, labels, from_logits=True, next_token=True, theta=0)
    np.savez(tmp_path / "a.npz", logits=logits[:3], labels=labels[:3])
    np.savez(tmp_path / "b.npz", logits=logits[3:], labels=labels[3:])
    got = stream_report(tmp_path, next_token=True, theta=0, progress=False)
    table_dir = tmp_path / "table"
    table_dir.mkdir()
    lengths = [7, 5, 7, 6, 7]  # rows of different lengths: a table keeps each row's own tokens
    rows = {"logits": [logits[i, : lengths[i]].tolist() for i in range(5)]}
    rows["labels"] = [labels[i, : lengths[i]].tolist() for i in range(5)]
    pq.write_table(pa.table(rows), table_dir / "s.parquet")
    cut = labels.copy()
    for i, n in enumerate(lengths):
        cut[i, n:] = IGNORE  # what the table does not hold
    cut_want = calibkit.calibration_report(logits, cut, from_logits=True, next_token=True, theta=0)
    from_table = stream_report(table_dir, next_token=True, theta=0, progress=False)
    assert_same_report(got, want)
    assert_same_report(from_table, cut_want)


def test_a_bad_label_in_a_table_shard_names_its_row_and_token(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from calibkit.io.shards import stream_report

    logits, labels = causal_batch(n=3, t=5, v=6, seed=10)
    labels[1, 3] = 6
    table = pa.table({"logits": [x.tolist() for x in logits], "labels": [y.tolist() for y in labels]})
    pq.write_table(table, tmp_path / "s.parquet")
    with pytest.raises(ValueError, match=r"got 6 at token 3 of row 1 of .*s\.parquet"):
        stream_report(tmp_path, next_token=True, progress=False)


def test_sequence_classification_rows_are_refused_with_next_token(tmp_path):
    from calibkit.io.shards import stream_report

    np.savez(tmp_path / "a.npz", logits=np.zeros((4, 3)), labels=np.array([0, 1, 2, 0]))
    with pytest.raises(ValueError, match=r"a\.npz: next_token=True reads token rows .* one vector per row"):
        stream_report(tmp_path, next_token=True, progress=False)


def test_dask_reads_sequences_as_the_report_does():
    da = pytest.importorskip("dask.array")
    from calibkit.io.dask import calibration_report as dask_report

    logits, labels = causal_batch(n=6, t=8, v=5, seed=11)
    want = calibkit.calibration_report(logits, labels, from_logits=True, next_token=True, theta=0)
    got = dask_report(
        da.from_array(logits, chunks=(2, 8, 5)),
        da.from_array(labels, chunks=(2, 8)),
        from_logits=True,
        next_token=True,
        theta=0,
        scheduler="sync",
    )
    assert_same_report(got, want)


def test_ace_and_sce_over_a_vocabulary_average_the_tokens_that_occur():
    """Unseen tokens would each add mean p_k (about 1/V) and divide by V: they are left out (SPEC.md)."""
    logits, labels = causal_batch(n=5, t=9, v=30, seed=12)
    rows, targets = shifted_by_loop(logits, labels)
    p = np.exp(rows - rows.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    seen = np.unique(targets)
    assert 0 < len(seen) < 30
    ace_gaps, sce_sums = [], []
    for k in seen:  # a plain loop over the tokens that occur
        order = np.argsort(p[:, k], kind="stable")
        for part in np.array_split(order, 15):
            if len(part):
                ace_gaps.append(abs(np.mean(targets[part] == k) - np.mean(p[part, k])))
        edges = np.clip(np.ceil(p[:, k] * 15 * (1 - 2**-40)) - 1, 0, 14)
        sce_sums.append(sum(abs(np.sum(targets[edges == b] == k) - np.sum(p[edges == b, k])) for b in range(15)))
    got = calibkit.calibration_report(logits, labels, from_logits=True, next_token=True, metrics=["ace", "sce"])
    assert got["ace"] == pytest.approx(np.sum(ace_gaps) / (15 * len(seen)), rel=1e-10)
    assert got["sce"] == pytest.approx(np.sum(sce_sums) / (len(seen) * len(targets)), rel=1e-10)
    over_all = calibkit.calibration_report(rows, targets, from_logits=True, metrics=["sce"])["sce"]
    assert over_all < got["sce"]  # the classifier convention divides by all 30 classes
