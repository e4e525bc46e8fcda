"""The registries are the only lists of metric and calibrator names in the library.

A second list (a tuple of names in the CLI, the callback, a card generator) is how a new metric
ends up in the report but not in the table: these tests read the source for such lists.
"""

import ast
from pathlib import Path

import pytest

import calibkit
from calibkit.calibrators import registry as calibrator_registry
from calibkit.calibrators.modeling_calibkit import METHODS
from calibkit.evaluate_modules import MODULE_NAMES, modules_root
from calibkit.metrics.registry import METRICS, REGISTRY

PACKAGE = Path(calibkit.__file__).parent
METRIC_NAMES = {m.name for m in REGISTRY}
CALIBRATOR_NAMES = set(calibrator_registry.NAMES)

# modeling_calibkit.py is copied next to a calibrated model's weights and must load without
# calibkit, so it keeps its own method names (checked equal to the registry below).
SELF_CONTAINED = {"calibrators/modeling_calibkit.py"}


def name_lists(source: str) -> list[tuple[int, list[str]]]:
    """(line, names) of every list/tuple/set literal naming 3+ metrics or 3+ calibrators, except ``__all__``."""
    tree = ast.parse(source)
    exported = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and id(node) not in exported:
            strings = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            for names in (METRIC_NAMES, CALIBRATOR_NAMES):
                hits = [s for s in strings if s in names]
                if len(hits) >= 3:
                    found.append((node.lineno, hits))
    return found


def test_the_scan_finds_a_second_list():
    assert name_lists("TABLE = ('ece', 'ace', 'rbece')\n") == [(1, ["ece", "ace", "rbece"])]
    assert name_lists("m = ['ts', 'wts', 'rd-ts']\n") == [(1, ["ts", "wts", "rd-ts"])]
    assert name_lists("__all__ = ['ece', 'ace', 'rbece']\nx = ('ece', 'probs')\n") == []


@pytest.mark.parametrize(
    "path",
    sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if not p.name == "registry.py"),
)
def test_no_other_list_of_names_in_the_package(path):
    if path in SELF_CONTAINED:
        pytest.skip("self-contained by design; checked against the registry below")
    assert name_lists((PACKAGE / path).read_text()) == []


def test_no_list_of_names_in_the_evaluate_scripts():
    for script in sorted(modules_root().glob("*/*.py")):
        assert name_lists(script.read_text()) == [], script


def test_the_saved_head_knows_every_registered_calibrator():
    # ... and the multi-label heads: MultiLabelScaling (every scaling mode) and MultiLabelIsotonic, and the reward head
    assert set(METHODS) == CALIBRATOR_NAMES | {"multilabel", "multilabel-ir", "reward-ts"}


def test_every_reported_metric_has_its_function_and_every_module_its_folder():
    for name in METRICS:
        assert callable(getattr(calibkit, name)), name
    for name in MODULE_NAMES:
        assert (modules_root() / name / f"{name}.py").is_file(), name
