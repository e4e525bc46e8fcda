"""How alike two sampled answers are: the similarity matrices of the consistency scores.

The consistency scores (:mod:`calibkit.lm.generations.consistency`) read, for each question, the
``k x k`` matrix of similarities in [0, 1] between its ``k`` sampled answers. Four similarities:

- ``"exact"``: 1 when :func:`~calibkit.lm.generations.normalize_answer` makes two answers equal
  (the grouping of the ``agreement`` source), else 0;
- ``"jaccard"``: the Jaccard index of the two answers' sets of words, a word being what
  ``text.lower().split()`` gives (LM-Polygraph's ``Jaccard_score``, the same tokens);
- ``"rouge_l"``: the ROUGE-L F-measure ``2 LCS / (m + n)`` of the two answers' token sequences
  (``m``, ``n`` tokens; rouge_score's tokens: lower case, runs of ``[a-z0-9]``; unstemmed unless
  ``stem=True``, which applies nltk's Porter stemmer to tokens longer than 3 characters as
  rouge_score's ``use_stemmer=True`` and LM-Polygraph's ``LexicalSimilarity`` do). Our own,
  vectorised across every pair of every question: the longest common subsequence row by row, each
  row a running maximum over all pairs at once;
- a callable, the user's (an NLI model's entailment probabilities), of the contract below.

Conventions, on the diagonal and for answers without a word: the built-in similarities give an
answer similarity 1 to itself; an answer with no word (``""``, or only punctuation for ROUGE-L)
has Jaccard and ROUGE-L similarity 0 to every other answer, another empty one included (as
LM-Polygraph's Jaccard and rouge_score do), and exact similarity 1 to another empty one.

**A callable's contract.** ``similarity(answers) -> matrix``, where ``answers`` is a list of ``Q``
questions' lists of ``k`` answers each (every question of the call has the same ``k``: calibkit
calls it once for each number of samples the questions have, usually once), and ``matrix`` an
array of shape ``(Q, k, k)`` with ``matrix[q, i, j]`` the similarity of answer ``i`` to answer
``j`` of question ``q`` in [0, 1], the diagonal included (an NLI model: the probability that
answer ``i`` entails answer ``j``, LM-Polygraph's ``semantic_matrix_entail``). It may instead
return a dict ``{"entail": (Q, k, k), "contra": (Q, k, k)}``: the entailment and the contradiction
probabilities (LM-Polygraph's two matrices), which NumSemSets and KLE read; given one matrix, the
contradiction is taken as ``1 - similarity``. Anything else (another shape, values outside
[0, 1], NaN) is refused with a ``ValueError`` naming ``similarity``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from calibkit.lm.generations.normalize import normalize_answer
from calibkit.lm.sources import SIMILARITIES

__all__ = [
    "SIMILARITIES",
    "check_similarity",
    "exact_matrices",
    "jaccard_matrices",
    "lcs_lengths",
    "rouge_l_matrices",
    "rouge_tokens",
    "similarity_matrices",
]


_ROUGE_TOKEN = re.compile(r"[a-z0-9]+")
_PAIR_CELLS = 1 << 22  # the longest-common-subsequence table is filled at most this many cells at a time
_PAIR_BLOCK = 4096  # and at most this many pairs (of similar lengths: less padding)


def check_similarity(similarity: Any) -> str | Callable:
    """Return ``similarity`` when it is a built-in name or a callable; refuse anything else.

    Parameters
    ----------
    similarity : str or callable

    Returns
    -------
    str or callable

    Raises
    ------
    ValueError
        On another name or type.
    """
    if callable(similarity) or similarity in SIMILARITIES:
        return similarity
    raise ValueError(
        f"`similarity` must be one of {list(SIMILARITIES)} or a callable (answers -> (Q, k, k) matrix), "
        f"got {similarity!r}"
    )


def _vocabulary(tokens: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
    """Each answer's tokens as integer ids (one vocabulary), and each answer's number of tokens."""
    ids: dict[str, int] = {}
    flat = [ids.setdefault(t, len(ids)) for words in tokens for t in words]
    return np.asarray(flat, dtype=np.int64), np.asarray([len(w) for w in tokens], dtype=np.int64)


def _padded(flat: np.ndarray, lengths: np.ndarray, pad: int) -> np.ndarray:
    """Rows of token ids, one an answer, padded on the right with ``pad`` to the longest."""
    width = int(lengths.max()) if lengths.size else 0
    out = np.full((lengths.size, max(width, 1)), pad, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    row = np.repeat(np.arange(lengths.size), lengths)
    column = np.arange(flat.size) - np.repeat(starts, lengths)
    out[row, column] = flat
    return out


def jaccard_matrices(answers: Sequence[Sequence[str]]) -> np.ndarray:
    """Return the Jaccard index of the word sets of every pair of each question's answers.

    Parameters
    ----------
    answers : sequence of sequences of str
        ``Q`` questions of ``k`` answers each.

    Returns
    -------
    ndarray of float64, shape (Q, k, k)
        ``|A & B| / |A | B|`` with ``A``, ``B`` the sets of ``text.lower().split()``; 1 on the
        diagonal, 0 where both sets are empty.

    Examples
    --------
    >>> jaccard_matrices([["the cat sat", "The cat"]])[0].round(3).tolist()
    [[1.0, 0.667], [0.667, 1.0]]
    """
    q, k = len(answers), len(answers[0]) if answers else 0
    words = [sorted(set(str(a).lower().split())) for question in answers for a in question]
    flat, lengths = _vocabulary(words)
    question = np.repeat(np.arange(q * k) // max(k, 1), lengths)
    answer = np.repeat(np.arange(q * k) % max(k, 1), lengths)
    vocabulary = int(flat.max()) + 1 if flat.size else 1
    pairs, local = np.unique(question * vocabulary + flat, return_inverse=True)
    local = local.reshape(-1) - np.searchsorted(pairs // vocabulary, question)  # word ids within each question
    width = int(local.max()) + 1 if local.size else 1
    member = np.zeros((q, k, width))
    member[question, answer, local] = 1.0
    inter = member @ member.transpose(0, 2, 1)
    size = lengths.reshape(q, k).astype(np.float64)
    union = size[:, :, None] + size[:, None, :] - inter
    out = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
    out[:, np.arange(k), np.arange(k)] = 1.0
    return out


def rouge_tokens(text: str, stem: bool = False) -> list[str]:
    """Return an answer's ROUGE tokens as rouge_score makes them.

    Parameters
    ----------
    text : str
    stem : bool, default False
        Apply nltk's Porter stemmer to tokens longer than 3 characters (rouge_score's
        ``use_stemmer=True``); nltk must be installed.

    Returns
    -------
    list of str

    Examples
    --------
    >>> rouge_tokens("The Cat's 2 hats!")
    ['the', 'cat', 's', '2', 'hats']
    """
    tokens = _ROUGE_TOKEN.findall(str(text).lower())
    if not stem:
        return tokens
    stemmer = _porter()
    return [t if len(t) <= 3 else stemmer.stem(t) for t in tokens]


def _porter() -> Any:
    try:
        from nltk.stem import porter
    except ImportError as exc:  # pragma: no cover - nltk is installed wherever rouge_score is
        raise ValueError("`stem`: stemming needs nltk (pip install nltk), or pass `stem`=False") from exc
    return porter.PorterStemmer()


def lcs_lengths(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Return the length of the longest common subsequence of each pair of rows.

    The table is filled one token of the shorter row at a time for every pair at once: with
    ``t[j] = max(above[j], above[j-1] + match[j])``, the row is the running maximum of ``t``. Pairs
    are taken in blocks of similar lengths, each block padded only to its own longest rows.

    Parameters
    ----------
    first, second : ndarray of int, shapes (P, m) and (P, n)
        Token ids (non-negative), padded on the right with negative values.

    Returns
    -------
    ndarray of int64, shape (P,)

    Examples
    --------
    >>> lcs_lengths(np.array([[1, 2, 3, 4]]), np.array([[2, 4, 3, -1]])).tolist()
    [2]
    """
    width = max(first.shape[1], second.shape[1])
    first, second = (np.pad(x, ((0, 0), (0, width - x.shape[1])), constant_values=-1) for x in (first, second))
    la, lb = (first >= 0).sum(axis=1), (second >= 0).sum(axis=1)
    swap = (la > lb)[:, None]  # the shorter row drives the loop
    short = np.where(swap, second, first)
    long = np.where(swap, first, second)
    short, long = np.where(short < 0, -1, short), np.where(long < 0, -2, long)  # pads that match nothing
    ls, ll = np.minimum(la, lb), np.maximum(la, lb)
    order = np.lexsort((ls, ll))
    out = np.zeros(first.shape[0], dtype=np.int64)
    step = min(_PAIR_BLOCK, max(1, _PAIR_CELLS // (width + 1)))
    for lo in range(0, order.size, step):  # blocks of pairs of similar lengths; every pair of a block at once
        rows = order[lo : lo + step]
        m, n = int(ls[rows].max()), int(ll[rows].max())
        a, b = short[rows, :m], long[rows, :n]
        table = np.zeros((rows.size, n + 1), dtype=np.int32)
        for i in range(m):  # the tokens of the block's longest short row, each for every pair
            candidate = np.maximum(table[:, 1:], table[:, :-1] + (a[:, i, None] == b))
            table[:, 1:] = np.maximum.accumulate(candidate, axis=1)
        out[rows] = table[:, -1]
    return out


def rouge_l_matrices(answers: Sequence[Sequence[str]], *, stem: bool = False) -> np.ndarray:
    """Return the ROUGE-L F-measure between every pair of each question's answers.

    Parameters
    ----------
    answers : sequence of sequences of str
        ``Q`` questions of ``k`` answers each.
    stem : bool, default False
        Porter-stem tokens longer than 3 characters (rouge_score's ``use_stemmer=True``, which
        LM-Polygraph's ``LexicalSimilarity`` uses); needs nltk.

    Returns
    -------
    ndarray of float64, shape (Q, k, k)
        ``2 LCS / (m + n)``, 0 where either answer has no token, 1 on the diagonal.

    Examples
    --------
    >>> rouge_l_matrices([["the cat sat on the mat", "the cat on a mat"]])[0, 0, 1].round(4)
    np.float64(0.7273)
    """
    q, k = len(answers), len(answers[0]) if answers else 0
    tokens = [rouge_tokens(a) for question in answers for a in question]
    if stem:  # each word stemmed once
        stemmer = _porter()
        stems = {t: t if len(t) <= 3 else stemmer.stem(t) for t in {t for words in tokens for t in words}}
        tokens = [[stems[t] for t in words] for words in tokens]
    flat, lengths = _vocabulary(tokens)
    rows = _padded(flat, lengths, -1)
    i, j = np.triu_indices(k, 1)
    base = (np.arange(q) * k)[:, None]
    a, b = (base + i).reshape(-1), (base + j).reshape(-1)
    lcs = lcs_lengths(rows[a], rows[b])
    total = lengths[a] + lengths[b]
    f = np.divide(2.0 * lcs, total, out=np.zeros(lcs.shape), where=(lengths[a] > 0) & (lengths[b] > 0))
    out = np.zeros((q, k, k))
    out[:, i, j] = f.reshape(q, -1)
    out[:, j, i] = out[:, i, j]
    out[:, np.arange(k), np.arange(k)] = 1.0
    return out


def exact_matrices(answers: Sequence[Sequence[str]]) -> np.ndarray:
    """Return 1 where two answers of a question normalise to the same text, else 0.

    Parameters
    ----------
    answers : sequence of sequences of str
        ``Q`` questions of ``k`` answers each.

    Returns
    -------
    ndarray of float64, shape (Q, k, k)

    Examples
    --------
    >>> exact_matrices([["Four.", "4", "five"]])[0].tolist()
    [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    q, k = len(answers), len(answers[0]) if answers else 0
    keys: dict[str, int] = {}
    ids = np.asarray([keys.setdefault(normalize_answer(a), len(keys)) for qa in answers for a in qa], dtype=np.int64)
    ids = ids.reshape(q, k)
    return (ids[:, :, None] == ids[:, None, :]).astype(np.float64)


def similarity_matrices(
    answers: Sequence[Sequence[str]], similarity: str | Callable = "jaccard", *, stem: bool = False
) -> tuple[np.ndarray, np.ndarray | None]:
    """Return the similarity (and, from a callable that gives one, the contradiction) matrices.

    Parameters
    ----------
    answers : sequence of sequences of str
        ``Q`` questions of ``k`` answers each (the same ``k``).
    similarity : {"exact", "jaccard", "rouge_l"} or callable, default "jaccard"
        A callable follows the module's contract.
    stem : bool, default False
        For ``"rouge_l"``: Porter-stem the tokens.

    Returns
    -------
    similarity : ndarray of float64, shape (Q, k, k)
    contra : ndarray of float64, shape (Q, k, k), or None
        The callable's ``contra`` matrix; None when it gave one matrix (or a built-in similarity).

    Raises
    ------
    ValueError
        On an unknown similarity, or a callable's result of another shape, of values outside
        [0, 1] or NaN.
    """
    similarity = check_similarity(similarity)
    if not callable(similarity):
        built = {"exact": exact_matrices, "jaccard": jaccard_matrices}.get(similarity)
        return (built(answers) if built else rouge_l_matrices(answers, stem=stem)), None
    q, k = len(answers), len(answers[0]) if answers else 0
    result = similarity([list(a) for a in answers])
    if isinstance(result, dict):
        if set(result) != {"entail", "contra"}:
            raise ValueError(f"`similarity` returned a dict with keys {sorted(result)}; expected 'entail' and 'contra'")
        return _checked(result["entail"], q, k, "['entail']"), _checked(result["contra"], q, k, "['contra']")
    return _checked(result, q, k, ""), None


def _checked(matrix: Any, q: int, k: int, part: str) -> np.ndarray:
    try:
        matrix = np.asarray(matrix, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"`similarity` returned{part} {type(matrix).__name__}, not a numeric array") from None
    if matrix.shape != (q, k, k):
        raise ValueError(
            f"`similarity` returned{part} an array of shape {matrix.shape} for {q} questions of {k} answers each; "
            f"expected ({q}, {k}, {k}): one similarity for each ordered pair of a question's answers"
        )
    bad = np.isnan(matrix) | (matrix < 0) | (matrix > 1)
    if bad.any():
        where = tuple(int(x) for x in np.argwhere(bad)[0])
        raise ValueError(
            f"`similarity` returned{part} {float(matrix[where])!r} at [question, i, j] = {list(where)}: "
            f"similarities must be in [0, 1] (probabilities), {int(bad.sum())} are not"
        )
    return matrix
