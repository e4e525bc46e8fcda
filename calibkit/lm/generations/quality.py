"""The quality of generated answers against their gold answers, for the rejection metrics.

The rejection metrics (:mod:`calibkit.metrics.rejection`) read a quality in [0, 1] per answer: a
``correct`` column as the readers give it, or a score computed here from the answer and its gold:
exact match after calibkit's normalisation (``calibkit.lm.generations.normalize_answer``:
case, articles, punctuation, number words), or any measure the caller gives, such as ROUGE-L (the
hook: a callable of the answers and the golds).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from calibkit.lm.generations.agreement import normalize_answer

__all__ = ["MEASURES", "answer_quality"]

MEASURES = ("exact_match",)
"""The measures named by a string; any other is a callable ``measure(answers, golds) -> scores``."""


def answer_quality(
    answers: Sequence[str],
    gold: Sequence[str],
    measure: str | Callable[[list[str], list[str]], Any] = "exact_match",
) -> np.ndarray:
    """Score each answer against its gold answer, in [0, 1].

    Parameters
    ----------
    answers : sequence of str
        The generated answers.
    gold : sequence of str
        One gold answer each.
    measure : {"exact_match"} or callable, default "exact_match"
        ``exact_match``: 1 where the two are equal after ``normalize_answer``, else 0. A
        callable takes the two lists and returns one score in [0, 1] per answer (ROUGE-L, an
        F1, a judge's grade), all at once: batched, as a model would score them.

    Returns
    -------
    ndarray of float64, shape (n,)

    Raises
    ------
    ValueError
        Naming the argument: lengths that differ, an unknown measure, or a callable's scores of the
        wrong shape, not finite or outside [0, 1].

    Examples
    --------
    >>> answer_quality(["The Paris.", "two", "Rome"], ["paris", "2", "Milan"]).tolist()
    [1.0, 1.0, 0.0]
    >>> overlap = lambda a, g: [len(set(x.split()) & set(y.split())) / len(set(y.split())) for x, y in zip(a, g)]
    >>> answer_quality(["New York City"], ["New York"], overlap).tolist()
    [1.0]
    """
    answers, gold = [str(a) for a in answers], [str(g) for g in gold]
    if len(answers) != len(gold):
        raise ValueError(f"`gold` has {len(gold)} answers for {len(answers)} `answers`: one gold answer each")
    if isinstance(measure, str):
        if measure not in MEASURES:
            raise ValueError(f"`measure`: unknown measure {measure!r}; known: {', '.join(MEASURES)}, or a callable")
        return np.array([normalize_answer(a) == normalize_answer(g) for a, g in zip(answers, gold)], dtype=np.float64)
    if not callable(measure):
        raise ValueError(f"`measure` must be one of {', '.join(MEASURES)} or a callable, got {measure!r}")
    try:
        scores = np.asarray(measure(answers, gold), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`measure` returned no numbers: {exc}") from None
    if scores.shape != (len(answers),):
        raise ValueError(f"`measure` returned shape {scores.shape} for {len(answers)} answers: one score each")
    bad = np.flatnonzero(~np.isfinite(scores) | (scores < 0) | (scores > 1))
    if bad.size:
        raise ValueError(f"`measure` must score in [0, 1]; answer {bad[0]} scored {scores[bad[0]]}")
    return scores
