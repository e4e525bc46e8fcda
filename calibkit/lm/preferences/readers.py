"""Read reward models' scores of preference pairs: RewardBench's per-sample output and a plain file.

- RewardBench's ``{output_dir}/{model}_outputs.jsonl`` (``rewardbench``'s per-sample output; its
  older ``scripts/run_rm.py`` wrote the same columns): a line per pair with ``prompt``,
  ``results``, ``scores_chosen``, ``scores_rejected``, ``text_chosen``, ``text_rejected``, ``id``
  and ``subset``. A score may be a list of one number (a model whose head returns ``(B, 1)``:
  the list is read as its number); a list of several is refused (one score an answer). The
  lengths of the length bias are the texts' lengths in characters (RewardBench's texts hold the
  prompt too, the same in both: the difference is the answers'). ``--save_all``'s ``_all.jsonl``
  has no id nor subset: read ``_outputs.jsonl``.
- A plain file, JSON Lines, CSV or Parquet: ``id``, ``reward_chosen``, ``reward_rejected``
  (rewards, or implicit rewards), optionally ``subset`` (default ``"all"``), ``length_chosen``
  and ``length_rejected`` (any unit, for the length bias) or ``text_chosen`` and
  ``text_rejected`` (their lengths in characters). RewardBench's score columns are read in any
  of the three formats too.

A folder is searched recursively for such files; a quoted glob names them. Bad input is one line
naming the file, the line (a CSV's header is line 1; a Parquet file's rows count from 0) and the
field; nothing is dropped unless asked (``drop_missing``), and then every dropped pair is stated.
"""

from __future__ import annotations

import glob
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.io.prediction_files import parquet_columns, read_table
from calibkit.lm.preferences.data import Preferences

OPTION = "`location`"
"""What the messages about the files read name: the argument (the command line names its flag)."""

REWARD_COLUMNS = (("reward_chosen", "reward_rejected"), ("scores_chosen", "scores_rejected"))
"""The rewards of a pair: a plain file's names, then RewardBench's."""

SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")

_NEEDS = (
    "a plain file needs id, reward_chosen and reward_rejected (subset optional); RewardBench's *_outputs.jsonl has "
    "id, subset, scores_chosen and scores_rejected"
)


def read_preferences(location: str | Path, *, drop_missing: bool = False) -> Preferences:
    """Read preference pairs with a reward for each answer: a file, a folder (searched recursively) or a quoted glob.

    Parameters
    ----------
    location : str or Path
        RewardBench's ``*_outputs.jsonl`` or a plain file (module docstring), or a folder or glob of them.
    drop_missing : bool, default False
        Leave out the pairs whose reward is missing (null, empty), NaN or infinite, each stated in
        ``Preferences.dropped``; by default the first such pair is an error.

    Returns
    -------
    Preferences
        Every pair, in the files' order (files sorted by name).

    Raises
    ------
    ValueError
        One line naming the file, the line and the field: a missing column, a reward that is not
        a number (or a list of several), missing, NaN or infinite (without ``drop_missing``), an
        empty id or subset, two pairs with one id in a subset, a length that is not a number >= 0,
        or no pair at all.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "scores.jsonl"
    >>> _ = f.write_text('{"id": "a", "reward_chosen": 1.5, "reward_rejected": 0.5}')
    >>> p = read_preferences(f)
    >>> p.ids.tolist(), p.subset.tolist(), p.margins.tolist()
    (['a'], ['all'], [1.0])
    """
    files = _located(location)
    parts = [_read_file(f, drop_missing) for f in files]
    data = _concat(parts)
    if len(data) == 0:
        dropped = f" ({len(data.dropped)} dropped: {data.dropped[0]})" if data.dropped else ""
        raise ValueError(f"{OPTION}: no preference pair in {location}{dropped}")
    _check_unique_ids(data)
    return data


def _located(location: str | Path) -> list[Path]:
    path = Path(location)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
        files = [f for f in files if _holds_pairs(f)]
    elif glob.has_magic(str(location)):
        files = sorted(Path(p) for p in glob.glob(str(location), recursive=True) if Path(p).is_file())
    elif path.is_file():
        files = [path]
    else:
        raise ValueError(f"{OPTION}: no such file or folder: {location}")
    if not files:
        raise ValueError(f"{OPTION}: no file of preference pairs in {location} ({_NEEDS})")
    return files


def _holds_pairs(file: Path) -> bool:
    """Tell a file of pairs in a folder by its columns (other files there are left alone)."""
    suffix = file.suffix.lower()
    if suffix == ".parquet":
        names = parquet_columns(file) or set()
    else:
        with open(file, encoding="utf-8", errors="replace") as handle:
            head = handle.readline(1 << 22)
        names = set(json.loads(head)) if suffix != ".csv" and head.lstrip().startswith("{") else set()
        names |= {c.strip().strip('"') for c in head.split(",")} if suffix == ".csv" else set()
    return any(set(pair) <= names for pair in REWARD_COLUMNS)


def _rows_of_json_lines(file: Path) -> tuple[dict[str, list[Any]], list[str]]:
    """Read JSON Lines line by line: a score may be a number on one line and a list on another."""
    columns: dict[str, list[Any]] = {}
    where: list[str] = []
    with open(file, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{OPTION}: {file} line {number} is not JSON: {exc}") from None
            if not isinstance(row, dict):
                raise ValueError(f"{OPTION}: {file} line {number} is not a JSON object")
            for name in row.keys() - columns.keys():
                columns[name] = [None] * len(where)
            for name, values in columns.items():
                values.append(row.get(name))
            where.append(f"{file}, line {number}")
    return columns, where


def _table(file: Path) -> tuple[dict[str, Any], list[str]]:
    """Read a file's columns (numeric ones as float arrays) and where each row was read."""
    suffix = file.suffix.lower()
    if suffix == ".jsonl" or suffix == ".json" and file.read_text(encoding="utf-8", errors="replace")[:1] == "{":
        return _rows_of_json_lines(file)
    import pyarrow.types as pt

    table = read_table(file, option=OPTION)
    columns: dict[str, Any] = {}
    for name in table.column_names:
        column = table.column(name)
        numeric = pt.is_integer(column.type) or pt.is_floating(column.type)
        columns[name] = column.to_numpy(zero_copy_only=False).astype(np.float64) if numeric else column.to_pylist()
    first, what = (2, "line") if suffix == ".csv" else (0, "row") if suffix == ".parquet" else (0, "record")
    return columns, [f"{file}, {what} {r + first}" for r in range(table.num_rows)]


def _read_file(file: Path, drop_missing: bool) -> Preferences:
    columns, where = _table(file)
    if not where:
        raise ValueError(f"{OPTION}: {file} holds no preference pair (an empty file)")
    names = list(columns)
    pair = next((p for p in REWARD_COLUMNS if set(p) <= set(names)), None)
    if pair is None:
        half = next((c for p in REWARD_COLUMNS for c in p if c in names), None)
        missing = next((c for p in REWARD_COLUMNS for c in p if half in p and c != half), None)
        what = f"no column {missing!r}" if half else "no reward columns"
        hint = " (RewardBench's _all.jsonl of every score has no id nor subset: read its *_outputs.jsonl)"
        hint = hint if {"chosen", "rejected"} <= set(names) else ""
        raise ValueError(f"{OPTION}: {file} has {what}: {_NEEDS}{hint} (columns: {names})")
    if "id" not in columns:
        raise ValueError(f"{OPTION}: {file} has no column 'id': {_NEEDS} (columns: {names})")
    chosen, bad_chosen = _rewards(columns[pair[0]], where, pair[0])
    rejected, bad_rejected = _rewards(columns[pair[1]], where, pair[1])
    bad = {**bad_rejected, **bad_chosen}
    if bad and not drop_missing:
        i = min(bad)
        raise ValueError(
            f"{OPTION}: {where[i]}: {bad[i]} (leave such pairs out, counted and stated, with `drop_missing`)"
        )
    ids = _texts(columns["id"], where, "id")
    subset = _texts(columns["subset"], where, "subset") if "subset" in columns else np.full(len(where), "all", object)
    lengths = _lengths(columns, where)
    keep = np.ones(len(where), dtype=bool)
    keep[list(bad)] = False
    origin = [w for w, k in zip(where, keep) if k]
    pick = lambda a: None if a is None else a[keep]  # noqa: E731
    return Preferences(
        ids[keep], subset[keep], chosen[keep], rejected[keep], pick(lengths[0]), pick(lengths[1]), origin,
        [f"{where[i]}: {bad[i]}" for i in sorted(bad)],
    )  # fmt: skip


def _number(value: Any) -> float:
    """Read one score: a number, a list of one number, a numeric string; None or "" is missing (NaN)."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if value is None or isinstance(value, str) and not value.strip():
        return math.nan
    if isinstance(value, (bool, list, dict)):
        raise TypeError
    return float(value)


def _rewards(values: Any, where: list[str], name: str) -> tuple[np.ndarray, dict[int, str]]:
    """Return the rewards (NaN where missing) and, by row, why a reward cannot be used (missing, NaN, infinite)."""
    if isinstance(values, np.ndarray):
        out, missing = values, np.zeros(len(values), dtype=bool)
    else:
        out = np.empty(len(values))
        missing = np.array([v is None or (isinstance(v, str) and not v.strip()) for v in values], dtype=bool)
        for i, value in enumerate(values):  # one check a row: the message names the first bad one
            try:
                out[i] = _number(value)
            except (TypeError, ValueError):
                several = f" (a list of {len(value)} scores: one score an answer)" if isinstance(value, list) else ""
                raise ValueError(f"{OPTION}: {where[i]}: {name} = {value!r:.60} is not a number{several}") from None
    bad = {}
    for i in np.flatnonzero(~np.isfinite(out)):  # the rows to state (each one: nothing dropped silently)
        table_nan = isinstance(values, np.ndarray) and np.isnan(out[i])  # a table's null reads as NaN
        what = "missing" if missing[i] else "missing or NaN" if table_nan else "NaN" if np.isnan(out[i]) else "infinite"
        bad[int(i)] = f"{name} is {what}"
    return out, bad


def _texts(values: Any, where: list[str], name: str) -> np.ndarray:
    if isinstance(values, np.ndarray):  # a numeric column (CSV ids): whole numbers read as such
        values = [int(v) if np.isfinite(v) and v == int(v) else v for v in values.tolist()]
    out = np.array(["" if v is None else str(v) for v in values], dtype=object)
    empty = [i for i, v in enumerate(out) if not v.strip()]
    if empty:
        raise ValueError(f"{OPTION}: {where[empty[0]]}: {name} is empty")
    return out


def _length_of_text(value: Any) -> float:
    if isinstance(value, str):
        return float(len(value))
    if isinstance(value, list) and all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in value):
        return float(sum(len(m["content"]) for m in value))  # a conversation: its messages' characters
    return math.nan


def _lengths(columns: dict[str, Any], where: list[str]) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Return the answers' lengths: ``length_*`` columns, else the texts' characters; (None, None) without."""
    if {"length_chosen", "length_rejected"} <= columns.keys():
        names, read = ("length_chosen", "length_rejected"), _number
    elif {"text_chosen", "text_rejected"} <= columns.keys():
        names, read = ("text_chosen", "text_rejected"), _length_of_text
    else:
        return None, None
    out = []
    for name in names:
        values = columns[name]
        try:
            lengths = values if isinstance(values, np.ndarray) else np.array([read(v) for v in values], dtype=float)
        except (TypeError, ValueError):
            lengths = np.full(len(where), math.nan)
        bad = np.flatnonzero(~np.isfinite(lengths) | (lengths < 0))
        if bad.size:
            value = values[bad[0]]
            raise ValueError(f"{OPTION}: {where[bad[0]]}: {name} = {value!r:.60} is not a text or a length >= 0")
        out.append(lengths)
    return out[0], out[1]


def _concat(parts: list[Preferences]) -> Preferences:
    with_lengths = all(p.length_chosen is not None for p in parts)

    def joined(name: str) -> np.ndarray:
        return np.concatenate([getattr(p, name) for p in parts])

    return Preferences(
        joined("ids"), joined("subset"), joined("chosen").astype(np.float64), joined("rejected").astype(np.float64),
        joined("length_chosen") if with_lengths else None, joined("length_rejected") if with_lengths else None,
        [o for p in parts for o in p.origin], [d for p in parts for d in p.dropped],
    )  # fmt: skip


def _check_unique_ids(data: Preferences) -> None:
    keys = np.char.add(np.char.add(data.subset.astype(str), "\x1f"), data.ids.astype(str))
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    if (counts > 1).any():
        key = keys[first[np.argmax(counts > 1)]]
        rows = np.flatnonzero(keys == key)[:2]
        subset, ident = key.split("\x1f")
        raise ValueError(
            f"{OPTION}: {data.origin[rows[0]]} and {data.origin[rows[1]]}: two pairs with id {ident!r} in subset "
            f"{subset!r}"
        )
