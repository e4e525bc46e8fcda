"""`calibkit --help` and every sub-command's help read as plain text in a terminal, each with an example."""

import re

import pytest

from calibkit.cli import main

COMMANDS = ["demo", "report", "install-modules", "warmup"]
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
