"""Readers of multiple-choice logs: lm-evaluation-harness samples files and calibkit's choice format."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.io.prediction_files import parquet_columns
from calibkit.lm.multiple_choice.data import ChoiceData, pad_flat
from calibkit.lm.multiple_choice.lighteval import DETAILS, read_details

_SAMPLES = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[0-9.\-]+)\.jsonl$")


# ----------------------------------------------------------------------------------------------
# Reading


def is_choice_location(location: str) -> bool:
    """Tell whether ``--predictions`` points at multiple-choice logs (this module), not class predictions.

    Parameters
    ----------
    location : str

    Returns
    -------
    bool
        True for an lm-evaluation-harness samples file or a lighteval details file, a folder
        holding one (searched recursively), or a file in calibkit's choice format (a
        ``choice_logprobs`` column).
    """
    path = Path(location)
    if path.is_dir():
        return any(kind_of(p) is not None for p in sorted(path.rglob("*")) if p.is_file())
    return path.is_file() and kind_of(path) is not None


def kind_of(file: Path) -> str | None:
    """Tell from its content which multiple-choice log a file is (its name is not needed).

    Parameters
    ----------
    file : Path

    Returns
    -------
    {"harness", "lighteval", "choices"} or None
        An lm-evaluation-harness samples file (JSON Lines with ``doc_id``, ``arguments`` and
        ``filtered_resps``), a lighteval details file (Parquet with ``doc`` and
        ``model_response``, or the flat ``predictions``, ``gold_index`` and ``choices``),
        calibkit's choice format (a ``choice_logprobs`` column), or none of them.
    """
    suffix = file.suffix.lower()
    if suffix == ".parquet":
        names = parquet_columns(file)
        if names is None:  # not Parquet after all: the other readers say why
            return None
        if "choice_logprobs" in names:
            return "choices"
        nested = names & {"doc", "__doc__"} and names & {"model_response", "__model_response__"}
        return "lighteval" if nested or {"predictions", "gold_index", "choices"} <= names else None
    if suffix in (".jsonl", ".json"):
        try:
            with open(file, encoding="utf-8", errors="replace") as handle:
                first = handle.readline(1 << 20)
        except OSError:
            return None
        if '"choice_logprobs"' in first:
            return "choices"
        try:
            keys = json.loads(first).keys()
        except (ValueError, AttributeError):
            return None
        return "harness" if {"doc_id", "arguments", "filtered_resps"} <= set(keys) else None
    return None


def read_choices(location: str | Path) -> ChoiceData:
    """Read multiple-choice logs: a samples file, a folder of them (a harness run), or a choice-format file.

    Parameters
    ----------
    location : str or Path
        An lm-evaluation-harness ``samples_*.jsonl`` (each task's ``target_delimiter`` read from
        the ``results_*.json`` beside it) or a lighteval ``details_*.parquet``
        (``calibkit.lm.multiple_choice.lighteval``); a folder searched recursively for them; or a
        ``.jsonl``/``.parquet`` file in calibkit's choice format.

    Returns
    -------
    ChoiceData

    Raises
    ------
    ValueError
        One line naming the file (and the sample's ``doc_id``) when it cannot be read, a gold
        cannot be derived or disagrees with the file's own accuracy, a score is not finite, a
        question has no choice, or a task appears in two files of one folder.
    """
    path = Path(location)
    if path.is_dir():
        kinds = {p: kind_of(p) for p in sorted(path.rglob("*")) if p.is_file()}
        logs = {p: kind for p, kind in kinds.items() if kind in READERS}
        if not logs:
            raise ValueError(f"`location`: no lm-evaluation-harness samples or lighteval details file in {location}")
        seen: dict[str, Path] = {}
        for file in logs:
            task = task_of(file)
            if task in seen:
                raise ValueError(
                    f"`location`: task {task!r} is in {seen[task]} and {file} (two runs?): point at one run's folder"
                )
            seen[task] = file
        return _concat([READERS[kind](file) for file, kind in logs.items()])
    if not path.is_file():
        raise ValueError(f"`location`: no such file or folder: {location}")
    kind = kind_of(path)
    if kind is None:
        raise ValueError(
            f"`location`: {location} is no lm-evaluation-harness samples file, lighteval details file or "
            "choice-format file (choice_logprobs, gold)"
        )
    return READERS.get(kind, _read_choice_table)(path)


def task_of(file: Path) -> str:
    """Return the task of a log file: from its name as the tools write it, else the file's stem.

    Parameters
    ----------
    file : Path
        An lm-evaluation-harness ``samples_{task}_{date}.jsonl``, a lighteval ``details_...``
        file, or any other file.

    Returns
    -------
    str
    """
    match = _SAMPLES.match(file.name) or DETAILS.match(file.name)
    return match["task"] if match else file.stem


def _concat(parts: list[ChoiceData]) -> ChoiceData:
    width = max(p.loglik.shape[1] for p in parts)

    def pad(a, rows):
        out = np.full((rows, width), np.nan)
        if a is not None:
            out[:, : a.shape[1]] = a
        return out

    def stack(name):
        if all(getattr(p, name) is None for p in parts):
            return None
        return np.concatenate([pad(getattr(p, name), len(p.gold)) for p in parts])

    return ChoiceData(
        np.concatenate([p.task for p in parts]), np.concatenate([p.doc_id for p in parts]),
        stack("loglik"), np.concatenate([p.gold for p in parts]), stack("chars"), stack("bytes"),
        np.concatenate([p.source for p in parts]), stack("tokens"),
    )  # fmt: skip


def _delimiters(samples_file: Path) -> dict[str, str]:
    """Each task's ``target_delimiter`` from the run's ``results_*.json`` files beside the samples."""
    found: dict[str, str] = {}
    for results in sorted(samples_file.parent.glob("results_*.json")):
        try:
            configs = json.loads(results.read_text(encoding="utf-8")).get("configs", {})
        except (OSError, ValueError):
            continue  # a results file is optional: the default delimiter applies
        for task, config in configs.items():
            if isinstance(config, dict) and isinstance(config.get("target_delimiter"), str):
                found[task] = config["target_delimiter"]
    return found


def _number(text: Any, what: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"{what} is not a number: {text!r}") from None
    if not np.isfinite(value):
        raise ValueError(f"{what} is not finite: {text!r}")
    return value


def _read_samples(file: Path) -> ChoiceData:
    """Read one lm-evaluation-harness samples file (one task)."""
    task = task_of(file)
    delimiter = _delimiters(file).get(task, " ")
    rows = []
    first_line: dict[str, int] = {}  # doc_id -> the line it was first read on
    with open(file, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                sample = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"`location`: {file} line {number} is not JSON: {exc}") from None
            try:
                rows.append(_sample_row(sample, delimiter))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                doc = sample.get("doc_id", f"line {number}") if isinstance(sample, dict) else f"line {number}"
                detail = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
                raise ValueError(f"`location`: {file}, doc_id {doc}: {detail}") from None
            # The harness logs each question of a task once; a second sample with the same doc_id
            # would count one question twice, silently (two runs appended to one file, a merge).
            key = str(rows[-1][0])
            if key in first_line:
                raise ValueError(
                    f"`location`: {file}, doc_id {rows[-1][0]}: appears twice (lines {first_line[key]} and "
                    f"{number}); each question is logged once per task"
                )
            first_line[key] = number
    if not rows:
        raise ValueError(f"`location`: {file} holds no sample")
    doc_id, ll, chars, nbytes, gold = zip(*rows)
    return ChoiceData.stack(ll, gold, task=task, source=str(file), doc_id=doc_id, chars=chars, bytes=nbytes)


def _sample_row(sample: dict, delimiter: str) -> tuple[Any, list[float], list[float], list[float], int]:
    """Return ``(doc_id, logliks, chars, bytes, gold)`` of one harness sample, checked against its own accuracies."""
    doc_id = sample["doc_id"]
    arguments = sample["arguments"]
    pairs = [arguments[f"gen_args_{i}"] for i in range(len(arguments))]
    responses = sample["filtered_resps"]
    if not isinstance(responses, list) or len(responses) != len(pairs):
        raise ValueError(f"`filtered_resps` holds {len(responses)} responses for {len(pairs)} requests")
    if len(pairs) % 2 == 0 and pairs and all(p["arg_0"] == "" for p in pairs[len(pairs) // 2 :]):
        # acc_mutual_info: the second half are unconditional ("", continuation) requests
        pairs, responses = pairs[: len(pairs) // 2], responses[: len(responses) // 2]
    if not pairs:
        raise ValueError("the question has no choice")
    ll = [
        _number(r[0] if isinstance(r, list) else r, f"the log-likelihood of choice {j}")
        for j, r in enumerate(responses)
    ]
    continuations = [str(p["arg_1"]) for p in pairs]
    same_continuation = len(set(continuations)) == 1 and len(pairs) > 1  # multiple_input: choices in the contexts
    texts = [c[len(delimiter) :] if delimiter and c.startswith(delimiter) else c for c in continuations]
    chars = [np.nan] * len(texts) if same_continuation else [float(len(t)) for t in texts]
    nbytes = [np.nan] * len(texts) if same_continuation else [float(len(t.encode("utf-8"))) for t in texts]
    gold = _gold(sample, texts, ll, same_continuation)
    for metric, lengths in (("acc", None), ("acc_norm", chars), ("acc_bytes", nbytes)):
        if metric in sample and (lengths is None or not np.isnan(lengths).any()):
            scores = np.array(ll) if lengths is None else np.array(ll) / np.array(lengths)
            if (int(np.argmax(scores)) == gold) != (_number(sample[metric], f"`{metric}`") == 1.0):
                raise ValueError(
                    f"the gold choice {gold} (from `target` {sample.get('target')!r}) disagrees with the file's "
                    f"`{metric}` {sample[metric]!r}; a target delimiter other than {delimiter!r}?"
                )
    return doc_id, ll, chars, nbytes, gold


def _gold(sample: dict, texts: list[str], ll: list[float], same_continuation: bool) -> int:
    """Derive the gold index from ``target`` (or, for a multiple_input task, from ``acc``), never guessing."""
    target = str(sample.get("target"))
    one = re.fullmatch(r"\[\s*(-?\d+)\s*\]", target.strip())  # a list of one index: the harness scores it as
    target = one.group(1) if one else target  # `pred in gold`, that one choice
    n = len(texts)
    if not same_continuation:
        if re.fullmatch(r"-?\d+", target.strip()):
            gold = int(target)
            if not 0 <= gold < n:
                raise ValueError(f"`target` {target!r} is no index of the {n} choices")
            return gold
        if target.strip().startswith("["):
            raise ValueError(f"`target` {target!r} names several gold choices: not supported")
        matches = [j for j, t in enumerate(texts) if t == target]
        if len(matches) == 1:
            return matches[0]
        raise ValueError(f"`target` {target!r} is neither an index nor the text of exactly one of the {n} choices")
    if "acc" in sample:  # the continuation is shared: the harness's acc says whether argmax was right
        best = int(np.argmax(ll))
        if _number(sample["acc"], "`acc`") == 1.0:
            return best
        if n == 2:
            return 1 - best
    raise ValueError("no gold choice can be derived (`target` is the shared continuation; `acc` leaves it open)")


def _check_once(task: np.ndarray, doc_id: np.ndarray, file: Path) -> None:
    """Refuse a question given twice in a choice-format file: it would count twice, with either gold."""
    first: dict[tuple[str, str], int] = {}
    for i, key in enumerate(zip(task.astype(str).tolist(), doc_id.astype(str).tolist())):
        if key in first:
            raise ValueError(
                f"`location`: {file}, doc_id {key[1]}: appears twice in task {key[0]!r} (questions {first[key]} and "
                f"{i}); each question is given once per task"
            )
        first[key] = i


def _read_choice_table(file: Path) -> ChoiceData:
    """Read calibkit's choice format (JSON Lines or Parquet), column by column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from calibkit.io.prediction_files import read_table

    table = read_table(file)
    names = table.column_names
    if "choice_logprobs" not in names or "gold" not in names:
        raise ValueError(f"`location`: {file} needs `choice_logprobs` and `gold` columns; it has {names}")
    q = table.num_rows
    if q == 0:
        raise ValueError(f"`location`: {file} holds no question")
    blocks, lengths = {}, None
    for name in ("choice_logprobs", "choice_chars", "choice_bytes", "choice_tokens"):
        if name not in names:
            continue
        column = table.column(name).combine_chunks()
        if not pa.types.is_list(column.type) and not pa.types.is_large_list(column.type):
            raise ValueError(f"`location`: {file}: `{name}` must hold a list of numbers a question, not {column.type}")
        counts = pc.list_value_length(column).fill_null(-1).to_numpy(zero_copy_only=False)
        if lengths is None:  # choice_logprobs: at least one choice per question
            lengths, bad = counts, np.flatnonzero(counts < 1)
        else:
            bad = np.flatnonzero(counts != lengths)
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"`location`: {file}, question {i}: `{name}` holds {max(int(counts[i]), 0)} values for "
                f"{max(int(lengths[i]), 0)} choices"
            )
        try:
            flat = column.flatten().cast(pa.float64()).to_numpy(zero_copy_only=False)
        except pa.ArrowException as exc:
            raise ValueError(f"`location`: {file}: `{name}` must hold numbers ({exc})") from None
        blocks[name] = pad_flat(flat, lengths)
    ll = blocks["choice_logprobs"]
    present = np.arange(ll.shape[1]) < lengths[:, None]
    bad = np.flatnonzero((present & ~np.isfinite(np.where(present, ll, 0.0))).any(axis=1))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"`location`: {file}, question {i}: a log-likelihood is not finite: {ll[i, : lengths[i]]}")
    gold_column = table.column("gold")
    if gold_column.null_count:  # a row without `gold`: name the question, not the column's type
        missing = int(np.flatnonzero(gold_column.is_null().to_numpy(zero_copy_only=False))[0])
        raise ValueError(f"`location`: {file}, question {missing}: no `gold` (the index of the right choice)")
    if not pa.types.is_integer(gold_column.type):
        raise ValueError(f"`location`: {file}: `gold` must hold one integer index a question, not {gold_column.type}")
    gold = gold_column.to_numpy().astype(np.int64)
    bad = np.flatnonzero((gold < 0) | (gold >= lengths))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"`location`: {file}, question {i}: `gold` {gold[i]} is no index of {lengths[i]} choices")
    task = table.column("task").to_numpy(zero_copy_only=False).astype(str) if "task" in names else np.full(q, file.stem)
    doc_id = table.column("doc_id").to_numpy(zero_copy_only=False) if "doc_id" in names else np.arange(q)
    _check_once(task, doc_id, file)
    return ChoiceData.stack(
        ll, gold, task=task, source=str(file), doc_id=doc_id, chars=blocks.get("choice_chars"),
        bytes=blocks.get("choice_bytes"), tokens=blocks.get("choice_tokens"),
    )  # fmt: skip


READERS = {"harness": _read_samples, "lighteval": read_details}
"""The reader of each kind of log (:func:`kind_of`); the choice format is read by its own."""
