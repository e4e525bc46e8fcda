"""Answers that agree: the confidence of a model that returns only its sampled answers.

Asked the same question k times with sampling, a model that knows the answer says it again and
again; one that guesses scatters. The samples are grouped into answers that mean the same (by a
normalisation, :func:`normalize_answer`, or by a callable the user gives: an entailment model, as
semantic entropy does), and two confidences of the majority answer follow from the groups' sizes
``n_c`` out of ``k`` samples:

- ``agreement``: the share of samples in the majority group, ``max_c n_c / k`` (the
  self-consistency vote's share, Wang et al. 2023);
- ``semantic_entropy``: ``exp(-SE)`` with ``SE = -sum_c (n_c / k) log(n_c / k)`` the discrete
  semantic entropy over the groups (Kuhn, Gal & Farquhar, ICLR 2023, "Semantic Uncertainty";
  its count-based form, without token probabilities, is Farquhar et al., Nature 2024). ``exp(-SE)``
  is 1 when every sample agrees and ``1 / k`` when none does, as the agreement is; it is one over
  the effective number of meanings, and does not depend on ``k`` otherwise.

The grouping loops over the answers in Python (it is text handling); the counts, shares and
entropies are computed for every question at once (:func:`agreement_scores`).

Readers (:func:`read_agreement`): lm-evaluation-harness samples of a task run with ``repeats: k``
(``resps[0]`` holds the k answers), and calibkit's generations format with one row a sample
(repeated ``id`` within a task).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.lm.generations.consistency import CONSISTENCY, consistency_scores
from calibkit.lm.generations.data import Generations, concat
from calibkit.lm.generations.normalize import normalize_answer
from calibkit.lm.generations.readers import (
    OPTION,
    _check_unique_ids,
    _correctness,
    _first_text,
    _harness_samples,
    _located,
    _read_table_file,
)
from calibkit.lm.generations.similarity import check_similarity
from calibkit.lm.multiple_choice.readers import task_of
from calibkit.lm.sources import AGREEMENT, source_kind

AGREEMENT_SOURCES = AGREEMENT
"""The confidence sources computed from several sampled answers a question (:data:`calibkit.lm.sources.AGREEMENT`)."""

ANSWERS = ("majority", "scored")
"""Which answer a harness log's row stands for: the samples' majority, or the one the harness scored."""


class _Grouping:
    """How answers are grouped: by a key (default :func:`normalize_answer`) or by a ``same(a, b)`` test."""

    def __init__(
        self,
        key: Callable[[str], Hashable] | None,
        same: Callable[[str, str], bool] | None,
        similarity: str | Callable = "jaccard",
        stem: bool = False,
    ) -> None:
        if key is not None and same is not None:
            raise ValueError("give `key` or `same`, not both: a key groups answers by equality, `same` by a test")
        for name, value in (("key", key), ("same", same)):
            if value is not None and not callable(value):
                raise ValueError(f"`{name}` must be a callable, got {type(value).__name__}")
        self.key = normalize_answer if key is None and same is None else key
        self.same = same
        self.similarity = check_similarity(similarity)  # of the consistency scores
        self.stem = stem

    def labels(self, answers: Sequence[str]) -> list[int]:
        """Label each answer with its group, groups numbered in the order first seen."""
        if self.key is not None:
            seen: dict[Hashable, int] = {}
            return [seen.setdefault(self.key(a), len(seen)) for a in answers]
        heads: list[str] = []  # each group's first answer, to which a new answer is compared (Kuhn et al.)
        out = []
        for a in answers:
            label = next((g for g, head in enumerate(heads) if self.same(head, a)), len(heads))
            if label == len(heads):
                heads.append(a)
            out.append(label)
        return out

    def agrees(self, a: str, b: str) -> bool:
        """Tell whether two answers fall in one group."""
        return bool(self.key(a) == self.key(b)) if self.key is not None else bool(self.same(a, b))


def group_answers(
    samples: Sequence[Sequence[str]],
    *,
    key: Callable[[str], Hashable] | None = None,
    same: Callable[[str, str], bool] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Group each question's sampled answers into answers that mean the same.

    Parameters
    ----------
    samples : sequence of sequences of str
        The sampled answers, one sequence a question (at least one answer each).
    key : callable, optional
        ``key(answer) -> hashable``: answers of equal keys agree (default :func:`normalize_answer`).
    same : callable, optional
        ``same(a, b) -> bool``: an answer joins the first group whose first answer it is the same
        as (the clustering of Kuhn et al. 2023, where ``same`` is bidirectional entailment).

    Returns
    -------
    question, label : ndarray of int64, shape (S,)
        For every sample (questions one after another), its question and its group within the
        question, groups numbered in the order first seen.

    Raises
    ------
    ValueError
        When both ``key`` and ``same`` are given, either is not callable, or a question has no
        answer.
    """
    grouping = _Grouping(key, same)
    labels, counts = [], []
    for i, answers in enumerate(samples):
        if isinstance(answers, str) or len(answers) == 0:
            raise ValueError(f"`samples`: question {i} has no list of answers: {answers!r}")
        labels.extend(grouping.labels(answers))
        counts.append(len(answers))
    question = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    return question, np.asarray(labels, dtype=np.int64).reshape(-1)


def agreement_scores(question: np.ndarray, label: np.ndarray) -> dict[str, np.ndarray]:
    """Count each question's groups and derive the majority, its share and the semantic entropy.

    With ``n_c`` the samples of group ``c`` among a question's ``k``: ``agreement = max_c n_c / k``,
    ``entropy = -sum_c (n_c / k) log(n_c / k)`` (nats; the discrete semantic entropy of Kuhn et al.
    2023, in its count-based form of Farquhar et al. 2024) and ``semantic_entropy = exp(-entropy)``.
    The majority group is the largest, a tie going to the group seen first (as
    ``collections.Counter.most_common`` and the harness's ``majority_vote`` filter do).

    Parameters
    ----------
    question : ndarray of int, shape (S,)
        Each sample's question, in ``0 .. N-1``, every question with at least one sample.
    label : ndarray of int, shape (S,)
        Each sample's group within its question (any integers; equal means agree).

    Returns
    -------
    dict of str to ndarray, each shape (N,)
        ``majority`` (the index of the majority group's first sample), ``agreement``, ``entropy``,
        ``semantic_entropy``, ``groups`` (the number of groups) and ``samples`` (``k``).

    Raises
    ------
    ValueError
        When the arrays differ in shape, hold negative values, or a question has no sample.

    Examples
    --------
    >>> s = agreement_scores(np.array([0, 0, 0, 1, 1]), np.array([0, 1, 0, 0, 1]))
    >>> s["agreement"].round(3).tolist(), s["majority"].tolist(), s["groups"].tolist()
    ([0.667, 0.5], [0, 3], [2, 2])
    """
    question = np.asarray(question, dtype=np.int64).reshape(-1)
    label = np.asarray(label, dtype=np.int64).reshape(-1)
    if question.shape != label.shape:
        raise ValueError(f"`question` and `label` differ in shape: {question.shape} and {label.shape}")
    if question.size and (question.min() < 0 or label.min() < 0):
        raise ValueError("`question` and `label` must be non-negative integers")
    n = int(question.max()) + 1 if question.size else 0
    k = np.bincount(question, minlength=n)
    if (k == 0).any():
        raise ValueError(f"`question`: question {int(np.argmax(k == 0))} has no sample")
    width = int(label.max()) + 1 if label.size else 1
    pairs, first, counts = np.unique(question * width + label, return_index=True, return_counts=True)
    owner = pairs // width  # each group's question; groups come sorted by question
    start = np.searchsorted(owner, np.arange(n))
    p = counts / k[owner]
    entropy = -np.bincount(owner, weights=p * np.log(p), minlength=n)
    # the largest group, ties to the one seen first: sorted within each question, its first is the majority
    top = np.lexsort((first, -counts, owner))[start]
    return {
        "majority": first[top],
        "agreement": counts[top] / k,
        "entropy": entropy,
        "semantic_entropy": np.exp(-entropy),
        "groups": np.bincount(owner, minlength=n),
        "samples": k,
    }


def answer_agreement(
    samples: Sequence[Sequence[str]],
    *,
    key: Callable[[str], Hashable] | None = None,
    same: Callable[[str, str], bool] | None = None,
) -> dict[str, Any]:
    """Return each question's majority answer and the two agreement confidences in it.

    Parameters
    ----------
    samples : sequence of sequences of str
        The sampled answers, one sequence a question.
    key, same : callable, optional
        The grouping (:func:`group_answers`; default :func:`normalize_answer`).

    Returns
    -------
    dict
        ``answer`` (list of str: the majority group's first answer), ``agreement``,
        ``semantic_entropy`` (confidences in [0, 1]), ``entropy`` (nats), ``groups`` and
        ``samples`` (arrays of shape (N,)), and ``label`` (each sample's group, flat).

    Examples
    --------
    >>> out = answer_agreement([["Paris.", "paris", "Lyon"], ["4", "four", "4.0", "Four"]])
    >>> out["answer"], out["agreement"].round(3).tolist()
    (['Paris.', '4'], [0.667, 1.0])
    """
    question, label = group_answers(samples, key=key, same=same)
    scores = agreement_scores(question, label)
    flat = [a for answers in samples for a in answers]
    return {"answer": [flat[i] for i in scores["majority"]], **scores, "label": label}


def read_agreement(
    location: str | Path,
    *,
    metric: str | None = None,
    harness_filter: str | None = None,
    key: Callable[[str], Hashable] | None = None,
    same: Callable[[str, str], bool] | None = None,
    score: Callable[[str, Any], float] | None = None,
    answer: str = "majority",
    similarity: str | Callable = "jaccard",
    stem: bool = False,
) -> Generations:
    """Read several sampled answers a question and give the majority answer its agreement confidences.

    Every source of several samples in the registry (:data:`AGREEMENT_SOURCES`): the two of the
    groups' counts (``agreement``, ``semantic_entropy``) and the consistency scores of
    :mod:`calibkit.lm.generations.consistency` (LexSim, NumSemSets, EigV, Deg, Ecc, KLE, as
    confidences in [0, 1]), which say how alike a question's samples are, whichever answer the row
    stands for. A question with one sample has no pair to compare: its consistency scores are NaN,
    with a ``UserWarning`` that counts such questions.

    Two inputs (a file, a folder searched recursively, or a quoted glob, as
    :func:`~calibkit.lm.generations.read_generations`):

    - lm-evaluation-harness ``--log_samples`` of a ``generate_until`` task run with ``repeats: k``
      (and ``do_sample``): ``resps[0]`` holds the k answers. The harness scores one answer per
      question, its filter's (``filtered_resps``: ``take_first`` by default, the first sample;
      ``majority_vote`` the most frequent exact string), so the majority answer is right when:
      ``score`` is given: ``score(answer, target)`` with the sample's ``target`` (the task's metric
      applied to the majority answer); otherwise the harness's metric (``metric``, default the
      sample's first), read only where the filter's answer falls in the majority group. Where it
      does not, the read stops (use a ``majority_vote`` filter, ``score``, or
      ``answer="scored"``). With ``answer="scored"`` the row is the filter's answer as the harness
      scored it, and ``agreement`` the share of samples agreeing with it.
    - calibkit's generations format with one row a sample: rows sharing ``task`` and ``id`` are one
      question's samples, each with its own ``correct``; the majority answer is its group's first
      row, with that row's ``correct`` and numeric columns.

    Parameters
    ----------
    location : str or Path
    metric : str, optional
        The harness samples' correctness key.
    harness_filter : str, optional
        The harness filter to read where a task was logged with several.
    key, same : callable, optional
        The grouping (:func:`group_answers`; default :func:`normalize_answer`).
    score : callable, optional
        ``score(answer, target) -> float`` in [0, 1]: the correctness of a harness log's majority
        answer.
    answer : {"majority", "scored"}, default "majority"
    similarity : {"jaccard", "exact", "rouge_l"} or callable, default "jaccard"
        The similarity of the graph scores (NumSemSets, EigV, Deg, Ecc, KLE):
        :mod:`calibkit.lm.generations.similarity` (a callable: an NLI model's batched matrices).
    stem : bool, default False
        Porter-stem ROUGE-L's tokens, as LM-Polygraph's LexSim does (needs nltk).

    Returns
    -------
    Generations
        One row a question, with every source of :data:`AGREEMENT_SOURCES` (kind ``samples``).

    Raises
    ------
    ValueError
        As :func:`~calibkit.lm.generations.read_generations`, and: a majority answer the harness
        did not score (without ``score``), ``score`` or ``answer="scored"`` on a table, an unknown
        ``answer``, a bad grouping or ``similarity`` (a callable's result of the wrong shape or
        outside [0, 1]).
    """
    if answer not in ANSWERS:
        raise ValueError(f"`answer` must be one of {list(ANSWERS)}, got {answer!r}")
    if score is not None and not callable(score):
        raise ValueError(f"`score` must be a callable, got {type(score).__name__}")
    grouping = _Grouping(key, same, similarity, stem)
    parts = []
    for file, kind in _located(location).items():
        if kind == "harness":
            parts.append(_harness_agreement(file, metric, harness_filter, grouping, score, answer))
        elif kind == "table":
            if score is not None or answer != "majority":
                raise ValueError(
                    f"{OPTION}: {file} is a table: each row has its own correct, so `score` and `answer`='scored' "
                    "(harness logs' options) do not apply"
                )
            parts.append(_table_agreement(file, grouping))
        else:
            raise ValueError(f"{OPTION}: {file} ({kind}) holds one answer a question, not several samples")
    data = concat(parts)
    _check_unique_ids(data)
    return data


def _sources(
    texts: Sequence[Sequence[str]], question: np.ndarray, label: np.ndarray, grouping: _Grouping
) -> dict[str, np.ndarray]:
    """Return the majority and every source of the samples: the groups' counts, and the consistency scores."""
    scores = agreement_scores(question, label)
    counts = scores["samples"]
    if (counts == 1).any():
        warnings.warn(
            f"`samples`: {int((counts == 1).sum())} of {counts.size} questions have one sampled answer: the "
            f"consistency scores ({', '.join(CONSISTENCY)}) compare answers in pairs and are NaN there (the report "
            "counts those answers as without a confidence)",
            UserWarning,
            stacklevel=4,
        )
    texts = [[str(t) for t in ts] for ts in texts]
    scores.update(consistency_scores(texts, similarity=grouping.similarity, stem=grouping.stem, single="nan"))
    return {"majority": scores["majority"], **{s: scores[s] for s in AGREEMENT_SOURCES}}


def _harness_agreement(
    file: Path, metric: str | None, harness_filter: str | None, grouping: _Grouping, score: Any, answer: str
) -> Generations:
    samples, where = _harness_samples(file, harness_filter)
    texts, scored, targets, values, questions = [], [], [], [], []
    for sample, place in zip(samples, where):
        try:
            responses = sample["resps"][0]
            texts.append([_first_text(r) for r in responses] if isinstance(responses, list) else [str(responses)])
            scored.append(_first_text(sample["filtered_resps"]))
            targets.append(sample.get("target"))
            values.append(None if score is not None else sample[metric or sample["metrics"][0]])
            questions.append(str(sample["arguments"]["gen_args_0"]["arg_0"]))
        except (KeyError, IndexError, TypeError) as exc:
            raise ValueError(
                f"{OPTION}: {place}: a samples file of an unknown lm-evaluation-harness version (no {exc})"
            ) from None
    question, label = group_answers(texts, key=grouping.key, same=grouping.same)
    out = _sources(texts, question, label, grouping)
    flat = [t for ts in texts for t in ts]
    majority = [flat[i] for i in out["majority"]]
    answers = majority
    if answer == "scored":  # the harness's answer, and the share of samples agreeing with it
        agree = np.array([grouping.agrees(scored[q], a) for q, a in zip(question, flat)], dtype=np.float64)
        out["agreement"] = np.bincount(question, weights=agree) / np.bincount(question)
        answers = scored
    elif score is None:
        off = [i for i, (m, s) in enumerate(zip(majority, scored)) if not grouping.agrees(m, s)]
        if off:
            i = off[0]
            chosen = samples[i].get("filter", "none")
            raise ValueError(
                f"{OPTION}: {where[i]}: the harness scored {scored[i]!r} (filter {chosen!r}), "
                f"not the samples' majority {majority[i]!r}; {len(off)} of {len(samples)} questions are so: log the "
                "task with a majority_vote filter, give `score` (the task's metric), or read the answers the harness "
                "scored (`answer`='scored')"
            )
    if score is not None:
        values = [score(a, t) for a, t in zip(answers, targets)]
    named = "score(answer, target)" if score is not None else metric or "the sample's metric"
    return Generations(
        np.array([task_of(file)] * len(samples), dtype=object),
        np.array([str(s["doc_id"]) for s in samples], dtype=object), list(answers),
        _correctness(values, where, named),
        {s: out[s] for s in AGREEMENT_SOURCES}, {s: source_kind(s) for s in AGREEMENT_SOURCES}, questions, where,
        list(answers),
    )  # fmt: skip


def _table_agreement(file: Path, grouping: _Grouping) -> Generations:
    rows = _read_table_file(file)
    keys = np.char.add(np.char.add(rows.task.astype(str), "\x1f"), rows.ids.astype(str))
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first))  # questions in the order first seen in the file
    question = rank[inverse.reshape(-1)]
    order = np.argsort(question, kind="stable")  # each question's rows together, in file order
    question = question[order]
    texts = np.split(np.asarray(rows.answers, dtype=object)[order], np.flatnonzero(np.diff(question)) + 1)
    _, label = group_answers([list(t) for t in texts], key=grouping.key, same=grouping.same)
    out = _sources(texts, question, label, grouping)
    data = rows.subset(order[out["majority"]])
    for name in AGREEMENT_SOURCES:
        data = data.with_source(name, out[name], source_kind(name))
    return data
