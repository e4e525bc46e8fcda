"""The part of every plugin that does not depend on its tool: one place, each plugin its tool's glue.

A plugin (``calibkit.plugins.lm_eval``, ``inspect_ai``, ``lighteval``, ``torchmetrics``) puts
calibkit's numbers in a tool's own results. What does not depend on the tool lives here, or in the
room it belongs to, and every plugin takes it from there:

- the questions: :meth:`calibkit.lm.multiple_choice.ChoiceData.stack` stacks each question's
  choices (any number) into one table, and :func:`calibkit.lm.multiple_choice.check_question`
  checks a question (one score per choice, finite, one gold index): the readers of the tools'
  log files use the same two, so a plugin's numbers and ``calibkit choices`` on the tool's log
  are computed from the same table;
- the rows: :func:`metric_rows` names them, each metric followed by its interval as two rows
  ``{metric}_ci_lower`` and ``{metric}_ci_upper`` (:func:`interval_rows`), the same names in
  every tool; the level is a setting (95% by default), not part of the name;
- the direction: :func:`higher_is_better` reads ``Metric.higher_is_better`` of the metrics
  registry (``calibkit.metrics.registry``) for a metric's rows, and :data:`OTHER_ROWS` for the
  few rows that are no metric of the registry.

A new harness adds one module here with its tool's glue (how the tool hands over a question and
takes a row back) and one entry in ``calibkit/plugins/__init__.py``'s list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from calibkit.metrics import registry

__all__ = [
    "INTERVAL_SUFFIXES",
    "OTHER_ROWS",
    "higher_is_better",
    "interval_rows",
    "metric_rows",
]

INTERVAL_SUFFIXES = ("_ci_lower", "_ci_upper")
"""The ends of a metric's interval, appended to its row's name (``ece_ci_lower``, ``ece_ci_upper``):
the level is a setting, not part of the name, and ``lower`` sorts before ``upper`` in a table
sorted by name (lm-evaluation-harness's)."""

OTHER_ROWS = {
    "without_confidence": False,  # the share of answers that state no confidence
    "calibration_error": False,  # HLE's calibration error (lighteval's, kept unchanged)
    "calibration_error_all_bins": False,  # HLE's, every bin counted
    "confidence_half_width": False,  # HLE's half-width of the accuracy's interval
}
"""The rows a plugin adds that are no metric of the registry, and whether higher is better."""


def interval_rows(row: str) -> tuple[str, str]:
    """Return the names of the two rows of ``row``'s interval, lower end first.

    Parameters
    ----------
    row : str
        A metric's row (``ece``, or ``ece_chars`` for another score).

    Returns
    -------
    (str, str)

    Examples
    --------
    >>> interval_rows("ece")
    ('ece_ci_lower', 'ece_ci_upper')
    """
    return f"{row}{INTERVAL_SUFFIXES[0]}", f"{row}{INTERVAL_SUFFIXES[1]}"


def higher_is_better(row: str) -> bool:
    """Tell whether a larger value of a plugin's row is better, from the metrics registry.

    Parameters
    ----------
    row : str
        A metric of ``calibkit.metrics.registry.REGISTRY``, one of :data:`OTHER_ROWS`, or
        either with an interval's or a standard error's suffix (the metric's direction).

    Returns
    -------
    bool

    Raises
    ------
    ValueError
        When ``row`` is neither, naming the known metrics.

    Examples
    --------
    >>> higher_is_better("ece"), higher_is_better("accuracy"), higher_is_better("brier_ci_upper")
    (False, True, False)
    """
    for suffix in (*INTERVAL_SUFFIXES, "_stderr"):
        row = row.removesuffix(suffix)
    if row in OTHER_ROWS:
        return OTHER_ROWS[row]
    return registry.higher_is_better(row)


def metric_rows(
    values: Mapping[str, Any], intervals: Mapping[str, Any], metrics: Iterable[str], suffix: str = ""
) -> dict[str, float]:
    """Return each metric's row then its interval's two rows, in the order of ``metrics``.

    Parameters
    ----------
    values : mapping of str to float or None
        Each metric's value; a metric whose value is None (not defined on these data) gets no row.
    intervals : mapping of str to (float, float)
        The metrics' intervals (a metric without one gets no interval rows).
    metrics : iterable of str
        The metrics, in the order of the rows.
    suffix : str, default ""
        Appended to each metric's name (``_chars``: the rows of another score).

    Returns
    -------
    dict of str to float

    Examples
    --------
    >>> metric_rows({"ece": 0.1, "cece": None}, {"ece": (0.05, 0.2)}, ["ece", "cece"])
    {'ece': 0.1, 'ece_ci_lower': 0.05, 'ece_ci_upper': 0.2}
    """
    out: dict[str, float] = {}
    for m in metrics:  # each metric, then its interval: adjacent rows in the tool's table
        if values.get(m) is None:
            continue
        out[f"{m}{suffix}"] = float(values[m])
        if m in intervals:
            lower, upper = interval_rows(f"{m}{suffix}")
            out[lower], out[upper] = (float(b) for b in intervals[m])
    return out
