"""RLCR's calibration reward for TRL's ``GRPOTrainer``: the Brier score of a stated confidence, behind a format gate.

RLCR (Damani et al. 2025, "Beyond Binary Rewards: Training LMs to Reason About Their
Uncertainty"; TRL issue #3871) trains a model to answer and then state its confidence, rewarded
by its correctness and by the Brier score of that confidence against it. This module is the
reference code's reward functions (``reward_fns.py`` of github.com/damanimehul/RLCR at
8904bed), reproduced to the value:

- :func:`format_reward` (its lines 28-63): 1 when the completion matches the format pattern
  (``tabc``: ``... </think> <answer>..</answer> <analysis>..</analysis> <confidence>..</confidence>``,
  and ``tbac``, ``tac``, ``ta``; :data:`FORMAT_PATTERNS`) and, for a pattern with a confidence,
  the last ``<confidence>`` parses as a float (Python's ``float``: ``" 0.9 "``, ``"1e-1"`` and
  ``"nan"`` do) within [0, 1]; else 0. A NaN confidence passes, as in the reference (its
  comparisons are False).
- :func:`accuracy_reward` (lines 65-86): 0 where the format fails, else the correctness of the
  last ``<answer>``: SQuAD's exact match (:func:`exact_match_score`) when the batch's first
  ``source`` is ``"hotpot"``, else ``math_verify.verify(answer, math_verify.parse(last_answer))``;
  or a ``checker`` of the caller.
- :func:`brier_reward` (lines 88-112): 0 where the format fails or the last ``<confidence>`` is
  empty, missing or not a float, else ``1 - (correctness - confidence)^2`` (NaN for a NaN
  confidence, as the reference gives it; TRL sums the weighted rewards with ``nansum``).

The reference trains with the three at weight 0.5 each (``configs/Qwen-7B/*/RLCR.yaml``):
:func:`rlcr_reward_funcs` and :data:`RLCR_REWARD_WEIGHTS` give them, for
``GRPOTrainer(reward_funcs=rlcr_reward_funcs(), args=GRPOConfig(reward_weights=RLCR_REWARD_WEIGHTS))``.
With the format met their sum is ``1 + (c - (c - q)^2) / 2`` for correctness ``c`` and confidence
``q``: the paper's ``c - (q - c)^2``, scaled and shifted. Each takes TRL's reward-function call
``(prompts, completions, **columns)``: a completion is the reference's conversational form (its
first message's ``content`` is read) or, beyond the reference, a plain string (TRL's standard
format); the dataset's ``answer`` (and ``source``) columns arrive as keywords. The text is parsed
once per completion (regular expressions have no vector form); the gate and the Brier score
are computed over the batch at once.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "FORMAT_PATTERNS",
    "RLCR_REWARD_WEIGHTS",
    "accuracy_reward",
    "brier_reward",
    "exact_match_score",
    "format_reward",
    "rlcr_reward_funcs",
]

FORMAT_PATTERNS: dict[str, str] = {
    "tbac": r".*?</think>\s*<analysis>.*?</analysis>\s*<answer>.*?</answer>\s*<confidence>.*?</confidence>\s*\Z",
    "ta": r".*?</think>\s*<answer>.*?</answer>\s*\Z",
    "tac": r".*?</think>\s*<answer>.*?</answer>\s*<confidence>.*?</confidence>\s*\Z",
    "tabc": r".*?</think>\s*<answer>.*?</answer>\s*<analysis>.*?</analysis>\s*<confidence>.*?</confidence>\s*\Z",
}
"""The reference's format patterns (``reward_fns.py`` lines 30-37), matched with ``re.DOTALL | re.MULTILINE``."""

RLCR_REWARD_WEIGHTS: tuple[float, float, float] = (0.5, 0.5, 0.5)
"""The reference's weights of format, accuracy and Brier (``configs/Qwen-7B/*/RLCR.yaml``; the two
monitors it logs at weight 1e-5, mean confidence and confidence at 0 or 1, are left out)."""

_FLAGS = re.DOTALL | re.MULTILINE
_CONFIDENCE = re.compile(r"<confidence>(.*?)</confidence>", _FLAGS)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", _FLAGS)


def _normalize_answer(s: str) -> str:
    """SQuAD's normalisation as the reference writes it (lines 7-22): lower, punctuation, articles, spaces."""
    text = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def exact_match_score(prediction: str, ground_truth: str) -> bool:
    """Tell whether two answers are equal after SQuAD's normalisation (the reference's lines 24-25).

    Parameters
    ----------
    prediction : str
    ground_truth : str

    Returns
    -------
    bool

    Examples
    --------
    >>> exact_match_score(" The Eiffel tower.", "eiffel Tower")
    True
    """
    return _normalize_answer(prediction) == _normalize_answer(ground_truth)


def _contents(completions: Sequence[Any]) -> list[str]:
    """Return the text of each completion: its first message's ``content`` (the reference's form) or itself."""
    out = []
    for i, completion in enumerate(completions):
        if isinstance(completion, str):
            out.append(completion)
            continue
        try:
            content = completion[0]["content"]
        except (TypeError, KeyError, IndexError):
            content = None
        if not isinstance(content, str):
            raise ValueError(
                f"`completions`: completion {i} is neither a string nor a list of messages whose first has a "
                f"string 'content', got {completion!r:.80}"
            )
        out.append(content)
    return out


def _pattern(format_pattern: str) -> str:
    if format_pattern not in FORMAT_PATTERNS:
        raise ValueError(f"`format_pattern` must be one of {sorted(FORMAT_PATTERNS)}, got {format_pattern!r}")
    return FORMAT_PATTERNS[format_pattern]


def _last_confidence(contents: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Return the last ``<confidence>`` of each text as ``float`` reads it, and whether it did (lines 49-62)."""
    value, parsed = np.full(len(contents), np.nan), np.zeros(len(contents), dtype=bool)
    for i, content in enumerate(contents):  # one regex pass per text: text has no vector form
        found = _CONFIDENCE.findall(content)
        last = found[-1] if found else ""
        if last == "":
            continue
        try:
            value[i], parsed[i] = float(last), True
        except ValueError:  # the reference's bare except: float() of a str raises only this
            continue
    return value, parsed


def _gate(contents: list[str], format_pattern: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the format gate of each text (0 or 1), with its last confidence and whether it parsed."""
    pattern = re.compile(_pattern(format_pattern), _FLAGS)
    matched = np.array([pattern.match(content) is not None for content in contents], dtype=bool)
    value, parsed = _last_confidence(contents)
    if "c" in format_pattern:  # lines 48-62: parsed, and not < 0 nor > 1 (NaN passes both)
        matched &= parsed & ~((value < 0) | (value > 1))
    return matched, value, parsed


def format_reward(completions: Sequence[Any], format_pattern: str = "tabc", **kwargs: Any) -> list[float]:
    """Return 1 for each completion in the reference's format with a confidence in [0, 1], else 0.

    The reference's ``format_reward`` (``reward_fns.py`` lines 28-63).

    Parameters
    ----------
    completions : list
        TRL's completions: lists of messages (the first one's ``content`` is read) or strings.
    format_pattern : {"tabc", "tbac", "tac", "ta"}, default "tabc"
        The order of the tags (:data:`FORMAT_PATTERNS`; ``t`` is ``</think>``); with a ``c`` the
        last ``<confidence>`` must be a float in [0, 1].
    **kwargs
        TRL's other arguments (``prompts``, dataset columns): unused.

    Returns
    -------
    list of float

    Raises
    ------
    ValueError
        On an unknown ``format_pattern`` or a completion of neither form.

    Examples
    --------
    >>> format_reward(["x</think> <answer>4</answer> <confidence>0.7</confidence>"], format_pattern="tac")
    [1.0]
    """
    return _gate(_contents(completions), format_pattern)[0].astype(float).tolist()


def _check_answers(answer: Any, n: int) -> list[Any]:
    if isinstance(answer, str) or not isinstance(answer, (Sequence, np.ndarray)) or len(answer) != n:
        raise ValueError(
            f"`answer` must be a list of {n} gold answers (the dataset's `answer` column), got {answer!r:.80}"
        )
    return list(answer)


def _reference_checker(source: Any) -> Callable[[str, Any], Any]:
    """Return the reference's correctness check (lines 80-84): exact match for a ``hotpot`` batch, else math_verify."""
    if source is not None and source[0] == "hotpot":
        return exact_match_score
    try:
        import math_verify
    except ImportError:
        raise ValueError(
            "`checker`: the reference checks a non-hotpot batch with math_verify (pip install math-verify), which "
            'is not installed; pass checker="exact_match" or a callable (answer_text, gold) -> bool'
        ) from None
    return lambda text, gold: math_verify.verify(gold, math_verify.parse(text))


def _checker(checker: Any, source: Any) -> Callable[[str, Any], Any]:
    if checker is None:
        return _reference_checker(source)
    if checker == "exact_match":
        return exact_match_score
    if callable(checker):
        return checker
    raise ValueError(f'`checker` must be None (the reference\'s), "exact_match" or a callable, got {checker!r}')


def _correctness(contents: list[str], gate: np.ndarray, answer: Any, source: Any, checker: Any) -> np.ndarray:
    """Return the reference's accuracy (lines 65-86): 0 where the gate fails, else the last ``<answer>``'s check."""
    gold = _check_answers(answer, len(contents))
    check = _checker(checker, source) if gate.any() else None
    out = np.zeros(len(contents))
    for i in np.flatnonzero(gate):  # one check per gated text: a parser, no vector form
        found = _ANSWER.findall(contents[i])
        out[i] = float(check(found[-1] if found else "", gold[i]))
    return out


def accuracy_reward(
    completions: Sequence[Any],
    answer: Sequence[Any],
    format_pattern: str = "tabc",
    source: Sequence[str] | None = None,
    checker: str | Callable[[str, Any], Any] | None = None,
    **kwargs: Any,
) -> list[float]:
    """Return the correctness of each completion's last ``<answer>``, 0 where the format gate fails.

    The reference's ``accuracy_reward`` (``reward_fns.py`` lines 65-86).

    Parameters
    ----------
    completions : list
        TRL's completions (see :func:`format_reward`).
    answer : list
        The gold answers (the dataset's ``answer`` column).
    format_pattern : {"tabc", "tbac", "tac", "ta"}, default "tabc"
        The gate's pattern (:func:`format_reward`).
    source : list of str, optional
        The dataset's ``source`` column: the reference's correctness is the exact match when its
        first entry is ``"hotpot"``.
    checker : None, "exact_match" or callable, optional
        None: the reference's rule (exact match for ``hotpot``, else ``math_verify``, which must
        then be installed); ``"exact_match"``: SQuAD's exact match for every answer; a callable
        ``(answer_text, gold) -> bool or float``.
    **kwargs
        TRL's other arguments: unused.

    Returns
    -------
    list of float

    Raises
    ------
    ValueError
        On an unknown ``format_pattern`` or ``checker``, ``answer`` of another length, a
        completion of neither form, or math_verify missing where the reference's rule needs it.

    Examples
    --------
    >>> accuracy_reward(["</think><answer>Paris</answer>"], ["paris"], format_pattern="ta", checker="exact_match")
    [1.0]
    """
    contents = _contents(completions)
    gate = _gate(contents, format_pattern)[0]
    return _correctness(contents, gate, answer, source, checker).tolist()


def brier_reward(
    completions: Sequence[Any],
    answer: Sequence[Any],
    format_pattern: str = "tabc",
    source: Sequence[str] | None = None,
    checker: str | Callable[[str, Any], Any] | None = None,
    **kwargs: Any,
) -> list[float]:
    """Return ``1 - (correctness - confidence)^2`` of each completion, 0 where the gate fails or no confidence parses.

    The reference's ``brier_reward`` (``reward_fns.py`` lines 88-112): the correctness is
    :func:`accuracy_reward`'s, the confidence the last ``<confidence>`` as Python's ``float``
    reads it (not clipped: with the pattern ``ta`` a confidence of 5 gives ``1 - (c - 5)^2``; a
    NaN confidence gives NaN, as the reference's).

    Parameters
    ----------
    completions : list
        TRL's completions (see :func:`format_reward`).
    answer : list
        The gold answers (the dataset's ``answer`` column).
    format_pattern : {"tabc", "tbac", "tac", "ta"}, default "tabc"
        The gate's pattern (:func:`format_reward`).
    source : list of str, optional
        The dataset's ``source`` column (see :func:`accuracy_reward`).
    checker : None, "exact_match" or callable, optional
        The correctness check (see :func:`accuracy_reward`).
    **kwargs
        TRL's other arguments: unused.

    Returns
    -------
    list of float

    Raises
    ------
    ValueError
        As :func:`accuracy_reward`.

    Examples
    --------
    >>> text = "</think> <answer>Paris</answer> <confidence>0.8</confidence>"
    >>> [round(r, 4) for r in brier_reward([text, text], ["paris", "rome"], "tac", checker="exact_match")]
    [0.96, 0.36]
    """
    contents = _contents(completions)
    gate, confidence, parsed = _gate(contents, format_pattern)
    correct = _correctness(contents, gate, answer, source, checker)
    scored = gate & parsed
    with np.errstate(invalid="ignore"):
        return np.where(scored, 1.0 - (correct - np.where(scored, confidence, 0.0)) ** 2, 0.0).tolist()


def rlcr_reward_funcs(
    format_pattern: str = "tabc", checker: str | Callable[[str, Any], Any] | None = None
) -> list[Callable[..., list[float]]]:
    """Return RLCR's three reward functions for ``GRPOTrainer(reward_funcs=...)``: format, accuracy, Brier.

    As the reference's ``rl_runner.py`` builds them (``functools.partial`` with the pattern; TRL
    logs them as ``rewards/format_reward``, ``rewards/accuracy_reward``, ``rewards/brier_reward``);
    weigh them with ``GRPOConfig(reward_weights=RLCR_REWARD_WEIGHTS)``.

    Parameters
    ----------
    format_pattern : {"tabc", "tbac", "tac", "ta"}, default "tabc"
        The tags' order (the reference's RLCR configs use ``tabc``).
    checker : None, "exact_match" or callable, optional
        The correctness check (see :func:`accuracy_reward`).

    Returns
    -------
    list of callable

    Raises
    ------
    ValueError
        On an unknown ``format_pattern`` or ``checker``.
    """
    _pattern(format_pattern)
    if checker is not None:
        _checker(checker, None)
    return [
        functools.partial(format_reward, format_pattern=format_pattern),
        functools.partial(accuracy_reward, format_pattern=format_pattern, checker=checker),
        functools.partial(brier_reward, format_pattern=format_pattern, checker=checker),
    ]
