"""Judged samples from lighteval's ``--save-details`` files of a judge metric (``details_{task}_{date}.parquet``).

lighteval's judge metrics (``JudgeLLMSimpleQA``, ``JudgeLLMMixEval``, ``JudgeLLMMTBench``: a
``SampleLevelMetricGrouping`` over ``JudgeLM``) write, per sample, the dict their ``compute``
returns into the details file's ``metric`` column: the judge's score under the metric's name
(``simpleqa_judge``: 1 for the judge's ``A``, correct, 0 for ``B`` or ``C``; ``judge_score_*``
for MixEval and MT-Bench), and beside it the judge's prompt (``user_prompt_*``) and its reply
(``judgement_*``). Each row becomes one row of :class:`~calibkit.lm.judges.Judged`:

- ``verdict``: the judge's score, a number in [0, 1] (a score on another scale, MT-Bench's 1 to
  10, is mapped by ``scale``);
- ``confidence``: a confidence the judge states in its reply (``CONFIDENCE: 0.8``,
  :data:`calibkit.lm.judges.inspect_logs.STATED`), NaN otherwise: lighteval logs no
  log-probabilities of the judge;
- ``explanation``: the judge's reply;
- ``ids``: the doc's ``id`` (its row in the file where the doc has none), ``task`` the file
  name's task.
"""

from __future__ import annotations

import glob
import math
from pathlib import Path
from typing import Any

from calibkit.lm.judges.data import Judged
from calibkit.lm.judges.inspect_logs import as_judged_refusal, stated_confidence
from calibkit.lm.judges.readers import JudgedReader, register_judged_reader
from calibkit.lm.multiple_choice.lighteval import DETAILS

__all__ = ["is_judge_details", "judge_metric", "read_lighteval_judged"]

_DOC = ("doc", "__doc__")
_METRIC = ("metric", "__metric__")


def _files(location: Any) -> list[Path]:
    path = Path(location)
    if path.is_dir():
        files = sorted(path.rglob("details_*.parquet"))
    elif glob.has_magic(str(location)):
        files = sorted(Path(p) for p in glob.glob(str(location), recursive=True) if p.endswith(".parquet"))
    elif path.is_file():
        files = [path]
    else:
        raise ValueError(f"`location`: no such file or folder: {location}")
    if not files:
        raise ValueError(f"`location`: no lighteval details file (details_*.parquet) in {location}")
    return files


def judge_metric(metrics: dict[str, Any], metric: str | None, where: str) -> str:
    """Return the name of the judge's score among one sample's metrics.

    Parameters
    ----------
    metrics : dict
        The details file's ``metric`` of one sample.
    metric : str, optional
        The name asked; default the only number whose name holds ``judge``.
    where : str
        The sample, for the error message.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        When the name asked is not there, or none or several judge scores are and none is named.
    """
    if metric is not None:
        if metric not in metrics:
            raise ValueError(f"{where}: no metric {metric!r} (the sample has {sorted(metrics)})")
        return metric
    numbers = [k for k, v in metrics.items() if "judge" in k and isinstance(v, int | float) and not isinstance(v, bool)]
    if len(numbers) != 1:
        found = f"the judge scores {numbers}" if numbers else f"no judge score among {sorted(metrics)}"
        raise ValueError(f"{where}: {found}: name one (`metric`)")
    return numbers[0]


def _reply(metrics: dict[str, Any]) -> str:
    for key, value in metrics.items():
        if key.startswith("judgement"):
            return "\n".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
    return ""


def _verdict(value: Any, scale: tuple[float, float] | None, key: str, where: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: the judge's score {key}={value!r} is not a number") from None
    if scale is not None:
        number = (number - scale[0]) / (scale[1] - scale[0])
    if not 0 <= number <= 1:  # NaN fails too
        said = f"on the scale {scale[0]:g} to {scale[1]:g}" if scale else "outside [0, 1]; give its scale (`scale`)"
        raise ValueError(f"{where}: the judge's score {key}={value!r} is {said}")
    return number


def _read_one(file: Path, metric: str | None, scale: Any, confidence: str) -> dict[str, list]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(file)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"`location`: {file} cannot be read as Parquet ({type(exc).__name__}: {exc})") from None
    names = table.column_names
    doc_column = next((n for n in _DOC if n in names), None)
    metric_column = next((n for n in _METRIC if n in names), None)
    if doc_column is None or metric_column is None:
        raise ValueError(f"`location`: {file} is no lighteval details file (columns {names}; doc and metric expected)")
    found = DETAILS.match(file.name)
    task = found["task"] if found else file.stem
    rows: dict[str, list] = {k: [] for k in ("ids", "verdict", "confidence", "explanation", "origin")}
    docs, metrics = table.column(doc_column).to_pylist(), table.column(metric_column).to_pylist()
    for r, (doc, values) in enumerate(zip(docs, metrics)):
        where = f"{file}, row {r}"
        key = judge_metric(values or {}, metric, where)
        verdict = _verdict(values[key], scale, key, where)
        reply = _reply(values)
        rows["ids"].append(str((doc or {}).get("id") or r))
        rows["verdict"].append(verdict)
        rows["confidence"].append(stated_confidence(reply, verdict, where) if confidence != "none" else math.nan)
        rows["explanation"].append(reply)
        rows["origin"].append(where)
    rows["task"] = [task] * len(rows["ids"])
    return rows


def read_lighteval_judged(
    location: Any, *, metric: str | None = None, scale: tuple[float, float] | None = None, confidence: str = "auto"
) -> Judged:
    """Read the judged samples of lighteval details files: a file, a folder (recursively) or a glob.

    Parameters
    ----------
    location : str or Path
    metric : str, optional
        The judge's score in the details' ``metric`` (default: the only number whose name holds
        ``judge``: ``simpleqa_judge``, ``judge_score_gpt-4o``).
    scale : (float, float), optional
        The judge's lowest and highest score, mapped to 0 and 1 (MT-Bench: ``(1, 10)``); default
        scores already in [0, 1].
    confidence : {"auto", "stated", "none"}, default "auto"
        A confidence the judge states in its reply (``auto`` and ``stated`` read it), or none.

    Returns
    -------
    Judged

    Raises
    ------
    ValueError
        One line naming the file and the row: not a details file, no judge score or several and
        none named, a score outside [0, 1] (or its ``scale``), a stated confidence outside
        [0, 1], two rows with one id in one task.

    Examples
    --------
    >>> judged = read_lighteval_judged("details/", metric="simpleqa_judge")  # doctest: +SKIP
    """
    if confidence not in ("auto", "stated", "none"):
        raise ValueError(f"`confidence`: {confidence!r} is none of auto, stated, none (lighteval logs no logprobs)")
    if scale is not None and not (len(scale) == 2 and float(scale[1]) > float(scale[0])):
        raise ValueError(f"`scale`: {scale!r} is not (lowest, highest) with highest > lowest")
    parts = [_read_one(f, metric, scale, confidence) for f in _files(location)]
    rows = {k: [v for part in parts for v in part[k]] for k in parts[0]}
    return Judged.from_rows(rows)


def is_judge_details(file: Path) -> bool:
    """Tell a lighteval details file of a judge metric: its name, and a ``metric`` field whose name holds ``judge``.

    Parameters
    ----------
    file : Path

    Returns
    -------
    bool
        Read from the Parquet schema alone; False for any other file.
    """
    if not (DETAILS.match(file.name) and file.suffix == ".parquet"):
        return False
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(file)
    except (pa.ArrowException, OSError):
        return False
    column = next((schema.field(n) for n in _METRIC if n in schema.names), None)
    return column is not None and pa.types.is_struct(column.type) and any("judge" in f.name for f in column.type)


def _read_file(file: Path) -> Judged:
    try:
        return read_lighteval_judged(file)
    except ValueError as exc:
        raise as_judged_refusal(exc) from None


register_judged_reader(
    JudgedReader("lighteval", is_judge_details, _read_file, "lighteval details (details_*.parquet) of a judge metric")
)
