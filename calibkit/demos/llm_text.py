"""The Markdown of the llm demo's answer sections: one way to write a number and a table of sources."""

from __future__ import annotations

import math
from typing import Any

from calibkit.metrics.registry import HARNESS_METRICS  # ECE, Brier, NLL, AURC: what a tool's table shows

RANKING_SHOWN = ("prr", "augrc")
"""The rejection metrics the uncertainty benchmarks publish, beside ECE and AURC (``calibkit.metrics.rejection``)."""


def source_table(report: dict[str, Any], answers: bool = True) -> list[str]:
    """Return the Markdown lines of a generations report's pooled sources: confidence, ECE, ..., AURC, PRR, AUGRC.

    Parameters
    ----------
    report : dict
        From ``calibkit.lm.generations.generations_report``.
    answers : bool, default True
        With a column of the answers each source scored.

    Returns
    -------
    list of str
    """
    head = ["source", *(["answers"] if answers else []), "mean confidence", *HARNESS_METRICS, *RANKING_SHOWN]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, row in report["pooled"]["sources"].items():
        cells = [row["mean_confidence"], *(row[m] for m in (*HARNESS_METRICS, *RANKING_SHOWN))]
        count = f"{row['answers']} | " if answers else ""
        lines.append(f"| {name} | {count}" + " | ".join(number(c) for c in cells) + " |")
    return lines


def number(value: Any) -> str:
    """Return ``value`` with 4 significant digits, ``n/a`` for None or NaN.

    Parameters
    ----------
    value : float or None

    Returns
    -------
    str
    """
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4g}"
