"""Import discipline, read from the source: no module reaches into another package's private
names, and the layers import one way (metrics -> calibrators -> callback / reporting -> CLI)."""

import ast
from pathlib import Path

import pytest

import calibkit

ROOT = Path(calibkit.__file__).parent


def _modules():
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            yield path, ".".join(parts[:-1]), ".".join(parts[:-1])
        else:
            yield path, ".".join(parts), ".".join(parts[:-1])


def _imports(path: Path):
    """(line, dotted target) for every ``import a.b`` and ``from a.b import c`` (as ``a.b.c``)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"


def private_reaches(path: Path, package: str) -> list[str]:
    """Imports of a private name (``_x``, not ``__x__``) owned by a package that does not contain
    the importing module: ``calibkit._numba_cache`` may be used anywhere in calibkit, and
    ``calibkit.metrics._kernels`` only inside ``calibkit.metrics``."""
    found = []
    for line, target in _imports(path):
        parts = target.split(".")
        if parts[0] != "calibkit":
            continue
        for i, part in enumerate(parts):
            if part.startswith("_") and not part.startswith("__"):
                owner = parts[:i]
                if not (ROOT.parent.joinpath(*owner) / "__init__.py").exists():
                    owner = owner[:-1]  # a module's private name belongs to the module's package
                owner = ".".join(owner)
                if not (package == owner or package.startswith(owner + ".")):
                    found.append(f"{path.name}:{line} imports {target}")
                break
    return found


def test_the_rule_sees_a_private_reach(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from calibkit.metrics._kernels import exp\nfrom calibkit.metrics.statistics import _lanes\n")
    assert len(private_reaches(bad, "calibkit.calibrators")) == 2
    assert private_reaches(bad, "calibkit.metrics") == []
    ok = tmp_path / "ok.py"
    ok.write_text("from calibkit._numba_cache import CACHE\nfrom calibkit.metrics.validation import to_numpy\n")
    assert private_reaches(ok, "calibkit.calibrators") == []


def test_no_module_imports_another_packages_private_name():
    found = [hit for path, _, package in _modules() for hit in private_reaches(path, package)]
    assert found == []


LOWER_LAYERS_NEVER_IMPORT = {
    "calibkit.metrics": ("calibkit.calibrators", "calibkit.callbacks", "calibkit.reporting", "calibkit.cli"),
    "calibkit.calibrators": ("calibkit.callbacks", "calibkit.reporting", "calibkit.cli"),
    "calibkit.plots": ("calibkit.reporting", "calibkit.cli"),
}


@pytest.mark.parametrize("layer", sorted(LOWER_LAYERS_NEVER_IMPORT))
def test_layers_import_one_way(layer):
    found = [
        f"{name} imports {target}"
        for path, name, _ in _modules()
        if name == layer or name.startswith(layer + ".")
        for _, target in _imports(path)
        if any(target == up or target.startswith(up + ".") for up in LOWER_LAYERS_NEVER_IMPORT[layer])
    ]
    assert found == []
