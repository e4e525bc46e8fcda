"""The modules that moved into the package's rooms in 0.2, still importable by their old paths.

``import calibkit.shards`` (and ``from calibkit.plots import ReliabilityDiagram``, and submodules
such as ``calibkit.multiple_choice.figures``) gives the module at its new path, the same object,
with a :class:`DeprecationWarning` that names the new path, attributed to the importing line.
The old paths will be removed in a later release (docs/changes.rst).
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
    "calibkit.plots": "calibkit.verdicts.plots",
    "calibkit.multiple_choice": "calibkit.lm.multiple_choice",
    "calibkit.cli_parser": "calibkit.cli.parser",
    "calibkit.multilabel_cli": "calibkit.cli.report_multilabel",
    "calibkit.demo": "calibkit.demos",
    "calibkit.demo_multilabel": "calibkit.demos.multilabel",
}
"""Old path -> new path (a moved package's submodules follow it)."""


def new_path(name: str) -> str | None:
    """Return the new path of a moved module ``name`` (or of a submodule of a moved package), else None."""
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return None


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
