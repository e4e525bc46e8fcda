"""``calibkit served --answers RESPONSES --gold FILE``: a served model's responses.

The options that say how to read responses in OpenAI's schema (:mod:`calibkit.lm.served`), and
the multiple-choice section that ``--letters`` adds to the report: the class-wise metrics over
the letters and what the unreturned mass leaves unknown (the bound on the ECE). The report is
the generations report (:mod:`calibkit.cli.report_generations`) of the responses' sources.
These options were ``calibkit generations``'s before this release; that form still works for
one release (:mod:`calibkit.cli.legacy`).
"""

from __future__ import annotations

import argparse
import glob
from pathlib import Path
from typing import Any

import numpy as np


def add_served_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--gold``, ``--letters``, ``--top-logprobs`` and ``--batch-input`` to ``calibkit served``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
    """
    group = parser.add_argument_group("the right answers, and what was requested")
    group.add_argument(
        "--gold",
        help="the right answers of served responses: a file (JSON Lines, CSV, Parquet) with id and gold (the answer, "
        "or with --letters its letter) or correct (0/1, a score in [0, 1]); id is the Batch API's custom_id, else "
        "the response's position in its file (0, 1, ...)",
    )
    group.add_argument(
        "--letters", help="multiple choice: the choice letters, e.g. ABCD (the answer is its first letter)"
    )
    group.add_argument("--top-logprobs", type=int, help="the top_logprobs requested (fewer returned is an error)")
    group.add_argument("--batch-input", help="the Batch API's input file: the prompts and what was requested")


def served_options(args: argparse.Namespace) -> dict[str, Any]:
    """Return the keywords of ``read_served`` the options give.

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    dict
    """
    return {
        "gold": args.gold,
        "letters": args.letters,
        "top_logprobs": args.top_logprobs,
        "batch_input": args.batch_input,
    }


SERVED_ONLY = ("--gold", "--letters", "--top-logprobs", "--batch-input")
"""The options only served responses take: given to ``calibkit generations``, its old form."""


def _files(location: str) -> list[Path]:
    path = Path(location)
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file())
    if glob.has_magic(location):
        return sorted(Path(p) for p in glob.glob(location, recursive=True))
    return [path] if path.is_file() else []


def _served_files(location: str) -> list[Path]:
    from calibkit.lm.served.readers import served_kind

    return [f for f in _files(location) if served_kind(f)]


def holds_served(location: str) -> bool:
    """Tell whether a file, a folder or a glob holds a served model's responses (never raises).

    Parameters
    ----------
    location : str
        ``--answers``.

    Returns
    -------
    bool
    """
    try:
        return bool(_served_files(location))
    except (OSError, ValueError):  # unreadable: the command says what is wrong
        return False


def run(args: argparse.Namespace) -> int:
    """Run ``calibkit served --answers PATH --gold FILE``: the generations report of the responses.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``calibkit served``.

    Returns
    -------
    int
        The exit status, 0 (bad input raises a one-line ``ValueError``).
    """
    from calibkit.cli.report_generations import run as report
    from calibkit.lm.generations import kind_of

    # Other answers beside the responses are read too, as `calibkit generations` read such a folder before
    # this command existed; a location with no response at all is another command's input.
    kinds = {file: kind_of(file) for file in _files(args.answers)}
    others = [(file, kind) for file, kind in kinds.items() if kind not in (None, "served")]
    if others and "served" not in kinds.values():
        file, kind = others[0]
        what = {"harness": "lm-evaluation-harness samples", "table": "a generations table"}.get(kind, f"{kind} logs")
        raise ValueError(
            f"--answers: {file} holds {what}, not a served model's responses: calibkit generations reads it"
        )
    return report(args, served=served_options(args), letters=letters_section if args.letters else None)


def letters_section(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """Return the letters' section of the report: metrics over the choice letters and the outside mass.

    Parameters
    ----------
    args : argparse.Namespace
        ``calibkit generations``'s options, ``--letters`` given.

    Returns
    -------
    (str, dict)
        The Markdown section and its JSON.
    """
    from calibkit.lm.multiple_choice import format_choice_table, multiple_choice_report
    from calibkit.lm.multiple_choice.data import ChoiceData
    from calibkit.lm.served.readers import read_served

    read = [read_served(f, **served_options(args)) for f in _served_files(args.answers)]
    if not read:
        raise ValueError(f"--letters: {args.answers} holds no served model's responses")
    parts = [r.choices() for r in read]
    data = ChoiceData(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("task", "doc_id", "loglik", "gold")),
                      None, None, np.concatenate([p.source for p in parts]))  # fmt: skip
    report = multiple_choice_report(data, n_bins=args.n_bins)
    answers = sum(r.summary()["answers"] for r in read)
    with_letter = sum(r.summary()["with_letter"] for r in read)
    shift = np.concatenate([r.sources.confidence_shift for r in read])
    outside = np.concatenate([r.sources.outside_mass for r in read])
    bound = np.concatenate([r.sources.absent_bound for r in read])
    summary = {
        "letters": args.letters,
        "answers": answers,
        "with_letter": with_letter,
        "outside_mass_mean": float(np.nanmean(outside)),
        "outside_mass_max": float(np.nanmax(outside)),
        "absent_bound_max": float(np.nanmax(bound)),
        "ece_bound": float(np.nanmean(shift)),
    }
    text = (
        f"\n\nMultiple choice over the letters {args.letters} (the distribution read from top_logprobs at each "
        f"answer's first letter; {with_letter} of {answers} answers give a letter):\n\n"
        f"{format_choice_table(report)}\n\n"
        f"Mass outside the returned alternatives at the letter: mean {summary['outside_mass_mean']:.3f}, max "
        f"{summary['outside_mass_max']:.3f}; a letter absent from them has at most {summary['absent_bound_max']:.3f}. "
        f"If that mass belonged to the letters, the top-label ECE over the letters could differ by at most "
        f"{summary['ece_bound']:.3f} (the mean of m / (S + m), bins held as reported)."
    )
    return text, {**summary, "report": report}
