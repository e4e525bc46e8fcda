"""Language models on multiple-choice benchmarks: calibration read from the evaluation logs.

lm-evaluation-harness scores each choice of a question by the log-likelihood of its continuation
and predicts the best; that score is a classifier's logit over the choices, so the softmax over
the choices is the model's confidence. The score is an explicit choice, named in every output,
since the harness reports three accuracies from three scores:

- ``score="loglik"`` (default): the summed log-likelihood, as the harness's ``acc``;
- ``score="chars"``: log-likelihood divided by the choice's length in characters (``acc_norm``);
- ``score="bytes"``: divided by its length in UTF-8 bytes (``acc_bytes``).

Questions may have different numbers of choices (ARC has 3 to 5): the probabilities of a
question are its softmax over its own choices, padded with zeros, which leaves every top-label
metric (ECE, MCE, ACE is not one, RBECE, FCE, ECD, ESCE, overconfidence), Brier (the padding adds
0) and NLL as they are. Metrics over answer positions (per-class ECE, CECE, MSECE, WSECE, ECE
variance, SCE, ACE) are given only where every question has the same number of choices (a
model's preference for position A is a known bias); elsewhere they are None, and
``"positions"`` says why.

Readers (:func:`read_choices`):

- lm-evaluation-harness ``--log_samples``: ``samples_{task}_{date}.jsonl`` (one sample per line,
  every value written as a string; ``filtered_resps`` holds ``[loglik, is_greedy]`` per choice,
  twice as many with ``acc_mutual_info``, the second half unconditional). The gold index is
  derived from ``target`` (an index, or the text of one continuation without the task's
  ``target_delimiter``, read from the run's ``results_*.json``, default ``" "``) and checked
  against the sample's own ``acc`` (and ``acc_norm``, ``acc_bytes``); where ``target`` is not the
  gold (``multiple_input`` tasks such as Winogrande) the gold follows from ``acc`` when that
  leaves one choice. A sample whose gold cannot be derived is refused with its ``doc_id``.
- calibkit's own format, for any other tool: JSON Lines or Parquet with ``task`` (optional),
  ``choice_logprobs`` (a list per question), ``gold`` (an index) and optionally ``choice_chars``
  and ``choice_bytes`` (lengths, for the normalised scores).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SCORES = ("loglik", "chars", "bytes")
"""The scores a choice's confidence can be the softmax of (see the module docstring)."""

_SAMPLES = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[0-9.\-]+)\.jsonl$")
POSITION_METRICS = ("subset_ece", "cece", "msece", "wsece", "ece_variance", "sce", "ace", "ace_error_bound")
"""Metrics over classes, here answer positions: given only where a task has a fixed number of choices."""


@dataclass(frozen=True)
class ChoiceData:
    """Scored choices of multiple-choice questions, one row per question (padded with NaN).

    Parameters
    ----------
    task : ndarray of str, shape (Q,)
        The task of each question.
    doc_id : ndarray of object, shape (Q,)
        The question's id in its task (for messages).
    loglik : ndarray of float64, shape (Q, K)
        Log-likelihood of each choice; NaN past the question's last choice.
    gold : ndarray of int64, shape (Q,)
        Index of the correct choice.
    chars, bytes : ndarray of float64, shape (Q, K), or None
        Lengths of the choices (NaN where unknown), for ``score="chars"`` / ``"bytes"``.
    source : ndarray of str, shape (Q,)
        The file each question was read from.
    """

    task: np.ndarray
    doc_id: np.ndarray
    loglik: np.ndarray
    gold: np.ndarray
    chars: np.ndarray | None
    bytes: np.ndarray | None
    source: np.ndarray

    @property
    def n_choices(self) -> np.ndarray:
        """Number of choices of each question, shape (Q,)."""
        return np.sum(~np.isnan(self.loglik), axis=1)

    def select(self, rows: np.ndarray) -> ChoiceData:
        """Return the questions ``rows``, the columns trimmed to their most choices.

        Parameters
        ----------
        rows : ndarray of bool or int
            A mask over the questions, or their indices.

        Returns
        -------
        ChoiceData
        """
        width = int(self.n_choices[rows].max()) if np.size(self.gold[rows]) else 1

        def cut(a):
            return None if a is None else a[rows][:, :width]

        return ChoiceData(
            self.task[rows], self.doc_id[rows], cut(self.loglik), self.gold[rows], cut(self.chars),
            cut(self.bytes), self.source[rows],
        )  # fmt: skip


def choice_probabilities(data: ChoiceData, score: str = "loglik") -> np.ndarray:
    """Return each question's softmax over its choices of ``score``, padded with zeros.

    Parameters
    ----------
    data : ChoiceData
    score : {"loglik", "chars", "bytes"}, default "loglik"
        Log-likelihood, or log-likelihood per character or per UTF-8 byte of the choice.

    Returns
    -------
    ndarray of float64, shape (Q, K)

    Raises
    ------
    ValueError
        When ``score`` is unknown, or the lengths it needs are missing for a question (named
        by its task and ``doc_id``).

    Examples
    --------
    >>> data = ChoiceData(np.array(["t"]), np.array([0], dtype=object), np.array([[-1.0, -2.0, np.nan]]),
    ...                   np.array([0]), None, None, np.array(["f"]))
    >>> choice_probabilities(data).round(4).tolist()
    [[0.7311, 0.2689, 0.0]]
    """
    if score not in SCORES:
        raise ValueError(f"`score` must be one of {list(SCORES)}, got {score!r}")
    s = data.loglik
    present = ~np.isnan(s)
    if score != "loglik":
        lengths = data.chars if score == "chars" else data.bytes
        missing = present if lengths is None else present & ~(lengths > 0)
        if missing.any():
            i = int(np.flatnonzero(missing.any(axis=1))[0])
            raise ValueError(
                f"score={score!r} needs each choice's length in {score}: {data.source[i]}, task {data.task[i]}, "
                f"doc_id {data.doc_id[i]} has none (a multiple_input task, or a file without choice_{score})"
            )
        s = s / lengths
    s = np.where(present, s, -np.inf)
    z = np.exp(s - s.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


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
        True for an lm-evaluation-harness samples file, a folder holding one (searched
        recursively), or a file in calibkit's choice format (a ``choice_logprobs`` column).
    """
    path = Path(location)
    if path.is_dir():
        return any(_SAMPLES.match(p.name) for p in path.rglob("samples_*.jsonl"))
    if not path.is_file():
        return False
    if _SAMPLES.match(path.name):
        return True
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        try:
            return "choice_logprobs" in pq.read_schema(path).names
        except Exception:  # noqa: BLE001 - not Parquet after all: the other readers say why
            return False
    if path.suffix.lower() in (".jsonl", ".json"):
        with open(path, encoding="utf-8", errors="replace") as handle:
            return '"choice_logprobs"' in handle.readline()
    return False


def read_choices(location: str | Path) -> ChoiceData:
    """Read multiple-choice logs: a samples file, a folder of them (a harness run), or a choice-format file.

    Parameters
    ----------
    location : str or Path
        An lm-evaluation-harness ``samples_*.jsonl``; a folder searched recursively for them
        (each task's ``target_delimiter`` read from the ``results_*.json`` beside them); or a
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
        files = sorted(p for p in path.rglob("samples_*.jsonl") if _SAMPLES.match(p.name))
        if not files:
            raise ValueError(f"--predictions: no lm-evaluation-harness samples_*.jsonl in {location}")
        seen: dict[str, Path] = {}
        for file in files:
            task = _SAMPLES.match(file.name)["task"]
            if task in seen:
                raise ValueError(
                    f"--predictions: task {task!r} is in {seen[task]} and {file} (two runs?): point at one run's folder"
                )
            seen[task] = file
        return _concat([_read_samples(f) for f in files])
    if not path.is_file():
        raise ValueError(f"--predictions: no such file or folder: {location}")
    if _SAMPLES.match(path.name):
        return _read_samples(path)
    return _read_choice_table(path)


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
        np.concatenate([p.source for p in parts]),
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
    task = _SAMPLES.match(file.name)["task"]
    delimiter = _delimiters(file).get(task, " ")
    rows = []
    with open(file, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                sample = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"--predictions: {file} line {number} is not JSON: {exc}") from None
            try:
                rows.append(_sample_row(sample, delimiter))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                doc = sample.get("doc_id", f"line {number}") if isinstance(sample, dict) else f"line {number}"
                detail = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
                raise ValueError(f"--predictions: {file}, doc_id {doc}: {detail}") from None
    if not rows:
        raise ValueError(f"--predictions: {file} holds no sample")
    width = max(len(r[1]) for r in rows)
    table = np.full((3, len(rows), width), np.nan)
    for i, (_, ll, chars, nbytes, _) in enumerate(rows):  # per question, as parsed: the file is read once
        table[0, i, : len(ll)], table[1, i, : len(ll)], table[2, i, : len(ll)] = ll, chars, nbytes
    return ChoiceData(
        np.full(len(rows), task, dtype=object), np.array([r[0] for r in rows], dtype=object), table[0],
        np.array([r[4] for r in rows], dtype=np.int64), table[1], table[2], np.full(len(rows), str(file), dtype=object),
    )  # fmt: skip


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


def _read_choice_table(file: Path) -> ChoiceData:
    """Read calibkit's choice format (JSON Lines or Parquet), column by column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from calibkit.prediction_files import read_table

    table = read_table(file)
    names = table.column_names
    if "choice_logprobs" not in names or "gold" not in names:
        raise ValueError(f"--predictions: {file} needs `choice_logprobs` and `gold` columns; it has {names}")
    q = table.num_rows
    if q == 0:
        raise ValueError(f"--predictions: {file} holds no question")
    blocks, lengths = {}, None
    for name in ("choice_logprobs", "choice_chars", "choice_bytes"):
        if name not in names:
            continue
        column = table.column(name).combine_chunks()
        if not pa.types.is_list(column.type) and not pa.types.is_large_list(column.type):
            raise ValueError(
                f"--predictions: {file}: `{name}` must hold a list of numbers a question, not {column.type}"
            )
        counts = pc.list_value_length(column).fill_null(-1).to_numpy(zero_copy_only=False)
        if lengths is None:  # choice_logprobs: at least one choice per question
            lengths, bad = counts, np.flatnonzero(counts < 1)
        else:
            bad = np.flatnonzero(counts != lengths)
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"--predictions: {file}, question {i}: `{name}` holds {max(int(counts[i]), 0)} values for "
                f"{max(int(lengths[i]), 0)} choices"
            )
        try:
            flat = column.flatten().cast(pa.float64()).to_numpy(zero_copy_only=False)
        except pa.ArrowException as exc:
            raise ValueError(f"--predictions: {file}: `{name}` must hold numbers ({exc})") from None
        out = np.full((q, int(lengths.max())), np.nan)
        out[np.arange(out.shape[1]) < lengths[:, None]] = flat  # row-major: each question's values in order
        blocks[name] = out
    ll = blocks["choice_logprobs"]
    present = np.arange(ll.shape[1]) < lengths[:, None]
    bad = np.flatnonzero((present & ~np.isfinite(np.where(present, ll, 0.0))).any(axis=1))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"--predictions: {file}, question {i}: a log-likelihood is not finite: {ll[i, : lengths[i]]}")
    gold_column = table.column("gold")
    if not pa.types.is_integer(gold_column.type) or gold_column.null_count:
        raise ValueError(
            f"--predictions: {file}: `gold` must hold one integer index a question, not {gold_column.type}"
        )
    gold = gold_column.to_numpy().astype(np.int64)
    bad = np.flatnonzero((gold < 0) | (gold >= lengths))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"--predictions: {file}, question {i}: `gold` {gold[i]} is no index of {lengths[i]} choices")
    task = table.column("task").to_numpy(zero_copy_only=False).astype(str) if "task" in names else np.full(q, file.stem)
    doc_id = table.column("doc_id").to_numpy(zero_copy_only=False) if "doc_id" in names else np.arange(q)
    return ChoiceData(
        task.astype(object), doc_id.astype(object), ll, gold, blocks.get("choice_chars"), blocks.get("choice_bytes"),
        np.full(q, str(file), dtype=object),
    )  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Report


def _one_report(data: ChoiceData, score: str, settings: dict[str, Any]) -> dict[str, Any]:
    import calibkit

    probs = choice_probabilities(data, score)
    counts = data.n_choices
    fixed = int(counts.min()) == int(counts.max())
    report = calibkit.calibration_report(probs, data.gold, **settings)
    out: dict[str, Any] = {"questions": int(len(data.gold)), "choices": sorted({int(c) for c in counts})}
    for key, value in report.items():  # JSON-ready: lists, and None for NaN (a class with no question, ...)
        value = value.tolist() if isinstance(value, np.ndarray) else value
        if isinstance(value, list):
            value = [None if isinstance(v, float) and np.isnan(v) else v for v in value]
        out[key] = None if isinstance(value, float) and np.isnan(value) else value
    if fixed:
        out["positions"] = "answer positions are the classes: " + ", ".join(chr(65 + j) for j in range(int(counts[0])))
    else:
        for key in POSITION_METRICS:
            if key in out:
                out[key] = None
        low, high = int(counts.min()), int(counts.max())
        out["positions"] = f"not defined: questions have {low} to {high} choices (metrics over positions are None)"
    return out


def multiple_choice_report(
    data: ChoiceData,
    *,
    score: str = "loglik",
    n_bins: int = 15,
    theta: float = 40,
    fce_variant: str = "paper",
    metrics: Any = None,
) -> dict[str, Any]:
    """Calibration of a language model on multiple-choice tasks: every metric per task and pooled.

    Parameters
    ----------
    data : ChoiceData
        From :func:`read_choices`.
    score : {"loglik", "chars", "bytes"}, default "loglik"
        The score whose softmax over the choices is the confidence (the harness's ``acc``,
        ``acc_norm``, ``acc_bytes``).
    n_bins, theta, fce_variant, metrics
        As in :func:`calibkit.calibration_report`.

    Returns
    -------
    dict
        ``"score"``; ``"pooled"``: the report over every question; ``"tasks"``: per task, the
        same. Each report holds :func:`calibkit.calibration_report`'s keys (``accuracy`` is the
        harness's accuracy for this score), ``"questions"``, ``"choices"`` (the numbers of choices
        seen) and ``"positions"`` (whether metrics over answer positions are defined: None where
        not).

    Raises
    ------
    ValueError
        On an unknown score or a bad setting.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> ll = -rng.gamma(2.0, 2.0, (200, 4))
    >>> gold = ll.argmax(1) * (rng.random(200) < 0.7)  # right 70 % of the time (or gold 0)
    >>> data = ChoiceData(np.array(["arc"] * 200, dtype=object), np.arange(200).astype(object), ll, gold,
    ...                   None, None, np.array(["f"] * 200, dtype=object))
    >>> r = multiple_choice_report(data)
    >>> r["score"], r["tasks"]["arc"]["questions"], r["pooled"]["positions"][:20]
    ('loglik', 200, 'answer positions are')
    """
    from calibkit.metrics.validation import check_choice

    score = check_choice(score, "score", SCORES)
    settings = {"n_bins": n_bins, "theta": theta, "fce_variant": fce_variant, "metrics": metrics}
    tasks = {}
    for task in sorted(set(data.task.tolist())):
        tasks[task] = _one_report(data.select(data.task == task), score, settings)
    return {"score": score, "pooled": _one_report(data, score, settings), "tasks": tasks}


TABLE_COLUMNS = ("questions", "accuracy", "ece", "mce", "rbece", "fce", "ecd", "esce", "brier", "nll", "cece")


def format_choice_table(report: dict[str, Any]) -> str:
    """Render :func:`multiple_choice_report` as a Markdown table: one row per task, then the pooled row.

    Parameters
    ----------
    report : dict

    Returns
    -------
    str
        ``-`` where a value is None (not defined) or NaN (e.g. RBECE with no bin over ``theta``).
    """

    def cell(value: Any) -> str:
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return "-"
        return str(value) if isinstance(value, int) else f"{value:.4f}"

    lines = ["| task | choices | " + " | ".join(TABLE_COLUMNS) + " |", "|---" * (len(TABLE_COLUMNS) + 2) + "|"]
    rows = [*report["tasks"].items(), ("(pooled)", report["pooled"])]
    for task, r in rows:
        choices = (
            "-".join(str(c) for c in (r["choices"][0], r["choices"][-1])) if len(r["choices"]) > 1 else r["choices"][0]
        )
        lines.append(f"| {task} | {choices} | " + " | ".join(cell(r[c]) for c in TABLE_COLUMNS) + " |")
    return "\n".join(lines)
