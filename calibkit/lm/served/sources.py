"""Confidence sources from a served model's token log-probabilities (the OpenAI chat shape).

One function, :func:`logprob_sources`, reads the tokens of any number of answers in the shape of
OpenAI's chat completions (``choices[i].logprobs.content``: a list of ``{"token", "logprob",
"bytes", "top_logprobs": [{"token", "logprob"}, ...]}``), which vLLM's server, most providers and
Inspect's logs share, and gives the sequence sources and, for multiple choice, the distribution
over the choice letters. Parsing loops over the objects; the arithmetic runs on flat arrays with
offsets (``np.add.reduceat``, ``np.minimum.reduceat``, ``np.add.at``), never a loop over tokens.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SENTINEL = -9999.0
"""vLLM's server writes this log-probability for a token whose log-probability is ``-inf`` after
its processing (outside the sampling set): it says "below the returned alternatives", never a
probability. Any log-probability at or below it is read so."""

ROUND_OFF = 1e-6
"""The largest log-probability accepted: above 0 up to it is the float32 round-off of a token of
probability 1 (read as it is); above it, a log-probability is refused."""

LETTER_STRIP = " \t\r\n\u2581\u0120()[]{}.:,*"
"""Characters stripped from a token's text before it is compared with the choice letters (white
space, SentencePiece's and GPT-2's space markers, brackets and the punctuation around a letter:
" (A)", "A." and "**A" all read as ``A``)."""


@dataclass(frozen=True)
class LogprobSources:
    """The confidence sources of N answers read from their token log-probabilities.

    Parameters
    ----------
    sequence : ndarray of float64, shape (N,)
        ``exp(sum_j log p_j)``, the answer's probability under the model (NaN for an answer
        without tokens or with a sentinel log-probability).
    sequence_normalized : ndarray of float64, shape (N,)
        ``exp(mean_j log p_j)``, the geometric mean of the token probabilities.
    least_token : ndarray of float64, shape (N,)
        ``min_j p_j``, the least probable token of the answer.
    n_tokens : ndarray of int64, shape (N,)
        The answer's number of tokens.
    sentinels : ndarray of int64, shape (N,)
        How many of the answer's own tokens carry vLLM's sentinel (their sequence sources are NaN).
    letters : ndarray of float64, shape (N, L), or None
        With ``letters``: the distribution over the choice letters at the answer's letter position
        (the letters' probabilities found there, divided by their sum); a row of NaN where the
        answer has no letter position.
    letter_mass : ndarray of float64, shape (N, L), or None
        The letters' probabilities themselves (0 for a letter absent from the alternatives).
    letter_position : ndarray of int64, shape (N,), or None
        The index of the letter token in the answer, -1 where none.
    outside_mass : ndarray of float64, shape (N,), or None
        ``1 - sum`` of the probabilities of the tokens returned at the letter position (the
        alternatives and the chosen token): the mass the model put on tokens it did not return.
    absent_bound : ndarray of float64, shape (N,), or None
        The most probability any one letter absent from the alternatives can have:
        ``min(p_k, outside_mass)``, with ``p_k`` the least of the top k alternatives (every token
        left out of the top k has at most the k-th's probability). The chosen token counts among
        them when it is one of the ``top_logprobs=k`` asked for (k alternatives returned, the
        chosen among them); not when it may be vLLM's extra (k+1)-th, the sampled token from
        outside the top k, or when ``k`` is not known (a looser bound, still valid).
    confidence_shift : ndarray of float64, shape (N,), or None
        ``m / (S + m)``, with ``S`` the letters' returned mass and ``m`` the outside mass: the most
        the top-label confidence over the letters (and half the L1 distance of the distribution)
        can move if the outside mass belonged to the letters (see ``ece_bound``).
    """

    sequence: np.ndarray
    sequence_normalized: np.ndarray
    least_token: np.ndarray
    n_tokens: np.ndarray
    sentinels: np.ndarray
    letters: np.ndarray | None = None
    letter_mass: np.ndarray | None = None
    letter_position: np.ndarray | None = None
    outside_mass: np.ndarray | None = None
    absent_bound: np.ndarray | None = None
    confidence_shift: np.ndarray | None = None

    @property
    def ece_bound(self) -> float:
        """The most the letters' top-label ECE can owe to the unreturned mass.

        If the outside mass ``m_i`` of question ``i`` all belonged to its letters, its
        distribution over the letters would be the mixture ``(S_i q_i + E_i e_i) / (S_i + E_i)``
        with ``E_i <= m_i``, so its top-label confidence moves by at most
        ``delta_i = m_i / (S_i + m_i)``. With the bins held as reported, each bin's gap
        ``|sum (y - c)|`` moves by at most the sum of its ``delta_i``, so the ECE moves by at most
        ``mean_i delta_i`` (over the questions with a letter position). A confidence that the
        shift moves across a bin edge is not covered: the bound is on the binned gaps, not on the
        bin assignment.

        Returns
        -------
        float
            ``mean_i delta_i``; NaN without ``letters`` or without any letter position.
        """
        if self.confidence_shift is None or not np.isfinite(self.confidence_shift).any():
            return float("nan")
        return float(np.nanmean(self.confidence_shift))


def _field(obj: Any, name: str) -> Any:
    """``obj[name]`` for a mapping, ``obj.name`` for an object (the ``openai`` or Inspect types)."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _number(value: Any, where: str) -> float:
    """Return a log-probability as a float, refused unless it is a number at most ``ROUND_OFF``.

    Up to it, a value above 0 is the float32 round-off of a token of probability 1, read as it is.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where}: expected a log-probability (a number), got {value!r}")
    value = float(value)
    if not value <= ROUND_OFF:  # NaN and positive values; a float32 round-off above 0 is let through
        raise ValueError(f"{where}: a log-probability must be a number at most 0 (1e-6 for round-off), got {value!r}")
    return value


def letter_of(token: str, letters: str) -> int:
    """Return the index in ``letters`` of the letter a token's text spells, -1 if it spells none.

    Parameters
    ----------
    token : str
        A token's text (``" B"``, ``"(C"``, ``"D."``).
    letters : str
        The choice letters, one character each (``"ABCD"``); compared case-sensitively, so that
        the article "a" is not read as choice ``a`` of ``"ABCD"``.

    Returns
    -------
    int
    """
    text = token.strip(LETTER_STRIP)
    return letters.find(text) if len(text) == 1 else -1


def _check_top(alternatives: Any, k: int | None, where: str) -> list:
    """Return the alternatives of one token as a list, refused when fewer than the ``k`` asked."""
    if alternatives is None:
        alternatives = []
    if not isinstance(alternatives, list | tuple):
        raise ValueError(f"{where}: expected a list of alternatives, got {type(alternatives).__name__}")
    if k is not None and len(alternatives) < k:
        raise ValueError(
            f"{where}: {len(alternatives)} alternatives, fewer than the top_logprobs={k} asked"
            + (" (were top_logprobs requested?)" if not alternatives else "")
        )
    return list(alternatives)


def _segments(values: np.ndarray, offsets: np.ndarray, ufunc: np.ufunc) -> np.ndarray:
    """``ufunc.reduce`` over each segment ``values[offsets[i]:offsets[i+1]]``; NaN for an empty one."""
    n = len(offsets) - 1
    out = np.full(n, np.nan)
    lengths = np.diff(offsets)
    full = lengths > 0
    if full.any():
        # reduceat over the starts of the non-empty segments only: an empty one in between has no
        # tokens, so each non-empty segment still ends where the next non-empty one starts.
        out[full] = ufunc.reduceat(values, offsets[:-1][full])
    return out


def _parse(contents: list, letter_text: str | None, asked: list, where: Sequence[str]) -> tuple:
    """Flatten the answers' log-probabilities and the letter positions' alternatives, checking them.

    ``asked``: each answer's top_logprobs requested, None where not known.
    """
    n = len(contents)
    lengths = np.zeros(n, dtype=np.int64)
    logprobs: list[float] = []
    # the letter position's returned tokens, flattened: owner answer, letter index (-1: not a
    # letter), log-probability, whether it is one of the top k (its least bounds every token not
    # returned): an alternative other than the chosen token, or the chosen token itself where it
    # is one of the k asked for (k returned, it among them), not vLLM's extra (k+1)-th
    alt_owner: list[int] = []
    alt_letter: list[int] = []
    alt_logprob: list[float] = []
    alt_top: list[bool] = []
    position = np.full(n, -1, dtype=np.int64)
    for i, tokens in enumerate(contents):
        if not isinstance(tokens, Sequence) or isinstance(tokens, str):
            raise ValueError(f"{where[i]}: expected a list of tokens (content), got {type(tokens).__name__}")
        lengths[i] = len(tokens)
        k = asked[i]
        for j, token in enumerate(tokens):
            here = f"{where[i]}.content[{j}]"
            text = _field(token, "token")
            if not isinstance(text, str):
                raise ValueError(f"{here}.token: expected a string, got {text!r}")
            value = _number(_field(token, "logprob"), f"{here}.logprob")
            logprobs.append(value)
            alternatives = _check_top(_field(token, "top_logprobs"), k, f"{here}.top_logprobs")
            if letter_text is None or position[i] >= 0 or letter_of(text, letter_text) < 0:
                continue
            if not alternatives:
                raise ValueError(
                    f"{here}.top_logprobs: empty at the letter position; the letters' distribution "
                    "needs top_logprobs requested (top_logprobs=k in the request)"
                )
            position[i] = j
            chosen_in_top = k is not None and len(alternatives) <= k
            seen = set()
            for a, alt in enumerate(alternatives):
                alt_text = _field(alt, "token")
                if not isinstance(alt_text, str):
                    raise ValueError(f"{here}.top_logprobs[{a}].token: expected a string, got {alt_text!r}")
                alt_owner.append(i)
                alt_letter.append(letter_of(alt_text, letter_text))
                alt_logprob.append(_number(_field(alt, "logprob"), f"{here}.top_logprobs[{a}].logprob"))
                alt_top.append(alt_text != text or chosen_in_top)
                seen.add(alt_text)
            if text not in seen:  # the chosen token, sampled from outside the top k (vLLM appends it)
                alt_owner.append(i)
                alt_letter.append(letter_of(text, letter_text))
                alt_logprob.append(value)
                alt_top.append(False)

    return lengths, logprobs, (alt_owner, alt_letter, alt_logprob, alt_top), position


def logprob_sources(
    contents: Sequence[Sequence[Any]],
    *,
    letters: str | Sequence[str] | None = None,
    top_logprobs: int | Sequence[int | None] | None = None,
    where: Sequence[str] | None = None,
) -> LogprobSources:
    r"""Confidence sources of answers from their token log-probabilities (OpenAI's chat shape).

    For an answer of tokens with probabilities :math:`p_1, \dots, p_T`:

    .. math::

        \text{sequence} = \prod_j p_j, \qquad
        \text{sequence\_normalized} = \exp\Big(\frac1T \sum_j \log p_j\Big), \qquad
        \text{least\_token} = \min_j p_j .

    With ``letters`` (multiple choice): the answer's *letter position* is its first token whose
    text, stripped of white space and of the brackets and punctuation in ``LETTER_STRIP``, is one
    of the letters (``" B"``, ``"(B"``, ``"B."``). There, the chosen token and its
    ``top_logprobs`` alternatives (each token once) are the returned tokens; the probability of a
    letter is the sum over the returned tokens that spell it (``" B"`` and ``"B"`` both), its
    distribution is these sums divided by their total, and the mass outside,
    ``m = 1 - sum of the returned probabilities``, is what the model put elsewhere. A letter
    absent from the returned tokens has at most ``min(p_k, m)``, ``p_k`` the least of the top k
    alternatives (every token outside the top k has at most the k-th's probability): the chosen
    token counts among them where it is one of the ``top_logprobs=k`` returned, not where it may
    be the sampled token from outside the top k that vLLM adds as a (k+1)-th alternative, nor
    when ``top_logprobs`` is not given (then it is left out: a looser bound, still valid);
    :attr:`LogprobSources.ece_bound` states what the outside mass can do to the ECE over the
    letters.

    vLLM's server writes -9999.0 (``SENTINEL``) for a log-probability of ``-inf`` after its
    processing; it is read as "below the returned alternatives", never as a probability: an
    answer token carrying it makes that answer's sequence sources NaN (counted in
    ``sentinels``), an alternative carrying it is left out of the returned tokens.

    Parameters
    ----------
    contents : sequence of sequences of token objects
        One list per answer, each item a token in OpenAI's chat shape: a mapping (or an object
        with these attributes, such as ``openai``'s ``ChatCompletionTokenLogprob`` or Inspect's
        ``Logprob``) with ``token`` (str), ``logprob`` (float) and ``top_logprobs`` (a list of
        ``{"token", "logprob"}``). An empty list gives NaN sources.
    letters : str or sequence of str, optional
        The choice letters (``"ABCD"``), one character each; without it, no letter sources.
    top_logprobs : int or sequence of (int or None), optional
        The number of alternatives requested per token, for every answer or one per answer (a
        Batch API file's requests may differ; None: not known): a token that returns fewer is
        refused (vLLM may return one more, the chosen token, which is accepted). Known, it tells
        whether the chosen token is one of the top k (k returned, it among them), which tightens
        ``absent_bound``.
    where : sequence of str, optional
        Each answer's location (``"run.jsonl, line 3, choices[0].logprobs"``), put before the
        field path in error messages; default ``"answer i"``.

    Returns
    -------
    LogprobSources

    Raises
    ------
    ValueError
        One line naming the answer's location and the field: a missing or non-numeric
        ``logprob``, a positive one (above ``ROUND_OFF``, 1e-6), a ``token`` that is not a
        string, fewer ``top_logprobs`` than asked, ``top_logprobs`` missing at the letter position,
        bad ``letters``.

    References
    ----------
    The sequence and geometric-mean probabilities and the least token probability are
    LM-Polygraph's ``MaximumSequenceProbability``, ``Perplexity`` and ``MaximumTokenProbability``
    family (Fadeeva et al., 2023, "LM-Polygraph: Uncertainty Estimation for Language Models").

    Examples
    --------
    >>> import math
    >>> tok = lambda t, p, top=(): {"token": t, "logprob": math.log(p),
    ...                             "top_logprobs": [{"token": a, "logprob": math.log(q)} for a, q in top]}
    >>> s = logprob_sources([[tok("The", 0.5), tok(" B", 0.6, [(" B", 0.6), (" A", 0.3)])]], letters="ABCD")
    >>> round(float(s.sequence[0]), 6), round(float(s.least_token[0]), 6)
    (0.3, 0.5)
    >>> [round(float(x), 6) for x in s.letters[0]], round(float(s.outside_mass[0]), 6)
    ([0.333333, 0.666667, 0.0, 0.0], 0.1)
    """
    per_answer = isinstance(top_logprobs, Sequence) and not isinstance(top_logprobs, str)
    if (
        not per_answer
        and top_logprobs is not None
        and (isinstance(top_logprobs, bool) or not isinstance(top_logprobs, int) or top_logprobs < 0)
    ):
        raise ValueError(f"top_logprobs must be a whole number >= 0 or None, got {top_logprobs!r}")
    letter_list = None
    if letters is not None:
        letter_list = list(letters)
        if (
            not letter_list
            or any(not isinstance(x, str) or len(x) != 1 for x in letter_list)
            or len(set(letter_list)) != len(letter_list)
        ):
            raise ValueError(f"letters must be distinct single characters (such as 'ABCD'), got {letters!r}")
    contents = list(contents)
    n = len(contents)
    if where is None:
        where = [f"answer {i}" for i in range(n)]
    elif len(where) != n:
        raise ValueError(f"where has {len(where)} locations for {n} answers")
    asked = list(top_logprobs) if per_answer else [top_logprobs] * n
    bad = [k for k in asked if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0)]
    if len(asked) != n or bad:
        raise ValueError(
            f"`top_logprobs`: one whole number >= 0 (or None) per answer, {n} answers; got {len(asked)} entries"
            + (f", among them {bad[0]!r}" if bad else "")
        )

    letter_text = "".join(letter_list) if letter_list is not None else None
    lengths, logprobs, alternatives, position = _parse(contents, letter_text, asked, where)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    flat = np.asarray(logprobs, dtype=np.float64)
    sentinel = flat <= SENTINEL
    sentinels = _segments(sentinel.astype(np.float64), offsets, np.add)
    sentinels = np.where(np.isnan(sentinels), 0, sentinels).astype(np.int64)
    flat = np.where(sentinel, np.nan, flat)
    total = _segments(flat, offsets, np.add)
    least = _segments(flat, offsets, np.minimum)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / lengths
    sources = dict(
        sequence=np.exp(total),
        sequence_normalized=np.exp(mean),
        least_token=np.exp(least),
        n_tokens=lengths,
        sentinels=sentinels,
    )
    if letter_list is None:
        return LogprobSources(**sources)
    return LogprobSources(**sources, **_letter_sources(n, len(letter_list), position, *alternatives))


def _letter_sources(
    n: int, n_letters: int, position: np.ndarray, owner: list, letter: list, logprob: list, top: list
) -> dict:
    """Compute the letters' distribution, the outside mass and its bounds from the flat alternatives."""
    owner = np.asarray(owner, dtype=np.int64)
    letter = np.asarray(letter, dtype=np.int64)
    logprob = np.asarray(logprob, dtype=np.float64)
    top = np.asarray(top, dtype=bool)
    returned = logprob > SENTINEL  # a sentinel alternative is below the others, never a probability
    prob = np.where(returned, np.exp(logprob), 0.0)
    found = position >= 0
    mass = np.zeros((n, n_letters))
    is_letter = letter >= 0
    np.add.at(mass, (owner[is_letter], letter[is_letter]), prob[is_letter])
    outside = np.clip(1.0 - np.bincount(owner, weights=prob, minlength=n), 0.0, 1.0)
    # p_k: the least of the top k (the chosen token among them only where it is one of the k
    # asked for, not vLLM's extra (k+1)-th); with the chosen token alone, its own probability
    least_top = np.full(n, np.inf)
    np.minimum.at(least_top, owner[top & returned], prob[top & returned])
    least_any = np.full(n, np.inf)
    np.minimum.at(least_any, owner[returned], prob[returned])
    p_k = np.where(np.isfinite(least_top), least_top, np.where(np.isfinite(least_any), least_any, 0.0))
    letter_total = mass.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        distribution = mass / letter_total[:, None]
        shift = outside / (letter_total + outside)
    nan = np.where(found, 0.0, np.nan)
    return dict(
        letters=distribution + nan[:, None],
        letter_mass=mass + nan[:, None],
        letter_position=position,
        outside_mass=outside + nan,
        absent_bound=np.minimum(p_k, outside) + nan,
        confidence_shift=shift + nan,
    )
