"""The plugins share one skeleton (calibkit/plugins/skeleton.py, ChoiceData.stack, check_question).

Each plugin module keeps its tool's glue only: the source scan below holds them to it (no
plugin builds a ChoiceData, checks a question, or decides a row's direction by itself), and the
unit tests pin what the shared pieces do. None of them imports a tool.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import calibkit.plugins
from calibkit.lm.multiple_choice import ChoiceData, check_question
from calibkit.metrics.registry import REGISTRY
from calibkit.plugins.skeleton import INTERVAL_SUFFIXES, OTHER_ROWS, higher_is_better, interval_rows, metric_rows

PLUGINS = sorted(
    p for p in Path(calibkit.plugins.__file__).parent.glob("*.py") if p.stem not in ("__init__", "skeleton")
)


def own_skeleton(source: str) -> list[str]:
    """What a plugin re-derives: a ChoiceData built, a direction from a literal, an interval's row name, a twin."""
    tree = ast.parse(source)
    defined = [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    found = [f"{name} defined twice" for name in sorted({n for n in defined if defined.count(n) > 1})]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if name == "ChoiceData":
                found.append(f"line {node.lineno}: ChoiceData(...) (stack with ChoiceData.stack)")
            for keyword in node.keywords:
                if keyword.arg == "higher_is_better" and _literal(keyword.value):
                    found.append(f"line {node.lineno}: higher_is_better={ast.unparse(keyword.value)}")
        if isinstance(node, ast.Assign) and _literal(node.value):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and "higher_is_better" in ast.unparse(target.value):
                    found.append(f"line {node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for word in ("_ci95_", "_ci_low", "_ci_high", "_ci_lower", "_ci_upper"):
                if (
                    word in node.value
                    and not node.value.strip().startswith(("calibkit", "`"))
                    and "\n" not in node.value
                ):
                    found.append(f"line {node.lineno}: the interval's row name {node.value!r} (use interval_rows)")
    return found


def _literal(value: ast.AST) -> bool:
    """A value fixed in the source: a constant, a literal collection, or a test of membership in one."""
    if isinstance(value, ast.Compare):
        return any(isinstance(c, (ast.Tuple, ast.List, ast.Set, ast.Dict)) for c in value.comparators)
    return isinstance(value, (ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Dict))


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.stem)
def test_no_plugin_re_derives_the_skeleton(plugin):
    assert own_skeleton(plugin.read_text(encoding="utf-8")) == []


def test_the_scan_sees_what_a_plugin_re_derives():
    planted = (
        "data = ChoiceData(task, ids, ll, gold, None, None, src)\n"
        "m = CorpusLevelMetric(metric_name='x', higher_is_better=False)\n"
        "g = Grouping(higher_is_better={'accuracy': True})\n"
        "self._higher_is_better[key] = metric in ('accuracy', 'selective_accuracy')\n"
        "out[f'{m}_ci_low'] = low\n"
        "def _metric(f):\n    pass\n"
        "def _metric(name, n_bins):\n    pass\n"
    )
    assert len(own_skeleton(planted)) == 6
    fine = "data = ChoiceData.stack(ll, gold, task=t, source=s)\nself._higher_is_better[key] = higher_is_better(m)\n"
    assert own_skeleton(fine) == []


def test_every_row_takes_the_registrys_direction():
    for m in REGISTRY:
        assert higher_is_better(m.name) is m.higher_is_better
        assert all(higher_is_better(row) is m.higher_is_better for row in interval_rows(m.name))
        assert higher_is_better(f"{m.name}_stderr") is m.higher_is_better
    assert higher_is_better("brier_discrimination") is True  # lm-eval's own literal said lower is better
    assert all(higher_is_better(row) is flag for row, flag in OTHER_ROWS.items())
    with pytest.raises(ValueError, match="unknown metric 'eec'"):
        higher_is_better("eec")


def test_torchmetrics_class_flag_agrees_with_the_registry():
    """torchmetrics takes one class-level constant (it refuses to set it on an instance): lower is better."""
    source = (Path(calibkit.plugins.__file__).parent / "torchmetrics.py").read_text(encoding="utf-8")
    assert "    higher_is_better = False\n" in source
    assert not any(higher_is_better(m) for m in ("ece", "brier", "nll", "aurc", "cece"))


def test_interval_rows_are_one_scheme_each_metric_then_its_interval():
    assert interval_rows("ece_chars") == ("ece_chars_ci_lower", "ece_chars_ci_upper")
    assert INTERVAL_SUFFIXES == tuple(sorted(INTERVAL_SUFFIXES))  # lower before upper in a table sorted by name
    rows = metric_rows({"ece": 0.1, "brier": 0.2, "cece": None}, {"ece": (0.05, 0.2)}, ["brier", "ece", "cece"], "_x")
    assert list(rows) == ["brier_x", "ece_x", "ece_x_ci_lower", "ece_x_ci_upper"]
    assert rows["ece_x_ci_lower"] == 0.05 and rows["ece_x_ci_upper"] == 0.2


def test_stack_pads_each_question_and_marks_unknown_lengths():
    data = ChoiceData.stack(
        [[-1.0, -2.0], np.array([-0.5, -1.5, -3.0])], [1, 2], task="t", source="f",
        chars=[[1, 2], None], bytes=[[1, 2], [3, 4]], tokens=[[], None],
    )  # fmt: skip
    np.testing.assert_array_equal(data.loglik, [[-1.0, -2.0, np.nan], [-0.5, -1.5, -3.0]])
    np.testing.assert_array_equal(data.chars, [[1, 2, np.nan], [np.nan] * 3])  # None: unknown
    np.testing.assert_array_equal(data.bytes, [[1, 2, np.nan], [np.nan] * 3])  # 2 lengths for 3 choices: unknown
    assert data.tokens is None  # no question has them
    assert data.gold.dtype == np.int64 and data.doc_id.tolist() == [0, 1]
    assert data.task.tolist() == ["t", "t"] and data.source.tolist() == ["f", "f"]
    padded = ChoiceData.stack(data.loglik, data.gold, task=["a", "b"], source="f", doc_id=["x", "y"], chars=data.bytes)
    np.testing.assert_array_equal(padded.loglik, data.loglik)
    assert padded.task.tolist() == ["a", "b"] and padded.doc_id.tolist() == ["x", "y"]


@pytest.mark.parametrize(
    ("n", "logprobs", "gold", "message"),
    [
        (0, [], 0, "the question has no choice"),
        (3, [-1.0, -2.0], 0, "2 log-probabilities for 3 choices"),
        (2, [-1.0, float("inf")], 0, "a log-probability is not finite"),
        (2, [-1.0, -2.0], [0, 1], r"`gold_index` \[0, 1\] is not one index of the 2 choices"),
        (2, [-1.0, -2.0], 2, "`gold_index` 2 is not one index"),
    ],
)
def test_one_question_check(n, logprobs, gold, message):
    with pytest.raises(ValueError, match=rf"^doc 7: {message}"):
        check_question("doc 7", n, logprobs, gold)
