"""Verbalized confidence: the number a model states about its own answer, parsed from its text.

Accepted forms, case-insensitive; the last one in the text counts (a model restating its answer
before its confidence is common):

- after a keyword (``confidence``, ``confident``, ``certainty``, optionally ``level`` or ``score``,
  then an optional ``:``, ``=`` or ``is``): a percentage ``80%`` (``80 %``, ``80 percent``), a
  fraction ``8/10`` (``4 out of 5``), a number in [0, 1] (``0.8``), or a number in (1, 100]
  (``80``, read as a percentage);
- a percentage before ``confident``, ``sure`` or ``certain`` (``I am 80% sure``);
- without a keyword, only a whole line that is a percentage (``80%``) or a fraction (``8/10``):
  a bare ``0.8`` or ``80`` may be the answer itself, so it is never read as a confidence;
- words (``high``, ``very likely``) only through a mapping the caller gives (``words``), matched
  as whole words after a keyword or as a whole line.

A percentage above 100, a fraction above 1 (``12/10``) or a number above 100 after a keyword is
bad input, refused with the row; text with no accepted form has no verbalized confidence (NaN),
and the report gives the share of such answers. Nothing is clipped or guessed.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

_NUMBER = r"(\d+(?:\.\d+)?|\.\d+)"
_VALUE = rf"{_NUMBER}\s*(?P<unit>%|percent\b|/\s*{_NUMBER}|out\s+of\s+{_NUMBER})?"
_KEYWORD = r"\b(?:confidence|confident|certainty)\b(?:\s+(?:level|score))?\s*(?:[:=]|\bis\b)?\s*"
_AFTER_KEYWORD = re.compile(_KEYWORD + _VALUE, re.IGNORECASE)
_BEFORE_KEYWORD = re.compile(rf"{_NUMBER}\s*(?P<unit>%|percent\b)\s*(?:confident|sure|certain)\b", re.IGNORECASE)
_WHOLE_LINE = re.compile(
    rf"^\s*{_NUMBER}\s*(?P<unit>%|percent|/\s*{_NUMBER}|out\s+of\s+{_NUMBER})\s*\.?\s*$", re.I | re.M
)


def _value(match: re.Match, keyword: bool) -> float:
    """Return the confidence of one match; ValueError when it cannot be one (above 100% or 1)."""
    groups = [g for g in match.groups() if g is not None]
    number = float(groups[0])
    unit = (match.group("unit") or "").lower()
    text = match.group(0).strip()
    if unit in ("%", "percent"):
        value = number / 100
    elif unit:  # "8/10", "4 out of 5"
        total = float(groups[-1])
        if total <= 0:
            raise ValueError(f"confidence {text!r} divides by {total:g}")
        value = number / total
    elif number <= 1:
        value = number
    elif keyword and number <= 100:
        value = number / 100  # "Confidence: 80"
    else:
        raise ValueError(f"confidence {text!r} is above 100")
    if value > 1:
        raise ValueError(f"confidence {text!r} is above 100% ({value:.4g})")
    return value


def parse_confidence(text: str, words: dict[str, float] | None = None) -> float:
    r"""Return the verbalized confidence of one answer, NaN when it states none.

    Parameters
    ----------
    text : str
        The model's response.
    words : dict of str to float, optional
        A mapping of words to confidences in [0, 1] (``{"high": 0.9, "low": 0.3}``), which are
        read only when given.

    Returns
    -------
    float
        In [0, 1], or NaN.

    Raises
    ------
    ValueError
        When the stated confidence is above 100% (or above 1 as a fraction).

    Examples
    --------
    >>> parse_confidence("Paris. Confidence: 80%")
    0.8
    >>> parse_confidence("Answer: 12\nConfidence: 0.65")
    0.65
    >>> parse_confidence("8/10")
    0.8
    >>> parse_confidence("Paris. I am 90% sure.")
    0.9
    >>> parse_confidence("The answer is 0.5")
    nan
    >>> parse_confidence("Paris (confidence: high)", words={"high": 0.9})
    0.9
    """
    found: list[tuple[int, float]] = []
    for match in _AFTER_KEYWORD.finditer(text):
        found.append((match.start(), _value(match, keyword=True)))
    for pattern in (_BEFORE_KEYWORD, _WHOLE_LINE):
        for match in pattern.finditer(text):
            found.append((match.start(), _value(match, keyword=False)))
    for word, value in (words or {}).items():
        pattern = rf"(?:{_KEYWORD}|^\s*){re.escape(word)}\b"
        for match in re.finditer(pattern, text, re.IGNORECASE | re.MULTILINE):
            found.append((match.start(), float(value)))
    return max(found)[1] if found else float("nan")


def verbalized_confidence(texts: list[str], where: list[str], words: dict[str, float] | None = None) -> np.ndarray:
    """Parse the verbalized confidence of every answer.

    Parameters
    ----------
    texts : list of str
        The responses.
    where : list of str
        Each response's place (``file, row r``), for the error message.
    words : dict of str to float, optional
        See :func:`parse_confidence`; each value must lie in [0, 1].

    Returns
    -------
    ndarray of float64, shape (N,)
        NaN where an answer states no confidence.

    Raises
    ------
    ValueError
        One line naming the place of the first bad confidence, or a bad ``words`` value.
    """
    for word, value in (words or {}).items():
        if not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ValueError(f"`words`: the confidence of {word!r} must be a number in [0, 1], got {value!r}")
    out = np.full(len(texts), np.nan)
    for i, text in enumerate(texts):  # one regex pass per answer: text has no vector form
        try:
            out[i] = parse_confidence(text, words)
        except ValueError as exc:
            raise ValueError(f"{where[i]}: {exc}") from None
    return out


def check_words(words: Any) -> dict[str, float] | None:
    """Read a ``word=value,...`` mapping (the command line's ``--confidence-words``).

    Parameters
    ----------
    words : str, dict or None

    Returns
    -------
    dict of str to float or None

    Raises
    ------
    ValueError
        When an entry is not ``word=number``.
    """
    if words is None or isinstance(words, dict):
        return words
    out = {}
    for entry in str(words).split(","):
        word, _, value = entry.partition("=")
        try:
            out[word.strip()] = float(value)
        except ValueError:
            raise ValueError(f"`words`: expected word=number, got {entry!r}") from None
    return out
