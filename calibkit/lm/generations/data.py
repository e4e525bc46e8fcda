"""Generated answers, their correctness and their confidences, as calibkit holds them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from calibkit.lm.sources import KINDS, check_source, source_kind

RESERVED = ("task", "id", "question", "answer", "correct")
"""The columns of the generations format that are not confidences."""


@dataclass
class Generations:
    """Answers to questions, whether each is right, and any number of confidences in it.

    Parameters
    ----------
    task : ndarray of str, shape (N,)
        The task (benchmark) of each answer.
    ids : ndarray of str, shape (N,)
        The question's id, unique within its task.
    answers : list of str
        The generated answers.
    correct : ndarray of float64, shape (N,)
        1 for a right answer, 0 for a wrong one, or a score in [0, 1] (then right when at least
        the report's ``threshold``).
    confidence : dict of str to ndarray of float64, shape (N,)
        Each source's confidence that the answer is right, in [0, 1]; NaN where the source gave
        none (a verbalized confidence the answer does not state).
    kinds : dict of str to str
        Each source's kind, one of :data:`calibkit.lm.sources.KINDS`: a registered source's
        (``log-probabilities``, ``white-box``, ``verbalized``, ``samples``), ``given`` for any
        other column of a file (:func:`calibkit.lm.sources.source_kind`).
    questions : list of str, optional
        The questions (or prompts), for the white-box sources.
    origin : list of str, default []
        Where each row was read (``file, row r``), for error messages.
    raw : list of str, optional
        The responses before the harness's filters (verbalized confidences are parsed from them).
    """

    task: np.ndarray
    ids: np.ndarray
    answers: list[str]
    correct: np.ndarray
    confidence: dict[str, np.ndarray]
    kinds: dict[str, str]
    questions: list[str] | None = None
    origin: list[str] = field(default_factory=list)
    raw: list[str] | None = None

    def __len__(self) -> int:
        """Return the number of answers."""
        return len(self.answers)

    def with_source(self, name: str, values: np.ndarray, kind: str | None = None) -> Generations:
        """Return these generations with one more confidence source.

        Parameters
        ----------
        name : str
            The source's name in every output.
        values : ndarray of shape (N,)
            In [0, 1], NaN where absent.
        kind : str, optional
            Its kind, one of :data:`calibkit.lm.sources.KINDS` (default: the registered source's
            kind, ``given`` for any other name).

        Returns
        -------
        Generations

        Raises
        ------
        ValueError
            When ``name`` is taken, ``values`` has the wrong length or ``kind`` is not a kind.
        """
        kind = source_kind(name) if kind is None else kind
        if kind not in KINDS:
            raise ValueError(f"`kind`: {kind!r} is not a kind of confidence source; known: {', '.join(KINDS)}")
        if name in self.confidence:
            raise ValueError(f"a confidence source named {name!r} exists already: {sorted(self.confidence)}")
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (len(self),):
            raise ValueError(f"source {name!r} has {values.shape} values for {len(self)} answers")
        return Generations(
            self.task, self.ids, self.answers, self.correct, {**self.confidence, name: values},
            {**self.kinds, name: kind}, self.questions, self.origin, self.raw,
        )  # fmt: skip

    def source_names(self, sources: Iterable[str] | None) -> list[str]:
        """Return the sources asked for (default: every one), each by its one name; each one these hold.

        Parameters
        ----------
        sources : iterable of str, optional
            Names of ``confidence`` (an old spelling of a registered source, ``letters``, is
            read with a ``FutureWarning``).

        Returns
        -------
        list of str

        Raises
        ------
        ValueError
            On a source these generations do not hold, with the ones they hold.
        """
        if sources is None:
            return list(self.confidence)
        return [check_source(s, "sources", among=(), present=self.confidence) for s in sources]

    def subset(self, rows: np.ndarray) -> Generations:
        """Return the rows ``rows`` (indices or a mask).

        Parameters
        ----------
        rows : ndarray of int or bool

        Returns
        -------
        Generations
        """
        index = np.flatnonzero(rows) if np.asarray(rows).dtype == bool else np.asarray(rows)
        pick = lambda items: None if items is None else [items[i] for i in index]  # noqa: E731
        return Generations(
            self.task[index], self.ids[index], pick(self.answers), self.correct[index],
            {k: v[index] for k, v in self.confidence.items()}, dict(self.kinds), pick(self.questions),
            pick(self.origin) or [], pick(self.raw),
        )  # fmt: skip


def concat(parts: list[Generations]) -> Generations:
    """Join generations read from several files (a folder, a glob).

    Parameters
    ----------
    parts : list of Generations
        At least one; their confidence sources may differ (a missing one is NaN).

    Returns
    -------
    Generations
    """
    if len(parts) == 1:
        return parts[0]
    names = list(dict.fromkeys(name for p in parts for name in p.confidence))
    kinds = {name: kind for p in parts for name, kind in p.kinds.items()}

    def join(attr: str) -> list | None:
        lists = [getattr(p, attr) for p in parts]
        return None if any(x is None for x in lists) else [x for items in lists for x in items]

    return Generations(
        np.concatenate([p.task for p in parts]),
        np.concatenate([p.ids for p in parts]),
        [a for p in parts for a in p.answers],
        np.concatenate([p.correct for p in parts]),
        {n: np.concatenate([p.confidence.get(n, np.full(len(p), np.nan)) for p in parts]) for n in names},
        kinds,
        join("questions"),
        [o for p in parts for o in p.origin],
        join("raw"),
    )
