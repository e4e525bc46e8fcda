"""What the sub-commands share: option checks, the ``--output`` folder, the metrics table and JSON."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from calibkit.plots.tables import cell, interval_cell, markdown_table


def format_value(value: Any) -> str:
    """Format a metric for a table: four decimals, ``nan`` for NaN.

    Parameters
    ----------
    value : float

    Returns
    -------
    str
    """
    return cell(float(value))


def shown_classes(count: int, support: Any = None) -> tuple[list[int], str]:
    """Return the per-class rows a table shows and the row that says what it leaves out.

    Up to ``MAX_CLASS_ROWS`` classes, all of them; over a vocabulary, the classes of largest
    ``support``, or none when the support is not known.

    Parameters
    ----------
    count : int
        The classes.
    support : array-like of shape (count,), optional
        Samples of each class.

    Returns
    -------
    tuple of (list of int, str)
        The classes, and a Markdown row for the others ("" when every class is shown).
    """
    import numpy as np

    from calibkit.metrics.statistics import MAX_CLASS_ROWS, largest_classes

    if count <= MAX_CLASS_ROWS:
        return list(range(count)), ""
    if support is None:
        return [], f"| ece_class_* | {count:,} classes: see --json |"
    shown = largest_classes(np.asarray(support))
    labelled = int(np.count_nonzero(support))
    return shown, f"| ece_class_* | {count - len(shown):,} more ({labelled:,} with a label): see --json |"


def format_table(report: dict[str, Any], class_names: list[str] | None = None, support: Any = None) -> str:
    """Render a report as a Markdown table: every metric, then each class's ECE and ``n``.

    Over a vocabulary (more than ``MAX_CLASS_ROWS`` classes) the per-class rows are those of the
    classes of largest ``support``, and one row says how many more there are.

    Parameters
    ----------
    report : dict
        From :func:`calibkit.calibration_report`.
    class_names : list of str, optional
        Names of the per-class rows (default: the class indices).
    support : array-like of shape (K,), optional
        Samples of each class: which classes a vocabulary's table shows.

    Returns
    -------
    str
    """
    from calibkit.metrics.registry import METRICS, metric

    # subset_ece: one row per class, below
    rows: list[Any] = [
        [name, format_value(report[name])] for name in (*METRICS, "accuracy") if not metric(name).per_class
    ]
    names = class_names or [str(k) for k in range(report["num_classes"])]
    per_class = report["subset_ece"]
    shown, more = shown_classes(len(per_class), support)
    rows += [[f"ece_class_{names[k] if k < len(names) else k}", format_value(float(per_class[k]))] for k in shown]
    rows += [more] if more else []
    rows.append(["n", str(report["n"])])
    return markdown_table(["metric", "value"], rows)


def interval_lines(ci: dict[str, Any], class_names: list[str] | None, support: Any = None) -> str:
    """Render bootstrap intervals as a Markdown table: every metric, then each class's ECE.

    Parameters
    ----------
    ci : dict
        From :func:`calibkit.metrics.bootstrap.bootstrap_intervals`.
    class_names : list of str or None
        Names of the per-class rows (default: the class indices).
    support : array-like of shape (K,), optional
        Samples of each class: which classes a vocabulary's table shows (:func:`shown_classes`).

    Returns
    -------
    str
    """
    head = ["metric", f"{100 * ci['confidence']:g}% interval (bootstrap, {ci['n_boot']} replicates)"]
    rows: list[Any] = [[name, interval_cell(float(low), float(high))] for name, (low, high) in ci["intervals"].items()]
    if "subset_ece" in ci:
        low, high = ci["subset_ece"]
        names = class_names or [str(k) for k in range(len(low))]
        shown, more = shown_classes(len(low), support)
        rows += [[f"ece_class_{names[k]}", interval_cell(float(low[k]), float(high[k]))] for k in shown]
        rows += [more] if more else []
    return markdown_table(head, rows)


def check_count(value: int, option: str, maximum: int | None = None) -> None:
    """Refuse an option below 0 (for a count, 0 is none) or above ``maximum``, naming it as typed.

    Parameters
    ----------
    value : int
        The option's value.
    option : str
        The option as typed (``--bootstrap``).
    maximum : int, optional
        The largest value allowed.

    Raises
    ------
    ValueError
        Naming the option and its bounds.
    """
    if value < 0 or (maximum is not None and value > maximum):
        bounds = ">= 0" if maximum is None else f"in [0, {maximum}]"
        raise ValueError(f"`{option}` must be an integer {bounds}, got {value}")


def writable_folder(location: str) -> Path:
    """Create ``--output`` (and its parents) now and check that a file can be written in it.

    A run then does not end, after all its work, on a folder it cannot write.

    Parameters
    ----------
    location : str
        The ``--output`` argument.

    Returns
    -------
    Path

    Raises
    ------
    ValueError
        When the folder cannot be created or written to.
    """
    import tempfile

    folder = Path(location)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise ValueError(f"--output: cannot write to {location}: {exc.strerror or exc}") from None
    return folder


_PREDICTIONS = {"path": "--predictions", "location": "--predictions", "predictions": "--predictions"}
_ANSWERS = {
    "location": "--answers",
    "file": "--answers",
    "sources": "--confidence",
    "words": "--confidence-words",
    "verbalized_confidence": "--confidence verbalized",
}
FLAGS: dict[str, dict[str, str]] = {
    "report": _PREDICTIONS,
    "multilabel": _PREDICTIONS,
    "choices": {**_PREDICTIONS, "file": "--predictions"},
    "generations": {
        **_ANSWERS,
        "metric": "--metric",
        "harness_filter": "--harness-filter",
        "answer": "--agreement-answer",
        "read_agreement": "--confidence agreement",
        "whitebox_confidence": "--model DIR --confidence sequence,ptrue",
    },
    "served": {
        **_ANSWERS,
        "gold": "--gold",
        "letters": "--letters",
        "top_logprobs": "--top-logprobs",
        "batch_input": "--batch-input",
    },
    "compare": {"model": "--model", "dataset": "--dataset", "label_column": "--label-column"},
    "judge": {"judged": "--judged", "labels": "--labels"},
}
"""What the command line says for a name a library message gives in backticks, by command: its
arguments (``gold`` of ``read_served`` is ``calibkit served``'s ``--gold``, ``location`` of
``read_generations`` its ``--answers``) and the library functions the command reaches through a flag; a
setting ``x_y`` (of :class:`calibkit.CalibrationSettings` or :class:`calibkit.metrics.sampling.SamplingSettings`:
``bootstrap``, ``seed``, ...) is ``--x-y`` everywhere (:func:`calibkit.cli.options.flag`). The one table from Python
names to flags: library code names its arguments, never a flag (tests/test_cli_errors_name_flags.py)."""


def name_flags(message: str, command: str | None = None) -> str:
    """Name the flags the user typed where a library error names its Python arguments.

    A message naming ``n_bins`` in backticks ("must be an integer >= 1") names ``--n-bins``
    instead, and an argument of the library function a command called names that command's flag
    (:data:`FLAGS`: ``gold`` is ``calibkit served``'s ``--gold``); other names (file columns such as
    ``labels``) are left as they are.

    Parameters
    ----------
    message : str
        A ``ValueError``'s message.
    command : str, optional
        The sub-command that passed the arguments (default: the settings' names and
        ``predictions``).

    Returns
    -------
    str
    """
    from calibkit.cli.options import flag
    from calibkit.metrics.sampling import sampling_names
    from calibkit.metrics.settings import names

    own = FLAGS.get(command, {}) if command else {"predictions": "--predictions"}
    flags = {**{name: flag(name) for name in (*names(), *sampling_names())}, **own}
    return re.sub(r"`([a-z_]+)`", lambda m: flags.get(m.group(1), m.group(0)), message)


def check_options(args: Any) -> dict[str, Any]:
    """Check a command's counts, settings and ``--output`` before any file or model is read.

    A bad ``--bootstrap`` should not wait for a model's logits to be collected.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options; only those the command declares are checked.

    Returns
    -------
    dict of str to object
        The settings the command was given (:func:`calibkit.cli.options.settings_of`).
    """
    from calibkit.cli.options import settings_of
    from calibkit.metrics.validation import check_positive_int

    for option in ("max_length", "batch_size"):
        if hasattr(args, option):
            check_positive_int(getattr(args, option), "--" + option.replace("_", "-"))
    settings = settings_of(args)  # the metric and sampling settings, each checked by its carrier
    if getattr(args, "output", None):
        writable_folder(args.output)
    return settings


def with_absent_metrics(report: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Give the metrics a report leaves out (ACE of next-token input, over a vocabulary) as NaN for the table.

    Parameters
    ----------
    report : dict
        From :func:`calibkit.calibration_report` or :func:`calibkit.io.shards.stream_report`.

    Returns
    -------
    tuple of (dict, str)
        The report with a NaN for each metric it leaves out, and a line saying which (``""`` when
        none), for below the table.
    """
    from calibkit.metrics.registry import METRICS

    absent = [name for name in METRICS if name not in report]
    if not absent:
        return report, ""
    note = f"not computed (the default report of next-token input leaves them out): {', '.join(absent)}"
    return {**report, **dict.fromkeys(absent, float("nan"))}, note
