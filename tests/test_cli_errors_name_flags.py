"""Library errors name Python arguments, the command line names its flags (issue 63, item 3).

Library code (anything outside calibkit/cli/) names the argument a caller passed, in backticks
("`gold`: ..."); the command line maps each name to the flag of the command that passed it
(``calibkit.cli.common.FLAGS``, one table). Two tests hold that: a source scan, so that no flag
is written in library code, and every command run on a catalogue of bad input, so that every
flag an error names exists on that command (``read_generations`` said ``--generations``, a flag
``calibkit generations`` never had: issue 62, item 4).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

from calibkit.cli import main
from calibkit.cli.parser import build_parser
from tests.test_generations import answers, harness_samples, write_jsonl
from tests.test_judges import judged_files

ROOT = Path(__file__).resolve().parents[1] / "calibkit"
FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")

# -- (a) no flag in library code ---------------------------------------------------------------

ALLOWED = {
    "demos/llm.py": (
        r"pip install --no-deps|\(--no-deps:|calibkit demo --task llm: ",
        "pip's own flag in the install hint; the progress line names the command the demo was run by",
    ),
    "demos/llm_answers.py": (r"pip install --no-deps", "pip's own flag in the install hint"),
    "demos/llm_harness.py": (r"--[a-z_]+", "the lm_eval command line the demo runs, with lm_eval's flags"),
    "plots/pages.py": (r"var\(--[\w-]+\)|(?<=[{;\s])--[\w-]+:", "CSS custom properties (--fg: ...; var(--fg))"),
}
"""Library files whose string literals may hold ``--x``: what may appear there, and why."""


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the bare string statements: docstrings, and the attribute docstrings under constants."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }


def flags_in_library_strings(text: str, allowed: str | None = None) -> list[tuple[int, str]]:
    """The ``--flag``s in a module's string literals (f-strings' parts included), docstrings left out."""
    tree = ast.parse(text)
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            value = re.sub(allowed, "", node.value) if allowed else node.value
            found += [(node.lineno, flag) for flag in FLAG.findall(value)]
    return found


def test_the_scan_finds_a_flag_in_a_raise_and_in_a_constant_a_message_is_built_from():
    planted = 'OPTION = "--answers"\ndef f(x):\n    """Docs may say --answers."""\n'
    planted += '    raise ValueError(f"{OPTION}: {x} or --gold FILE")\n'
    assert flags_in_library_strings(planted) == [(1, "--answers"), (4, "--gold")]
    assert flags_in_library_strings('raise ValueError(f"`gold`: {x}")') == []


def test_no_library_module_writes_a_command_line_flag():
    """Every string literal outside calibkit/cli/ but docstrings: raised messages, and the constants
    and ``where`` prefixes they are built from (``OPTION = "--generations"`` was one)."""
    seen = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("cli/"):
            continue
        allowed = ALLOWED.get(relative, (None, ""))[0]
        seen += [
            f"calibkit/{relative}:{line}: {flag}" for line, flag in flags_in_library_strings(path.read_text(), allowed)
        ]
    assert not seen, "library code names command-line flags (name the Python argument, in backticks):\n" + "\n".join(
        seen
    )


# -- (b) every flag an error names exists on its command ---------------------------------------

FOREIGN = {"--no-deps"}
"""Flags of other tools that an error may name (pip's, in the demos' install hints)."""


def option_strings() -> dict[str, set[str]]:
    """Each command's option strings, from the parser itself."""
    parser = build_parser(dict.fromkeys(COMMANDS, print))
    commands = next(action for action in parser._actions if action.choices).choices
    return {name: {o for a in command._actions for o in a.option_strings} for name, command in commands.items()}


COMMANDS = (
    "demo", "report", "choices", "generations", "served", "multilabel", "compare", "judge", "install-modules", "warmup",
)  # fmt: skip


def _chat(answer: str = " B") -> dict:
    token = {"token": answer, "logprob": -0.5, "top_logprobs": [{"token": answer, "logprob": -0.5}]}
    return {
        "id": "c", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": {"content": [token]},
                     "message": {"role": "assistant", "content": answer}}],
    }  # fmt: skip


def _batch(folder: Path, ids: list[str]) -> Path:
    lines = [{"custom_id": i, "response": {"status_code": 200, "body": _chat()}, "error": None} for i in ids]
    return write_jsonl(folder / "batch_output.jsonl", lines)


def catalogue(tmp: Path) -> list[tuple[str, list[str], str]]:
    """(command, arguments, what the error line says) for bad input at every command."""
    missing = str(tmp / "missing.jsonl")
    table = write_jsonl(tmp / "answers.jsonl", answers(40))
    no_id = write_jsonl(tmp / "no_id.jsonl", [{k: v for k, v in r.items() if k != "id"} for r in answers(4)])
    twice = write_jsonl(tmp / "twice.jsonl", answers(4) + answers(4)[:1])
    (tmp / "nostated").mkdir()
    nostated = write_jsonl(tmp / "nostated" / "a.jsonl", [{"id": "1", "answer": "yes", "correct": 1}])
    filters = harness_samples(tmp / "h" / "samples_t_2026-01-01T00-00-00.jsonl", filters=("strict", "flexible"))
    batch = _batch(tmp / "b", ["q0", "q1", "q2"])
    repeated = _batch(tmp / "r", ["q0", "dup", "q2", "dup"])
    gold = write_jsonl(tmp / "gold.jsonl", [{"id": f"q{q}", "gold": "B"} for q in range(3)])
    gold_e = write_jsonl(tmp / "gold_e.jsonl", [{"id": f"q{q}", "gold": "E"} for q in range(3)])
    gold_twice = write_jsonl(tmp / "gold2.jsonl", [{"id": i, "gold": "B"} for i in ("q0", "q1", "q2", "q1")])
    write_jsonl(tmp / "m" / "answers.jsonl", answers(4))  # answers, and no served response
    np.savez(tmp / "nolabels.npz", probs=np.eye(2))
    bad_choice = write_jsonl(tmp / "choices.jsonl", [{"choice_logprobs": [-1.0, -2.0], "gold": 5}])
    (tmp / "empty").mkdir()
    served = ["--gold", str(gold)]
    jf = judged_files(tmp / "judges")
    judged = ["--judged", str(jf["judged"]), "--labels"]
    return [
        ("report", ["--predictions", str(tmp / "missing.npz")], "--predictions: no such file"),
        ("report", ["--predictions", str(tmp / "nolabels.npz")], "--predictions: "),
        ("report", ["--predictions", str(tmp / "empty")], "--predictions"),
        ("report", ["--n-bins", "0"], "--n-bins must be"),
        ("report", ["--bootstrap", "-1"], "--bootstrap"),
        ("report", ["--output", str(table)], "--output: cannot write"),
        ("multilabel", ["--predictions", str(tmp / "missing.npz")], "--predictions: no such file"),
        ("multilabel", ["--predictions", str(tmp / "nolabels.npz")], "--predictions"),
        ("choices", ["--predictions", missing], "--predictions: no such file or folder"),
        ("choices", ["--predictions", str(tmp / "empty")], "--predictions: no lm-evaluation-harness samples"),
        ("choices", ["--predictions", str(bad_choice)], "--predictions: "),
        ("choices", ["--predictions", str(bad_choice), "--theta", "-1"], "--theta"),
        ("generations", ["--answers", missing], "--answers: no such file or folder"),
        ("generations", ["--answers", str(no_id)], "--answers: "),
        ("generations", ["--answers", str(twice)], "--confidence agreement reads them"),
        ("generations", ["--answers", str(filters)], "name one (--harness-filter)"),
        ("generations", ["--answers", str(filters), "--harness-filter", "x"], "--answers: "),
        ("generations", ["--answers", str(table), "--confidence-words", "high"], "--confidence-words: expected"),
        ("generations", ["--answers", str(table), "--threshold", "2"], "--threshold"),
        ("generations", ["--answers", str(table), "--confidence", "nope"], "--confidence: unknown confidence"),
        ("generations", ["--answers", str(table), "--confidence", "ptrue"], "--model DIR"),
        ("generations", ["--answers", str(table), "--abstention-alpha", "2"], "--abstention-alpha"),
        ("generations", ["--answers", str(nostated)], "(--confidence verbalized), or a model's (--model DIR"),
        ("generations", ["--answers", str(table), "--confidence", "agreement", "--agreement-answer", "scored"],
         "--answers: "),
        ("served", ["--answers", missing, *served], "--answers: no such file or folder"),
        ("served", ["--answers", str(batch)], "(--gold: a file with id"),
        ("served", ["--answers", str(batch), "--gold", missing], "--gold: no such file"),
        ("served", ["--answers", str(batch), "--gold", str(gold_twice)], "--gold: "),
        ("served", ["--answers", str(repeated), *served], "--answers: "),
        ("served", ["--answers", str(batch), *served, "--batch-input", missing], "--batch-input: no such file"),
        ("served", ["--answers", str(batch), *served, "--batch-input", str(batch)], "--batch-input: "),
        ("served", ["--answers", str(batch), *served, "--top-logprobs", "5"], "--answers: "),
        ("served", ["--answers", str(batch), "--gold", str(gold_e), "--letters", "ABCD"], "is none of the letters"),
        ("served", ["--answers", str(batch), *served, "--letters", "AAB"], "letters"),
        ("served", ["--answers", str(batch), *served, "--confidence-words", "x"], "--confidence-words: "),
        ("served", ["--answers", str(tmp / "m"), *served], "--answers: "),
        ("served", ["--answers", str(tmp / "b"), *served, "--n-bins", "0"], "--n-bins"),
        ("compare", ["--model", missing, "--dataset", missing], "--dataset"),
        ("judge", ["--judged", missing, "--labels", str(jf["labels"])], "--judged: no such file or folder"),
        ("judge", [*judged, missing], "--labels: no such file or folder"),
        ("judge", [*judged, str(jf["judged"])], "--labels: "),
        ("judge", [*judged, str(gold)], "--labels: "),
        ("judge", ["--judged", str(gold), "--labels", str(jf["labels"])], "--judged: "),
        ("judge", [*judged, str(jf["labels"]), "--other-judged", str(jf["judged2"])], "--other-labels"),
        ("judge", [*judged, str(jf["labels"]), "--other-judged", missing, "--other-labels", str(jf["labels2"])],
         "--other-judged: no such file"),
        ("judge", [*judged, str(jf["labels"]), "--threshold", "2"], "--threshold"),
        ("judge", [*judged, str(jf["labels"]), "--n-bins", "0"], "--n-bins"),
        ("demo", ["--bootstrap", "-1"], "--bootstrap"),
        ("demo", ["--epochs", "0"], "--epochs"),
        ("install-modules", ["nope", "--modules-cache", str(tmp / "cache")], "`name` must be one of"),
    ]  # fmt: skip


def test_every_flag_an_error_names_exists_on_its_command(tmp_path, capsys):
    options = option_strings()
    cases = catalogue(tmp_path)
    assert {command for command, _, _ in cases} >= {"report", "choices", "generations", "served", "multilabel"}
    wrong = []
    for command, argv, expected in cases:
        capsys.readouterr()
        try:
            code = main([command, *argv])
        except SystemExit as stop:  # the parser's own errors
            code = stop.code
        err = capsys.readouterr().err
        line = err.splitlines()[-1] if err else ""
        assert code == 2 and line.startswith("calibkit: error: "), (command, argv, code, err)
        assert expected in line, (command, argv, line)
        named = set(FLAG.findall(line)) - FOREIGN
        if named - options[command]:
            wrong.append(f"calibkit {command}: {sorted(named - options[command])} in {line!r}")
        if re.search(r"`(path|location|file)`", line):  # what a reader calls the file the command gave it
            wrong.append(f"calibkit {command}: a reader's argument left unnamed as its flag in {line!r}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    "command, message, said",
    [
        ("generations", "`location`: no such file or folder: x", "--answers: no such file or folder: x"),
        ("served", "`file`: a: custom_id 'd' appears twice", "--answers: a: custom_id 'd' appears twice"),
        ("served", "`gold`: g.csv: id 'q' appears twice", "--gold: g.csv: id 'q' appears twice"),
        ("served", "`batch_input`: no such file: i", "--batch-input: no such file: i"),
        ("choices", "`location`: no such file or folder: x", "--predictions: no such file or folder: x"),
        (
            "choices",
            "`location`: f, question 0: `gold` 5 is no index",
            "--predictions: f, question 0: `gold` 5 is no index",
        ),
        ("report", "`path`: no such file: a.npz", "--predictions: no such file: a.npz"),
        ("generations", "`gold`: a column", "`gold`: a column"),  # no --gold on generations: left as it is
    ],
)
def test_one_table_maps_each_argument_to_the_flag_of_the_command_that_passed_it(command, message, said):
    from calibkit.cli.common import name_flags

    assert name_flags(message, command) == said
