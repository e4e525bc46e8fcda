"""The options the sub-commands share, as parent parsers: the metric settings and the outputs.

The settings' flags are generated from :class:`calibkit.metrics.settings.CalibrationSettings`:
its field names (``n_bins`` is ``--n-bins``), its defaults and the descriptions of its docstring,
so that a setting added there, or a default changed, reaches the command line without a second
copy here. The sampling flags (``--bootstrap``, ``--resplits``, ``--seed``, ``--threshold``) are
generated the same way from :class:`calibkit.metrics.sampling.SamplingSettings`.
Each command declares only the settings its input uses (the names below, checked
against the library functions they reach by tests/test_cli_help.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
from typing import Any

from calibkit.metrics.multilabel import LABEL_METRICS
from calibkit.metrics.registry import METRICS, metric
from calibkit.metrics.sampling import OFF, SAMPLING_DEFAULTS, SamplingSettings, sampling_names
from calibkit.metrics.settings import FCE_VARIANTS, CalibrationSettings, names, resolve_settings

CHOICES = {"fce_variant": FCE_VARIANTS}
"""The settings that take one of a few words."""
_REPORTED = {setting for name in METRICS for setting in metric(name).settings}
FILE_SETTINGS = tuple(name for name in names() if name in _REPORTED or name in ("next_token", "ignore_index"))
"""``calibkit report``: the settings of the metrics it reports (not ``coverage``: selective accuracy is
asked for by name), and the input's conventions but ``from_logits`` (the file says) and ``multilabel``
(``calibkit multilabel``)."""
_PER_LABEL = {setting for name in LABEL_METRICS for setting in metric(name).settings}
MULTILABEL_SETTINGS = tuple(name for name in FILE_SETTINGS if name in _PER_LABEL or name == "ignore_index")
"""``calibkit multilabel``: the settings of the metrics a multi-label report gives per label (not ``sce_bins``:
SCE is not one of them, and a flag that changes nothing would read as one that works)."""
CHOICE_SETTINGS = ("n_bins", "theta", "fce_variant")
"""``calibkit choices``: what :func:`calibkit.lm.multiple_choice.multiple_choice_report` takes."""
COMPARISON_SETTINGS = ("ignore_index", "n_bins", "rbece_bins", "theta", "fce_variant")
"""What :func:`calibkit.verdicts.comparison.compare_calibrators` (``--output``'s report) takes."""
COMPARE_SETTINGS = tuple(name for name in COMPARISON_SETTINGS if name != "ignore_index")
"""``calibkit compare``: the comparison's settings but ``ignore_index`` (the command pads labels itself, at -100)."""
GENERATION_SETTINGS = ("n_bins", "abstention_alpha", "abstention_delta")
"""``calibkit generations``: what :func:`calibkit.lm.generations.generations_report` takes."""


def flag(name: str) -> str:
    """Return the command-line flag of a Python argument or setting (``n_bins`` is ``--n-bins``).

    Parameters
    ----------
    name : str

    Returns
    -------
    str
    """
    return "--" + name.replace("_", "-")


def defaults() -> dict[str, Any]:
    """Return each setting's default, read from the dataclass (no default is written in the CLI).

    Returns
    -------
    dict of str to object
    """
    return {field.name: field.default for field in dataclasses.fields(CalibrationSettings)}


def descriptions(carrier: type = CalibrationSettings) -> dict[str, str]:
    """Read each setting's description from :class:`CalibrationSettings`' numpydoc ``Parameters``, as plain text.

    Parameters
    ----------
    carrier : type, default CalibrationSettings
        The settings dataclass (:class:`calibkit.metrics.sampling.SamplingSettings` for the sampling flags).

    Returns
    -------
    dict of str to str
        The description of each setting, its reST markup removed (``--help`` prints it as is).
    """
    doc = inspect.getdoc(carrier) or ""
    section = doc.split("Parameters\n----------\n", 1)[-1].split("\n\n", 1)[0]
    found: dict[str, str] = {}
    for block in re.split(r"\n(?=\S)", section):
        head, _, body = block.partition("\n")
        text = " ".join(line.strip() for line in body.splitlines())
        text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text).replace("``", "")
        found[head.split(" : ")[0].strip()] = text
    return found


def settings_parent(settings: tuple[str, ...]) -> argparse.ArgumentParser:
    """Build the parent parser of the given settings: a flag each, with its default and description.

    Parameters
    ----------
    settings : tuple of str
        Names of :class:`CalibrationSettings` fields, in the order they are listed.

    Returns
    -------
    argparse.ArgumentParser
        A parser without ``--help``, to pass as ``parents=``.
    """
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("metric settings (calibkit.CalibrationSettings)")
    texts, values = descriptions(), defaults()
    for name in settings:
        default, text = values[name], texts[name].replace("%", "%%")
        if isinstance(default, bool):
            group.add_argument(flag(name), action="store_true", help=text)
        else:
            group.add_argument(
                flag(name), type=type(default), default=default, choices=CHOICES.get(name),
                help=f"{text} (default: {default})",
            )  # fmt: skip
    return parent


def outputs_parent(output: str | None) -> argparse.ArgumentParser:
    """Build the parent parser of the outputs: ``--json``, and ``--output`` where the command writes files.

    Parameters
    ----------
    output : str or None
        What ``--output`` writes (its help), or None when the command writes no files.

    Returns
    -------
    argparse.ArgumentParser
        A parser without ``--help``, to pass as ``parents=``.
    """
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("outputs")
    group.add_argument("--json", action="store_true", help="print JSON instead of a table")
    if output:
        group.add_argument("--output", help=f"folder for {output}")
    return parent


COMMAND_DEFAULTS = {"bootstrap": OFF}
"""The sampling settings whose command-line default is not the dataclass's: a command draws bootstrap
intervals only when ``--bootstrap`` asks for them."""


def sampling_parent(resplits: str | None, bootstrap: bool = True, threshold: bool = False) -> argparse.ArgumentParser:
    """Build the parent parser of ``--bootstrap``, ``--resplits``, ``--seed`` and ``--threshold``, from the dataclass.

    Each flag is a field of :class:`calibkit.metrics.sampling.SamplingSettings` (``--bootstrap``
    is ``bootstrap``), with its type, default (but :data:`COMMAND_DEFAULTS`) and description.

    Parameters
    ----------
    resplits : str or None
        What ``--resplits`` re-splits (its help), or None when the command does not re-split.
    bootstrap : bool, default True
        Whether the command has bootstrap intervals.
    threshold : bool, default False
        Whether the command scores answers (``--threshold``: when an answer is right).

    Returns
    -------
    argparse.ArgumentParser
        A parser without ``--help``, to pass as ``parents=``.
    """
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("sampling settings (calibkit.metrics.sampling.SamplingSettings)")
    texts = {**descriptions(SamplingSettings), **({"resplits": resplits} if resplits else {})}
    declared = {"bootstrap": bootstrap, "resplits": bool(resplits), "seed": True, "threshold": threshold}
    for name in sampling_names():
        if declared.get(name):
            kind = float if isinstance(getattr(SAMPLING_DEFAULTS, name), float) else int
            default = kind(COMMAND_DEFAULTS.get(name, getattr(SAMPLING_DEFAULTS, name)))
            text = texts[name].replace("%", "%%")
            group.add_argument(flag(name), type=kind, default=default, help=f"{text} (default: {default})")
    return parent


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    """Return the settings a command was given (those it declares), checked.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of a command built with :func:`settings_parent`.

    Returns
    -------
    dict of str to object
        The settings by name, to pass as keywords to the library.

    Raises
    ------
    ValueError
        From ``resolve_settings``, naming the setting (``name_flags``
        turns it into the flag).
    """
    given = {name: getattr(args, name) for name in names() if hasattr(args, name)}
    resolve_settings(**given)  # checked before any file or model is read, by the one function every door uses
    SamplingSettings(**{name: getattr(args, name) for name in sampling_names() if hasattr(args, name)})
    return given
