"""``calibkit choices --predictions LOGS``: multiple-choice logs, by task and pooled.

lm-evaluation-harness and lighteval logs or the choice format (read by
:mod:`calibkit.lm.multiple_choice`), with ``--calibrate`` for temperature scaling over the choices.
"""

from __future__ import annotations

import argparse
import json

from calibkit.cli.common import check_options, writable_folder


def run(args: argparse.Namespace) -> int:
    """``--predictions`` holds multiple-choice logs (lm-evaluation-harness, the choice format): by task and pooled.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``calibkit choices``.

    Returns
    -------
    int
        The exit status, 0 (bad input raises a one-line ``ValueError``, which :func:`calibkit.cli.main`
        prints as exit status 2).
    """
    from calibkit.lm.multiple_choice import (
        chance_notes,
        choice_temperature_scaling,
        format_choice_table,
        format_ts_table,
        multiple_choice_report,
        read_choices,
    )
    from calibkit.lm.multiple_choice.data import SCORE_NAMES

    check_options(args)
    data = read_choices(args.predictions)
    report = multiple_choice_report(
        data, score=args.score, n_bins=args.n_bins, theta=args.theta, fce_variant=args.fce_variant
    )
    score = SCORE_NAMES[args.score]
    tasks = len(report["tasks"]) + len(report["skipped"])
    source = f"{args.predictions} ({len(data.gold)} questions, {tasks} tasks; confidence: softmax of {score})"
    out = {"source": source, **report}
    table = format_choice_table(report)
    if args.calibrate:
        ts = choice_temperature_scaling(data, score=args.score, resplits=args.resplits, n_bins=args.n_bins,
                                        theta=args.theta, seed=args.seed)  # fmt: skip
        out["temperature_scaling"] = ts
        how = f"fitted per task on one half, evaluated on the other, {args.resplits} re-splits"
        table += f"\n\nTemperature scaling over the choices ({how}):\n{format_ts_table(ts)}"
    notes = chance_notes(report, data, out.get("temperature_scaling"))
    if notes:  # true verdicts about noise are useless ones: say so beside them
        out["at_chance"] = notes
        table += "\n\n" + "\n".join(notes)
    if args.json:
        print(json.dumps(out, indent=2, default=lambda v: None))
    else:
        print(f"calibkit report: {source}")
        print(table)
    if args.output:
        from calibkit.lm.multiple_choice.figures import write_choice_report

        folder = writable_folder(args.output)
        (folder / "report.json").write_text(json.dumps(out, indent=2, default=lambda v: None) + "\n")
        (folder / "table.md").write_text(f"# calibkit report: {source}\n{table}\n")
        what = f"{args.predictions} ({len(data.gold)} questions)"  # the page says the tasks and the confidence
        paths = write_choice_report(folder, what, table, report, data, n_bins=args.n_bins)
        if not args.json:
            print("\n".join(f"{name}: {path}" for name, path in paths.items()))
    return 0
