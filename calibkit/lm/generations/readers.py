"""Read generated answers as the tools write them: lm-evaluation-harness samples and calibkit's format.

- lm-evaluation-harness ``--log_samples`` of a ``generate_until`` task
  (``samples_{task}_{date}.jsonl``): the answer is ``filtered_resps[0]``, the raw response
  ``resps[0][0]`` (verbalized confidences are parsed from it: a filter may cut them off), the
  question the prompt (``arguments.gen_args_0.arg_0``), the id ``doc_id``, and the correctness
  the sample's metric (``exact_match``, or the one named): 0/1, or a score in [0, 1]. A task
  logged with several filters (``strict-match``, ``flexible-extract``) needs one named.
- calibkit's generations format, JSON Lines, CSV or Parquet: ``id``, ``answer``, ``correct``
  (0/1, true/false, or a score in [0, 1]), optionally ``task`` (default: the file's name) and
  ``question``, and any number of numeric columns, each a confidence source in [0, 1] (empty
  where the source gave none) named by its column;
- a served model's responses in OpenAI's schema (chat or legacy completions, Batch API output):
  ``calibkit.lm.served.read_served``, with the keywords given as ``served``;
- Inspect AI logs (``.eval`` or ``.json``), read by ``calibkit.lm.inspect_logs.read_inspect_logs``.

A folder is searched recursively for all (other files, such as the harness's
``results_*.json``, are left alone); a quoted glob names the files.
"""

from __future__ import annotations

import glob
import json
import math
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.io.prediction_files import parquet_columns, read_table
from calibkit.lm.generations.data import RESERVED, Generations, concat
from calibkit.lm.multiple_choice.readers import task_of
from calibkit.lm.sources import source_kind

OPTION = "`location`"
"""What the messages about the files read name: the argument (the command line names its flag)."""


def kind_of(file: Path) -> str | None:
    """Tell from its content whether a file holds generations, and in which form.

    Parameters
    ----------
    file : Path

    Returns
    -------
    {"harness", "table", "served", "inspect"} or None
        An lm-evaluation-harness samples file of a ``generate_until`` task, a table in
        calibkit's generations format (``answer`` and ``correct`` columns), a served model's
        responses (``calibkit.lm.served.read_served``), an Inspect log (``.eval`` or ``.json``:
        ``calibkit.lm.inspect_logs``), or neither.
    """
    suffix = file.suffix.lower()
    if suffix == ".parquet":
        names = parquet_columns(file)
        return "table" if names is not None and {"answer", "correct"} <= names else None
    if suffix == ".csv":
        with open(file, encoding="utf-8", errors="replace") as handle:
            header = {c.strip().strip('"') for c in handle.readline(1 << 16).split(",")}
        return "table" if {"answer", "correct"} <= header else None
    if suffix == ".eval" or suffix == ".json" and _inspect_json(file):  # Inspect's logs: a zip, or one JSON object
        return "inspect" if suffix == ".json" or zipfile.is_zipfile(file) else None
    if suffix not in (".jsonl", ".json"):
        return None
    from calibkit.lm.served.readers import served_kind  # a served model's responses (OpenAI's schema)

    if served_kind(file):
        return "served"
    try:
        with open(file, encoding="utf-8", errors="replace") as handle:
            first = json.loads(handle.readline(1 << 22))
    except (OSError, ValueError):
        return None
    if not isinstance(first, dict):
        return None
    if {"doc_id", "arguments", "filtered_resps"} <= first.keys():
        return "harness" if _generated(first) else None
    return "table" if {"answer", "correct"} <= first.keys() else None


def _inspect_json(file: Path) -> bool:
    """Tell an Inspect log written as JSON: one object whose first keys are its version, status and eval."""
    with open(file, encoding="utf-8", errors="replace") as handle:
        head = handle.read(1 << 10)
    return head.lstrip().startswith("{") and all(f'"{key}"' in head for key in ("version", "status", "eval"))


def _generated(sample: dict) -> bool:
    """Tell a ``generate_until`` sample: its request's second argument is the generation settings."""
    arguments = sample.get("arguments")
    first = arguments.get("gen_args_0") if isinstance(arguments, dict) else None
    return isinstance(first, dict) and isinstance(first.get("arg_1"), dict)


def read_generations(
    location: str | Path,
    *,
    metric: str | None = None,
    harness_filter: str | None = None,
    served: dict[str, Any] | None = None,
) -> Generations:
    """Read generated answers: a file, a folder (searched recursively) or a quoted glob.

    Parameters
    ----------
    location : str or Path
    metric : str, optional
        The harness samples' correctness key (default: the first of the sample's ``metrics``).
    harness_filter : str, optional
        The harness filter to read where a task was logged with several.
    served : dict, optional
        For a served model's responses: the keywords of ``calibkit.lm.served.read_served``
        (``gold``, ``letters``, ``top_logprobs``, ``batch_input``).

    Returns
    -------
    Generations

    Raises
    ------
    ValueError
        One line naming the file and the row: a missing column, a confidence outside [0, 1], a
        ``correct`` that is neither 0/1 nor in [0, 1], an empty answer, two rows with one id in
        a task, a samples file of an unknown harness version, or nothing to read.
    """
    kinds = _located(location)
    parts = [_read_file(f, k, metric, harness_filter, served) for f, k in kinds.items()]
    data = concat(parts)
    _check_unique_ids(data)
    return data


def _located(location: str | Path) -> dict[Path, str]:
    """Return the generations files of a file, a folder or a glob, each with its kind (:func:`kind_of`)."""
    path = Path(location)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
    elif glob.has_magic(str(location)):
        files = sorted(Path(p) for p in glob.glob(str(location), recursive=True))
    elif path.is_file():
        files = [path]
    else:
        raise ValueError(f"{OPTION}: no such file or folder: {location}")
    kinds = {f: kind_of(f) for f in files}
    found = {f: kind for f, kind in kinds.items() if kind}
    if not found:
        if len(files) == 1:
            raise ValueError(
                f"{OPTION}: {files[0]} is neither an lm-evaluation-harness generate_until samples file, a "
                "generations table (answer and correct columns), a served model's responses nor an Inspect log"
            )
        raise ValueError(f"{OPTION}: no generations in {location}")
    return found


def _read_file(
    file: Path, kind: str | None, metric: str | None, harness_filter: str | None, served: dict[str, Any] | None
) -> Generations:
    if kind == "inspect":
        from calibkit.lm.inspect_logs import read_inspect_logs  # imports inspect_ai: only for its logs

        return read_inspect_logs(file)  # type: ignore[return-value]
    if kind == "served":
        from calibkit.lm.served.readers import read_served

        return read_served(file, **(served or {})).generations
    return _read_samples(file, metric, harness_filter) if kind == "harness" else _read_table_file(file)


def _read_table_file(file: Path) -> Generations:
    table = read_table(file, option=OPTION)
    names = table.column_names
    missing = [c for c in ("id", "answer", "correct") if c not in names]
    if missing:
        raise ValueError(f"{OPTION}: {file} has no column {missing[0]!r} (columns: {names})")
    import pyarrow.types as pt

    sources = {}
    for name in names:
        if name in RESERVED:
            continue
        kind = table.schema.field(name).type
        if not (pt.is_integer(kind) or pt.is_floating(kind) or pt.is_null(kind)):
            raise ValueError(
                f"{OPTION}: {file} column {name!r} is {kind}: every column besides {list(RESERVED)} is a confidence "
                "(numbers in [0, 1]); drop or convert it"
            )
        sources[name] = table.column(name).to_numpy(zero_copy_only=False).astype(np.float64)
    rows = table.num_rows
    where = [f"{file}, row {r}" for r in range(rows)]
    answers = ["" if a is None else str(a) for a in table.column("answer").to_pylist()]
    correct = _correctness(table.column("correct").to_pylist(), where, "correct")
    for name, values in sources.items():
        _check_confidence(values, where, name)
    task = table.column("task").to_pylist() if "task" in names else [task_of(file)] * rows
    questions = [str(q) for q in table.column("question").to_pylist()] if "question" in names else None
    ids = np.array([str(i) for i in table.column("id").to_pylist()], dtype=object)
    data = Generations(
        np.array([str(t) for t in task], dtype=object), ids, answers, correct, sources,
        {name: source_kind(name) for name in sources}, questions, where,
    )  # fmt: skip
    _check_answers(data)
    return data


def _read_samples(file: Path, metric: str | None, harness_filter: str | None) -> Generations:
    task = task_of(file)
    samples, where = _harness_samples(file, harness_filter)
    answers, raw, questions, scores = [], [], [], []
    for sample, place in zip(samples, where):
        try:
            key = metric or sample["metrics"][0]
            scores.append(sample[key])
            answers.append(_first_text(sample["filtered_resps"]))
            raw.append(_first_text(sample["resps"]))
            questions.append(str(sample["arguments"]["gen_args_0"]["arg_0"]))
        except (KeyError, IndexError, TypeError) as exc:
            raise ValueError(
                f"{OPTION}: {place}: a samples file of an unknown lm-evaluation-harness version (no {exc})"
            ) from None
    data = Generations(
        np.array([task] * len(samples), dtype=object), np.array([str(s["doc_id"]) for s in samples], dtype=object),
        answers, _correctness(scores, where, metric or "the sample's metric"), {}, {}, questions, where, raw,
    )  # fmt: skip
    _check_answers(data)
    return data


def _harness_samples(file: Path, harness_filter: str | None) -> tuple[list[dict], list[str]]:
    """Return a samples file's samples of one filter (the named one, or the only one) and where each was read."""
    samples, where = [], []
    with open(file, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                sample = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{OPTION}: {file} line {number} is not JSON: {exc}") from None
            if not isinstance(sample, dict) or not _generated(sample):
                raise ValueError(
                    f"{OPTION}: {file} line {number}: a samples file of an unknown lm-evaluation-harness version "
                    "(expected arguments.gen_args_0.arg_1 to hold the generation settings)"
                )
            samples.append(sample)
            where.append(f"{file}, line {number}")
    filters = list(dict.fromkeys(s.get("filter", "none") for s in samples))
    if len(filters) > 1 and harness_filter is None:
        raise ValueError(f"{OPTION}: {file} holds the filters {filters}: name one (`harness_filter`)")
    chosen = harness_filter if harness_filter is not None else filters[0]
    if chosen not in filters:
        raise ValueError(f"{OPTION}: {file} has no filter {chosen!r} (it has {filters})")
    keep = [i for i, s in enumerate(samples) if s.get("filter", "none") == chosen]
    return [samples[i] for i in keep], [where[i] for i in keep]


def _first_text(value: Any) -> str:
    """Return the first response of a sample's ``resps`` (``[["text"]]``) or ``filtered_resps`` (``["text"]``)."""
    while isinstance(value, list):
        value = value[0]
    return "" if value is None else str(value)


_WORDS = {"true": 1.0, "false": 0.0}
"""Correctness written as a word (JSON Lines strings; CSV's pyarrow reads the column as booleans)."""


def _number(value: Any) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _WORDS:  # looked up first: float("true") would raise before .get read its default
            return _WORDS[text]
        return float(text) if text else math.nan
    return math.nan if value is None else float(value)


def _correctness(values: list[Any], where: list[str], name: str) -> np.ndarray:
    out = np.empty(len(values))
    for i, value in enumerate(values):  # one check a row: the message names the first bad one
        try:
            out[i] = _number(value)
        except (TypeError, ValueError):
            out[i] = math.nan
        if not 0 <= out[i] <= 1:
            raise ValueError(f"{OPTION}: {where[i]}: {name} = {value!r} is neither 0/1 nor a score in [0, 1]")
    return out


def _check_confidence(values: np.ndarray, where: list[str], name: str) -> None:
    bad = np.flatnonzero(~np.isnan(values) & ((values < 0) | (values > 1)))
    if bad.size:
        i = int(bad[0])
        hint = " (a percentage? divide the column by 100)" if 1 < values[i] <= 100 else ""
        raise ValueError(f"{OPTION}: {where[i]}: confidence {name!r} = {values[i]:g} is outside [0, 1]{hint}")


def _check_answers(data: Generations) -> None:
    empty = [i for i, a in enumerate(data.answers) if not a.strip()]
    if empty:
        raise ValueError(f"{OPTION}: {data.origin[empty[0]]}: the answer is empty")


def _check_unique_ids(data: Generations) -> None:
    keys = np.char.add(np.char.add(data.task.astype(str), "\x1f"), data.ids.astype(str))  # numpy ends strings at NUL
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    if (counts > 1).any():
        key = keys[first[np.argmax(counts > 1)]]
        rows = np.flatnonzero(keys == key)[:2]
        task, ident = key.split("\x1f")
        raise ValueError(
            f"{OPTION}: {data.origin[rows[0]]} and {data.origin[rows[1]]}: two answers to question id {ident!r} "
            f"of task {task!r} (several sampled answers to a question: `read_agreement` reads them)"
        )
