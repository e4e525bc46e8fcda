"""Judged samples (a language model's verdict on each answer) and human labels for some of them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Judged:
    """Answers graded by a judge (a language model), as calibkit holds them.

    Parameters
    ----------
    ids : ndarray of str, shape (N,)
        The sample's id, unique.
    task : ndarray of str, shape (N,)
        The task (benchmark) of each sample.
    verdict : ndarray of float64, shape (N,)
        The judge's grade: 1 pass, 0 fail, or a score in [0, 1].
    confidence : ndarray of float64, shape (N,)
        The judge's probability that the answer passes (the grade token's probability, or a
        confidence it states), in [0, 1]; NaN where it gave none.
    explanation : list of str, optional
        The judge's explanation per sample.
    origin : list of str, default []
        Where each sample was read (``file, line l``), for error messages.
    """

    ids: np.ndarray
    task: np.ndarray
    verdict: np.ndarray
    confidence: np.ndarray
    explanation: list[str] | None = None
    origin: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        """Return the number of judged samples."""
        return len(self.ids)

    @classmethod
    def from_rows(cls, rows: dict[str, list]) -> Judged:
        """Build judged samples from a reader's columns, refusing a sample judged twice.

        Parameters
        ----------
        rows : dict of str to list
            ``ids``, ``task``, ``verdict``, ``confidence`` (NaN where none), ``explanation`` and
            ``origin``, one entry a sample.

        Returns
        -------
        Judged

        Raises
        ------
        ValueError
            Naming both places, when one (task, id) is judged twice.
        """
        first: dict[tuple[str, str], int] = {}
        for r, key in enumerate(zip(rows["task"], rows["ids"])):  # a loop over rows while reading: the first repeat
            if key in first:
                raise ValueError(
                    f"{rows['origin'][first[key]]} and {rows['origin'][r]}: two verdicts on sample {key[1]!r} of "
                    f"task {key[0]!r} (two runs of one task: read them apart)"
                )
            first[key] = r
        return cls(
            np.array(rows["ids"], dtype=object), np.array(rows["task"], dtype=object),
            np.array(rows["verdict"], dtype=np.float64), np.array(rows["confidence"], dtype=np.float64),
            rows["explanation"], rows["origin"],
        )  # fmt: skip


@dataclass
class HumanLabels:
    """People's labels for some judged samples, by id.

    Parameters
    ----------
    ids : ndarray of str, shape (M,)
        Ids of judged samples, unique.
    label : ndarray of float64, shape (M,)
        The human label on the verdict's scale (1 pass, 0 fail, or a score in [0, 1]).
    origin : list of str, default []
        Where each label was read, for error messages.
    """

    ids: np.ndarray
    label: np.ndarray
    origin: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        """Return the number of labels."""
        return len(self.ids)
