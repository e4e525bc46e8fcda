"""The bad-input catalogue of tests/metrics/test_bad_input.py walked through the doors that read
files and partitions: the shard reader (``.npz`` and Parquet shards) and Dask arrays; and, at the
end, the newer doors: multi-label input (report, accumulator, bootstrap, shards), multiple-choice
logs in the choice format, and the selective metrics.

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


# --------------------------------------------------------------------------------------------
# The newer doors: multi-label (report, accumulator, bootstrap, shards), multiple-choice logs
# (the choice format's reader), and the selective metrics. Every door x every bad input of its
# kind gives one ValueError naming the argument, and the place where there is one.

ML_P = np.array([[0.9, 0.2, 0.7], [0.1, 0.8, 0.6], [0.3, 0.4, 0.5]])
ML_Y = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0]])


def _spoiled(value):
    p = ML_P.copy()
    p[1, 2] = value
    return p


ML_CASES = {
    "nan": (_spoiled(np.nan), ML_Y, {}, r"^`probs` contains NaN or inf at position \(1, 2\)"),
    "inf": (_spoiled(np.inf), ML_Y, {}, r"^`probs` contains NaN or inf at position \(1, 2\)"),
    "above one": (_spoiled(1.5), ML_Y, {}, r"^`probs` has a value outside \[0, 1\] at position \(1, 2\)"),
    "labels of another shape": (ML_P, ML_Y[:, :2], {}, r"^`labels` must have the shape of `probs` \(3, 3\)"),
    "3-D probs": (np.zeros((2, 3, 4)), np.zeros((2, 3, 4), int), {}, r"^`probs` must have shape \(N, K\)"),
    "string probs": (ML_P.astype(str), ML_Y, {}, r"^`probs` must be a float array"),
    "label 2": (ML_P, np.where(ML_Y == 1, 2, 0), {}, r"^`labels` must be multi-hot .* at position \(0, 0\)"),
    "empty": (np.zeros((0, 3)), np.zeros((0, 3), int), {}, r"^`labels`: no decision to evaluate"),
    "contradictory settings": (
        ML_P,
        ML_Y,
        {"settings": calibkit.CalibrationSettings(multilabel=True), "n_bins": 10},
        r"`n_bins=10` and",
    ),
}


def _ml_doors():
    from calibkit.metrics.bootstrap import bootstrap_intervals

    def accumulate(p, y, **k):
        return calibkit.CalibrationAccumulator(**k).update(p, y).compute()

    return {
        "calibration_report": calibkit.calibration_report,
        "accumulator": accumulate,
        "bootstrap": lambda p, y, **k: bootstrap_intervals(p, y, bootstrap=3, **k),
    }


@pytest.mark.parametrize("door", ["calibration_report", "accumulator", "bootstrap"])
@pytest.mark.parametrize("case", sorted(ML_CASES))
def test_multilabel_doors_refuse_bad_input_naming_the_argument_and_place(door, case):
    probs, labels, kwargs, message = ML_CASES[case]
    kwargs = {"multilabel": True, **kwargs} if "settings" not in kwargs else {**kwargs, "multilabel": True}
    with pytest.raises(ValueError, match=message):
        _ml_doors()[door](probs, labels, **kwargs)


def test_a_multilabel_shard_names_the_label_row_and_file(tmp_path):
    np.savez(tmp_path / "a.npz", probs=ML_P, labels=ML_Y)
    np.savez(tmp_path / "b.npz", probs=_spoiled(np.nan), labels=ML_Y)
    with pytest.raises(ValueError, match=r"at label 2 of row 1 of .*b\.npz \(row 4 of all shards\)"):
        stream_report(tmp_path, multilabel=True, progress=False)


CHOICE_CASES = {
    "nan log-likelihood": ({"choice_logprobs": [-1.0, float("nan")], "gold": 0}, r"question 1: a log-likelihood"),
    "gold out of range": ({"choice_logprobs": [-1.0, -2.0], "gold": 2}, r"question 1: `gold` 2 is no index"),
    "negative gold": ({"choice_logprobs": [-1.0, -2.0], "gold": -1}, r"question 1: `gold` -1 is no index"),
    "no choice": ({"choice_logprobs": [], "gold": 0}, r"question 1: `choice_logprobs` holds 0 values"),
    "string log-likelihoods": ({"choice_logprobs": ["a", "b"], "gold": 0}, r"cannot be read as JSON"),
    "string gold": ({"choice_logprobs": [-1.0, -2.0], "gold": "A"}, r"cannot be read as JSON"),
    "no gold": ({"choice_logprobs": [-1.0, -2.0]}, r"question 1: no `gold`"),
}


@pytest.mark.parametrize("case", sorted(CHOICE_CASES))
def test_the_choice_format_refuses_a_bad_question_naming_the_file_and_question(tmp_path, case):
    import json

    from calibkit.lm.multiple_choice import read_choices

    bad, message = CHOICE_CASES[case]
    path = tmp_path / "choices.jsonl"
    path.write_text(json.dumps({"choice_logprobs": [-1.0, -2.0], "gold": 1}) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(ValueError, match=message) as info:
        read_choices(path)
    assert str(path) in str(info.value)


def test_an_empty_choice_file_is_refused_naming_what_it_is_not(tmp_path):
    from calibkit.lm.multiple_choice import read_choices

    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match="is no lm-evaluation-harness samples file"):
        read_choices(tmp_path / "empty.jsonl")


SEL_P = np.array([0.9, 0.2, 0.7])
SEL_Y = np.array([1, 0, 1])
SELECTIVE_CASES = {
    "coverage 0": (SEL_P, SEL_Y, {"coverage": 0}, r"^`coverage` must lie in \(0, 1\], got 0"),
    "coverage above 1": (SEL_P, SEL_Y, {"coverage": 1.5}, r"^`coverage` must lie in \(0, 1\]"),
    "coverage NaN": (SEL_P, SEL_Y, {"coverage": float("nan")}, r"^`coverage` must lie in \(0, 1\]"),
    "coverage a string": (SEL_P, SEL_Y, {"coverage": "0.5"}, r"^`coverage` must be a number"),
    "nan": (np.array([0.9, np.nan, 0.7]), SEL_Y, {}, r"^`probs` contains NaN or inf at position 1"),
    "labels of another shape": (SEL_P, SEL_Y[:2], {}, r"^`labels` has shape \(2,\)"),
    "empty": (np.zeros(0), np.zeros(0, int), {}, r"^`labels`: no sample to evaluate"),
    "label out of range": (SEL_P, np.array([1, 0, 3]), {}, r"^`labels` must lie in \[0, 2\).* at position 2"),
    "string probs": (SEL_P.astype(str), SEL_Y, {}, r"^`probs` must be a float array"),
}


@pytest.mark.parametrize("door", ["selective_accuracy", "report", "accumulator"])
@pytest.mark.parametrize("case", sorted(SELECTIVE_CASES))
def test_selective_doors_refuse_bad_input_naming_the_argument(door, case):
    probs, labels, kwargs, message = SELECTIVE_CASES[case]
    with pytest.raises(ValueError, match=message):
        if door == "selective_accuracy":
            calibkit.selective_accuracy(probs, labels, **kwargs)
        elif door == "report":
            calibkit.calibration_report(probs, labels, metrics=["aurc", "selective_accuracy"], **kwargs)
        else:
            acc = calibkit.CalibrationAccumulator(["aurc", "selective_accuracy"], **kwargs)
            acc.update(probs, labels).compute()


def test_selective_metrics_are_refused_by_name_for_multilabel_input():
    with pytest.raises(ValueError, match=r"`metrics` \['aurc'\] are not defined per label"):
        calibkit.calibration_report(ML_P, ML_Y, multilabel=True, metrics=["aurc"])


GOOD_PAIR = {"id": "a", "subset": "s", "reward_chosen": 1.0, "reward_rejected": 0.0}
PREFERENCE_CASES = {  # the second pair spoiled: (its fields, the file's line/row of it: what the message says)
    "nan reward": ({"reward_chosen": float("nan")}, "reward_chosen is (missing or )?NaN"),
    "inf reward": ({"reward_rejected": float("inf")}, "reward_rejected is infinite"),
    "missing reward": ({"reward_rejected": None}, "reward_rejected is missing"),
    "duplicate id": ({"id": "a"}, "two pairs with id 'a' in subset 's'"),
    "empty subset": ({"subset": ""}, "subset is empty"),
}
PLACE = {".jsonl": "line 2", ".csv": "line 3", ".parquet": "row 1"}  # the second pair (CSV: after its header)


@pytest.mark.parametrize("suffix", sorted(PLACE))
@pytest.mark.parametrize("case", sorted(PREFERENCE_CASES))
def test_a_bad_preference_pair_is_one_line_naming_the_file_line_and_field(tmp_path, suffix, case):
    import json

    import pyarrow.csv

    from calibkit.lm.preferences import read_preferences

    spoil, message = PREFERENCE_CASES[case]
    rows = [GOOD_PAIR, {**GOOD_PAIR, "id": "b", **spoil}]
    path = tmp_path / f"pairs{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        table = pa.Table.from_pylist(rows)
        pyarrow.csv.write_csv(table, path) if suffix == ".csv" else pq.write_table(table, path)
    with pytest.raises(ValueError, match=message) as info:
        read_preferences(path)
    said = str(info.value)
    assert "\n" not in said and said.startswith(f"`location`: {path}") and PLACE[suffix] in said, said


@pytest.mark.parametrize("suffix", sorted(PLACE))
def test_a_preference_file_without_its_columns_names_the_column(tmp_path, suffix):
    import json

    import pyarrow.csv

    from calibkit.lm.preferences import read_preferences

    rows = [{"id": "a", "reward_chosen": 1.0}]
    path = tmp_path / f"pairs{suffix}"
    if suffix == ".jsonl":
        path.write_text(json.dumps(rows[0]) + "\n")
    else:
        table = pa.Table.from_pylist(rows)
        pyarrow.csv.write_csv(table, path) if suffix == ".csv" else pq.write_table(table, path)
    with pytest.raises(ValueError, match=f"{re.escape(str(path))} has no column 'reward_rejected'"):
        read_preferences(path)
