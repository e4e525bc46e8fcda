"""`calibkit report` on bad input: each case exits with status 2 and one line on stderr (no
traceback), and nothing is scored that was not in the file as written (issue 14)."""

import io
import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import Dataset, DatasetDict

import calibkit
from calibkit.cli import main
from tests.test_cli_report import save_tiny


def run(capsys, *args, command="report"):
    capsys.readouterr()
    code = main([command, *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(capsys, expected: str, *args, command="report"):
    code, _, err = run(capsys, *args, command=command)
    assert code == 2, (args, err)
    assert err.startswith("calibkit: error:") and err.count("\n") == 1, err
    assert expected in err, err


def good_npz(path, n=50, k=3, seed=0):
    rng = np.random.default_rng(seed)
    np.savez(path, logits=rng.normal(size=(n, k)), labels=rng.integers(0, k, n))
    return path


# -- silently wrong before: now refused ------------------------------------------------------------


def test_token_jsonl_row_with_fewer_logits_than_labels_is_refused(tmp_path, capsys):
    path = tmp_path / "tokens.jsonl"
    rows = [{"logits": [[4, 0, 0], [0, 4, 0]], "labels": [0, 1, 2]}, {"logits": [[0, 0, 4]], "labels": [2]}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert_one_line_error(capsys, "row 0 has 2 `logits` vectors but 3 labels", "--predictions", path)


@pytest.mark.parametrize(
    "columns, expected",
    [
        (["probs_0", "probs_1", "probs_3"], "probs_2 missing"),
        (["probs_1", "probs_2"], "probs_0 missing"),
        (["probs_0", "probs_01"], "'probs_01' is not of the form"),
        (["probs_0", "probs_x"], "'probs_x' is not of the form"),
        (["probs_0", "logits_1"], "both probs_* and logits_*"),
        (["scores_0", "scores_1"], "needs a `probs` or `logits` column"),
    ],
)
def test_wide_csv_columns_must_be_exactly_0_to_k_minus_1(tmp_path, capsys, columns, expected):
    path = tmp_path / "wide.csv"
    rows = [",".join([*columns, "labels"])] + [",".join(["0.5"] * len(columns) + ["0"])] * 3
    path.write_text("\n".join(rows) + "\n")
    assert_one_line_error(capsys, expected, "--predictions", path)


def test_wide_csv_columns_in_any_order_are_read_by_their_index(tmp_path, capsys):
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.3, 0.6, 0.1], [0.5, 0.25, 0.25]])
    labels = np.array([0, 2, 0, 1])
    path = tmp_path / "wide.csv"
    lines = ["probs_2,labels,probs_0,probs_1"] + [f"{p[2]},{y},{p[0]},{p[1]}" for p, y in zip(probs, labels)]
    path.write_text("\n".join(lines) + "\n")
    code, out, _ = run(capsys, "--predictions", path, "--json", "--theta", "0")
    assert code == 0
    assert json.loads(out)["ece"] == calibkit.ece(probs, labels)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".json", ".jsonl"])
def test_table_files_keep_their_float_dtype(tmp_path, capsys, dtype, suffix):
    """datasets turned float64 into float32 (ECE 0.26835977683 from npz, 0.26835977569 from parquet)."""
    rng = np.random.default_rng(3)
    logits = (rng.normal(size=(400, 4)) * 3).astype(dtype)
    labels = rng.integers(0, 4, 400)
    path = tmp_path / f"preds{suffix}"
    if suffix == ".parquet":
        pq.write_table(pa.table({"logits": pa.array(list(logits)), "labels": labels}), path)
        expected = calibkit.ece(logits, labels, from_logits=True)  # the file's own dtype
    else:
        if suffix == ".csv":
            lines = [",".join([f"logits_{k}" for k in range(4)] + ["labels"])]
            lines += [",".join([*(repr(float(v)) for v in row), str(y)]) for row, y in zip(logits, labels)]
            path.write_text("\n".join(lines) + "\n")
        else:
            rows = [{"logits": [float(v) for v in row], "labels": int(y)} for row, y in zip(logits, labels)]
            path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        expected = calibkit.ece(logits.astype(np.float64), labels, from_logits=True)  # text holds float64
    code, out, _ = run(capsys, "--predictions", path, "--json")
    assert code == 0
    assert json.loads(out)["ece"] == expected


def test_json_document_forms_are_read(tmp_path, capsys):
    logits = [[2.0, 0.0], [0.0, 1.0], [1.0, 3.0]]
    labels = [0, 1, 0]
    expected = calibkit.ece(np.array(logits), labels, from_logits=True)
    records = tmp_path / "records.json"
    records.write_text(json.dumps([{"logits": z, "labels": y} for z, y in zip(logits, labels)]))
    columns = tmp_path / "columns.json"
    columns.write_text(json.dumps({"logits": logits, "labels": labels}))
    for path in (records, columns):
        code, out, err = run(capsys, "--predictions", path, "--json", "--theta", "0")
        assert code == 0, err
        assert json.loads(out)["ece"] == expected


def test_token_rows_equal_the_padded_array(tmp_path, capsys):
    rng = np.random.default_rng(4)
    lengths = [3, 1, 4, 2]
    rows = [rng.normal(size=(n, 3)).tolist() for n in lengths]
    labels = [rng.integers(0, 3, n).tolist() for n in lengths]
    labels[2][1] = -100
    path = tmp_path / "tokens.jsonl"
    path.write_text("\n".join(json.dumps({"logits": z, "labels": y}) for z, y in zip(rows, labels)) + "\n")
    padded = np.zeros((4, 4, 3))
    padded_labels = np.full((4, 4), -100)
    for i, (z, y) in enumerate(zip(rows, labels)):
        padded[i, : len(z)] = z
        padded_labels[i, : len(y)] = y
    code, out, _ = run(capsys, "--predictions", path, "--json", "--theta", "0")
    assert code == 0
    got = json.loads(out)
    expected = calibkit.calibration_report(padded, padded_labels, from_logits=True, theta=0)
    assert got["n"] == expected["n"] == 9
    for key in ("ece", "nll", "sce", "ace"):
        assert got[key] == pytest.approx(expected[key], rel=1e-12)


def test_model_head_must_match_task(tmp_path, capsys):
    model, _ = save_tiny(tmp_path, "sequence")
    _, data = save_tiny(tmp_path, "token")
    assert_one_line_error(
        capsys,
        "--task token: ",
        "--model",
        model,
        "--dataset",
        data,
        "--task",
        "token",
        "--theta",
        "5",
        command="compare",
    )
    _, err = capsys.readouterr()
    token_model, _ = save_tiny(tmp_path, "token")
    _, seq_data = save_tiny(tmp_path, "sequence")
    assert_one_line_error(capsys, "use --task token", "--model", token_model, "--dataset", seq_data, command="compare")


# -- tracebacks before: now one line, status 2 -----------------------------------------------------


def npz_cases(tmp_path):
    good = good_npz(tmp_path / "good.npz")
    data = good.read_bytes()
    cases = {}
    (tmp_path / "empty.npz").write_bytes(b"")
    cases["empty.npz"] = "not a readable .npz"
    (tmp_path / "truncated.npz").write_bytes(data[: len(data) // 2])
    cases["truncated.npz"] = "not a readable .npz"
    (tmp_path / "random.npz").write_bytes(np.random.default_rng(0).bytes(4000))
    cases["random.npz"] = "not a readable .npz"
    # bad CRC: np.savez stores without compression, so flip one byte of the logits' data
    corrupt = bytearray(data)
    at = data.index(b"logits.npy") + 400
    corrupt[at] ^= 0xFF
    (tmp_path / "badcrc.npz").write_bytes(bytes(corrupt))
    cases["badcrc.npz"] = "is damaged"
    # a header that claims 2**40 float64 elements, with 80 bytes of data behind it
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (2**40,)})
    with zipfile.ZipFile(tmp_path / "huge.npz", "w") as archive:
        archive.writestr("probs.npy", header.getvalue() + bytes(80))
        labels = io.BytesIO()
        np.lib.format.write_array(labels, np.zeros(10, dtype=np.int64))
        archive.writestr("labels.npy", labels.getvalue())
    cases["huge.npz"] = "claims shape (1099511627776,)"
    with zipfile.ZipFile(tmp_path / "objects.npz", "w") as archive:
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, np.array([[0.5, 0.5]], dtype=object), allow_pickle=True)
        archive.writestr("probs.npy", buffer.getvalue())
        archive.writestr("labels.npy", labels.getvalue())
    cases["objects.npz"] = "holds Python objects"
    np.savez(tmp_path / "nolabels.npz", probs=np.eye(2))
    cases["nolabels.npz"] = "needs arrays `labels`"
    return cases


def test_damaged_npz_files(tmp_path, capsys):
    for name, expected in npz_cases(tmp_path).items():
        assert_one_line_error(capsys, expected, "--predictions", tmp_path / name)


def test_npz_larger_than_memory_says_how_much_it_needs(tmp_path, capsys, monkeypatch):
    import calibkit.io.prediction_files as files

    monkeypatch.setattr(files, "available_memory", lambda: 1000)
    path = good_npz(tmp_path / "good.npz", n=200)
    assert_one_line_error(capsys, "GiB of memory to load, and 0.00 GiB are available", "--predictions", path)


def test_table_and_json_files_that_cannot_be_read(tmp_path, capsys):
    rng = np.random.default_rng(0)
    cases = {
        "random.csv": (rng.bytes(3000), "cannot be read as CSV"),
        "empty.csv": (b"", "cannot be read as CSV"),
        "corrupt.json": (b'{"logits": [4, 0, 0], "labels": 0}\n{"logits": [1.5, 0], "lab', "cannot be read as JSON"),
        "corrupt.jsonl": (b'{"logits": [4, 0, 0], "labels": 0', "cannot be read as JSON"),
        "scalar.json": (b"3", "cannot be read as JSON"),
        "random.parquet": (rng.bytes(3000), "cannot be read as Parquet"),
        "classes.jsonl": (
            b'{"logits": [4, 0, 0], "labels": 0}\n{"logits": [1.5, 0], "labels": 1}\n',
            "has 2 values in row 1 but 3 in row 0",
        ),
        "token-classes.jsonl": (
            b'{"logits": [[4, 0, 0]], "labels": [0]}\n{"logits": [[1, 0, 0], [1.5, 0]], "labels": [1, 0]}\n',
            "row 1 has a token with 2 classes but row 0 has 3",
        ),
        "nulls.jsonl": (b'{"logits": [4, 0], "labels": 0}\n{"logits": [1.5, 0], "labels": null}\n', "null value"),
        "nullrow.jsonl": (b'{"logits": [4, 0], "labels": 0}\n{"labels": 1}\n', "`logits` is null in row 1"),
        "strings.jsonl": (b'{"logits": ["a", "b"], "labels": 0}\n', "must hold numbers"),
        "scalar-logits.jsonl": (b'{"logits": 4, "labels": 0}\n', "must hold a list of numbers per row"),
        "mixed.jsonl": (b'{"logits": [[4, 0]], "labels": 0}\n', "`labels` must hold a list of token labels"),
        "mixed2.jsonl": (b'{"logits": [4, 0], "labels": [0]}\n', "`labels` holds a list per row"),
        "nolabels.csv": (b"probs_0,probs_1\n0.5,0.5\n", "needs a `labels` column"),
        "labels.csv": (b"probs_0,probs_1,labels\n0.5,0.5,x\n", "`labels` must hold numbers"),
        "badlabel.csv": (b"probs_0,probs_1,labels\n0.5,0.5,1e20\n", "1e+20"),
        "range.csv": (b"probs_0,probs_1,labels\n0.5,0.5,2\n", "`labels` must lie in [0, 2)"),
        "notprobs.csv": (b"probs_0,probs_1,labels\n3.5,0.5,1\n", "outside [0, 1]"),
        "suffix.txt": (b"", "expected .npz, .parquet"),
    }
    for name, (content, expected) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        assert_one_line_error(capsys, expected, "--predictions", path)
    assert_one_line_error(capsys, "no such file", "--predictions", tmp_path / "absent.npz")


@pytest.mark.parametrize(
    "options, expected",
    [
        (["--bootstrap", "1000000000"], "--bootstrap must be an integer in [0, 100000]"),
        (["--bootstrap", "-3"], "--bootstrap must be an integer in [0, 100000], got -3"),
        (["--seed", "-1"], "--seed must be an integer >= 0, got -1"),
        (["--n-bins", "0"], "--n-bins must be an integer >= 1"),
        (["--n-bins", "10000000"], "--n-bins must be an integer in [1, 1000000]"),
        (["--theta", "-1"], "--theta must be a number >= 0"),
        (["--theta", "nan"], "--theta must be a number >= 0"),
        (["--ignore-index", str(2**70)], "--ignore-index must fit in int64"),
    ],
)
def test_out_of_range_options(tmp_path, capsys, options, expected):
    assert_one_line_error(capsys, expected, "--predictions", good_npz(tmp_path / "p.npz"), *options)


@pytest.mark.parametrize("command", ["choices", "compare", "generations"])
def test_out_of_range_resplits_before_any_input_is_read(capsys, command):
    given = {"choices": ["--predictions", "logs"], "compare": ["--model", "m", "--dataset", "d"]}
    expected = "--resplits must be an integer in [0, 10000], got -1"  # 0: no re-splits
    args = given.get(command, ["--answers", "a.jsonl"])
    assert_one_line_error(capsys, expected, *args, "--resplits", "-1", command=command)


@pytest.mark.parametrize("option", [["--calibrate"], ["--score", "chars"], ["--resplits", "3"], ["--answers", "a"]])
def test_an_option_of_another_command_is_refused_not_ignored(tmp_path, capsys, option):
    # --calibrate on a file of logits printed the plain table: nothing calibrated, and no notice
    with pytest.raises(SystemExit) as stop:
        main(["report", "--predictions", str(good_npz(tmp_path / "p.npz")), *option])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and f"unrecognized arguments: {option[0]}" in err, err


def test_an_option_the_input_cannot_use_is_refused_not_ignored(tmp_path, capsys):
    expected = "--approximate-ace (shards): not used"
    assert_one_line_error(capsys, expected, "--predictions", good_npz(tmp_path / "p.npz"), "--approximate-ace")


def test_output_that_cannot_be_written(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    path = good_npz(tmp_path / "p.npz")
    assert_one_line_error(capsys, "--output: cannot write to", "--predictions", path, "--output", blocker / "out")
    assert_one_line_error(capsys, "--output: cannot write to", "--predictions", path, "--output", blocker)
    assert_one_line_error(capsys, "--output: cannot write to", "--predictions", path, "--output", "/proc/calibkit")


def test_model_report_on_bad_datasets(tmp_path, capsys):
    model, data = save_tiny(tmp_path, "sequence")
    empty = tmp_path / "empty"
    no_rows = Dataset.from_dict({"text": ["w1"], "label": [0]}).filter(lambda row: False)
    DatasetDict({"test": no_rows}).save_to_disk(empty)
    assert_one_line_error(capsys, "has no rows", "--model", model, "--dataset", empty, command="compare")
    (tmp_path / "empty.jsonl").write_text("")
    assert_one_line_error(
        capsys, "the file is empty", "--model", model, "--dataset", tmp_path / "empty.jsonl", command="compare"
    )
    _, token_data = save_tiny(tmp_path, "token")
    assert_one_line_error(
        capsys, "use --task token", "--model", model, "--dataset", token_data, "--task", "sequence", command="compare"
    )
    assert_one_line_error(
        capsys, "use --task sequence", "--model", model, "--dataset", data, "--task", "token", command="compare"
    )
    folder = tmp_path / "not-a-dataset"
    folder.mkdir()
    assert_one_line_error(capsys, "--dataset: cannot load", "--model", model, "--dataset", folder, command="compare")
    broken = tmp_path / "broken.json"
    broken.write_text('{"text": "a", "label": ')
    assert_one_line_error(capsys, "--dataset: cannot load", "--model", model, "--dataset", broken, command="compare")


def test_missing_hub_dataset_offline_is_one_line_in_a_fresh_process(tmp_path):
    model, _ = save_tiny(tmp_path, "sequence")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    proc = subprocess.run(
        [sys.executable, "-m", "calibkit.cli", "compare", "--model", str(model), "--dataset", "nobody/no-such-data"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("calibkit: error: --dataset: cannot load nobody/no-such-data")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_memory_error_is_one_line(tmp_path, capsys, monkeypatch):
    import calibkit.metrics

    def exhausted(*args, **kwargs):
        raise MemoryError("Unable to allocate 8.00 TiB for an array with shape (2**40,)")

    monkeypatch.setattr(calibkit.metrics, "calibration_report", exhausted)
    assert_one_line_error(
        capsys, "not enough memory (Unable to allocate 8.00 TiB", "--predictions", good_npz(tmp_path / "p.npz")
    )


@pytest.mark.parametrize(
    "args, expected",
    [
        (["report", "--fce-variant", "Authors"], "argument --fce-variant: invalid choice: 'Authors'"),
        (["report", "--bins", "3"], "unrecognized arguments: --bins 3"),
        (["frobnicate"], "argument COMMAND: invalid choice: 'frobnicate'"),
    ],
)
def test_a_bad_option_is_one_line_and_exit_2(capsys, args, expected):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("calibkit: error: ") and expected in err


def test_a_csv_header_repeating_a_column_is_one_line(tmp_path, capsys):
    (tmp_path / "dup.csv").write_text("probs_0,probs_1,probs_1,labels\n0.5,0.2,0.3,1\n")
    assert_one_line_error(
        capsys, "the header repeats the column(s) ['probs_1']", "--predictions", str(tmp_path / "dup.csv")
    )


def test_a_text_value_in_a_csv_column_is_named_with_its_row(tmp_path, capsys):
    (tmp_path / "text.csv").write_text("probs_0,probs_1,labels\n0.5,0.5,1\n0.4,abc,0\n")
    assert_one_line_error(
        capsys,
        "`probs_1` must hold numbers, it holds string ('abc' in row 1)",
        "--predictions",
        str(tmp_path / "text.csv"),
    )


@pytest.mark.parametrize(
    "options, expected",
    [
        (["--threads", "0"], "`--threads` must be an integer >= 1, got 0"),
        (["--max-train", "0"], "`--max-train` must be an integer >= 1, got 0"),
        (["--bootstrap", "-3"], "--bootstrap must be an integer in [0, 100000], got -3"),
        (["--resplits", "-1"], "--resplits must be an integer in [0, 10000], got -1"),
        (["--epochs", "-1"], "`--epochs` must be a number > 0, got -1.0"),
        (["--epochs", "nan"], "`--epochs` must be a number > 0"),
        (["--seed", "-1"], "--seed must be an integer >= 0, got -1"),
    ],
)
def test_demo_options_are_checked_before_the_model_is_loaded(tmp_path, capsys, monkeypatch, options, expected):
    """They failed with a traceback, or after the whole training run, or (--epochs -1) reported on
    an untrained model with exit 0."""
    import calibkit.demos

    def no_training(*args, **kwargs):
        raise AssertionError("the demo ran before its options were checked")

    monkeypatch.setattr(calibkit.demos, "run_demo", no_training)
    capsys.readouterr()
    assert main(["demo", "--output", str(tmp_path / "out"), *options]) == 2
    err = capsys.readouterr().err
    assert err.startswith("calibkit: error:") and err.count("\n") == 1 and expected in err, err
