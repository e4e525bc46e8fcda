"""``calibkit multilabel``: a multi-label head's saved predictions, as a table per label and averaged."""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from calibkit.io.jsonable import json_ready
from calibkit.plots.tables import cell, interval_cell, markdown_table


def format_multilabel_table(report: dict[str, Any], intervals: dict[str, Any] | None = None) -> str:
    """Render :func:`calibkit.multilabel_report` as Markdown: a row per metric, a column per label and average.

    Parameters
    ----------
    report : dict
        From :func:`calibkit.multilabel_report` (or ``calibration_report(multilabel=True)``).
    intervals : dict, optional
        :func:`~calibkit.metrics.bootstrap.bootstrap_intervals`' ``"intervals"`` with
        ``multilabel=True``: a macro interval column is added.

    Returns
    -------
    str
        Then the class-wise summaries over the labels' ECEs, and each label's support.
    """
    k = len(report["support"])
    head = ["metric", *[f"label {j}" for j in range(k)], "macro", "weighted", "micro"]
    head += ["macro 95% interval"] if intervals else []
    rows: list[Any] = []
    for name, values in report["per_label"].items():
        cells = [_cell(v) for v in values] + [_cell(report[avg][name]) for avg in ("macro", "weighted", "micro")]
        if intervals:
            low, high = intervals["macro"][name]
            cells.append(interval_cell(_float(low), _float(high), missing="-"))
        rows.append([name, *cells])
    rows.append(
        "| support | " + " | ".join(str(int(s)) for s in report["support"]) + " | | | |" + (" |" if intervals else "")
    )  # the averages have no support: empty cells, written as the table always wrote them
    lines = [markdown_table(head, rows), ""]
    summaries = [key for key, value in report.items() if isinstance(value, float)]
    lines.append("Over the labels' ECEs: " + ", ".join(f"{key} {_cell(report[key])}" for key in summaries))
    if "ace_error_bound" in report:  # streamed: each ACE an estimate within its bound
        bound = report["ace_error_bound"]
        lines.append(
            f"ACE, streamed: within {_cell(bound['macro'])} of the exact value (macro), "
            f"{_cell(bound['micro'])} (micro), per label up to {_cell(np.nanmax(bound['per_label']))}"
        )
    lines.append(f"Label decisions counted: {report['n']}")
    return "\n".join(lines)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)  # a count too has four decimals here


def _cell(value: Any) -> str:
    return cell(_float(value), missing="-")


def run(args: argparse.Namespace) -> int:
    """Run ``calibkit multilabel --predictions PATH``.

    Parameters
    ----------
    args : argparse.Namespace
        The command's options.

    Returns
    -------
    int
        0.

    Raises
    ------
    ValueError
        On bad input (one line).
    """
    from calibkit.cli.common import check_options
    from calibkit.io.prediction_files import load_predictions
    from calibkit.io.shards import is_shard_location, stream_report
    from calibkit.lm.multiple_choice import is_choice_location

    settings = check_options(args)
    if is_choice_location(args.predictions):
        raise ValueError(
            f"--predictions: {args.predictions} holds multiple-choice logs (one answer per question), "
            "not multi-label predictions; use `calibkit choices`"
        )
    intervals = None
    if is_shard_location(args.predictions):
        if args.bootstrap:
            raise ValueError("--bootstrap resamples predictions held in memory; with shards it is not available")
        report = stream_report(args.predictions, multilabel=True, progress=not args.quiet, **settings)
        source = f"{args.predictions} ({report.pop('shards')} shards, read {report.pop('passes')} time)"
        report.pop("skipped")
    else:
        from calibkit.metrics import calibration_report
        from calibkit.metrics.bootstrap import bootstrap_intervals

        values, labels, from_logits = load_predictions(args.predictions, multilabel=True)
        report = calibration_report(values, labels, from_logits=from_logits, multilabel=True, **settings)
        if args.bootstrap:
            ci = bootstrap_intervals(
                values, labels, from_logits=from_logits, multilabel=True, n_boot=args.bootstrap, seed=args.seed,
                **settings,
            )  # fmt: skip
            intervals = ci["intervals"]
        source = args.predictions
    if args.json:
        print(json.dumps(json_ready({"source": source, **report, "intervals": intervals}), indent=2))
    else:
        print(f"calibkit report (multi-label): {source}")
        print(format_multilabel_table(report, intervals))
    return 0
