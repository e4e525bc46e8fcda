"""Streaming shards (calibkit.io.shards) and the extra passes that make ACE exact (ExactACE):
the same numbers as one-shot calibration_report on the concatenation, whatever the sharding."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import calibkit
from calibkit.cli import main
from calibkit.io.shards import shard_files, stream_report
from calibkit.metrics import CalibrationAccumulator
from calibkit.metrics.exact_ace import ExactACE

FLOATS = ("ece", "mce", "ace", "sce", "cece", "msece", "wsece", "ece_variance", "rbece", "fce")
FLOATS += ("overconfidence", "ecd", "esce", "brier", "nll", "accuracy")


def assert_same_report(got, expected, tol=1e-12):
    assert got["n"] == expected["n"]
    for key in FLOATS:
        assert abs(got[key] - expected[key]) <= tol * max(1.0, abs(expected[key])), key
    np.testing.assert_allclose(got["subset_ece"], expected["subset_ece"], rtol=tol, atol=tol)
    assert got["ace_error_bound"] == 0.0


def exact_stream(values, labels, from_logits, pieces, max_samples):
    """Pass 1 and the exact-ACE passes over the same batches."""
    acc = CalibrationAccumulator(from_logits=from_logits)
    batches = np.array_split(np.arange(len(labels)), pieces)
    for rows in batches:
        acc.update(values[rows], labels[rows])
    exact = ExactACE(acc, max_samples=max_samples)
    while not exact.done:
        for rows in batches:
            exact.update(values[rows], labels[rows])
        exact.end_pass()
    return acc.compute(ace_partials=exact.partials()), exact.passes


def data(kind, n, k, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 2.5
    y = rng.integers(0, k, n)
    y[::11] = -100
    if kind == "logits":
        return z, y, True
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    if kind == "ties":  # many equal probabilities: a boundary inside a tie
        p[: n // 2] = np.round(p[: n // 2], 1) + 1e-3
        p /= p.sum(1, keepdims=True)
    return p, y, False


@pytest.mark.parametrize("max_samples", [10**9, 200, 1])
@pytest.mark.parametrize("kind, k", [("probs", 4), ("logits", 4), ("logits", 20), ("ties", 3), ("probs", 2)])
def test_exact_ace_passes_equal_one_shot(kind, k, max_samples):
    values, labels, logits = data(kind, 6000, k)
    expected = calibkit.calibration_report(values, labels, from_logits=logits)
    got, passes = exact_stream(values, labels, logits, 5, max_samples)
    assert_same_report(got, expected)
    # the gather budget decides how many passes: a small one narrows with a histogram first
    assert passes == 1 if max_samples == 10**9 else passes >= 1


def test_a_peaked_column_is_narrowed_then_gathered():
    values, labels, _ = data("probs", 20000, 3, seed=3)
    expected = calibkit.calibration_report(values, labels)
    got, passes = exact_stream(values, labels, False, 4, 50)
    assert passes >= 2  # histogram pass(es), then the gather
    assert_same_report(got, expected)
    # without the extra passes the streamed ACE is only within its bound
    acc = CalibrationAccumulator().update(values, labels)
    assert acc.compute()["ace"] != expected["ace"]


def first_extra_pass(values, labels, max_samples, pieces=4, spoil=None):
    """Pass 1, then one histogram pass; the ExactACE object after it."""
    acc = CalibrationAccumulator(["ace"])
    batches = np.array_split(np.arange(len(labels)), pieces)
    for rows in batches:
        acc.update(values[rows], labels[rows])
    exact = ExactACE(acc, max_samples=max_samples)
    assert exact._histogram, "the cut buckets must hold more than the budget"
    if spoil is not None:
        spoil(exact)
    for rows in batches:
        exact.update(values[rows], labels[rows])
    exact.end_pass()
    return acc, exact


def finish(acc, exact, values, labels):
    while not exact.done:
        exact.update(values, labels).end_pass()
    return acc.compute(ace_partials=exact.partials())


def test_a_histogram_pass_settles_smooth_columns_from_the_values_it_kept():
    # the cut buckets hold ~10x the budget: without speculation a gather pass would follow
    values, labels, _ = data("probs", 200_000, 4, seed=11)
    expected = calibkit.calibration_report(values, labels, metrics=["ace"])["ace"]
    acc, exact = first_extra_pass(values, labels, max_samples=20_000)
    assert exact.done and exact.passes == 1
    assert abs(acc.compute(ace_partials=exact.partials())["ace"] - expected) <= 1e-12


def test_a_wrong_guess_or_an_overflow_falls_back_to_narrowing():
    values, labels, _ = data("probs", 200_000, 4, seed=11)
    expected = calibkit.calibration_report(values, labels, metrics=["ace"])["ace"]

    def overflow(exact):
        exact._cap[:] = 1  # every cell keeps more than this: its values are dropped

    def miss(exact):
        exact._keep[:] = np.roll(exact._keep, exact._n_sub // 2, axis=1)  # keep the far side

    for spoil in (overflow, miss):
        acc, exact = first_extra_pass(values, labels, max_samples=20_000, spoil=spoil)
        assert not exact.done  # nothing settled from kept values: a further pass is needed
        assert abs(finish(acc, exact, values, labels)["ace"] - expected) <= 1e-12


def test_a_spike_away_from_the_guess_still_gives_the_exact_ace():
    # a third of column 0 in a narrow cluster near the low end of its ACE bucket (0.3 sits at
    # 1/5 of [0.296875, 0.3125)): the histogram finds the boundary there, far from the guess
    rng = np.random.default_rng(4)
    values, labels, _ = data("probs", 60_000, 3, seed=4)
    spike = rng.uniform(0.3, 0.3 + 1e-7, 20_000)
    values[:20_000, 0] = spike
    values[:20_000, 1:] = (1 - spike)[:, None] / 2
    expected = calibkit.calibration_report(values, labels, metrics=["ace"])["ace"]
    acc, exact = first_extra_pass(values, labels, max_samples=2_000)
    assert abs(finish(acc, exact, values, labels)["ace"] - expected) <= 1e-12


def test_binary_and_token_input():
    rng = np.random.default_rng(5)
    p1 = rng.uniform(size=3000)
    y1 = (rng.uniform(size=3000) < p1).astype(int)
    got, _ = exact_stream(p1, y1, False, 3, 100)
    assert_same_report(got, calibkit.calibration_report(p1, y1))
    z = rng.normal(size=(200, 12, 5))
    y = rng.integers(0, 5, (200, 12))
    y[:, 9:] = -100
    expected = calibkit.calibration_report(z, y, from_logits=True)
    got, _ = exact_stream(z, y, True, 4, 100)
    assert_same_report(got, expected)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 400),
    k=st.integers(2, 6),
    pieces=st.integers(1, 6),
    max_samples=st.sampled_from([1, 7, 60, 10**9]),
    seed=st.integers(0, 2**16),
)
def test_any_batching_gives_the_one_shot_numbers(n, k, pieces, max_samples, seed):
    values, labels, logits = data("probs", n, k, seed)
    labels[0] = 0  # at least one labelled row
    expected = calibkit.calibration_report(values, labels, from_logits=logits, metrics=["ace", "ece"])
    acc = CalibrationAccumulator(["ace", "ece"])
    order = np.random.default_rng(seed).permutation(n)  # batches in any order
    batches = np.array_split(order, pieces)
    for rows in batches:
        acc.update(values[rows], labels[rows])
    exact = ExactACE(acc, max_samples=max_samples)
    while not exact.done:
        for rows in batches[::-1]:  # a later pass may read the batches in another order
            exact.update(values[rows], labels[rows])
        exact.end_pass()
    got = acc.compute(ace_partials=exact.partials())
    assert abs(got["ace"] - expected["ace"]) <= 1e-12


def test_contributions_add_in_any_grouping():
    values, labels, _ = data("probs", 5000, 4, seed=9)
    acc = CalibrationAccumulator(["ace"]).update(values, labels)
    one, two = ExactACE(acc, max_samples=10), ExactACE(acc, max_samples=10)
    while not one.done:
        parts = [one.contribution(values[i::3], labels[i::3]) for i in range(3)]
        one.add(parts[0] + (parts[1] + parts[2]))
        one.end_pass()
        for i in (2, 0, 1):
            two.update(values[i::3], labels[i::3])
        two.end_pass()
    np.testing.assert_array_equal(one.partials()[0], two.partials()[0])


def test_data_that_changed_between_passes_is_refused():
    values, labels, _ = data("probs", 3000, 4)
    acc = CalibrationAccumulator(["ace"]).update(values, labels)
    exact = ExactACE(acc)
    exact.update(values[:2000], labels[:2000])  # a shard went missing
    with pytest.raises(ValueError, match="differs from the first pass"):
        exact.end_pass()
    with pytest.raises(ValueError, match="does not compute ACE"):
        ExactACE(CalibrationAccumulator(["ece"]).update(values, labels))
    with pytest.raises(ValueError, match="no data"):
        ExactACE(CalibrationAccumulator(["ace"]))
    with pytest.raises(ValueError, match="passes are left"):
        ExactACE(acc).partials()
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="max_samples"):
            ExactACE(acc, max_samples=bad)


# ----------------------------------------------------------------------------------------------
# Shards on disk


def write_parquet(path, values, labels, name, row_group_size=None):
    column = pa.array(list(values), type=pa.list_(pa.from_numpy_dtype(values.dtype)))
    pq.write_table(pa.table({name: column, "labels": labels}), path, row_group_size=row_group_size)


def token_table(values, labels, name):
    """Token rows as a dataset would hold them: a list of per-token vectors, a list of labels."""
    width = labels.shape[1]
    lengths = np.random.default_rng(0).integers(1, width + 1, len(labels))
    vectors = [[list(map(float, v)) for v in row[:m]] for row, m in zip(values, lengths)]
    tags = [row[:m].tolist() for row, m in zip(labels, lengths)]
    flat_v = np.concatenate([row[:m] for row, m in zip(values, lengths)])
    flat_y = np.concatenate([row[:m] for row, m in zip(labels, lengths)])
    return pa.table({name: vectors, "labels": tags}), flat_v, flat_y


def test_parquet_shards_of_any_size_equal_one_shot(tmp_path):
    values, labels, _ = data("logits", 9000, 4, seed=2)
    values = values.astype(np.float32)
    cuts = [0, 1, 1, 2500, 8000, 9000]  # an empty shard, a one-row shard, uneven sizes
    for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
        write_parquet(tmp_path / f"part-{i}.parquet", values[a:b], labels[a:b], "logits", row_group_size=700)
    expected = calibkit.calibration_report(values, labels, from_logits=True)
    got = stream_report(str(tmp_path), batch_bytes=10_000, max_samples=300, progress=False)
    assert got["shards"] == 5 and got["passes"] >= 2
    assert_same_report(got, expected)
    glob_got = stream_report(str(tmp_path / "part-*.parquet"), progress=False)
    assert_same_report(glob_got, expected)


def test_token_shards_in_every_format(tmp_path):
    rng = np.random.default_rng(4)
    z = rng.normal(size=(300, 10, 5)) * 2
    y = rng.integers(0, 5, (300, 10))
    y[rng.uniform(size=y.shape) < 0.2] = -100
    table, flat_z, flat_y = token_table(z[:200], y[:200], "logits")
    pq.write_table(table.slice(0, 120), tmp_path / "a.parquet", row_group_size=50)
    with open(tmp_path / "b.jsonl", "w") as fh:
        for row in table.slice(120).to_pylist():
            fh.write(json.dumps(row) + "\n")
    np.savez(tmp_path / "c.npz", logits=z[200:], labels=y[200:])  # (N, L, K) with -100 padding
    (tmp_path / "d.jsonl").write_bytes(b"")  # an empty JSON Lines shard holds no row, as an empty Parquet one
    values = np.concatenate([flat_z, z[200:].reshape(-1, 5)])
    labels = np.concatenate([flat_y, y[200:].reshape(-1)])
    expected = calibkit.calibration_report(values, labels, from_logits=True)
    got = stream_report(str(tmp_path), batch_bytes=4000, max_samples=50, progress=False)
    assert got["shards"] == 4
    assert_same_report(got, expected)
    (tmp_path.parent / f"{tmp_path.name}-empty").mkdir()
    (tmp_path.parent / f"{tmp_path.name}-empty" / "only.jsonl").write_bytes(b"")
    with pytest.raises(ValueError, match="no labelled prediction \\(empty shards"):  # a StopIteration before
        stream_report(str(tmp_path.parent / f"{tmp_path.name}-empty"), progress=False)


def test_probabilities_with_a_shard_of_only_padding(tmp_path):
    values, labels, _ = data("probs", 4000, 3, seed=8)
    write_parquet(tmp_path / "0.parquet", values[:3000], labels[:3000], "probs")
    padding = np.full(1000, -100)
    write_parquet(tmp_path / "1.parquet", values[3000:], padding, "probs")
    expected = calibkit.calibration_report(values[:3000], labels[:3000])
    assert_same_report(stream_report(str(tmp_path), progress=False), expected)


def test_shard_errors_name_the_shard(tmp_path):
    values, labels, _ = data("probs", 100, 3)
    write_parquet(tmp_path / "0.parquet", values, labels, "probs")
    write_parquet(tmp_path / "1.parquet", np.log(values), labels, "logits")
    with pytest.raises(ValueError, match=r"1\.parquet holds logits but .*0\.parquet holds probs"):
        stream_report(str(tmp_path), progress=False)
    (tmp_path / "1.parquet").unlink()
    ragged = pa.table({"probs": [[0.5, 0.5, 0.0]] * 5 + [[0.5, 0.5]], "labels": [0] * 6})
    pq.write_table(ragged, tmp_path / "2.parquet")
    with pytest.raises(ValueError, match=r"2\.parquet \(batch from row 0\): `probs` has 2 values in row 5"):
        stream_report(str(tmp_path), progress=False)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="notes.txt matches"):
        shard_files(str(tmp_path / "*"))
    with pytest.raises(ValueError, match="no .parquet, .npz or .jsonl shard"):
        shard_files(str(tmp_path / "none-*.parquet"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no .parquet"):
        shard_files(str(empty))
    only_padding = tmp_path / "padding"
    only_padding.mkdir()
    write_parquet(only_padding / "0.parquet", values, np.full(100, -100), "probs")
    with pytest.raises(ValueError, match="no labelled prediction"):
        stream_report(str(only_padding), progress=False)


def test_cli_streams_a_folder(tmp_path, capsys):
    values, labels, _ = data("logits", 5000, 4, seed=6)
    for i in range(3):
        write_parquet(tmp_path / f"{i}.parquet", values[i::3], labels[i::3], "logits")
    assert main(["report", "--predictions", str(tmp_path), "--json", "--quiet", "--theta", "5"]) == 0
    got = json.loads(capsys.readouterr().out)
    order = np.concatenate([np.arange(i, 5000, 3) for i in range(3)])
    expected = calibkit.calibration_report(values[order], labels[order], from_logits=True, theta=5)
    assert got["shards"] == 3 and got["passes"] == 2
    for key in FLOATS:
        assert abs(got[key] - expected[key]) <= 1e-12
    out = tmp_path / "out"
    assert main(["report", "--predictions", str(tmp_path / "*.parquet"), "--quiet", "--output", str(out)]) == 0
    assert "3 shards" in capsys.readouterr().out
    assert json.loads((out / "report.json").read_text())["n"] == expected["n"]
    assert (
        main(["report", "--predictions", str(tmp_path), "--json", "--quiet", "--theta", "5", "--approximate-ace"]) == 0
    )
    once = json.loads(capsys.readouterr().out)
    assert once["passes"] == 1 and once["ace_error_bound"] > 0
    assert abs(once["ace"] - expected["ace"]) <= once["ace_error_bound"]
    assert all(once[key] == got[key] for key in FLOATS if key != "ace")
    assert main(["report", "--predictions", str(tmp_path), "--bootstrap", "10"]) == 2
    assert "--bootstrap" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# Which files are read: each once, whatever the links; nothing left out without a word


def three_shards(folder, seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    values, labels = [], []
    for i in range(3):
        p = rng.dirichlet(np.ones(3), 100)
        y = rng.integers(0, 3, 100)
        write_parquet(folder / f"s{i}.parquet", p, y, "probs")
        values.append(p)
        labels.append(y)
    return np.concatenate(values), np.concatenate(labels)


def test_links_and_loops_read_each_file_once(tmp_path):
    runs = tmp_path / "runs"
    p, y = three_shards(runs / "run1")
    (runs / "latest").symlink_to("run1")  # the same run twice
    (runs / "run1" / "loop").symlink_to("..")  # a loop back up
    (runs / "run1" / "again.parquet").symlink_to("s0.parquet")  # one shard under two names
    expected = calibkit.calibration_report(p, y)
    for location in (str(runs), str(runs / "**" / "*.parquet"), str(runs / "*" / "*.parquet")):
        report = stream_report(location, progress=False)
        assert report["shards"] == 3 and report["n"] == 300, location
        assert_same_report(report, expected)
    skipped = stream_report(str(runs / "**" / "*.parquet"), progress=False)["skipped"]
    assert set(skipped) == {"a link to a file already read"}


def test_spark_folders_are_read_and_other_files_counted(tmp_path, capsys):
    spark = tmp_path / "spark"
    p, y = three_shards(spark / "b.parquet")  # a directory of part files, as Spark writes
    (spark / "b.parquet" / "_SUCCESS").write_text("")
    (spark / "b.parquet" / ".s0.parquet.crc").write_text("x")
    report = stream_report(str(spark / "*.parquet"), progress=False)
    assert report["shards"] == 3 and report["n"] == 300
    assert sorted(report["skipped"]["not a prediction file"]) == sorted(
        str(spark / "b.parquet" / name) for name in ("_SUCCESS", ".s0.parquet.crc")
    )
    assert main(["report", "--predictions", str(spark), "--quiet"]) == 0
    assert (
        "3 shards, 300 labelled predictions, read 2 times; 2 skipped (not a prediction file" in capsys.readouterr().out
    )


def test_json_and_csv_prediction_files_among_shards_are_read_and_broken_links_named(tmp_path, capsys):
    folder = tmp_path / "preds"
    p, y = three_shards(folder)
    extra_p = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    (folder / "extra.json").write_text(json.dumps({"probs": extra_p.tolist(), "labels": [0, 2]}))
    (folder / "wide.csv").write_text("probs_0,probs_1,probs_2,labels\n0.2,0.5,0.3,1\n")
    (folder / "report.json").write_text(json.dumps({"ece": 0.1, "n": 3}))  # an output, not predictions
    report = stream_report(str(folder), progress=False)
    expected = calibkit.calibration_report(
        np.concatenate([extra_p, p, [[0.2, 0.5, 0.3]]]), np.concatenate([[0, 2], y, [1]])
    )
    assert report["shards"] == 5 and report["n"] == 303
    assert_same_report(report, expected)
    assert report["skipped"] == {"not a prediction file": [str(folder / "report.json")]}
    with pytest.raises(ValueError, match=r"report\.json matches .* but is not a prediction file"):
        shard_files(str(folder / "*.json"))
    (folder / "dead.parquet").symlink_to(tmp_path / "gone.parquet")
    with pytest.raises(ValueError, match=r"dead\.parquet is a link to .*gone\.parquet, which does not exist"):
        shard_files(str(folder))
    assert main(["report", "--predictions", str(folder), "--quiet"]) == 2
    assert capsys.readouterr().err.count("\n") == 1  # one line, exit 2


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_samples": 0}, "max_samples"),
        ({"max_samples": -5, "metrics": ["ece"]}, "max_samples"),  # checked even when ACE is not asked
        ({"exact_ace": "yes"}, "exact_ace"),
        ({"batch_bytes": 0}, "batch_bytes"),
        ({"n_bins": 0}, "n_bins"),
        ({"fce_variant": "Authors"}, "fce_variant"),
    ],
)
def test_every_setting_is_checked_before_any_shard_is_read(tmp_path, kwargs, message):
    # the location does not exist: a setting error must come first, not the missing data
    with pytest.raises(ValueError, match=message):
        stream_report(str(tmp_path / "nothing-here" / "*.parquet"), progress=False, **kwargs)


def test_a_jsonl_shard_with_integer_vectors_first_reads_as_the_whole_file(tmp_path):
    # Arrow infers a JSON block's types from the first block: `[1, 0, 0]` there and floats later
    # failed ("Failed to convert JSON to int64") in blocks, though the file reads whole.
    values, labels, _ = data("probs", 3000, 3, seed=5)
    with open(tmp_path / "a.jsonl", "w") as fh:
        for i in range(3000):
            row = [1, 0, 0] if i < 2000 else values[i].tolist()
            fh.write(json.dumps({"probs": row, "labels": int(labels[i])}) + "\n")
    whole = calibkit.calibration_report(*calibkit.io.prediction_files.load_predictions(tmp_path / "a.jsonl")[:2])
    got = stream_report(str(tmp_path), batch_bytes=20_000, progress=False)  # many blocks, ints in the first
    assert_same_report(got, whole)


def test_an_error_in_a_shard_names_the_file_its_row_and_the_row_of_all_shards(tmp_path):
    values, labels, _ = data("probs", 100, 3, seed=1)
    labels[labels == -100] = 0
    write_parquet(tmp_path / "s0.parquet", values[:30], labels[:30], "probs")
    bad = values[30:].copy()
    bad[7, 1] = np.nan  # row 37 of the data, row 7 of s1
    write_parquet(tmp_path / "s1.parquet", bad, labels[30:], "probs", row_group_size=5)
    with pytest.raises(ValueError, match=r"NaN or inf at row 7 of \S*s1\.parquet \(row 37 of all shards\)"):
        stream_report(str(tmp_path), batch_bytes=100, progress=False)  # batches of a few rows: the offset counts
    bad_labels = labels[30:].copy()
    bad_labels[12] = 3  # a label out of range in the last shard
    write_parquet(tmp_path / "s1.parquet", values[30:], bad_labels, "probs")
    with pytest.raises(ValueError, match=r"got 3 at row 12 of \S*s1\.parquet \(row 42 of all shards\)"):
        stream_report(str(tmp_path), progress=False)
    write_parquet(tmp_path / "s1.parquet", np.full((70, 4), 0.25), labels[30:], "probs")  # another class count
    with pytest.raises(ValueError, match=r"s1\.parquet \(rows from 0\): .*4"):
        stream_report(str(tmp_path), progress=False)


def test_an_error_in_a_token_shard_names_the_token_and_its_row(tmp_path):
    rows = [
        {"logits": [[0.0, 1.0]] * 3, "labels": [0, 1, 0]},
        {"logits": [[0.0, 1.0], [0.5, float("nan")]], "labels": [1, 1]},
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "t.parquet")
    with pytest.raises(ValueError, match=r"NaN or inf at token 1 of row 1 of \S*t\.parquet \(row 1 of all shards\)"):
        stream_report(str(tmp_path), progress=False)
    np.savez(tmp_path / "t.npz", logits=np.zeros((2, 4, 2)), labels=np.array([[0, 1, 0, 5], [0, 0, 0, 0]]))
    (tmp_path / "t.parquet").unlink()
    with pytest.raises(ValueError, match=r"got 5 at token 3 of row 0 of \S*t\.npz \(row 0 of all shards\)"):
        stream_report(str(tmp_path), progress=False)


def test_selective_metrics_from_shards_are_within_their_bound(tmp_path):
    values, labels, _ = data("logits", 6000, 5, seed=4)
    for i, (a, b) in enumerate([(0, 2500), (2500, 6000)]):
        write_parquet(tmp_path / f"part-{i}.parquet", values[a:b], labels[a:b], "logits", row_group_size=900)
    names = ["aurc", "selective_accuracy", "ece"]
    exact = calibkit.calibration_report(values, labels, from_logits=True, metrics=names, coverage=0.6)
    got = stream_report(str(tmp_path), metrics=names, coverage=0.6, batch_bytes=20_000, progress=False)
    assert got["passes"] == 1  # no ACE asked for: one read
    assert got["ece"] == pytest.approx(exact["ece"], rel=1e-12)
    for name in ("aurc", "selective_accuracy"):
        assert 0 < got[f"{name}_error_bound"] < 5e-3
        assert abs(got[name] - exact[name]) <= got[f"{name}_error_bound"]


def multilabel_table(n=3000, k=4, seed=5):
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=(n, k)) * 2).astype(np.float32)
    y = (rng.random((n, k)) < 1 / (1 + np.exp(-z / 2))).astype(np.float32)
    y[::17, 2] = -100
    return z, y


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl", ".npz"])
def test_multilabel_shards_equal_the_one_shot_report(tmp_path, suffix):
    z, y = multilabel_table()
    for i, (a, b) in enumerate([(0, 1000), (1000, 1001), (1001, 3000)]):
        file = tmp_path / f"part-{i}{suffix}"
        if suffix == ".npz":
            np.savez(file, logits=z[a:b], labels=y[a:b])
        elif suffix == ".parquet":
            write_parquet(file, z[a:b], [row.tolist() for row in y[a:b]], "logits", row_group_size=400)
        else:
            file.write_text(
                "".join(json.dumps({"logits": v.tolist(), "labels": t.tolist()}) + "\n" for v, t in zip(z[a:b], y[a:b]))
            )
    want = calibkit.calibration_report(z, y, from_logits=True, multilabel=True)
    got = stream_report(str(tmp_path), multilabel=True, batch_bytes=20_000, progress=False)
    assert got["passes"] == 1 and got["shards"] == 3
    for avg in ("macro", "weighted", "micro"):
        for m, value in want[avg].items():
            if m == "ace":  # per label a streaming estimate: within the bound the report gives
                assert abs(got[avg][m] - value) <= got["ace_error_bound"][avg] + 1e-12, avg
                continue
            assert got[avg][m] == pytest.approx(value, rel=1e-9, abs=1e-9, nan_ok=True), (avg, m)
    exact_per_label = np.asarray(want["per_label"]["ace"])
    assert np.all(np.abs(got["per_label"]["ace"] - exact_per_label) <= got["ace_error_bound"]["per_label"] + 1e-12)
    assert got["cece"] == pytest.approx(want["cece"], rel=1e-9)
    if suffix == ".parquet":  # the same files without the setting: never guessed
        with pytest.raises(ValueError, match=r"^`location`: .*pass multilabel=True$"):  # Python names, not the flags
            stream_report(str(tmp_path), progress=False)
