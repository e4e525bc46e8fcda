"""The bad-input catalogue of tests/metrics/test_bad_input.py walked through the doors that read
files and partitions: the shard reader (``.npz`` and Parquet shards) and Dask arrays.

Each bad value gives the message the functional core gives for the same arrays, with the place
said in the door's terms: the file (or partition), the row (and token) within it, and the row of
all the data. The bad shard (partition) comes second, after one that holds the same arrays with
every label ``ignore_index`` (read and skipped, never checked), so the two rows differ.

The rest of the catalogue for these doors lives beside their other tests: links, link loops,
Spark folders and mixed folders in tests/test_shards.py; unknown chunk sizes, a probs/logits mix,
missing paths and empty globs in tests/test_dask.py; contradicting settings at every door in
tests/metrics/test_settings.py and tests/hf_evaluate/test_renamed_settings.py.
"""

import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import calibkit
from calibkit.io.shards import stream_report
from tests.metrics.test_bad_input import BAD_INPUT

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")


def direct_error(probs, labels, kwargs):
    with pytest.raises(ValueError) as info:
        calibkit.calibration_report(probs, labels, **kwargs)
    return str(info.value)


def placed_cases():
    """The catalogue's cases that name a position: numeric arrays a file or a Dask array can hold."""
    for name, (probs, labels, kwargs, _) in sorted(BAD_INPUT.items()):
        if not isinstance(probs, np.ndarray):  # a ragged list: no file or Dask array holds it
            continue
        labels = np.asarray(labels)
        if probs.dtype.kind != "f" or labels.dtype.kind not in "iuf" or set(kwargs) - {"from_logits"}:
            continue
        message = direct_error(probs, labels, kwargs)
        if " position " in message:
            yield pytest.param(probs, labels, kwargs.get("from_logits", False), message, id=name)


CASES = list(placed_cases())


def expected(message, labels, where, total_word):
    """The functional core's message with ``position P`` re-said as the door says it."""
    position = re.search(r"position (\(\d+, \d+\)|\d+)", message).group(1)
    index = int(position) if position.isdigit() else None
    if index is None:  # (row, token) of token input
        row, token = (int(v) for v in position.strip("()").split(", "))
    elif labels.ndim == 2:
        row, token = divmod(index, labels.shape[1])
    else:
        row, token = index, None
    n = labels.shape[0]
    token_of = "" if token is None else f"token {token} of "
    place = f"{token_of}row {row} of {where} (row {n + row} of {total_word})"
    head, tail = message.split(f"position {position}", 1)
    return re.escape(head) + re.escape(place).replace(re.escape(where), r"\S*" + re.escape(where)) + re.escape(tail)


def padding_like(labels):
    if labels.dtype.kind == "u":  # cannot hold -100: class 0 (the probabilities of these cases are good)
        return np.zeros_like(labels)
    return np.full_like(labels, -100)


def test_the_catalogue_has_cases_for_every_kind_of_place():
    names = {case.id for case in CASES}
    assert {"nan", "row sum", "label range", "nan label", "uint64 label", "binary above 1"} <= names


@pytest.mark.parametrize("probs, labels, from_logits, message", CASES)
def test_npz_shards_say_the_file_and_row(tmp_path, probs, labels, from_logits, message):
    kind = "logits" if from_logits else "probs"
    np.savez(tmp_path / "a.npz", **{kind: probs, "labels": padding_like(labels)})
    np.savez(tmp_path / "b.npz", **{kind: probs, "labels": labels})
    with pytest.raises(ValueError, match=expected(message, labels, "b.npz", "all shards")):
        stream_report(str(tmp_path), progress=False)


@pytest.mark.parametrize("probs, labels, from_logits, message", [c for c in CASES if c.values[0].ndim == 2])
def test_parquet_shards_say_the_file_and_row(tmp_path, probs, labels, from_logits, message):
    kind = "logits" if from_logits else "probs"
    for name, y in (("a", padding_like(labels)), ("b", labels)):
        table = pa.table({kind: pa.array(list(probs), type=pa.list_(pa.float64())), "labels": y})
        pq.write_table(table, tmp_path / f"{name}.parquet")
    with pytest.raises(ValueError, match=expected(message, labels, "b.parquet", "all shards")):
        stream_report(str(tmp_path), progress=False)


@pytest.mark.parametrize("probs, labels, from_logits, message", CASES)
def test_dask_partitions_say_the_partition_and_row(probs, labels, from_logits, message):
    from calibkit.io.dask import calibration_report

    n = labels.shape[0]
    values = da.from_array(np.concatenate([probs, probs]), chunks=(n,) + probs.shape[1:])
    targets = da.from_array(np.concatenate([padding_like(labels), labels]), chunks=(n,) + labels.shape[1:])
    with pytest.raises(ValueError, match=expected(message, labels, "partition 1", "all the data")):
        calibration_report(values, targets, from_logits=from_logits, scheduler="sync")


def token_input():
    probs = np.full((3, 4, 2), 0.5)
    labels = np.zeros((3, 4), dtype=np.int64)
    labels[:, 3] = -100
    return probs, labels


@pytest.mark.parametrize("spoil", ["nan", "label"])
def test_token_input_says_the_token_and_its_row(tmp_path, spoil):
    from calibkit.io.dask import calibration_report

    probs, labels = token_input()
    if spoil == "nan":
        probs[2, 1, 0] = np.nan
    else:
        labels[2, 1] = 7
    message = direct_error(probs, labels, {})
    assert "position (2, 1)" in message
    np.savez(tmp_path / "a.npz", probs=probs, labels=np.full_like(labels, -100))
    np.savez(tmp_path / "b.npz", probs=probs, labels=labels)
    with pytest.raises(ValueError, match=expected(message, labels, "b.npz", "all shards")):
        stream_report(str(tmp_path), progress=False)
    values = da.from_array(np.concatenate([probs, probs]), chunks=(3, 4, 2))
    targets = da.from_array(np.concatenate([np.full_like(labels, -100), labels]), chunks=(3, 4))
    with pytest.raises(ValueError, match=expected(message, labels, "partition 1", "all the data")):
        calibration_report(values, targets, scheduler="sync")
