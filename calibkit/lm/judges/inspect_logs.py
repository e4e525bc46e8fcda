"""Judged samples from Inspect AI logs of a model-graded scorer (``model_graded_qa``, ``model_graded_fact``).

Inspect's model graders write, for each sample, a score whose ``value`` is the grade (``C``
correct, ``I`` incorrect, ``P`` partial, or a word such as ``yes`` a custom ``grade_pattern``
captured), whose ``explanation`` is the judge's whole reply, and whose ``metadata["grading"]``
holds the grading prompt and the judge's message. The judge's call is also in the sample's
events: a ``model`` event whose output is that reply, with its tokens' log-probabilities when the
grader ran with ``GenerateConfig(logprobs=True, top_logprobs=k)``. Each sample becomes one row of
:class:`~calibkit.lm.judges.Judged`:

- ``verdict``: the grade as Inspect maps it to a number (``value_to_float``: ``C`` 1, ``P`` 0.5,
  ``I`` 0, ``yes`` 1, ``no`` 0, numbers as they are), in [0, 1];
- ``confidence``: the judge's probability that the answer passes, from the **grade token's
  log-probabilities** where they were logged: at the last token of the reply that spells a grade
  of the verdict's value (:data:`GRADES`: ``C``, ``I``, ``P``, ``yes``, ``no``, ``correct``, ...),
  the probabilities of the alternatives that spell a grade, summed by grade and normalised, and
  the grades' values averaged under them (``P(C)`` when the grades are C and I); else a
  **stated** confidence, the last ``CONFIDENCE: 0.8`` (or ``80%``) in the reply (:data:`STATED`),
  read as the probability of the verdict it came with (``1 - c`` for a failing one); else NaN;
- ``explanation``: the judge's reply.

A sample the grader left unscored (no grade found in its reply: Inspect's ``Score.unscored``,
its value NaN, which Inspect's own metrics leave out) is left out here too, with a warning that
counts them.
"""

from __future__ import annotations

import math
import re
import warnings
from typing import Any

from calibkit.lm.inspect_logs import _log_files, _looks_like_a_log, _scorer_name, answer_tokens, score_value
from calibkit.lm.judges.data import Judged
from calibkit.lm.judges.readers import JUDGED, JudgedReader, register_judged_reader

__all__ = [
    "CONFIDENCE_KINDS",
    "GRADES",
    "STATED",
    "as_judged_refusal",
    "grade_probability",
    "read_inspect_judged",
    "stated_confidence",
]

GRADES = {
    "c": 1.0, "correct": 1.0, "yes": 1.0, "true": 1.0, "pass": 1.0,
    "p": 0.5, "partial": 0.5,
    "i": 0.0, "incorrect": 0.0, "no": 0.0, "false": 0.0, "fail": 0.0,
}  # fmt: skip
"""A grade token's text (stripped of spaces and punctuation, lower case) and the value Inspect gives it."""

STATED = re.compile(r"(?i)\bconfidence\b[^0-9.\n]{0,12}?(\d+(?:\.\d+)?|\.\d+)\s*(%?)")
"""A confidence the judge states in its reply: ``CONFIDENCE: 0.8``, ``confidence = 80%``; the last one counts."""

CONFIDENCE_KINDS = ("auto", "logprobs", "stated", "none")
"""Where the confidence comes from: ``auto`` (the grade token's probability where logged, else a stated one)."""

_STRIP = " \t\n\r.,:;!?'\"()[]*_`"


def _grade_of(text: str) -> float | None:
    return GRADES.get(text.strip(_STRIP).lower())


def grade_probability(tokens: list[dict[str, Any]], verdict: float) -> float:
    """Return the judge's probability that the answer passes, from the grade token's alternatives.

    Parameters
    ----------
    tokens : list of dict
        The reply's tokens as :func:`calibkit.lm.inspect_logs.answer_tokens` returns them
        (``token``, ``logprob``, ``top_logprobs``).
    verdict : float
        The grade's value: the grade token is the last token spelling a grade of this value.

    Returns
    -------
    float
        ``sum_g p_g v_g / sum_g p_g`` over the grades ``g`` among the token's alternatives (the
        token itself counted where the alternatives leave it out), ``v_g`` the grade's value;
        NaN when no token spells a grade of the verdict's value.
    """
    at = [j for j, t in enumerate(tokens) if _grade_of(t["token"]) == verdict]
    if not at:
        return math.nan
    token = tokens[at[-1]]
    alternatives = list(token["top_logprobs"] or [])
    if all(a["token"] != token["token"] for a in alternatives):
        alternatives.append({"token": token["token"], "logprob": token["logprob"]})
    mass = value = 0.0
    for alternative in alternatives:
        grade = _grade_of(alternative["token"])
        if grade is not None:
            p = math.exp(alternative["logprob"])
            mass += p
            value += p * grade
    return value / mass


def stated_confidence(reply: str, verdict: float, where: str) -> float:
    """Return the probability that the answer passes from a confidence the judge states (:data:`STATED`).

    Parameters
    ----------
    reply : str
        The judge's reply.
    verdict : float
        The grade's value: a stated confidence ``c`` is ``c`` for a passing verdict (at least
        0.5), ``1 - c`` for a failing one.
    where : str
        The sample, for the error message.

    Returns
    -------
    float
        NaN when the reply states none.

    Raises
    ------
    ValueError
        When the stated confidence is outside [0, 1] (or [0, 100] with ``%``).
    """
    found = list(STATED.finditer(reply or ""))
    if not found:
        return math.nan
    number, percent = float(found[-1].group(1)), found[-1].group(2)
    c = number / 100 if percent else number
    if not 0 <= c <= 1:
        raise ValueError(f"{where}: the judge states confidence {found[-1].group(0)!r}, outside [0, 1] (or 0-100%)")
    return c if verdict >= 0.5 else 1 - c


def _grader_reply(sample: Any, score: Any) -> Any:
    """Return the output of the judge's model call: the last ``model`` event whose reply is the score's explanation."""
    reply = score.explanation
    found = None
    for event in sample.events or []:
        if getattr(event, "event", None) == "model" and event.output is not None and event.output.choices:
            if event.output.completion == reply:
                found = event.output
    return found


def _confidence(sample: Any, score: Any, verdict: float, kind: str, where: str) -> float:
    value = math.nan
    if kind in ("auto", "logprobs"):
        output = _grader_reply(sample, score)
        choice = output.choices[0] if output is not None else None
        if choice is not None and choice.logprobs is not None:
            value = grade_probability(answer_tokens(choice.logprobs.content, output.completion, where), verdict)
        elif kind == "logprobs":
            raise ValueError(
                f"{where}: the judge's log-probabilities were not logged; give the grader "
                "GenerateConfig(logprobs=True, top_logprobs=5)"
            )
    if kind == "stated" or (kind == "auto" and math.isnan(value)):
        value = stated_confidence(score.explanation or "", verdict, where)
    return value


def _read_one(file: Any, scorer: str | None, kind: str) -> tuple[dict[str, list], int]:
    from inspect_ai.log import read_eval_log

    try:
        log = read_eval_log(str(file), resolve_attachments=True)
    except Exception as exc:  # Inspect raises many kinds; the reader says one line
        raise ValueError(f"`location`: {file} is not an Inspect log ({type(exc).__name__}: {exc})") from None
    samples = log.samples or []
    if not samples:
        raise ValueError(f"{file}: the log has no samples (status {log.status!r})")
    epochs = max(s.epoch for s in samples)
    rows: dict[str, list] = {k: [] for k in ("ids", "verdict", "confidence", "explanation", "origin")}
    unscored = 0
    for sample in samples:
        where = f"{file}, sample {sample.id}" + (f" epoch {sample.epoch}" if epochs > 1 else "")
        score = sample.scores[_scorer_name(sample, scorer, where)]
        if isinstance(score.value, float) and math.isnan(score.value):
            unscored += 1
            continue
        verdict = score_value(score, where)
        rows["ids"].append(str(sample.id) if epochs == 1 else f"{sample.id}#{sample.epoch}")
        rows["verdict"].append(verdict)
        rows["confidence"].append(_confidence(sample, score, verdict, kind, where))
        rows["explanation"].append(score.explanation or "")
        rows["origin"].append(where)
    rows["task"] = [log.eval.task] * len(rows["ids"])
    return rows, unscored


def read_inspect_judged(location: Any, *, scorer: str | None = None, confidence: str = "auto") -> Judged:
    """Read the judged samples of Inspect logs: a ``.eval`` or ``.json`` file, a folder (recursively) or a glob.

    Parameters
    ----------
    location : str or Path
    scorer : str, optional
        The model grader's score, where a sample has several (default: the only one).
    confidence : {"auto", "logprobs", "stated", "none"}, default "auto"
        The judge's confidence: the grade token's probability (``logprobs``: refused where not
        logged), a confidence the judge states (``stated``), the first of them found (``auto``),
        or none (NaN).

    Returns
    -------
    Judged
        One row per scored sample (and epoch: its id is ``id#epoch`` when a task ran several), its
        task the Inspect task's name.

    Raises
    ------
    ValueError
        One line naming the file and the sample: not an Inspect log, several scores and none
        named, a score that is not one number in [0, 1], a stated confidence outside [0, 1],
        log-probabilities asked but not logged, two samples with one id in one task, no scored
        sample at all.

    Examples
    --------
    >>> judged = read_inspect_judged("logs/")  # doctest: +SKIP
    >>> judged.verdict.mean()  # the judge's pass rate  # doctest: +SKIP
    """
    if confidence not in CONFIDENCE_KINDS:
        raise ValueError(f"`confidence`: {confidence!r} is none of {', '.join(CONFIDENCE_KINDS)}")
    parts = [_read_one(f, scorer, confidence) for f in _log_files(location)]
    unscored = sum(n for _, n in parts)
    rows = {k: [v for part, _ in parts for v in part[k]] for k in parts[0][0]}
    if unscored:
        warnings.warn(
            f"{unscored} sample(s) left out: the grader found no grade in the judge's reply (Inspect's unscored)",
            stacklevel=2,
        )
    if not rows["ids"]:
        raise ValueError(f"`location`: no scored sample in {location}")
    return Judged.from_rows(rows)


def as_judged_refusal(exc: ValueError) -> ValueError:
    """Return a reader's refusal as :func:`calibkit.lm.judges.read_judged` words it (opening with ``judged``).

    Parameters
    ----------
    exc : ValueError

    Returns
    -------
    ValueError
    """
    return ValueError(f"{JUDGED}: {str(exc).removeprefix('`location`: ')}")


def _read_file(file: Any) -> Judged:
    try:
        return read_inspect_judged(file)
    except ValueError as exc:
        raise as_judged_refusal(exc) from None


register_judged_reader(
    JudgedReader("inspect", _looks_like_a_log, _read_file, "Inspect logs (.eval, .json) of a model grader")
)
