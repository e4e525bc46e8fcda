"""Import discipline, read from the source: no module reaches into another package's private
names, the package's rooms stand on floors that import one way (the functional core at the bottom,
the command line on top), and so do the floors inside calibkit.metrics."""

import ast
from pathlib import Path

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
    the importing module: ``calibkit._numba.cache`` may be used anywhere in calibkit, and
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
    ok.write_text("from calibkit._numba.cache import CACHE\nfrom calibkit.metrics.validation import to_numpy\n")
    assert private_reaches(ok, "calibkit.calibrators") == []


def test_no_module_imports_another_packages_private_name():
    found = [hit for path, _, package in _modules() for hit in private_reaches(path, package)]
    assert found == []


# --------------------------------------------------------------------------------------------
# Import circles and the floors of calibkit.metrics


def import_graph(root: Path, package: str) -> dict[str, dict[str, list[tuple[int, bool]]]]:
    """Module -> {imported calibkit module: [(line, inside a function)]}, every import statement counted.

    ``from a.b import c`` counts as an import of module ``a.b.c`` when that is a module, else of
    ``a.b``; relative imports are resolved. A name taken from a parent package's ``__init__`` is an
    edge to that package (which imports its submodules: a circle).
    """
    base = root.parent
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(base).with_suffix("").parts
        is_init = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_init else parts)
        modules[name] = (path, name if is_init else name.rpartition(".")[0])

    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    return {name: _edges(path, name, pkg, package, resolve) for name, (path, pkg) in modules.items()}


def _edges(path: Path, name: str, pkg: str, package: str, resolve) -> dict[str, list[tuple[int, bool]]]:
    edges: dict[str, list[tuple[int, bool]]] = {}

    def visit(node, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            targets = []
            if isinstance(child, ast.Import):
                targets = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    anchor = pkg.split(".")[: len(pkg.split(".")) - (child.level - 1)]
                    module = ".".join(anchor + ([child.module] if child.module else []))
                else:
                    module = child.module or ""
                targets = [f"{module}.{alias.name}" for alias in child.names]
            for target in targets:
                found = resolve(target) if target.split(".")[0] == package else None
                if found and found != name:
                    edges.setdefault(found, []).append((child.lineno, inner))
            visit(child, inner)

    visit(ast.parse(path.read_text()), False)
    return edges


def import_circles(graph) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan), as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    counter = [0]

    def connect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return circles


GRAPH = import_graph(ROOT, "calibkit")

# The floors of calibkit.metrics, lowest first: a module imports only its own floor or lower ones
# (CONTRIBUTING.md draws them). Each entry: a module, or a package prefix ending in ".".
METRICS_FLOORS = (
    ("the user's engine switch, the compiled kernels", ("calibkit.metrics.backends", "calibkit.metrics._kernels")),
    ("input checks, the papers", ("calibkit.metrics.validation", "calibkit.metrics.papers")),
    ("settings", ("calibkit.metrics.settings", "calibkit.metrics.sampling")),
    (
        "the statistics type, the selective buckets and the abstention threshold",
        (
            "calibkit.metrics.statistics",
            "calibkit.metrics.ranking",
            "calibkit.metrics.rejection",
            "calibkit.metrics.abstention",
        ),
    ),
    ("engines", ("calibkit.metrics.engines",)),
    (
        "formulas, smooth ECE and CORP on rows",
        ("calibkit.metrics.formulas", "calibkit.metrics.smooth", "calibkit.metrics.corp"),
    ),
    ("registry", ("calibkit.metrics.sums", "calibkit.metrics.registry")),
    (
        "doors",
        (
            "calibkit.metrics.report",
            "calibkit.metrics.accumulator",
            "calibkit.metrics.bootstrap",
            "calibkit.metrics.exact_ace",
            "calibkit.metrics.multilabel",
            "calibkit.metrics.decomposition",
            "calibkit.metrics.conformal",
            "calibkit.metrics.preferences",
            "calibkit.metrics.judges",
        ),
    ),
    ("functions and warm-up", ("calibkit.metrics.functional", "calibkit.metrics.warmup")),
)


def floor_of(module: str) -> int | None:
    if module == "calibkit.metrics":
        return len(METRICS_FLOORS)  # the package's face re-exports every floor
    for level, (_, prefixes) in enumerate(METRICS_FLOORS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return level
    return None


def upward_imports(graph, floor_fn=floor_of, floors=METRICS_FLOORS) -> list[str]:
    """Every import of a higher floor, by ``floor_fn`` (the metrics' floors, or the package's)."""

    def name(level: int) -> str:
        return floors[level][0] if level < len(floors) else "the package's face"

    found = []
    for source, edges in graph.items():
        mine = floor_fn(source)
        if mine is None:
            continue
        for target, sites in edges.items():
            theirs = floor_fn(target)
            if theirs is not None and theirs > mine:
                found.append(
                    f"{source} (floor {name(mine)!r}) imports {target} (floor {name(theirs)!r}) at line {sites[0][0]}"
                )
    return found


def test_no_import_circle_in_calibkit_counting_imports_inside_functions():
    assert import_circles(GRAPH) == []


def test_every_metrics_module_has_a_floor():
    assert [name for name in GRAPH if name.startswith("calibkit.metrics") and floor_of(name) is None] == []


def test_metrics_floors_import_only_downward():
    assert upward_imports(GRAPH) == []


def test_metrics_imports_calibkit_modules_at_module_top_only():
    """Imports inside functions are for optional heavy dependencies (torch, matplotlib), never for
    calibkit's own modules: one placed there would be hiding a circle."""
    found = [
        f"{source}:{line} imports {target} inside a function"
        for source, edges in GRAPH.items()
        if source.startswith("calibkit.metrics")
        for target, sites in edges.items()
        for line, inner in sites
        if inner
    ]
    assert found == []


def test_the_rules_see_planted_mistakes(tmp_path):
    pkg = tmp_path / "calibkit"
    (pkg / "metrics").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "metrics" / "__init__.py").write_text("from calibkit.metrics import registry\n")
    (pkg / "metrics" / "statistics.py").write_text("def f():\n    from calibkit.metrics.registry import g\n")
    (pkg / "metrics" / "registry.py").write_text("from calibkit.metrics import statistics\n")
    (pkg / "metrics" / "formulas.py").write_text("from .registry import g\n")
    graph = import_graph(pkg, "calibkit")
    # a circle made through an import inside a function, and the package importing its own parts is none
    assert import_circles(graph) == [["calibkit.metrics.registry", "calibkit.metrics.statistics"]]
    ups = upward_imports(graph)
    assert len(ups) == 2 and any("statistics" in u and "imports calibkit.metrics.registry" in u for u in ups)
    assert any(u.startswith("calibkit.metrics.formulas") for u in ups)  # a relative import, resolved


# --------------------------------------------------------------------------------------------
# The package's floors: a module imports only its own floor or lower ones (CONTRIBUTING.md draws
# them). Imports inside functions count: a lazy import is still a dependency.

PACKAGE_FLOORS = (
    ("private helpers", ("calibkit._version", "calibkit._numba", "calibkit._moved")),
    ("the functional core", ("calibkit.metrics",)),
    ("the evaluate modules and the package's face", ("calibkit.evaluate_modules", "calibkit")),
    ("input formats", ("calibkit.io",)),
    ("calibrators", ("calibkit.calibrators",)),
    ("the Trainer callback; figures and tables", ("calibkit.callbacks", "calibkit.plots")),
    ("verdicts", ("calibkit.verdicts",)),
    ("language models", ("calibkit.lm",)),
    ("calibkit inside other tools", ("calibkit.plugins",)),
    ("demos", ("calibkit.demos",)),
    ("the command line", ("calibkit.cli",)),
)


def package_floor_of(module: str) -> int | None:
    best = None
    for level, (_, prefixes) in enumerate(PACKAGE_FLOORS):
        for prefix in prefixes:
            # "calibkit" is the face (calibkit/__init__.py) itself, not everything under it
            hit = module == prefix or (prefix != "calibkit" and module.startswith(prefix + "."))
            if hit:
                best = level
    return best


def package_upward_imports(graph) -> list[str]:
    return upward_imports(graph, package_floor_of, PACKAGE_FLOORS)


def test_every_calibkit_module_has_a_package_floor():
    assert [name for name in GRAPH if package_floor_of(name) is None] == []


def test_package_floors_import_only_downward():
    assert package_upward_imports(GRAPH) == []


def test_no_module_stands_loose_at_the_top_of_the_package():
    """The top of calibkit holds rooms (subpackages); only the face and private helpers are files there."""
    loose = sorted(p.name for p in ROOT.glob("*.py") if p.name != "__init__.py" and not p.name.startswith("_"))
    assert loose == []


def test_the_package_rule_sees_a_planted_upward_import(tmp_path):
    pkg = tmp_path / "calibkit"
    for sub in ("metrics", "io", "cli", "verdicts"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from calibkit import metrics\n")
    (pkg / "metrics" / "core.py").write_text("def f():\n    from calibkit.cli import main\n")  # lazy, still upward
    (pkg / "io" / "files.py").write_text("from calibkit.verdicts import plots\n")
    (pkg / "verdicts" / "plots.py").write_text("from calibkit.io import files\nfrom calibkit.metrics import core\n")
    (pkg / "cli" / "main.py").write_text("from calibkit.verdicts import plots\n")
    ups = package_upward_imports(import_graph(pkg, "calibkit"))
    assert len(ups) == 2
    assert any(u.startswith("calibkit.metrics.core") and "calibkit.cli" in u for u in ups)
    assert any(u.startswith("calibkit.io.files") and "calibkit.verdicts.plots" in u for u in ups)


MAX_FILE_LINES = 700
MAX_FUNCTION_LINES = 80
"""Lines of code of one function, its docstring excluded (comments and blank lines count)."""


def _measured_files():
    """Library files whose size is held: all but the numba kernels (loops unrolled by hand for speed)."""
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("metrics/_kernels/") or rel in ("_numba/fastmath.py", "calibrators/_kernels.py"):
            continue
        yield rel, path


def code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The lines of a function from its ``def`` to its end, less its docstring's."""
    length = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        length -= first.end_lineno - first.lineno + 1
    return length


def oversized(files) -> list[str]:
    found = []
    for rel, path in files:
        text = path.read_text()
        if len(text.splitlines()) > MAX_FILE_LINES:
            found.append(f"{rel}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = code_lines(node)
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{rel}:{node.lineno} {node.name}() is {length} lines of code")
    return found


def test_no_library_file_or_function_is_oversized():
    assert oversized(_measured_files()) == []


def test_the_size_rule_sees_a_long_function_and_not_its_docstring(tmp_path):
    docstring = '    """One line.\n\n' + "    More words.\n" * 50 + '    """\n'
    body = "    x = 1\n" * (MAX_FUNCTION_LINES - 1)  # with the def: the most a function may hold
    files = {
        "fits.py": "def f():\n" + docstring + body,
        "long.py": "def f():\n" + docstring + body + "    x = 2\n",
        "no_doc.py": "def f():\n" + body + "    x = 2\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    found = oversized([(name, tmp_path / name) for name in files])
    assert found == ["long.py:1 f() is 81 lines of code", "no_doc.py:1 f() is 81 lines of code"]
