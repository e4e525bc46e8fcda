"""The options the sub-commands share, as parent parsers: the metric settings and the outputs.

The settings' flags are generated from :class:`calibkit.metrics.settings.CalibrationSettings`:
its field names (``n_bins`` is ``--n-bins``), its defaults and the descriptions of its docstring,
so that a setting added there, or a default changed, reaches the command line without a second
copy here. Each command declares only the settings its input uses (the names below, checked
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


def descriptions() -> dict[str, str]:
    """Read each setting's description from :class:`CalibrationSettings`' numpydoc ``Parameters``, as plain text.

    Returns
    -------
    dict of str to str
        The description of each setting, its reST markup removed (``--help`` prints it as is).
    """
    doc = inspect.getdoc(CalibrationSettings) or ""
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


def sampling_parent(resplits: str | None, bootstrap: bool = True) -> argparse.ArgumentParser:
    """Build the parent parser of ``--bootstrap``, ``--resplits`` (where the command re-splits) and ``--seed``.

    Parameters
    ----------
    resplits : str or None
        What ``--resplits`` re-splits (its help), or None when the command does not re-split.
    bootstrap : bool, default True
        Whether the command has bootstrap intervals.

    Returns
    -------
    argparse.ArgumentParser
        A parser without ``--help``, to pass as ``parents=``.
    """
    parent = argparse.ArgumentParser(add_help=False)
    if bootstrap:
        parent.add_argument("--bootstrap", type=int, default=0, help="bootstrap replicates for 95%% intervals")
    if resplits:
        parent.add_argument("--resplits", type=int, default=20, help=resplits)
    parent.add_argument("--seed", type=int, default=0)
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
    return given
