"""The public API's docstrings follow numpydoc, cite their papers and carry no timings.

Ruff's ``D`` rules (pyproject.toml) check the layout of every docstring of the public package:
a one-line summary in the imperative mood, a blank line, then the body. They cannot tell
whether a docstring documents what it should, so this module does, for every public function
and class and every public method of those classes:

- a ``Parameters`` section naming every parameter of the signature (a class documents its
  constructor's, in the class docstring, as numpydoc and scikit-learn do), and no name that is
  not a parameter;
- a ``Returns`` section (``Yields`` for a generator) when the function returns something;
- for the metric functions of :mod:`calibkit.metrics.functional` that the metric registry links
  to papers, a ``References`` section citing each paper (first author, year, title) and SPEC.md.

Timings and machine-specific measurements belong in ``benchmarks/`` and the README, where
they are dated and reproducible; a docstring keeps the reason in words. The last test scans
every docstring of the public modules for them.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
from pathlib import Path

import pytest

import calibkit
from calibkit.metrics import functional
from calibkit.metrics.papers import PAPERS
from calibkit.metrics.registry import REGISTRY

PACKAGE = Path(calibkit.__file__).parent

# Modules whose ``__all__`` (where defined) or own public names make the public API.
PUBLIC_MODULES = (
    "calibkit",
    "calibkit.metrics",
    "calibkit.calibrators",
    "calibkit.callbacks",
    "calibkit.callbacks.preferences",
    "calibkit.plots",
    "calibkit.plots.figures",
    "calibkit.plots.tables",
    "calibkit.verdicts.reporting",
    "calibkit.verdicts.resplits",
    "calibkit.io.shards",
    "calibkit.io.dask",
    "calibkit.io.prediction_files",
    "calibkit.io.jsonable",
    "calibkit.verdicts.comparison",
    "calibkit.verdicts.held",
    "calibkit.verdicts.claims",
    "calibkit.verdicts.sequences",
    "calibkit.lm.multiple_choice",
    "calibkit.lm.generations",
    "calibkit.lm.generations.whitebox",
    "calibkit.lm.generations.rlcr",
    "calibkit.lm.generations.consistency",
    "calibkit.lm.generations.similarity",
    "calibkit.lm.sources",
    "calibkit.lm.preferences",
    "calibkit.lm.preferences.data",
    "calibkit.lm.preferences.readers",
    "calibkit.lm.preferences.report",
    "calibkit.lm.preferences.rewardbench",
    "calibkit.cli.report_preferences",
    "calibkit.metrics.preferences",
    "calibkit.metrics.judges",
    "calibkit.calibrators.preference",
    "calibkit.calibrators.reward_head",
    "calibkit.lm.judges",
    "calibkit.lm.judges.data",
    "calibkit.lm.judges.inspect_logs",
    "calibkit.lm.judges.lighteval",
    "calibkit.lm.judges.readers",
    "calibkit.lm.judges.report",
    "calibkit.demos.llm",
    "calibkit.demos.llm_harness",
    "calibkit.demos.llm_judges",
    "calibkit.cli",
    "calibkit.cli.common",
    "calibkit.cli.report",
    "calibkit.demos",
    "calibkit.demos.data",
    "calibkit.demos.classifier",
    "calibkit.demos.token",
    "calibkit.demos.sequence",
    "calibkit.demos.rewards",
    "calibkit.demos.rewards_page",
    "calibkit.metrics.statistics",
    "calibkit.metrics.registry",
    "calibkit.metrics.smooth",
    "calibkit.metrics.settings",
    "calibkit.metrics.accumulator",
    "calibkit.metrics.bootstrap",
    "calibkit.metrics.exact_ace",
    "calibkit.metrics.validation",
    "calibkit.metrics.functional",
    "calibkit.metrics.conformal",
    "calibkit.metrics.abstention",
    "calibkit.metrics.rejection",
    "calibkit.lm.generations.quality",
    "calibkit.lm.served",
    "calibkit.lm.inspect_logs",
    "calibkit.plugins.lm_eval",
    "calibkit.plugins.inspect_ai",
    "calibkit.plugins.lighteval",
    "calibkit.plugins.torchmetrics",
    "calibkit.plugins.skeleton",
    "calibkit.evaluate_modules",
    "calibkit.evaluate_modules.cards",
    "calibkit.evaluate_modules.metric",
    "calibkit.calibrators.base",
    "calibkit.calibrators.baselines",
    "calibkit.calibrators.conformal",
    "calibkit.calibrators.beyond",
    "calibkit.calibrators.calibrated",
    "calibkit.calibrators.modeling_calibkit",
    "calibkit.calibrators.modeling_calibkit_heads",
    "calibkit.calibrators.registry",
    "calibkit.calibrators.temperature",
    "calibkit.callbacks.calibration",
)

TIMING = re.compile(
    r"\d(\.\d+)?x (faster|slower)|\d+(\.\d+)? ?(ms|µs|us)\b|CPU seconds|\d+(\.\d+)? ?s (import|of|for|per|against)\b"
)
"""A measured time in prose: ``1.4x faster``, ``10 ms``, ``0.47 of 2.6 CPU seconds``, ``the 7 s import``."""


# --------------------------------------------------------------------------------------------
# The checker


def sections(doc: str) -> dict[str, str]:
    """The numpydoc sections of a cleaned docstring: header -> body (the summary under ``""``)."""
    lines = doc.splitlines()
    out: dict[str, list[str]] = {"": []}
    current = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        underline = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and not line.startswith(" ") and re.fullmatch(r"-{3,}", underline.strip()):
            current = line.strip()
            out[current] = []
            i += 2
            continue
        out[current].append(line)
        i += 1
    return {name: "\n".join(body) for name, body in out.items()}


def documented_names(section: str) -> set[str]:
    """The names of a Parameters section: its unindented lines, before `` : `` (``a, b : int`` gives two)."""
    names = set()
    for line in section.splitlines():
        if not line.strip() or line.startswith(" "):
            continue
        head = line.split(" : ")[0].rstrip(" :")
        names.update(name.strip() for name in head.split(",") if name.strip())
    return names


def _signature(obj) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):  # a builtin base: exceptions, warnings
        return None


def required_parameters(obj) -> tuple[set[str], set[str]]:
    """(names that must be documented, names that may be: ``*args``, ``**kwargs``).

    A class documents the parameters its constructor adds to those of its first base outside
    calibkit (``transformers``' config fields, ``evaluate``'s options are theirs to document).
    """
    signature = _signature(obj)
    if signature is None:
        return set(), set()
    inherited: set[str] = set()
    if inspect.isclass(obj):
        library = next(
            (b for b in obj.__mro__[1:] if not b.__module__.startswith("calibkit") and b is not object), None
        )
        base = _signature(library) if library is not None else None
        inherited = set(base.parameters) if base is not None else set()
    required, optional = set(), set()
    for p in signature.parameters.values():
        if p.name in ("self", "cls"):
            continue
        if p.kind is p.VAR_POSITIONAL:
            optional |= {f"*{p.name}", p.name}
        elif p.kind is p.VAR_KEYWORD:
            optional |= {f"**{p.name}", p.name}
        elif p.name in inherited:
            optional.add(p.name)
        else:
            required.add(p.name)
    return required, optional


def _returns_value(fn) -> bool:
    """Whether ``fn`` says it returns something: its annotation, else a ``return <value>`` or ``yield`` in its body."""
    annotation = _signature(fn).return_annotation
    if annotation is not inspect.Signature.empty:
        return annotation not in (None, "None")
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return False
    body = tree.body[0]

    def walk(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            yield child
            yield from walk(child)

    return any(isinstance(n, (ast.Yield, ast.YieldFrom)) or (isinstance(n, ast.Return) and n.value) for n in walk(body))


def problems(obj, doc: str | None = None) -> list[str]:
    """What the docstring of a function or class lacks (empty when it is complete)."""
    doc = inspect.getdoc(obj) if doc is None else inspect.cleandoc(doc)
    if not doc:
        return ["no docstring"]
    found = sections(doc)
    out = []
    required, optional = required_parameters(obj)
    if required or "Parameters" in found:
        documented = documented_names(found.get("Parameters", ""))
        missing = sorted(required - documented)
        unknown = sorted(documented - required - optional)
        if "Parameters" not in found:
            out.append(f"no Parameters section (parameters {missing})")
        elif missing:
            out.append(f"Parameters lacks {missing}")
        if unknown:
            out.append(f"Parameters names {unknown}, which the signature does not have")
    if not inspect.isclass(obj) and _returns_value(obj):
        wanted = "Yields" if inspect.isgeneratorfunction(obj) else "Returns"
        if wanted not in found:
            out.append(f"no {wanted} section")
    return out


# --------------------------------------------------------------------------------------------
# The public objects


def public_names(module) -> list[str]:
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
    ]


def public_methods(cls) -> dict[str, object]:
    """Public methods defined by ``cls`` or a calibkit base (first definition in the MRO wins)."""
    out: dict[str, object] = {}
    for klass in cls.__mro__:
        if not klass.__module__.startswith("calibkit"):
            continue
        for name, raw in vars(klass).items():
            if name.startswith("_") or name in out:
                continue
            # a descriptor that gives a function on the class counts too (the calibrated models'
            # forward, bound with the base model's signature)
            if isinstance(raw, (staticmethod, classmethod)) or inspect.isfunction(getattr(cls, name, None)):
                out[name] = getattr(cls, name)
    return out


def _public_objects() -> dict[str, object]:
    seen: dict[int, str] = {}
    objects: dict[str, object] = {}

    def add(qualname: str, obj) -> None:
        key = id(getattr(obj, "__func__", obj))
        if key not in seen:
            seen[key] = qualname
            objects[qualname] = obj

    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in public_names(module):
            obj = getattr(module, name)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue  # data (METRICS, REGISTRY), sub-modules
            add(f"{obj.__module__}.{obj.__qualname__}", obj)
            if inspect.isclass(obj):
                for method in public_methods(obj).values():
                    fn = getattr(method, "__func__", method)  # named where it is defined
                    add(f"{fn.__module__}.{fn.__qualname__}", method)
    return objects


PUBLIC = _public_objects()


def test_the_walk_finds_the_public_api():
    assert "calibkit.metrics.functional.binned.ece" in PUBLIC
    assert "calibkit.calibrators.temperature.TemperatureScaling" in PUBLIC
    assert "calibkit.calibrators.base.Calibrator.fit" in PUBLIC
    assert "calibkit.metrics.accumulator.CalibrationAccumulator.merge" in PUBLIC
    assert "calibkit.callbacks.calibration.CalibrationCallback.attach" in PUBLIC
    assert "calibkit.calibrators.modeling_calibkit._CalibratedModel._calibrated_forward" in PUBLIC  # its forward
    assert "calibkit.plots.diagrams.ReliabilityDiagram.from_predictions" in PUBLIC
    assert len(PUBLIC) > 150


@pytest.mark.parametrize("qualname", sorted(PUBLIC))
def test_numpydoc_sections(qualname):
    assert problems(PUBLIC[qualname]) == []


# --------------------------------------------------------------------------------------------
# The checker checks


def _example(values, n_bins: int = 15, *, weights=None, **options) -> float:
    """Doc.

    Parameters
    ----------
    values : ndarray
    weights, n_bins
        Two at once.
    **options
        Anything.

    Returns
    -------
    float
    """
    return 0.0


def test_the_checker_passes_a_complete_docstring():
    assert problems(_example) == []


def test_the_checker_flags_a_missing_parameter():
    doc = _example.__doc__.replace("weights, n_bins", "n_bins")
    assert problems(_example, doc) == ["Parameters lacks ['weights']"]


def test_the_checker_flags_a_stale_parameter_and_a_missing_returns():
    doc = _example.__doc__.replace("values : ndarray", "vals : ndarray").split("Returns")[0]
    assert problems(_example, doc) == [
        "Parameters lacks ['values']",
        "Parameters names ['vals'], which the signature does not have",
        "no Returns section",
    ]


def test_the_checker_flags_a_missing_parameters_section():
    assert problems(_example, "Doc.\n\nReturns\n-------\nfloat\n") == [
        "no Parameters section (parameters ['n_bins', 'values', 'weights'])"
    ]


def test_the_checker_reads_returns_from_the_body_when_unannotated():
    def gives(x):
        """Doc.

        Parameters
        ----------
        x : int
        """
        return x

    def gives_nothing(x):
        """Doc.

        Parameters
        ----------
        x : int
        """
        print(x)

    def generates(x):
        """Doc.

        Parameters
        ----------
        x : int
        """
        yield x

    assert problems(gives) == ["no Returns section"]
    assert problems(gives_nothing) == []
    assert problems(generates) == ["no Yields section"]


def test_a_class_documents_the_parameters_it_adds_to_a_library_base():
    class Local(ValueError):
        """Doc."""

    class Settings(calibkit.CalibrationSettings):
        """Doc.

        Parameters
        ----------
        n_bins, ace_ranges, sce_bins, rbece_bins, theta, fce_bins, fce_variant, esce_bins, eps, coverage
            As the base.
        abstention_alpha, abstention_delta
            As the base.
        """

    assert problems(Local) == []  # a builtin base: no signature to document
    assert problems(Settings) == ["Parameters lacks ['from_logits', 'ignore_index', 'multilabel', 'next_token']"]


# --------------------------------------------------------------------------------------------
# Papers


def _paper(key: str) -> tuple[str, str | None, str]:
    """(first author's surname, year or None, title) of a BibTeX entry of :data:`PAPERS`."""
    entry = PAPERS[key]

    def field(name: str) -> str | None:
        match = re.search(rf"^\s*{name}\s*=\s*\{{(.*?)\}},?\s*$", entry, flags=re.MULTILINE | re.DOTALL)
        return None if match is None else " ".join(match.group(1).replace("{", "").replace("}", "").split())

    return field("author").split(",")[0], field("year"), field("title")


PAPER_METRICS = sorted(m.name for m in REGISTRY if m.papers and inspect.isfunction(getattr(functional, m.name, None)))


def test_the_paper_fields_parse():
    assert _paper("guo2017") == ("Guo", "2017", "On Calibration of Modern Neural Networks")
    assert _paper("galdran")[1] is None
    assert len(PAPER_METRICS) >= 15


@pytest.mark.parametrize("name", PAPER_METRICS)
def test_metric_functions_cite_their_papers(name):
    references = sections(inspect.getdoc(getattr(functional, name))).get("References")
    assert references is not None, f"{name} has no References section"
    text = " ".join(references.split()).lower()
    assert "spec.md" in text
    for key in next(m for m in REGISTRY if m.name == name).papers:
        author, year, title = _paper(key)
        assert author.lower() in text, (key, author)
        assert year is None or year in text, (key, year)
        assert title.lower() in text, (key, title)


# --------------------------------------------------------------------------------------------
# No timings


def _public_files() -> list[Path]:
    """Every module of the package whose path has no private (single-underscore) part."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if not any(p.startswith("_") and not p.startswith("__") for p in parts):
            out.append(path)
    return out


def _string_statements(source: str) -> list[tuple[int, str]]:
    """Every docstring, and every string statement after an assignment (attribute docstrings)."""
    return [
        (node.lineno, node.value.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    ]


def test_the_timing_pattern():
    for text in ("1.4x faster at K = 66", "10 ms of a 15 ms report", "0.47 of 2.6 CPU seconds", "the 7 s import"):
        assert TIMING.search(text), text
    for text in ("8 MiB batches", "32 MB by default", "16 classes or more", "n_boot x blocks"):
        assert not TIMING.search(text), text


def test_the_file_walk_skips_private_modules():
    names = {str(p.relative_to(PACKAGE)) for p in _public_files()}
    assert "metrics/functional/binned.py" in names and "__init__.py" in names
    assert not any(n.endswith("_kernels.py") or n.startswith("_numba/") or n == "_moved.py" for n in names)
    assert not any(n.startswith("metrics/_kernels/") for n in names)


@pytest.mark.parametrize("path", [str(p.relative_to(PACKAGE)) for p in _public_files()])
def test_no_timings_in_docstrings(path):
    found = [
        (line, match.group(0))
        for line, text in _string_statements((PACKAGE / path).read_text(encoding="utf-8"))
        for match in [TIMING.search(text)]
        if match
    ]
    assert found == []
