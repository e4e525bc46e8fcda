"""Sphinx configuration of calibkit's documentation site.

Built offline with ``python -m sphinx -W -n --keep-going -b html docs docs/_build/html``: warnings
are errors and every cross-reference must resolve (nitpicky). The maths is rendered to MathML at
build time (``_ext/mathml.py``), so pages need no JavaScript from a CDN.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(DOCS.parent))

import calibkit  # noqa: E402

project = "calibkit"
author = "the calibkit developers"
copyright = "2026, the calibkit developers"  # noqa: A001 - Sphinx's name
release = calibkit.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "mathml",
]
html_math_renderer = "mathml"
nitpicky = True
exclude_patterns = [
    "_build", "**/GALLERY_HEADER.rst", "guide/harness/*", "guide/generations/*", "guide/judges/*",
]  # fmt: skip
templates_path = ["_templates"]

# Docstrings are numpydoc: their Parameters sections state the types, so signatures carry none
# (annotations would name numpy, torch and transformers types this offline build cannot link).
autodoc_typehints = "none"
autodoc_member_order = "bysource"
autosummary_generate = True
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

html_theme = "pydata_sphinx_theme"
html_title = f"calibkit {release}"
html_static_path = ["_static"]
html_css_files = ["calibkit.css"]
html_theme_options = {
    "navbar_end": ["navbar-icon-links"],
    "secondary_sidebar_items": ["page-toc"],
    "show_toc_level": 2,
    "navigation_with_keys": False,
}
html_show_sourcelink = False

sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "abort_on_example_error": True,
    "download_all_examples": False,
    "remove_config_comments": True,
    "matplotlib_animations": False,
    "within_subsection_order": "FileNameSortKey",
    # The computation-times page needs jQuery DataTables, which the theme does not load (a
    # script error in the browser); the times are printed by the build instead.
    "write_computation_times": False,
}

# The API reference: one page per public name, listed from each module's ``__all__`` so that a
# name added to the code is on the site without editing the docs.
API_MODULES = {
    "calibkit": "Metrics, statistics and settings (the functional core, ``import calibkit``)",
    "calibkit.calibrators": "Calibrators and calibrated transformers models",
    "calibkit.callbacks": "The Trainer callback",
    "calibkit.callbacks.preferences": "TRL's RewardTrainer and DPOTrainer: preference calibration",
    "calibkit.plots": "Plots",
    "calibkit.plots.figures": "A comparison's figures",
    "calibkit.plots.tables": "Markdown tables",
    "calibkit.metrics.bootstrap": "Bootstrap intervals",
    "calibkit.metrics.sampling": "Sampling settings (replicates, level, seed, re-splits, threshold)",
    "calibkit.io.shards": "Sharded prediction files (data larger than memory)",
    "calibkit.io.dask": "Dask",
    "calibkit.io.prediction_files": "Prediction files",
    "calibkit.metrics.backends": "Engines",
    "calibkit.lm.multiple_choice": "Language models on multiple-choice benchmarks",
    "calibkit.lm.generations": "Generated answers: confidence sources, report and recalibration",
    "calibkit.lm.generations.rlcr": "RLCR's calibration reward for TRL's GRPOTrainer",
    "calibkit.lm.sources": "Confidence sources: the registry of their names, kinds and descriptions",
    "calibkit.lm.generations.consistency": "Consistency of sampled answers: LexSim, NumSemSets, EigV, Deg, Ecc, KLE",
    "calibkit.lm.generations.similarity": "Similarity of sampled answers: exact, Jaccard, ROUGE-L, or an NLI model's",
    "calibkit.lm.served": "Served models: confidence from API log-probabilities",
    "calibkit.lm.judges": "LLM judges against people: readers, report, two runs compared",
    "calibkit.metrics.judges": "LLM judges' statistics: agreement, PPI++, Rogan-Gladen",
    "calibkit.lm.preferences": "Reward models: preference pairs, their report and the pairwise temperature",
    "calibkit.metrics.preferences": "Reward models' preference probabilities: the functional core",
    "calibkit.calibrators.preference": "The pairwise temperature of a reward model",
    "calibkit.metrics.abstention": "Abstention with a guarantee (Learn then Test)",
    "calibkit.metrics.rejection": "Rejection metrics: PRR, ROC AUC, PR AUC, AURC, AUGRC, risk and coverage",
    "calibkit.lm.generations.quality": "Generated answers scored against their gold (rejection metrics)",
    "calibkit.lm.inspect_logs": "Inspect AI logs",
    "calibkit.plugins.lm_eval": "In lm-evaluation-harness",
    "calibkit.plugins.inspect_ai": "In Inspect AI",
    "calibkit.plugins.lighteval": "In lighteval",
    "calibkit.plugins.torchmetrics": "In Lightning and torchmetrics",
    "calibkit.plugins.skeleton": "What every plugin shares (its rows, their direction)",
    "calibkit.verdicts.comparison": "Comparing calibrators",
    "calibkit.verdicts.resplits": "Re-splits and verdicts",
    "calibkit.verdicts.claims": "The papers' claims",
    "calibkit.verdicts.reporting": "Reports",
    "calibkit.evaluate_modules": "evaluate modules",
}
# Names of calibkit.__all__ whose home is a subpackage: documented there, once.
_HOME_ELSEWHERE = {"calibrators", "callbacks", "__version__", "evaluate_module_path", "install_evaluate_modules"}


def public_names(module_name: str) -> list[str]:
    """The names a module exports (its ``__all__``), minus those documented under another module."""
    module = importlib.import_module(module_name)
    names = list(module.__all__)
    if module_name == "calibkit":
        lazy = set(calibkit._LAZY)
        names = [n for n in names if n not in lazy and n not in _HOME_ELSEWHERE]
    return names


def _write_if_changed(page: Path, text: str) -> None:
    if not page.exists() or page.read_text() != text:  # unchanged pages keep Sphinx's cache
        page.write_text(text)


def write_api_pages() -> None:
    """Write ``api/<module>.rst`` (an autosummary of the module's public names) and ``api/index.rst``."""
    folder = DOCS / "api"
    folder.mkdir(exist_ok=True)
    names = {module_name: public_names(module_name) for module_name in API_MODULES}
    for module_name, title in API_MODULES.items():
        lines = [
            f".. _api-{module_name}:",
            "",
            title,
            "=" * len(title),
            "",
            f".. automodule:: {module_name}",
            "   :no-members:",
            "   :no-index:" if module_name == "calibkit" else "",
            "",
            f".. currentmodule:: {module_name}",
            "",
            ".. autosummary::",
            "   :toctree: generated/",
            "   :nosignatures:",
            "",
            *[f"   {name}" for name in names[module_name]],
            "",
        ]
        _write_if_changed(folder / f"{module_name}.rst", "\n".join(lines))
    index = [
        "API reference",
        "=============",
        "",
        "Every public name of calibkit, one page each, generated from its docstring.",
        "",
        ".. toctree::",
        "   :maxdepth: 2",
        "",
        *[f"   {module_name}" for module_name in API_MODULES],
        "",
    ]
    _write_if_changed(folder / "index.rst", "\n".join(index))
    # A name no longer public must not leave its page behind (it would be an orphan page).
    current = {f"{m}.{n}.rst" for m, listed in names.items() for n in listed}
    for stale in (folder / "generated").glob("*.rst"):
        if stale.name not in current:
            stale.unlink()


write_api_pages()
