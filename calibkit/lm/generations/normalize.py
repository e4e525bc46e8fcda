"""The form of an answer that two answers meaning the same share, as a rule can tell (:func:`normalize_answer`).

Its own module so that the grouping of the agreement sources (:mod:`calibkit.lm.generations.agreement`)
and the ``exact`` similarity of the consistency scores (:mod:`calibkit.lm.generations.similarity`) read one rule.
"""

from __future__ import annotations

import re

_ARTICLES = frozenset(("a", "an", "the"))
_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
} | {w: str(10 * i) for i, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), start=3)}
_NUMBER = re.compile(r"(?<![\w.])(-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?)(?![\w])")
_PUNCTUATION = re.compile(r"[^\w\s]|_")


def normalize_answer(text: str) -> str:
    """Return the form of an answer that two answers meaning the same share, as a rule can tell.

    Lower case; numbers written in digits read as numbers (``3.0`` and ``3`` agree, ``1,000`` and
    ``1000`` too) and the number words zero to twenty and the tens as their digits (``four`` and
    ``4``); punctuation removed; the articles *a*, *an*, *the* dropped; white space collapsed. As
    SQuAD's official ``normalize_answer`` (Rajpurkar et al. 2016), with the numbers added.

    Parameters
    ----------
    text : str

    Returns
    -------
    str

    Examples
    --------
    >>> normalize_answer(" The Four legs."), normalize_answer("4 legs")
    ('4 legs', '4 legs')
    >>> normalize_answer("3.0") == normalize_answer("3"), normalize_answer("1,000 km")
    (True, '1000 km')
    """
    pieces = _NUMBER.split(str(text).lower())
    words = []
    for i, piece in enumerate(pieces):
        if i % 2:  # a number the pattern matched
            value = float(piece.replace(",", ""))
            words.append(str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value))
            continue
        for word in _PUNCTUATION.sub("", piece).split():
            if word not in _ARTICLES:
                words.append(_NUMBER_WORDS.get(word, word))
    return " ".join(words)
