"""The command lines of one `calibkit report` for every input keep working for one release: one line on
stderr names the new command, then the new command does the same (issue 54)."""

import json

import numpy as np
import pytest

from calibkit.cli import main
from tests.test_generations import answers, write_jsonl
from tests.test_multiple_choice import sample, write_samples


def output(capsys, argv):
    assert main(argv) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def deprecation(err, old, new):
    line = err.splitlines()[0]
    assert line.startswith(f"calibkit: `calibkit report {old}` is deprecated: use `calibkit {new}`"), line
    assert "removed in the next release" in line
    return err.split("\n", 1)[1]


@pytest.mark.parametrize("option", [["--generations"], ["--gen"], ["--generations="]])
def test_generations(tmp_path, capsys, option):
    file = str(write_jsonl(tmp_path / "gen.jsonl", answers(60)))
    given = [option[0] + file] if option[0].endswith("=") else [*option, file]
    old, err = output(capsys, ["report", *given, "--json", "--resplits", "0", "--n-bins", "5"])
    assert deprecation(err, "--generations", "generations --answers") == ""
    new, err = output(capsys, ["generations", "--answers", file, "--json", "--resplits", "0", "--n-bins", "5"])
    assert err == "" and json.loads(old) == json.loads(new)


def test_multiple_choice_logs(tmp_path, capsys):
    rng = np.random.default_rng(0)
    rows = [sample(i, rng.normal(size=3).tolist(), int(rng.integers(3))) for i in range(40)]
    logs = str(write_samples(tmp_path, "task", rows))
    old, err = output(
        capsys, ["report", "--predictions", logs, "--score", "chars", "--calibrate", "--resplits", "2", "--theta", "0"]
    )
    assert deprecation(err, "--predictions LOGS", "choices") == ""
    new, _ = output(
        capsys, ["choices", "--predictions", logs, "--score", "chars", "--calibrate", "--resplits", "2", "--theta", "0"]
    )
    assert old == new and "Temperature scaling over the choices" in new


@pytest.mark.parametrize("flag", ["--multilabel", "--multi"])
def test_multilabel(tmp_path, capsys, flag):
    rng = np.random.default_rng(1)
    path = str(tmp_path / "ml.npz")
    np.savez(path, logits=rng.normal(size=(80, 3)), labels=(rng.random((80, 3)) < 0.4).astype(float))
    old, err = output(capsys, ["report", "--predictions", path, flag, "--json", "--theta", "3"])
    assert deprecation(err, "--multilabel", "multilabel") == ""
    new, _ = output(capsys, ["multilabel", "--predictions", path, "--json", "--theta", "3"])
    assert old == new and "micro" in json.loads(new)


def test_a_model_and_a_dataset_are_the_compare_command(capsys):
    with pytest.raises(SystemExit) as stop:  # checked by compare's parser: both are needed
        main(["report", "--model", "some-model"])
    err = deprecation(capsys.readouterr().err, "--model --dataset", "compare")
    assert stop.value.code == 2 and "the following arguments are required: --dataset" in err


def test_an_option_the_new_command_does_not_take_is_refused(tmp_path, capsys):
    file = str(write_jsonl(tmp_path / "gen.jsonl", answers(20)))
    with pytest.raises(SystemExit) as stop:  # refused by hand before; now the generations parser has none
        main(["report", "--generations", file, "--predictions", "x.npz"])
    err = deprecation(capsys.readouterr().err, "--generations", "generations --answers")
    assert stop.value.code == 2 and "unrecognized arguments: --predictions x.npz" in err


def test_the_forms_that_stay_are_not_deprecated(tmp_path, capsys):
    path = str(tmp_path / "p.npz")
    np.savez(path, logits=np.random.default_rng(2).normal(size=(50, 3)), labels=np.arange(50) % 3)
    _, err = output(capsys, ["report", "--predictions", path, "--theta", "0"])
    assert err == ""
