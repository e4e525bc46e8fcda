"""Read judged samples and human labels: the plain file, and a dispatcher other tools' readers join.

- Judged samples (:func:`read_judged`): a file, a folder (searched recursively) or a quoted glob;
  each file goes to the first reader of :data:`JUDGED_READERS` that recognises it. calibkit's own
  is the plain table (JSON Lines, a JSON list of records, CSV or Parquet) with the columns ``id``,
  ``verdict`` (1 pass, 0 fail, ``true``/``false``, ``pass``/``fail``, or a score in [0, 1]) and
  optionally ``task`` (default: the file's name), ``confidence`` (the judge's probability that the
  answer passes, in [0, 1]; empty where it gave none) and ``explanation``. A tool's log reader
  (Inspect logs, lighteval details) is one more :class:`JudgedReader` in the list, ahead of the
  table: :func:`register_judged_reader`.
- Human labels (:func:`read_labels`): a table with ``id`` and ``label`` (on the verdicts' scale).
- :func:`match_labels` puts each label on its judged sample, refusing ids that match nothing and
  labels off the verdicts' scale.

Every refusal is one line naming the argument (``judged`` or ``labels``), the file and the line
(JSON Lines and CSV: the line of the file, its header counted; Parquet and JSON lists: the row).
"""

from __future__ import annotations

import glob
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.io.prediction_files import one_line, parquet_columns, read_table
from calibkit.lm.judges.data import HumanLabels, Judged
from calibkit.lm.multiple_choice.readers import task_of

JUDGED = "`judged`"
"""What the messages about judged samples name: the argument (the command line names its flag)."""
LABELS = "`labels`"
"""What the messages about the labels name."""

TABLE_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")
"""The plain tables' formats, by suffix."""

_WORDS = {"true": 1.0, "false": 0.0, "pass": 1.0, "fail": 0.0, "yes": 1.0, "no": 0.0}
"""Verdicts and labels written as words (JSON strings; CSV's pyarrow reads true/false as booleans)."""


@dataclass(frozen=True)
class JudgedReader:
    """One kind of file of judged samples: how to recognise it and how to read it.

    Parameters
    ----------
    kind : str
        Its name (``"table"``, ``"inspect"``, ...), as ``judged_kind`` returns it.
    detect : callable
        ``detect(file: Path) -> bool``: whether a file is of this kind (cheap: a header or the
        first line; never raises on a file of another kind).
    read : callable
        ``read(file: Path) -> Judged``: its samples, each ``origin`` naming the file and line;
        refuses bad content with a one-line ``ValueError`` opening with ``"`judged`: "``.
    description : str
        What it reads, for the message when no reader recognises a file.
    """

    kind: str
    detect: Callable[[Path], bool]
    read: Callable[[Path], Judged]
    description: str


def _columns(file: Path) -> set[str] | None:
    """Return a table's column names from its header (Parquet schema, CSV header, first JSON record)."""
    suffix = file.suffix.lower()
    if suffix == ".parquet":
        return parquet_columns(file)
    try:
        with open(file, encoding="utf-8", errors="replace") as handle:
            head = handle.readline(1 << 20)
    except OSError:
        return None
    if suffix == ".csv":
        return {c.strip().strip('"') for c in head.strip().split(",")}

    try:
        first = json.loads(head)
    except ValueError:  # a JSON list over several lines: the whole file
        try:
            first = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        first = first[0] if isinstance(first, list) and first else first
    return set(first) if isinstance(first, dict) else None


def is_judged_table(file: Path) -> bool:
    """Tell a plain table of judged samples: a table file with ``id`` and ``verdict`` columns.

    Parameters
    ----------
    file : Path

    Returns
    -------
    bool
    """
    if file.suffix.lower() not in TABLE_SUFFIXES:
        return False
    names = _columns(file)
    return names is not None and {"id", "verdict"} <= names


JUDGED_READERS: list[JudgedReader] = []
"""The readers of judged samples, tried in order; the plain table last (other tools' logs are more
specific). Extend with :func:`register_judged_reader`."""


def register_judged_reader(reader: JudgedReader) -> None:
    """Add a reader of judged samples ahead of the plain table (replacing one of the same ``kind``).

    Parameters
    ----------
    reader : JudgedReader

    Examples
    --------
    >>> register_judged_reader(JudgedReader("table", is_judged_table, read_judged_table, "a plain table"))
    >>> [r.kind for r in JUDGED_READERS][-1]
    'table'
    """
    JUDGED_READERS[:] = [r for r in JUDGED_READERS if r.kind != reader.kind]
    table = [i for i, r in enumerate(JUDGED_READERS) if r.kind == "table"]
    at = table[0] if table and reader.kind != "table" else len(JUDGED_READERS)
    JUDGED_READERS.insert(at, reader)


def judged_kind(file: Path) -> str | None:
    """Tell which reader of :data:`JUDGED_READERS` reads a file.

    Parameters
    ----------
    file : Path

    Returns
    -------
    str or None
        The reader's ``kind``, or None when none recognises the file.
    """
    return next((r.kind for r in JUDGED_READERS if r.detect(file)), None)


def read_columns(file: Path, what: str) -> tuple[dict[str, list[Any]], list[str]]:
    """Read a table's columns as lists, and where each row was read.

    JSON (Lines, a list of records, a dict of columns) is read by Python's ``json``, so that a
    column may mix types (``1``, ``"pass"``, ``true``) and a blank line keeps the lines' numbers;
    CSV and Parquet by ``calibkit.io.prediction_files.read_table``.

    Parameters
    ----------
    file : Path
    what : str
        The argument the messages name (```judged``` or ```labels```).

    Returns
    -------
    columns : dict of str to list
    origin : list of str
        ``file line l`` (JSON Lines, CSV with its header counted) or ``file row r``.

    Raises
    ------
    ValueError
        One line naming ``what`` and the file (and line) when it cannot be read.
    """
    suffix = file.suffix.lower()
    if suffix in (".csv", ".parquet"):
        table = read_table(file, option=what)
        first, place = (2, "line") if suffix == ".csv" else (0, "row")
        origin = [f"{file} {place} {r + first}" for r in range(table.num_rows)]
        return {name: table.column(name).to_pylist() for name in table.column_names}, origin
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{what}: {file} cannot be read: {one_line(exc)}") from None
    records, origin = _json_records(text, file, what)
    bad = [i for i, r in enumerate(records) if not isinstance(r, dict)]
    if bad:
        raise ValueError(f"{what}: {origin[bad[0]]}: expected a JSON object (a record with named fields)")
    names = list(dict.fromkeys(k for r in records for k in r))
    return {k: [r.get(k) for r in records] for k in names}, origin


def _json_records(text: str, file: Path, what: str) -> tuple[list[Any], list[str]]:
    """Return a JSON file's records (JSON Lines, a list of records, a dict of columns) and where each was read."""
    try:
        data = json.loads(text)  # one document: a list of records, a dict of columns, or one record
    except ValueError:
        data = None
    if isinstance(data, list):
        return data, [f"{file} row {r}" for r in range(len(data))]
    if isinstance(data, dict) and data and all(isinstance(v, list) for v in data.values()):
        rows = max(len(v) for v in data.values())
        records = [{k: v[r] if r < len(v) else None for k, v in data.items()} for r in range(rows)]
        return records, [f"{file} row {r}" for r in range(rows)]
    records, origin = [], []
    for number, line in enumerate(text.splitlines(), start=1):  # a loop over lines while reading
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError as exc:
            raise ValueError(f"{what}: {file} line {number} is not JSON: {one_line(exc)}") from None
        origin.append(f"{file} line {number}")
    return records, origin


def _unit_value(value: Any) -> float:
    """Read one verdict or label: a number, a boolean or a word; NaN when it is none of them."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _WORDS:
            return _WORDS[text]
        try:
            return float(text)
        except ValueError:
            return math.nan
    try:
        return math.nan if value is None else float(value)
    except (TypeError, ValueError):
        return math.nan


def scale_values(values: list[Any], origin: list[str], what: str, column: str) -> np.ndarray:
    """Read verdicts or labels (0/1, true/false, pass/fail, or scores in [0, 1]), refusing any other.

    Parameters
    ----------
    values : list
        As the file holds them.
    origin : list of str
        Where each was read (``file line l``).
    what : str
        The argument the message names (```judged``` or ```labels```, in backticks).
    column : str
        The column's name, for the message.

    Returns
    -------
    ndarray of float64

    Raises
    ------
    ValueError
        One line naming ``what``, the file and line of the first bad value.
    """
    out = np.array([_unit_value(v) for v in values], dtype=np.float64)  # a loop over lines while reading
    bad = np.flatnonzero(~((out >= 0) & (out <= 1)))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{what}: {origin[i]}: {column} = {values[i]!r} is neither 0/1 (pass/fail) nor a score in [0, 1]"
        )
    return out


def _texts(values: list[Any]) -> list[str]:
    return ["" if v is None else str(v) for v in values]


def read_judged_table(file: Path) -> Judged:
    """Read a plain table of judged samples (``id``, ``verdict``; ``task``, ``confidence``, ``explanation``).

    Parameters
    ----------
    file : Path
        JSON Lines, a JSON list of records, CSV or Parquet.

    Returns
    -------
    Judged

    Raises
    ------
    ValueError
        One line naming the file and line: a missing column, an empty id, a verdict that is not
        0/1 nor a score in [0, 1], a confidence outside [0, 1].
    """
    columns, where = read_columns(file, JUDGED)
    names = list(columns)
    missing = [c for c in ("id", "verdict") if c not in names]
    if missing:
        raise ValueError(f"{JUDGED}: {file} has no column {missing[0]!r} (columns: {names})")
    ids = _texts(columns["id"])
    empty = [i for i, v in enumerate(ids) if not v.strip()]
    if empty:
        raise ValueError(f"{JUDGED}: {where[empty[0]]}: the id is empty")
    verdict = scale_values(columns["verdict"], where, JUDGED, "verdict")
    confidence = np.full(len(ids), np.nan)
    if "confidence" in names:
        raw = columns["confidence"]
        given = [i for i, v in enumerate(raw) if v is not None and str(v).strip() != ""]
        confidence[given] = scale_values([raw[i] for i in given], [where[i] for i in given], JUDGED, "confidence")
    task = _texts(columns["task"]) if "task" in names else [task_of(file)] * len(ids)
    explanation = _texts(columns["explanation"]) if "explanation" in names else None
    return Judged(np.array(ids, dtype=object), np.array(task, dtype=object), verdict, confidence, explanation, where)


register_judged_reader(
    JudgedReader("table", is_judged_table, read_judged_table, "a table (JSON Lines, CSV, Parquet) with id and verdict")
)


def _files(location: str | Path, what: str) -> list[Path]:
    path = Path(location)
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file())
    if glob.has_magic(str(location)):
        found = sorted(Path(p) for p in glob.glob(str(location), recursive=True) if Path(p).is_file())
        if not found:
            raise ValueError(f"{what}: no file matches {location}")
        return found
    if path.is_file():
        return [path]
    raise ValueError(f"{what}: no such file or folder: {location}")


def concat_judged(parts: list[Judged]) -> Judged:
    """Join judged samples read from several files.

    Parameters
    ----------
    parts : list of Judged

    Returns
    -------
    Judged
        Explanations kept where every part has them.
    """
    explained = all(p.explanation is not None for p in parts)
    return Judged(
        np.concatenate([p.ids for p in parts]).astype(object),
        np.concatenate([p.task for p in parts]).astype(object),
        np.concatenate([p.verdict for p in parts]).astype(np.float64),
        np.concatenate([p.confidence for p in parts]).astype(np.float64),
        [e for p in parts for e in p.explanation] if explained else None,  # type: ignore[union-attr]
        [o for p in parts for o in p.origin],
    )


def _check_unique(ids: np.ndarray, origin: list[str], what: str, things: str) -> None:
    """Refuse two entries with one id, naming where both were read."""
    keys = ids.astype(str)
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    if (counts > 1).any():
        rows = np.flatnonzero(keys == keys[first[np.argmax(counts > 1)]])[:2]
        raise ValueError(
            f"{what}: {origin[rows[0]]} and {origin[rows[1]]}: two {things} with id {str(keys[rows[0]])!r}"
        )


def read_judged(location: str | Path) -> Judged:
    """Read judged samples: a file, a folder (searched recursively) or a quoted glob.

    Parameters
    ----------
    location : str or Path
        Each file is read by the first of :data:`JUDGED_READERS` that recognises it; in a folder,
        files none recognises are left alone.

    Returns
    -------
    Judged

    Raises
    ------
    ValueError
        One line opening with ``judged``: nothing recognised (naming what is read), a reader's
        refusal (file and line), or two samples with one id (both places).
    """
    files = _files(location, JUDGED)
    kinds = {f: judged_kind(f) for f in files}
    found = [f for f in files if kinds[f]]
    if not found:
        what = "; ".join(r.description for r in JUDGED_READERS)
        target = files[0] if len(files) == 1 else location
        raise ValueError(f"{JUDGED}: {target}: no judged samples found (read: {what})")
    readers = {r.kind: r for r in JUDGED_READERS}
    data = concat_judged([readers[kinds[f]].read(f) for f in found])  # type: ignore[index]
    if len(data) == 0:
        raise ValueError(f"{JUDGED}: {location}: no judged sample")
    _check_unique(data.ids, data.origin, JUDGED, "judged samples")
    return data


def read_labels(location: str | Path) -> HumanLabels:
    """Read people's labels: a table (JSON Lines, JSON, CSV, Parquet) with ``id`` and ``label``.

    Parameters
    ----------
    location : str or Path
        A file, or a folder or glob of them.

    Returns
    -------
    HumanLabels

    Raises
    ------
    ValueError
        One line opening with ``labels``, naming the file and line: a missing column, an empty
        id, a label not 0/1 nor in [0, 1], two labels for one id.
    """
    ids: list[str] = []
    labels: list[np.ndarray] = []
    origin: list[str] = []
    for file in _files(location, LABELS):
        columns, where = read_columns(file, LABELS)
        missing = [c for c in ("id", "label") if c not in columns]
        if missing:
            raise ValueError(f"{LABELS}: {file} has no column {missing[0]!r} (columns: {list(columns)})")
        these = _texts(columns["id"])
        empty = [i for i, v in enumerate(these) if not v.strip()]
        if empty:
            raise ValueError(f"{LABELS}: {where[empty[0]]}: the id is empty")
        labels.append(scale_values(columns["label"], where, LABELS, "label"))
        ids += these
        origin += where
    out = HumanLabels(np.array(ids, dtype=object), np.concatenate(labels) if labels else np.zeros(0), origin)
    _check_unique(out.ids, out.origin, LABELS, "labels")
    return out


def is_binary(values: np.ndarray) -> bool:
    """Tell 0/1 values (pass/fail) from scores.

    Parameters
    ----------
    values : ndarray

    Returns
    -------
    bool
    """
    return bool(np.all((values == 0) | (values == 1)))


def match_labels(judged: Judged, labels: HumanLabels) -> np.ndarray:
    """Find each label's judged sample, refusing ids that match nothing and labels off the verdicts' scale.

    Parameters
    ----------
    judged : Judged
    labels : HumanLabels

    Returns
    -------
    ndarray of int64, shape (M,)
        The judged sample of each label, in the labels' order.

    Raises
    ------
    ValueError
        One line naming ``labels``, the file and line: an id no judged sample has, or a label that
        is a score where every verdict is 0/1 (pass/fail).

    Examples
    --------
    >>> j = Judged(np.array(["a", "b"]), np.array(["t", "t"]), np.array([1.0, 0.0]), np.full(2, np.nan))
    >>> match_labels(j, HumanLabels(np.array(["b"]), np.array([1.0]))).tolist()
    [1]
    """
    keys = judged.ids.astype(str)
    order = np.argsort(keys, kind="stable")
    wanted = labels.ids.astype(str)
    at = np.clip(np.searchsorted(keys[order], wanted), 0, max(len(keys) - 1, 0))
    found = (keys[order][at] == wanted) if len(keys) else np.zeros(len(wanted), dtype=bool)
    origin = labels.origin or [f"label {i}" for i in range(len(labels))]
    if not found.all():
        i = int(np.argmin(found))
        raise ValueError(f"{LABELS}: {origin[i]}: id {str(wanted[i])!r} matches no judged sample")
    if is_binary(judged.verdict) and not is_binary(labels.label):
        i = int(np.argmax((labels.label != 0) & (labels.label != 1)))
        raise ValueError(
            f"{LABELS}: {origin[i]}: label = {labels.label[i]:g} is off the verdicts' scale (every verdict is 0/1)"
        )
    return order[at].astype(np.int64)
