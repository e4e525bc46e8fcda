"""`calibkit --help` and every sub-command's help read as plain text in a terminal, each with an example;
each command lists only the options its input takes, the settings generated from CalibrationSettings."""

import dataclasses
import inspect
import re

import pytest

from calibkit.cli import main
from calibkit.cli import options as cli_options
from calibkit.metrics.settings import CalibrationSettings, names

COMMANDS = [
    "demo",
    "report",
    "choices",
    "generations",
    "served",
    "multilabel",
    "compare",
    "judge",
    "install-modules",
    "warmup",
]
# reST that a terminal would print as it is: ``literal``, :role:`target`, `link`_ and .. directives.
MARKUP = re.compile(r"``|:[a-z]+:`|`_|^\s*\.\. ", re.MULTILINE)


def help_text(capsys, argv):
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("argv", [[], *[[c] for c in COMMANDS]])
def test_help_is_plain_text_with_an_example(capsys, argv):
    text = help_text(capsys, argv)
    assert not MARKUP.search(text), MARKUP.search(text).group(0)
    example = text.split("example:\n", 1)[1].splitlines()[0].strip()
    assert example.startswith("calibkit ")
    if argv:  # the example is a valid command line for this parser
        assert example.split()[1] == argv[0]


def test_the_top_help_lists_every_command(capsys):
    text = help_text(capsys, [])
    for command in COMMANDS:
        assert re.search(rf"^\s+{re.escape(command)}\s", text, re.MULTILINE), command


# What each input-kind command takes, and options of the other kinds its --help must not list.
OWN = {
    "report": ["--predictions", "--approximate-ace", "--quiet", "--bootstrap", "--next-token", "--output", "--json"],
    "choices": ["--predictions", "--score", "--calibrate", "--resplits", "--n-bins", "--theta", "--fce-variant"],
    "generations": ["--answers", "--confidence", "--threshold", "--model", "--gguf-file", "--bootstrap", "--n-bins"],
    "served": [
        "--answers",
        "--gold",
        "--letters",
        "--top-logprobs",
        "--batch-input",
        "--confidence",
        "--threshold",
        "--resplits",
        "--abstention-alpha",
        "--output",
    ],
    "multilabel": ["--predictions", "--bootstrap", "--quiet", "--ace-ranges", "--eps", "--ignore-index", "--output"],
    "compare": ["--model", "--dataset", "--split", "--task", "--resplits", "--rbece-bins", "--output"],
}
FOREIGN = {
    "report": ["--model", "--dataset", "--calibrate", "--score", "--generations", "--answers", "--multilabel",
               "--threshold", "--resplits", "--task", "--from-logits", "--coverage"],
    "choices": ["--model", "--bootstrap", "--approximate-ace", "--answers", "--multilabel", "--ace-ranges",
                "--ignore-index"],
    "generations": ["--predictions", "--dataset", "--calibrate", "--score", "--multilabel", "--theta",
                    "--approximate-ace", "--ignore-index", "--gold", "--letters", "--top-logprobs", "--batch-input"],
    "served": ["--predictions", "--model", "--gguf-file", "--metric", "--harness-filter", "--agreement-answer",
               "--theta", "--ignore-index"],
    "multilabel": ["--model", "--multilabel", "--next-token", "--calibrate", "--score",
                   "--approximate-ace", "--resplits", "--sce-bins"],
    "compare": ["--predictions", "--calibrate", "--score", "--answers", "--multilabel", "--ignore-index",
                "--approximate-ace", "--next-token", "--quiet"],
}  # fmt: skip


def options_listed(text):
    return set(re.findall(r"^\s+(--[a-z-]+)", text, re.MULTILINE))


@pytest.mark.parametrize("command", sorted(OWN))
def test_a_command_lists_only_its_own_options(capsys, command):
    listed = options_listed(help_text(capsys, [command]))
    assert set(OWN[command]) <= listed, set(OWN[command]) - listed
    assert not listed & set(FOREIGN[command]), listed & set(FOREIGN[command])


@pytest.mark.parametrize(
    "command, settings, door",
    [
        ("report", cli_options.FILE_SETTINGS, "calibkit.metrics:calibration_report"),
        ("multilabel", cli_options.MULTILABEL_SETTINGS, "calibkit.metrics:calibration_report"),
        ("choices", cli_options.CHOICE_SETTINGS, "calibkit.lm.multiple_choice:multiple_choice_report"),
        ("compare", cli_options.COMPARE_SETTINGS, "calibkit.verdicts.comparison:compare_calibrators"),
        ("generations", cli_options.GENERATION_SETTINGS, "calibkit.lm.generations:generations_report"),
        ("served", cli_options.GENERATION_SETTINGS, "calibkit.lm.generations:generations_report"),
    ],
)
def test_setting_flags_are_the_dataclass_fields_the_door_takes(capsys, command, settings, door):
    import importlib

    module, name = door.split(":")
    taken = set(inspect.signature(getattr(importlib.import_module(module), name)).parameters)
    assert set(settings) <= taken & set(names())
    text = help_text(capsys, [command])
    defaults = {f.name: f.default for f in dataclasses.fields(CalibrationSettings)}
    for setting in settings:
        option = "--" + setting.replace("_", "-")
        assert option in options_listed(text), option
        if not isinstance(defaults[setting], bool):  # its default, read from the dataclass
            assert f"(default: {defaults[setting]})" in " ".join(text.split(option, 2)[2].split()[:80]), setting
    # every setting a door takes is on the command, but those that do not apply to its input
    left_out = {"from_logits", "multilabel", "coverage"}  # the file says; another command; a metric asked by name
    left_out |= {"multilabel": {"next_token", "sce_bins"}, "compare": {"ignore_index"}}.get(command, set())
    assert taken & set(names()) - set(settings) <= left_out


def test_a_setting_is_on_report_when_a_reported_metric_uses_it():
    from calibkit.metrics.registry import METRICS, metric

    used = {setting for name in METRICS for setting in metric(name).settings}
    assert set(cli_options.FILE_SETTINGS) == used | {"next_token", "ignore_index"}
    assert "coverage" not in cli_options.FILE_SETTINGS  # selective accuracy is asked for by name


def test_the_settings_help_is_the_dataclass_docstring_as_plain_text():
    texts = cli_options.descriptions()
    assert set(texts) == set(names())
    assert texts["rbece_bins"] == "Equal-width bins for RBECE."
    assert not any(MARKUP.search(text) for text in texts.values())


MAX_OPTIONS = 20
"""The most options a command lists in its --help, -h/--help counted (issue 63: generations had 21)."""


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_at_most_twenty_options(capsys, command):
    listed = re.findall(r"^  (-[-a-zA-Z]+)", help_text(capsys, [command]), re.MULTILINE)  # -h, --help is one
    assert "-h" in listed and len(listed) == len(set(listed))
    assert len(listed) <= MAX_OPTIONS, (command, len(listed), listed)
    from calibkit.cli.parser import build_parser

    parser = next(a for a in build_parser({c: print for c in COMMANDS})._actions if a.choices).choices[command]
    assert len(listed) == len([a for a in parser._actions if a.option_strings])  # none hidden from --help


def test_library_errors_name_the_flags():
    from calibkit.cli.common import name_flags

    assert name_flags("`n_bins` must be an integer >= 1, got 0") == "--n-bins must be an integer >= 1, got 0"
    assert name_flags("`seed` must be >= 0; `predictions` too") == "--seed must be >= 0; --predictions too"
    assert name_flags("needs arrays `labels`") == "needs arrays `labels`"  # a file's column, not an argument


def documented_command_lines():
    """Every ``calibkit ...`` line of the guide's and README's bash blocks, continuation lines joined."""
    import shlex
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    blocks = []
    for page in sorted((root / "docs" / "guide").glob("*.rst")):
        blocks += re.findall(r"^\.\. code-block:: bash\n\n((?:(?:   .*)?\n)+)", page.read_text(), re.MULTILINE)
    blocks += re.findall(r"^```bash\n(.*?)^```", (root / "README.md").read_text(), re.MULTILINE | re.DOTALL)
    lines = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            tokens = shlex.split(line, comments=True)
            if tokens[:1] == ["calibkit"] and not any(t.startswith("[") for t in tokens):  # not a synopsis
                lines.append(tokens[1:])
    return lines


def test_the_documented_command_lines_are_the_new_commands(capsys):
    from calibkit.cli.legacy import rewrite
    from calibkit.cli.parser import build_parser

    lines = documented_command_lines()
    assert {line[0] for line in lines} >= {"report", "choices", "generations", "multilabel", "compare", "demo"}
    parser = build_parser({name: print for name in COMMANDS})
    for argv in lines:
        assert rewrite(argv) is argv, argv  # no deprecation line
        parser.parse_args(argv)  # exits on an option the command does not take
    assert capsys.readouterr().err == ""
