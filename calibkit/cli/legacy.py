"""The command lines of one ``calibkit report`` for every input, kept for one release.

Before a command per input kind, ``calibkit report`` read multiple-choice logs (``--predictions``
pointing at them), generated answers (``--generations``), multi-label predictions
(``--multilabel``) and a model on a dataset (``--model``, ``--dataset``). Such a command line is
rewritten here to its new command (the same options, ``--generations`` renamed ``--answers``,
``--multilabel`` dropped), after one line on stderr naming it; the new command's parser then
refuses any option that its input does not take. So is ``calibkit generations`` given a served
model's responses (``--answers`` holding them, or ``--gold``, ``--letters``, ``--top-logprobs``,
``--batch-input``): ``calibkit served`` reads them now.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

REMOVAL = "the old form will be removed in the next release"


class _Detector(argparse.ArgumentParser):
    """Reads only the options that tell the input kind; its errors are left to the real parser."""

    def error(self, message: str) -> NoReturn:
        raise LookupError(message)


def _kind(rest: list[str]) -> tuple[str, str] | None:
    """Return the new command and the old form's words for ``calibkit report REST``, or None."""
    detector = _Detector(add_help=False)
    for option in ("--predictions", "--model", "--dataset", "--generations"):
        detector.add_argument(option)
    detector.add_argument("--multilabel", action="store_true")
    try:
        seen, _ = detector.parse_known_args(rest)
    except LookupError:  # ambiguous or missing values: the real parser says what is wrong
        return None
    if seen.generations:
        return "generations", "--generations"
    if seen.model or seen.dataset:
        return "compare", "--model --dataset"
    if seen.multilabel:
        return "multilabel", "--multilabel"
    if seen.predictions:
        from calibkit.lm.multiple_choice import is_choice_location

        if is_choice_location(seen.predictions):
            return "choices", "--predictions LOGS"
    return None


def _is_option(token: str, name: str) -> bool:
    """Whether ``token`` is ``name``, ``name=...`` or an abbreviation argparse accepted (4 characters or more)."""
    key = token.split("=", 1)[0]
    return token.startswith("--") and len(key) >= 4 and name.startswith(key)


def _served(rest: list[str]) -> bool:
    """Whether the options of ``calibkit generations REST`` are a served model's responses."""
    from calibkit.cli.report_served import SERVED_ONLY, holds_served

    if any(_is_option(token, option) for token in rest for option in SERVED_ONLY):
        return True
    detector = _Detector(add_help=False)
    detector.add_argument("--answers")
    try:
        seen, _ = detector.parse_known_args(rest)
    except LookupError:
        return False
    return bool(seen.answers) and holds_served(seen.answers)


def rewrite(argv: list[str]) -> list[str]:
    """Rewrite an old ``calibkit report`` or ``calibkit generations`` command line to its new command, on stderr.

    Parameters
    ----------
    argv : list of str
        The arguments.

    Returns
    -------
    list of str
        ``argv`` itself when it is not an old form.
    """
    if argv[:1] == ["generations"] and _served(argv[1:]):
        print(
            f"calibkit: `calibkit generations` of a served model's responses is deprecated: use `calibkit served`; "
            f"{REMOVAL}",
            file=sys.stderr,
        )
        return ["served", *argv[1:]]
    if not argv or argv[0] != "report":
        return argv
    found = _kind(argv[1:])
    if found is None:
        return argv
    command, old = found
    rest = []
    for token in argv[1:]:
        if command == "multilabel" and _is_option(token, "--multilabel"):
            continue
        if command == "generations" and _is_option(token, "--generations"):
            token = "--answers" + token[len(token.split("=", 1)[0]) :]
        rest.append(token)
    if command == "generations" and _served(rest):
        command = "served"
    new = f"{command} --answers" if command in ("generations", "served") else command
    print(f"calibkit: `calibkit report {old}` is deprecated: use `calibkit {new}`; {REMOVAL}", file=sys.stderr)
    return [command, *rest]
