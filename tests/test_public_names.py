"""Every public name of 4e32ce0 (the release before issue 54's restructuring) still imports.

tests/data/public_names_4e32ce0.json lists, for each public module of that commit (no path part
starting with ``_``; a package by its ``__init__``; and the old paths its calibkit/_moved.py still
served, with their new paths' names), its public names: the module's ``__all__``
where it has one, else the classes, functions and constants its own body defines (not starting
with ``_``; imported names are not its own). Each module must import and give each name; a name
or module that moved may warn (DeprecationWarning, through calibkit/_moved.py), never fail.

The list is written from the commit's sources (a module whose ``__all__`` is computed is imported
there, to read it)::

    git worktree add /tmp/old 4e32ce0 && python tests/test_public_names.py /tmp/old
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

COMMIT = "4e32ce0"
DATA = Path(__file__).parent / "data" / f"public_names_{COMMIT}.json"

NEEDS = {  # module prefix -> the optional package it imports at its top
    "calibkit.evaluate_modules": "evaluate",
    "calibkit.io.dask": "dask",
}

SPLIT = {}
"""(module, name) -> why it fails here: names of calibrators/ and callbacks/ that the ``split`` branch
(which restructures those packages) re-exports; remove an entry once it imports."""


def module_name(path: str) -> str | None:
    """``calibkit/io/shards.py`` -> ``calibkit.io.shards``; None for a private module."""
    parts = path.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if any(part.startswith("_") for part in parts):
        return None
    return ".".join(parts)


def public_names(source: str) -> list[str] | None:
    """The module's ``__all__`` (None where it is computed), else the public names its body defines."""
    tree = ast.parse(source)
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
            try:
                return sorted(ast.literal_eval(node.value))
            except ValueError:  # computed (``[*other.__all__, ...]``)
                return None
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for target in node.targets for t in ast.walk(target) if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return sorted(n for n in names if not n.startswith("_"))


def public_moves(source: str) -> dict[str, str]:
    """The ``MOVED`` table (old module path -> new) of a calibkit/_moved.py."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "MOVED" for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


def write_list(checkout: Path) -> dict[str, list[str]]:
    """Read the public modules and names of a checkout of ``COMMIT``, and store them."""
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert head.stdout.startswith(COMMIT), f"{checkout} is not at {COMMIT}"
    modules = {}
    for path in sorted((checkout / "calibkit").rglob("*.py")):
        name = module_name(path.relative_to(checkout).as_posix())
        if name is None:
            continue
        names = public_names(path.read_text(encoding="utf-8"))
        if names is None:
            code = f"import json, {name} as m; print(json.dumps(sorted(m.__all__)))"
            out = subprocess.run([sys.executable, "-c", code], cwd=checkout, capture_output=True, text=True, check=True)
            names = json.loads(out.stdout.splitlines()[-1])
        modules[name] = names
    moved = public_moves((checkout / "calibkit" / "_moved.py").read_text(encoding="utf-8"))
    for old, new in moved.items():  # the old paths that the commit still served (calibkit/_moved.py)
        modules.update({old + m[len(new) :]: modules[m] for m in list(modules) if m == new or m.startswith(new + ".")})
    modules = dict(sorted(modules.items()))
    DATA.write_text(json.dumps({"commit": head.stdout.strip(), "modules": modules}, indent=1) + "\n")
    return modules


def listed() -> list[tuple[str, str]]:
    modules = json.loads(DATA.read_text())["modules"]
    return [(module, name) for module, names in modules.items() for name in ["", *names]]


def imported(module: str):
    """Import ``module``, a moved one's warning allowed; skip when an optional package it needs is absent."""
    for prefix, package in NEEDS.items():
        if module == prefix or module.startswith(prefix + "."):
            pytest.importorskip(package)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module(module)


@pytest.mark.parametrize(("module", "name"), listed(), ids=lambda v: v or "(module)")
def test_a_public_name_of_the_release_still_imports(module, name):
    if (module, name) in SPLIT:
        pytest.xfail(SPLIT[module, name])
    found = imported(module)
    if name:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            assert hasattr(found, name), f"`from {module} import {name}` fails"


def test_the_list_is_the_commits_and_not_empty():
    data = json.loads(DATA.read_text())
    assert data["commit"].startswith(COMMIT)
    modules = data["modules"]
    assert len(modules) > 100 and "calibkit" in modules and "calibration_report" in modules["calibkit"]
    assert all(name is not None for name in modules)


def test_the_names_are_read_as_said():
    assert public_names("__all__ = ['b', 'a']\ndef c(): pass\n") == ["a", "b"]
    source = "import os\nfrom x import y\nA = 1\nB: int = 2\n_C = 3\ndef f(): pass\nclass K: pass\ndef _g(): pass\n"
    assert public_names(source) == ["A", "B", "K", "f"]
    assert module_name("calibkit/io/__init__.py") == "calibkit.io"
    assert module_name("calibkit/metrics/_kernels/ece.py") is None


def test_a_name_that_is_gone_is_seen():
    with pytest.raises(AssertionError, match="`from calibkit import no_such_name` fails"):
        test_a_public_name_of_the_release_still_imports("calibkit", "no_such_name")


if __name__ == "__main__":
    print(f"{len(write_list(Path(sys.argv[1])))} modules written to {DATA}")
