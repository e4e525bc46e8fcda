"""The modules that moved into the package's rooms in 0.2, still importable by their old paths.

``import calibkit.shards`` (and ``from calibkit.comparison import compare_calibrators``, and
submodules such as ``calibkit.multiple_choice.figures``) gives the module at its new path, the same
object, with a :class:`DeprecationWarning` that names the new path, attributed to the importing
line. A name that left a module which stays (``calibkit.verdicts.reporting.write_figures``) is
given the same way by the module's ``__getattr__`` (:func:`moved_name`). The old paths will be
removed in a later release (docs/changes.rst).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType

MOVED = {
    "calibkit.prediction_files": "calibkit.io.prediction_files",
    "calibkit.shards": "calibkit.io.shards",
    "calibkit.dask": "calibkit.io.dask",
    "calibkit.comparison": "calibkit.verdicts.comparison",
    "calibkit.resplits": "calibkit.verdicts.resplits",
    "calibkit.claims": "calibkit.verdicts.claims",
    "calibkit.reporting": "calibkit.verdicts.reporting",
    "calibkit.verdicts.plots": "calibkit.plots",
    "calibkit.multiple_choice": "calibkit.lm.multiple_choice",
    "calibkit.cli_parser": "calibkit.cli.parser",
    "calibkit.multilabel_cli": "calibkit.cli.report_multilabel",
    "calibkit.demo": "calibkit.demos",
    "calibkit.demo_multilabel": "calibkit.demos.multilabel",
}
"""Old path -> new path (a moved package's submodules follow it).

``calibkit.plots``, the 0.1 path of the plot classes, is their room again (figures and tables);
``calibkit.verdicts.plots``, where 0.2 had put them, leads there."""

MOVED_NAMES = {
    "calibkit.verdicts.reporting": {
        "calibkit.plots.figures": (
            "MIN_PANEL_SUPPORT",
            "class_ece_figure",
            "new_figure",
            "per_class_figure",
            "regions_figure",
            "reliability_figure",
            "small_classes_line",
            "write_figures",
        ),
        "calibkit.plots.pages": ("embedded_figure", "html_page", "markdown_to_html", "markdown_to_html_table"),
    },
}
"""Module -> {the module some of its names moved to: those names}: names that left a module which stays."""


def new_path(name: str) -> str | None:
    """Return the new path of a moved module ``name`` (or of a submodule of a moved package), else None."""
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return None


def moved_name(module: str, name: str) -> object:
    """Return ``name``, which left ``module`` (:data:`MOVED_NAMES`), from its new module, with a warning.

    A module whose names moved out ends with ``def __getattr__(name): return moved_name(__name__, name)``.

    Parameters
    ----------
    module : str
        The module the name is asked of.
    name : str
        The name.

    Returns
    -------
    object
        The object at its new path.

    Raises
    ------
    AttributeError
        When ``name`` is not one that moved (the module has no such attribute).
    """
    new = next((new for new, names in MOVED_NAMES.get(module, {}).items() if name in names), None)
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"`{module}.{name}` moved to `{new}.{name}` in calibkit 0.2; import it from there "
        "(the old path will be removed in a later release)",
        DeprecationWarning,
        stacklevel=3,  # the line that asked: past this function and the module's __getattr__
    )
    return getattr(importlib.import_module(new), name)


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolve an old module path to the module at its new path."""

    def find_spec(self, fullname, path, target=None):  # noqa: D102 - the finder protocol
        new = new_path(fullname)
        return None if new is None else importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):  # noqa: D102 - the loader protocol
        new = new_path(spec.name)
        warnings.warn(
            f"`{spec.name}` moved to `{new}` in calibkit 0.2; import it from there "
            "(the old path will be removed in a later release)",
            DeprecationWarning,
            stacklevel=2,  # the importing line: warnings skips the import machinery's frames
        )
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:  # noqa: D102 - already executed at its new path
        pass


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
