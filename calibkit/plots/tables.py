"""The Markdown tables every report prints: one renderer and the cells' number formats.

:func:`markdown_table` renders a header and rows as a pipe table; :func:`cell` formats a number
(four decimals, a count as it is, a chosen mark for a missing value, an interval after it),
:func:`interval_cell` an interval alone and :func:`summary_cell` a value summarised over re-splits
(``mean ± std [2.5%, 97.5%]``). The command line's tables (``calibkit.cli``), the language-model
reports (``calibkit.lm``) and the comparison's and re-splits' tables (``calibkit.verdicts``)
are all written with them, so a number reads the same in each.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["cell", "interval_cell", "markdown_table", "summary_cell"]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, (float, np.floating)) and math.isnan(value))


def cell(value: Any, interval: Sequence[float] | None = None, *, digits: int = 4, missing: str = "nan") -> str:
    """Format one number for a table: ``digits`` decimals, a count as it is, ``missing`` for None or NaN.

    Parameters
    ----------
    value : float, int or None
        The number; an integer (a count) is written without decimals.
    interval : (float, float), optional
        Written after the value as ``[low, high]``, unless one end is NaN (no interval then).
    digits : int, default=4
        Decimals.
    missing : str, default="nan"
        The text of a None or NaN value (``"-"``, ``"n/a"``, ``""``: each report keeps its own).

    Returns
    -------
    str

    Examples
    --------
    >>> cell(0.123456), cell(float("nan"), missing="-"), cell(12), cell(0.05, (0.01, 0.1))
    ('0.1235', '-', '12', '0.0500 [0.0100, 0.1000]')
    """
    if _missing(value):
        return missing
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(value)
    text = f"{value:.{digits}f}"
    if interval is not None and not any(math.isnan(end) for end in interval):
        text += f" [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"
    return text


def interval_cell(low: Any, high: Any, *, digits: int = 4, missing: str = "nan") -> str:
    """Format an interval alone, ``[low, high]``, each end as :func:`cell` writes it.

    Parameters
    ----------
    low, high : float or None
        The ends.
    digits : int, default=4
        Decimals.
    missing : str, default="nan"
        The text of an end that is None or NaN.

    Returns
    -------
    str

    Examples
    --------
    >>> interval_cell(0.01, 0.1), interval_cell(float("nan"), float("nan"), missing="-")
    ('[0.0100, 0.1000]', '[-, -]')
    """
    return f"[{cell(low, digits=digits, missing=missing)}, {cell(high, digits=digits, missing=missing)}]"


def summary_cell(summary: Mapping[str, Any], *, std: bool = False, digits: int = 4, missing: str = "not fitted") -> str:
    """Format a value over re-splits: ``mean [low, high]`` (``mean ± std [low, high]`` with ``std``).

    Parameters
    ----------
    summary : dict
        ``mean``, ``low``, ``high`` (the 2.5% and 97.5% quantiles), ``n`` (the re-splits that gave
        a value) and, with ``std``, ``std``: a re-split summary such as
        :meth:`calibkit.verdicts.resplits.Resplits.summary` returns.
    std : bool, default=False
        Write the standard deviation after the mean.
    digits : int, default=4
        Decimals.
    missing : str, default="not fitted"
        The text when no re-split gave a value (``n`` is 0).

    Returns
    -------
    str

    Examples
    --------
    >>> summary_cell({"mean": 0.05, "std": 0.01, "low": 0.03, "high": 0.07, "n": 20}, std=True)
    '0.0500 ± 0.0100 [0.0300, 0.0700]'
    >>> summary_cell({"mean": float("nan"), "low": 0.0, "high": 0.0, "n": 0})
    'not fitted'
    """
    if not summary["n"]:
        return missing
    spread = f" ± {summary['std']:.{digits}f}" if std else ""
    return f"{summary['mean']:.{digits}f}{spread} [{summary['low']:.{digits}f}, {summary['high']:.{digits}f}]"


def markdown_table(
    head: Sequence[str], rows: Iterable[Sequence[Any] | str], *, digits: int = 4, missing: str = "nan"
) -> str:
    """Render a Markdown pipe table: the header, its rule, one line per row.

    Parameters
    ----------
    head : sequence of str
        The column titles.
    rows : iterable of sequences, or of str
        The cells of each row: a str as it is, anything else through :func:`cell` (with ``digits``
        and ``missing``). A row given as one str is a line written as it is (a row whose cells the
        caller joined itself, such as one with empty cells).
    digits : int, default=4
        Decimals of the cells that are numbers.
    missing : str, default="nan"
        The text of a cell that is None or NaN.

    Returns
    -------
    str
        The lines, without a final newline.

    Examples
    --------
    >>> print(markdown_table(["metric", "value"], [["ece", 0.0312], ["n", 200], ["aurc", None]], missing="-"))
    | metric | value |
    |---|---|
    | ece | 0.0312 |
    | n | 200 |
    | aurc | - |
    """
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for row in rows:
        if isinstance(row, str):
            lines.append(row)
            continue
        cells = [c if isinstance(c, str) else cell(c, digits=digits, missing=missing) for c in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
