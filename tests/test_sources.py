"""The registry of confidence sources is the only list of them (calibkit/lm/sources.py).

A second list (a tuple of names in a reader, the CLI's help, a plugin, the guide) is how a new
source ends up read but not offered, or offered under another spelling (``letter`` from a served
model, ``letters`` from an Inspect log, before the registry). These tests read the package's source
for such lists, hold the guide's table, the command line's choices and help, the readers' old
public names and the kinds to the registry, and check the one message of an unknown source.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import calibkit
from calibkit.lm import sources
from calibkit.lm.sources import KINDS, NEEDS, REGISTRY, Source, check_source, names, source_kind, sources_table

PACKAGE = Path(calibkit.__file__).parent
ROOT = PACKAGE.parent
SOURCE_NAMES = {s.name for s in REGISTRY} | {old for s in REGISTRY for old in s.old_names}


def source_lists(text: str) -> list[tuple[int, list[str]]]:
    """(line, names) of every list/tuple/set literal naming 2+ confidence sources, except ``__all__``."""
    tree = ast.parse(text)
    exported = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and id(node) not in exported:
            hits = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in SOURCE_NAMES]
            if len(hits) >= 2:
                found.append((node.lineno, hits))
    return found


def test_the_scan_finds_a_second_list():
    assert source_lists('SOURCES = ("sequence", "sequence_normalized", "least_token")\n') == [
        (1, ["sequence", "sequence_normalized", "least_token"])
    ]
    assert source_lists('if {"sequence", "sequence_normalized"} & asked: pass\n') == [
        (1, ["sequence", "sequence_normalized"])
    ]
    assert source_lists('x = ["verbalized", "letters"]\n') == [(1, ["verbalized", "letters"])]
    assert source_lists('__all__ = ["sequence", "ptrue"]\nx = ("sequence", "probs")\n') == []


@pytest.mark.parametrize(
    "path",
    sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if p != PACKAGE / "lm" / "sources.py"),
)
def test_no_other_list_of_sources_in_the_package(path):
    assert source_lists((PACKAGE / path).read_text()) == []


# What the command line and the plugins compute nothing of: they name no source but through the
# registry. "sequence" is also a sequence classifier and "letters" the --letters option there.
NOT_ONLY_SOURCES = {"sequence", "letters"}


DOORS_WITHOUT_SOURCES = sorted(
    str(p.relative_to(PACKAGE)) for folder in ("cli", "plugins") for p in (PACKAGE / folder).glob("*.py")
)


@pytest.mark.parametrize("path", DOORS_WITHOUT_SOURCES)
def test_the_command_line_and_the_plugins_name_no_source_by_hand(path):
    tree = ast.parse((PACKAGE / path).read_text())
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    named = [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and node.value in SOURCE_NAMES - NOT_ONLY_SOURCES
        and id(node) not in docstrings
    ]
    assert named == []


def test_each_entry_is_whole_and_one_name_each():
    assert len({s.name for s in REGISTRY}) == len(REGISTRY)
    olds = [old for s in REGISTRY for old in s.old_names]
    assert len(set(olds)) == len(olds) and not set(olds) & {s.name for s in REGISTRY}
    for s in REGISTRY:
        assert s.kind in KINDS and s.kind != sources.GIVEN, s
        assert s.needs and s.needs <= set(NEEDS), s
        assert s.doors and set(s.doors) <= set(sources.DOORS), s
        assert s.description and "\n" not in s.description, s
    assert set(KINDS) == {s.kind for s in REGISTRY} | {sources.GIVEN}  # no kind without a source


def test_the_old_public_names_are_the_registrys():
    from calibkit.cli.report_generations import WHITEBOX_HELP
    from calibkit.lm.generations import AGREEMENT_SOURCES, WHITEBOX
    from calibkit.lm.generations.consistency import CONSISTENCY
    from calibkit.lm.inspect_logs import LETTERS
    from calibkit.lm.inspect_logs import SOURCES as INSPECT
    from calibkit.lm.served import SOURCES as SERVED

    assert SERVED == INSPECT == names("served", choices=False) == names("inspect", choices=False)
    assert SERVED == ("sequence", "sequence_normalized", "least_token")  # the order of every output, unchanged
    assert LETTERS == sources.LETTER == "letter"
    assert WHITEBOX == names("model") == ("sequence", "sequence_normalized", "ptrue")
    assert WHITEBOX_HELP == ", ".join(WHITEBOX)
    assert AGREEMENT_SOURCES == names(kind="samples") == names("samples")
    assert AGREEMENT_SOURCES[:2] == ("agreement", "semantic_entropy")  # the groups' counts, then the consistency
    assert AGREEMENT_SOURCES[2:] == CONSISTENCY


def test_the_consistency_scores_are_the_registrys():
    from calibkit.lm.generations.consistency import CONSISTENCY, consistency_scores, consistency_uncertainties

    samples = [["a b", "a", "b c"], ["x", "x"]]
    assert tuple(consistency_uncertainties(samples)) == tuple(consistency_scores(samples)) == CONSISTENCY


def test_an_unknown_source_gets_one_message_listing_the_known_ones():
    with pytest.raises(ValueError) as caught:
        check_source("entropy")
    assert str(caught.value) == f"`source`: unknown confidence source 'entropy'; known: {', '.join(names())}"
    with pytest.raises(ValueError, match=r"^`sources`: .*; known: judge \(in the data\), verbalized$"):
        check_source("entropy", "sources", among=["verbalized"], present={"judge": None})
    with pytest.raises(ValueError, match="`door`: unknown door 'weights'; known: model, served"):
        names("weights")
    assert check_source("judge", present=["judge"]) == "judge" and check_source("ptrue") == "ptrue"


def test_the_old_spelling_is_read_with_a_warning_and_a_column_of_that_name_is_the_column():
    with pytest.warns(FutureWarning, match="`source`: the confidence source 'letters' is renamed 'letter'"):
        assert check_source("letters") == "letter"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_source("letters", present=["letters"]) == "letters"  # a file's own column
    with pytest.raises(ValueError, match="unknown confidence source 'letters'; known: sequence, sequence_normalized"):
        with pytest.warns(FutureWarning):
            check_source("letters", among=names("model"))  # renamed, and still not one this door computes


def test_kinds_are_the_registrys_and_any_other_column_is_given(tmp_path):
    from calibkit.lm.generations import read_generations

    rows = [{"id": str(i), "answer": "a", "correct": i % 2, "judge": 0.5, "ptrue": 0.25} for i in range(4)]
    file = tmp_path / "answers.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = read_generations(file)
    assert data.kinds == {"judge": "given", "ptrue": "white-box"}
    assert data.with_source("verbalized", np.full(4, 0.5)).kinds["verbalized"] == "verbalized"
    assert data.with_source("mine", np.full(4, 0.5)).kinds["mine"] == "given"
    with pytest.raises(ValueError, match="`kind`: 'sequence' is not a kind of confidence source; known: log-prob"):
        data.with_source("sequence", np.full(4, 0.5), "sequence")  # a name, not a kind
    assert {source_kind(s.name) for s in REGISTRY} <= set(KINDS) and source_kind("judge") == "given"


def test_the_guide_holds_the_registrys_table():
    guide = (ROOT / "docs" / "guide" / "generations.rst").read_text()
    assert sources_table() in guide
    table = guide.split("   * - source\n     - kind\n", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"^   \* - (.+)$", table, re.M)
    assert listed == [*(f"``{s.name}``" for s in REGISTRY), "any other column"]  # exactly the registry's sources


def test_a_new_source_is_one_entry(monkeypatch):
    extra = Source("entropy", "log-probabilities", frozenset({"log-probabilities"}), "one more", ("served",))
    monkeypatch.setattr(sources, "REGISTRY", (*REGISTRY, extra))
    assert names("served", choices=False)[-1] == "entropy" and "entropy" in names()
    assert check_source("entropy") == "entropy"
    assert "   * - ``entropy``\n     - log-probabilities\n     - log-probabilities\n     - served\n     - one more" in (
        sources_table()
    )


@pytest.mark.parametrize("command", ["generations", "served"])
def test_the_help_lists_each_source_the_command_computes_with_its_description(capsys, command):
    from calibkit.cli import main

    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    listed = text.split("confidence sources (--confidence):\n", 1)[1]
    shown = re.findall(r"^  (\w+) +(.+(?:\n {4,}.+)*)", listed, re.M)
    computed = {
        "generations": ("verbalized", *names("model"), *names("samples")),
        "served": (*names("served"), "verbalized"),
    }[command]
    assert sorted(name for name, _ in shown) == sorted(computed)
    for name, description in shown:
        assert " ".join(description.split()) == sources.lookup(name).description
