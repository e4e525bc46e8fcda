"""lighteval's ``--save-details`` files: ``details/{model}/{date}/details_{task}_{date}.parquet``.

Two layouts, both read (tests/data/lighteval holds files written by lighteval's own classes):

- lighteval 0.11 and later: one row per question, columns ``doc`` (``choices``, ``gold_index``,
  ``query``, ``id``, ``task_name``), ``model_response`` (``logprobs``: one summed value per
  choice, or ``2n`` with the unconditioned values appended for PMI) and ``metric`` (``acc``,
  ``acc_norm``, ...). lighteval's documentation names the columns ``__doc__``,
  ``__model_response__`` and ``__metric__``: both spellings are read.
- lighteval 0.8 to 0.10, flat: ``predictions`` (``[logprob, is_greedy]`` per choice),
  ``gold_index`` (a list), ``choices``, ``example`` (the query) and ``metrics``. A task with PMI
  metrics writes each question twice, once with ``n`` and once with ``2n`` predictions: the
  second row is the same question, read once.

lighteval's ``acc_norm`` divides by the choice's length in characters as stored, the leading
space included, so ``score="chars"`` does the same here and is checked against the file's
``acc_norm`` (lighteval's no-space variant, one character less where a choice starts with a
space, is logged under the same name: the file's ``acc_norm`` may agree with either);
``score="tokens"`` divides by the choice's tokens (``output_tokens``, 0.11+), checked against
``acc_norm_token``; ``score="bytes"`` divides by its UTF-8 bytes (lighteval has no such
metric). A question with several gold choices is refused (calibration needs one).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.lm.multiple_choice.data import ChoiceData, check_question

DETAILS = re.compile(r"^details_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[0-9.\-]+)\.parquet$")
"""The name lighteval gives a details file."""

_COLUMNS = {"doc": ("doc", "__doc__"), "response": ("model_response", "__model_response__")}
_COLUMNS["metric"] = ("metric", "__metric__")


def _column(names: list[str], role: str) -> str | None:
    return next((n for n in _COLUMNS[role] if n in names), None)


def read_details(file: Path) -> ChoiceData:
    """Read one lighteval details file (either layout) as :class:`ChoiceData`.

    Parameters
    ----------
    file : Path
        A ``details_{task}_{date}.parquet``.

    Returns
    -------
    ChoiceData
        The task is the one in the file name; ``doc_id`` is the doc's ``id`` (new layout) or the
        question's row (flat layout).

    Raises
    ------
    ValueError
        One line naming the file and the question when the file is of an unknown layout, a
        question has no choice, a gold is not one index of its choices, a log-likelihood is not
        finite, or the file's own ``acc``/``acc_norm`` disagree with the gold.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from calibkit.io.prediction_files import one_line

    try:
        table = pq.read_table(file)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"`file`: {file} cannot be read as Parquet: {one_line(exc)}") from None
    names = table.column_names
    task = DETAILS.match(file.name)["task"] if DETAILS.match(file.name) else file.stem
    if _column(names, "doc") and _column(names, "response"):
        docs = table.column(_column(names, "doc")).to_pylist()
        responses = table.column(_column(names, "response")).to_pylist()
        metric_column = _column(names, "metric")
        metrics = table.column(metric_column).to_pylist() if metric_column else [None] * len(docs)
        questions = [
            (doc.get("id", i), doc["choices"], response["logprobs"], doc["gold_index"], metric or {}, _tokens(response))
            for i, (doc, response, metric) in enumerate(zip(docs, responses, metrics))
        ]
    elif {"predictions", "gold_index", "choices"} <= set(names):
        questions = _flat_questions(table)
    else:
        raise ValueError(
            f"`file`: {file} is no lighteval details file of a known layout (columns {names}): expected "
            "doc/model_response/metric (lighteval >= 0.11) or predictions/gold_index/choices (0.8-0.10)"
        )
    return _choice_data(questions, task, file)


def _flat_questions(table) -> list[tuple[Any, list[str], list[float], Any, dict]]:
    """Return the questions of a flat (0.8-0.10) file, a PMI task's second row of a question dropped."""
    columns = {name: table.column(name).to_pylist() for name in ("predictions", "gold_index", "choices")}
    examples = table.column("example").to_pylist() if "example" in table.column_names else [None] * table.num_rows
    metrics = table.column("metrics").to_pylist() if "metrics" in table.column_names else [None] * table.num_rows
    rows = []
    for i, (pred, gold, choices, example, metric) in enumerate(
        zip(columns["predictions"], columns["gold_index"], columns["choices"], examples, metrics)
    ):
        ll = [p[0] if isinstance(p, (list, tuple)) else p for p in (pred or [])]
        rows.append((i, choices or [], ll, gold, metric or {}, example))
    seen = {(example, tuple(ll)) for _, choices, ll, _, _, example in rows if len(ll) == len(choices)}
    questions = []
    for i, choices, ll, gold, metric, example in rows:
        if len(ll) == 2 * len(choices) and len(choices) and (example, tuple(ll[: len(choices)])) in seen:
            continue  # the PMI row of a question already read (its conditioned half is the same)
        questions.append((i, choices, ll, gold, {k: v for k, v in metric.items() if v is not None}, None))
    return questions


def _tokens(response: dict) -> list[int] | None:
    """Each choice's length in tokens: lighteval keeps the continuation's tokens per choice (``output_tokens``)."""
    tokens = response.get("output_tokens")
    if not tokens or not all(isinstance(t, list) for t in tokens):
        return None
    return [len(t) for t in tokens]


def _choice_data(questions: list[tuple], task: str, file: Path) -> ChoiceData:
    """Check each question (`check_question`, then the file's own accuracies) and stack them."""
    if not questions:
        raise ValueError(f"`file`: {file} holds no question")
    lls, golds = [], []
    for doc_id, choices, logprobs, gold_index, metric, tokens in questions:
        ll, gold = check_question(f"`file`: {file}, question {doc_id}", len(choices), logprobs, gold_index)
        _check_accuracies(f"`file`: {file}, question {doc_id}", ll, gold, choices, metric, tokens)
        lls.append(ll)
        golds.append(gold)
    chars, nbytes = zip(*(choice_lengths(q[1]) for q in questions))
    return ChoiceData.stack(
        lls, golds, task=task, source=str(file), doc_id=[q[0] for q in questions], chars=chars, bytes=nbytes,
        tokens=[q[5] for q in questions],
    )  # fmt: skip


def choice_lengths(choices: list[str]) -> tuple[list[int], list[int]]:
    """Return each choice's length in characters and in UTF-8 bytes, as lighteval's ``acc_norm`` counts it.

    Parameters
    ----------
    choices : list of str
        The choices as lighteval stores them (a leading space included).

    Returns
    -------
    (list of int, list of int)
        Characters and bytes of each choice.

    Examples
    --------
    >>> choice_lengths([" yes", " née"])
    ([4, 4], [4, 5])
    """
    return [len(c) for c in choices], [len(c.encode("utf-8")) for c in choices]


def _check_accuracies(where: str, ll: np.ndarray, gold: int, choices: list[str], metric: dict, tokens: Any) -> None:
    """Refuse a question whose file's own ``acc``/``acc_norm``/``acc_norm_token`` disagree with its gold."""
    chars = np.array([len(c) for c in choices], dtype=np.float64)
    # lighteval logs both of its character normalisations as `acc_norm`: the length as stored,
    # and (ignore_first_space, used by the agieval tasks and many suites) one less where the
    # choice starts with a space; the file's value must agree with one of them
    nospace = np.maximum(chars - np.array([c.startswith(" ") for c in choices]), 1.0)
    checks = [("acc", (ll,)), ("acc_norm", (ll / chars, ll / nospace))]
    if tokens is not None and len(tokens) == len(choices):
        checks.append(("acc_norm_token", (ll / np.asarray(tokens, dtype=np.float64),)))
    for name, variants in checks:
        if metric.get(name) is None:
            continue
        picks = [int(np.argmax(scores)) for scores in variants]
        if all((pick == gold) != (float(metric[name]) == 1.0) for pick in picks):
            raise ValueError(
                f"{where}: the file's `{name}` is {metric[name]}, but its log-likelihoods pick choice "
                f"{' or '.join(map(str, dict.fromkeys(picks)))} for the gold {gold}"
            )
