"""calibkit's metrics as Hugging Face ``evaluate`` modules: where they live and how to install them.

The module scripts are the folders ``metrics/<name>/`` of the repository (shipped in the wheel
as ``calibkit/_evaluate_modules/<name>/``), in the layout of ``evaluate``'s own
``metrics/accuracy/``. Their shared machinery is ``calibkit.evaluate_modules.metric.CalibrationMetric``;
this module stays free of ``evaluate`` imports (a slow import) so that ``import calibkit`` and
``calibkit install-modules`` stay fast.

Three ways to load a module (see README.md, "evaluate modules"):

- by path, always ours and offline: ``evaluate.load(calibkit.evaluate_module_path("cece"))``;
- bare name, ``evaluate.load("cece")``, after :func:`install_evaluate_modules`;
- namespaced, ``evaluate.load("calibkit/cece")``, after the same install (or from the Hub once published).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

from calibkit.metrics.papers import PAPERS
from calibkit.metrics.registry import module_metrics

__all__ = ["MODULE_NAMES", "SET_MODULE_NAMES", "evaluate_module_path", "install_evaluate_modules"]

MODULE_NAMES = (*module_metrics(), "calibration_report")
"""Every calibration module folder, from the metric registry; ``calibration_report`` returns all in one pass."""

SET_MODULE_NAMES = ("conformal_sets",)
"""The module folders that read prediction sets, not probabilities: outside the metric registry.

Their scripts subclass ``calibkit.evaluate_modules.metric.SetMetric``; their values are those of
:func:`calibkit.coverage` and :func:`calibkit.set_size`."""

CORE_METRICS = module_metrics()
"""Which metrics of :data:`calibkit.METRICS` each single-purpose module returns (from the registry)."""

NAMESPACES = ("evaluate-metric", "calibkit")
"""Cache namespaces written by :func:`install_evaluate_modules`: bare names and ``calibkit/<name>``."""

ARGS_DOC = """
Args:
    predictions (`list` of `float` vectors, or a numpy array or torch tensor): per sample, the class
        probabilities, shape `(N, K)` (logits with `from_logits=True`), or `(N,)` = P(class 1) for
        binary input. Token configuration (`evaluate.load(name, "token")`): per sequence, `(N, L, K)`
        (or `(N, L)` binary), or lists of per-sequence `(L_i, K)` per-token vectors.
    references (`list` of `int`): the true class of each sample, `(N,)`. Token configuration: per
        sequence, `(N, L)` or lists of `L_i` labels, where `ignore_index` marks padding. Multilabel
        configuration (`evaluate.load(name, "multilabel")`): predictions `(N, K)`, one per label, and
        multi-hot references `(N, K)`. Next-token configuration (`evaluate.load(name, "next_token")`):
        a causal LM's `(N, T)` labels, unshifted; position `t` is scored against the label at `t + 1`.
    from_logits (`bool`, defaults to `False`): `predictions` are logits; softmax (sigmoid for 1-D
        binary input) is applied on the fly. Never guessed from the values.
    ignore_index (`int`, defaults to `-100`): label of the positions to skip, as `Trainer` pads; the
        mask is taken from `references`, never from the -100 padding of the logits.
    settings (`calibkit.CalibrationSettings`, optional): every setting in one object, instead of the
        setting keywords (not both).
"""
"""The arguments every module takes, opening each script's ``_KWARGS_DESCRIPTION``."""

MODULE_FILES = ("{name}.py", "README.md", "app.py", "requirements.txt", "SPEC.md")

CITATIONS = PAPERS
"""BibTeX of every paper a module cites (:data:`calibkit.metrics.papers.PAPERS`)."""


def bibtex(*keys: str) -> str:
    """Join the BibTeX entries of ``keys`` (see :data:`CITATIONS`), one blank line apart, for ``_CITATION``.

    Parameters
    ----------
    *keys : str
        Keys of :data:`CITATIONS`.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        Naming the unknown keys.
    """
    unknown = [key for key in keys if key not in CITATIONS]
    if unknown:
        raise ValueError(f"`keys` has unknown papers {unknown}; known: {sorted(CITATIONS)}")
    return "\n\n".join(CITATIONS[key] for key in keys) + "\n"


# --------------------------------------------------------------------------------------------
# Where the module folders are


def modules_root() -> Path:
    """Locate the folder holding one sub-folder per module.

    In an installed wheel: ``calibkit/_evaluate_modules`` (setup.py maps the repository's
    ``metrics/`` there); in a source checkout (editable install, ``PYTHONPATH``): ``metrics/``.

    Returns
    -------
    Path

    Raises
    ------
    FileNotFoundError
        When neither folder holds the modules.
    """
    package = Path(__file__).resolve().parent.parent
    for root in (package / "_evaluate_modules", package.parent / "metrics"):
        if (root / "cece" / "cece.py").is_file():
            return root
    raise FileNotFoundError(
        f"calibkit's evaluate module folders are missing: looked in {package / '_evaluate_modules'} "
        f"and {package.parent / 'metrics'}; reinstall calibkit"
    )


def _check_name(name: str) -> str:
    if name not in (*MODULE_NAMES, *SET_MODULE_NAMES):
        raise ValueError(f"`name` must be one of {[*MODULE_NAMES, *SET_MODULE_NAMES]}, got {name!r}")
    return name


def evaluate_module_path(name: str) -> str:
    """Return the path of the script of module ``name``, for ``evaluate.load(path)``: always calibkit's, offline.

    Parameters
    ----------
    name : str
        One of :data:`~calibkit.evaluate_modules.MODULE_NAMES` or
        :data:`~calibkit.evaluate_modules.SET_MODULE_NAMES`.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        On an unknown module name.

    Examples
    --------
    >>> Path(evaluate_module_path("cece")).name
    'cece.py'
    """
    return str(modules_root() / _check_name(name) / f"{name}.py")


# --------------------------------------------------------------------------------------------
# Installing into evaluate's module cache


def hf_modules_cache() -> Path:
    """Locate ``evaluate``'s module cache: ``evaluate.config.HF_MODULES_CACHE`` if evaluate is imported.

    Otherwise the same rule evaluate 0.4.6 applies at import (evaluate/config.py), read here
    so that installing does not pay for importing evaluate: ``$HF_MODULES_CACHE``, else
    ``$HF_HOME/modules``, else ``$XDG_CACHE_HOME/huggingface/modules`` (``~/.cache`` by default).

    Returns
    -------
    Path
    """
    config = sys.modules.get("evaluate.config")
    if config is not None:
        return Path(config.HF_MODULES_CACHE)
    home = os.path.expanduser(
        os.getenv("HF_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"), "huggingface"))
    )
    return Path(os.getenv("HF_MODULES_CACHE", os.path.join(home, "modules")))


def _touch_package(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").touch(exist_ok=True)


def _files_of(name: str) -> list[Path]:
    folder = modules_root() / name
    files = [folder / pattern.format(name=name) for pattern in MODULE_FILES]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(f"module {name!r} is incomplete, missing: {missing}")
    return files


def install_evaluate_modules(
    names: Iterable[str] | None = None,
    *,
    modules_cache: str | os.PathLike | None = None,
    namespaces: Iterable[str] = NAMESPACES,
) -> list[Path]:
    """Make ``evaluate.load("cece")`` (and ``"calibkit/cece"``) find calibkit's modules offline, from any directory.

    ``evaluate`` 0.4.6 resolves a bare name by asking the Hub for ``evaluate-metric/<name>``
    (then ``-comparison``, ``-measurement``); when that fails it takes the newest (by mtime)
    ``$HF_MODULES_CACHE/evaluate_modules/metrics/evaluate-metric--<name>/<64-char dir>/<name>.py``
    (evaluate/loading.py, ``CachedEvaluationModuleFactory``); ``"calibkit/cece"`` likewise
    reads ``calibkit--cece``. This writes each module folder there, under a directory named by
    the SHA-256 of its files, and refreshes its mtime so it is the newest. Set
    ``HF_EVALUATE_OFFLINE=1`` to skip the Hub look-ups, which are slow without a network.

    Parameters
    ----------
    names : iterable of str, optional
        Modules to install (default: all, :data:`~calibkit.evaluate_modules.MODULE_NAMES` and
        :data:`~calibkit.evaluate_modules.SET_MODULE_NAMES`).
    modules_cache : path, optional
        evaluate's module cache (default: ``hf_modules_cache()``).
    namespaces : iterable of str
        ``"evaluate-metric"`` for bare names, ``"calibkit"`` for ``calibkit/<name>``.

    Returns
    -------
    list of Path
        The installed scripts.
    """
    names = [_check_name(n) for n in ((*MODULE_NAMES, *SET_MODULE_NAMES) if names is None else names)]
    namespaces = list(namespaces)
    bad = [ns for ns in namespaces if not ns or "/" in ns or "--" in ns]
    if bad:
        raise ValueError(f"`namespaces` must be plain names without '/' or '--', got {bad}")
    cache = Path(modules_cache) if modules_cache is not None else hf_modules_cache()
    # Packages all the way down, as evaluate's init_dynamic_modules creates them: the cached
    # script is imported as evaluate_modules.metrics.<ns>--<name>.<hash>.<name>.
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "__init__.py").touch(exist_ok=True)
    metrics_dir = cache / "evaluate_modules" / "metrics"
    _touch_package(cache / "evaluate_modules")
    _touch_package(metrics_dir)
    installed = []
    for name in names:
        files = _files_of(name)
        digest = hashlib.sha256()
        for file in files:
            digest.update(file.name.encode() + b"\0" + file.read_bytes())
        for namespace in namespaces:
            target = metrics_dir / f"{namespace}--{name}" / digest.hexdigest()
            _touch_package(target.parent)
            _touch_package(target)
            for file in files:
                shutil.copyfile(file, target / file.name)
            script = target / f"{name}.py"
            meta = {"original file path": str(files[0]), "local file path": str(script)}
            (target / f"{name}.json").write_text(json.dumps(meta), encoding="utf-8")
            os.utime(script)  # the newest hash directory wins, also when this one existed already
            installed.append(script)
    return installed
