"""``calibkit report --predictions DIR_OR_GLOB``: shards streamed in bounded memory, ACE exact by extra passes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from calibkit.cli.common import format_table, with_absent_metrics, writable_folder
from calibkit.io.jsonable import json_ready


def run(args: argparse.Namespace, settings: dict[str, Any]) -> int:
    """``--predictions`` is a folder or a glob: stream the shards (bounded memory, exact ACE).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``calibkit report``.
    settings : dict of str to object
        The metric settings it was given (:func:`calibkit.cli.options.settings_of`).

    Returns
    -------
    int
        The exit status, 0 (bad input raises a one-line ``ValueError``, which :func:`calibkit.cli.main`
        prints as exit status 2).
    """
    from calibkit.io.shards import skipped_note, stream_report

    if args.bootstrap:
        raise ValueError(
            "--bootstrap resamples predictions held in memory; with shards (a folder or glob) it is not available"
        )
    report = stream_report(args.predictions, exact_ace=not args.approximate_ace, progress=not args.quiet, **settings)
    passes, shards, skipped = report.pop("passes"), report.pop("shards"), report.pop("skipped")
    left_out = skipped_note(skipped)
    source = f"{args.predictions} ({shards} shards, {report['n']} labelled predictions, read {passes} times"
    source += f"; {left_out})" if left_out else ")"
    if args.approximate_ace:
        source += f"; ace within {report['ace_error_bound']:.2g} (--approximate-ace: one pass)"
    if args.fce_variant != "paper":
        source += f"; fce as the fuzzy-binning authors' code computes it (--fce-variant {args.fce_variant})"
    out = {"source": source, "fce_variant": args.fce_variant, "passes": passes, "shards": shards, "skipped": skipped}
    out.update(json_ready(report))
    shown, note = with_absent_metrics(report)
    table = f"calibkit report: {source}\n{format_table(shown)}" + (f"\n\n{note}" if note else "")
    if args.output:
        folder = writable_folder(args.output)
        (folder / "report.json").write_text(json.dumps(out, indent=2) + "\n")
        (folder / "table.md").write_text(f"# {table}\n")
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(table)
        if args.output:
            print(f"json: {Path(args.output) / 'report.json'}\nmarkdown: {Path(args.output) / 'table.md'}")
    return 0
