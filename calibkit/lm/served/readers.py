"""Read a served model's responses (OpenAI's schema) as generations with their confidence sources.

The forms read, field paths as the ``openai`` package's own types name them (3.57):

- chat completions (``"object": "chat.completion"``): the answer is ``choices[i].message.content``,
  its tokens ``choices[i].logprobs.content[j].{token, logprob, top_logprobs}``;
- legacy completions (``"object": "text_completion"``): the answer is ``choices[i].text``, its
  tokens ``choices[i].logprobs.{tokens, token_logprobs, top_logprobs, text_offset}``, with
  ``top_logprobs[j]`` a mapping of token to log-probability;
- in one JSON file (a response, or a list of them), in JSON Lines (one response a line), or in
  the Batch API's output (one ``{"custom_id", "response": {"status_code", "body"}, "error"}`` a
  line), whose input file (``{"custom_id", "body": {"messages" | "prompt", ...}}``) gives the
  prompts and what was requested.

vLLM's server writes the same schema with two differences read here: -9999.0 for a
log-probability of ``-inf`` (``SENTINEL``: below the returned alternatives, never a probability)
and, with ``echo``, the prompt's tokens before the answer's, the first with a null log-probability
(``openai``'s ``Completion.model_validate`` refuses it; this reader drops the prompt's tokens,
which needs the prompt: the batch input file). By default vLLM takes log-probabilities before
temperature and penalties, OpenAI after: say which in a report.

A question's id is its ``custom_id`` in a batch file, else its response's position in the file
(``0``, ``1``, ...); a response with several choices (``n > 1``) gives one answer per choice, with
ids ``ID#0``, ``ID#1``, .... Correctness comes from the user (``gold``): a right answer per id
(compared after case folding and stripping white space and punctuation, or, with ``letters``, as
a choice letter) or a correctness per id.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.io.prediction_files import read_table
from calibkit.lm.generations.data import Generations
from calibkit.lm.multiple_choice.data import ChoiceData
from calibkit.lm.multiple_choice.readers import task_of
from calibkit.lm.served.sources import LETTER_STRIP, LogprobSources, letter_of, logprob_sources
from calibkit.lm.sources import LETTER, TOKENS, source_kind

OPTION = "`file`"
"""What the messages about the responses file name: its argument (the command line names its flag)."""
SOURCES = TOKENS
"""The confidence sources every served answer gets (see :func:`logprob_sources`; :data:`calibkit.lm.sources.TOKENS`)."""
_RESPONSES = ("chat.completion", "text_completion")
_MAX_JSON = 1 << 28  # a single-JSON file read whole to tell its kind: responses, not data sets


def served_kind(file: Path) -> str | None:
    """Tell whether a file holds a served model's responses, and in which form.

    Parameters
    ----------
    file : Path

    Returns
    -------
    {"response", "batch"} or None
        Chat or legacy completions (one JSON, a list of them, or JSON Lines), the Batch API's
        output, or neither.
    """
    suffix = file.suffix.lower()
    if suffix not in (".json", ".jsonl"):
        return None
    try:
        with open(file, encoding="utf-8", errors="replace") as handle:
            first = json.loads(handle.readline(1 << 22))
    except (OSError, ValueError):
        first = None
        if suffix == ".json" and file.stat().st_size <= _MAX_JSON and _looks_served(file):  # pretty-printed
            try:
                first = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None
    if isinstance(first, list) and first:
        first = first[0]
    return _record_kind(first)


def _looks_served(file: Path) -> bool:
    """Tell from the file's first 64 KiB whether it may hold responses, before parsing it whole."""
    with open(file, encoding="utf-8", errors="replace") as handle:
        head = handle.read(1 << 16)
    return '"custom_id"' in head or any(f'"{kind}"' in head for kind in _RESPONSES)


def _record_kind(record: Any) -> str | None:
    if not isinstance(record, dict):
        return None
    if "custom_id" in record and "response" in record:
        return "batch"
    return "response" if record.get("object") in _RESPONSES and "choices" in record else None


@dataclass(frozen=True)
class ServedAnswers:
    """A served model's answers read from its responses.

    Parameters
    ----------
    generations : Generations
        One row per answer (choice), with the sources ``sequence``, ``sequence_normalized``,
        ``least_token`` and, with letters, ``letter`` (kind ``served``).
    sources : LogprobSources
        The sources themselves, with the letters' distribution and the outside mass.
    letters : str or None
        The choice letters.
    chosen : ndarray of int64, shape (N,)
        The letter the answer gives (its letter position's token), -1 where none or without letters.
    gold : ndarray of int64, shape (N,)
        The right letter's index, -1 without letters or where the gold is a correctness.
    """

    generations: Generations
    sources: LogprobSources
    letters: str | None
    chosen: np.ndarray
    gold: np.ndarray

    def choices(self) -> ChoiceData:
        """Return the answers that give a letter as multiple-choice questions over the letters.

        The log-likelihood of a letter is the log of its share of the letters' distribution
        (``-inf`` for a letter absent from the returned tokens: its softmax is 0), so that
        :func:`calibkit.lm.multiple_choice.multiple_choice_report` scores the distribution as it
        is, class-wise metrics over the letters included.

        Returns
        -------
        ChoiceData

        Raises
        ------
        ValueError
            Without letters, or when no answer has both a letter position and a gold letter.
        """
        if self.letters is None:
            raise ValueError("choices() needs the choice letters (letters='ABCD')")
        keep = (self.sources.letter_position >= 0) & (self.gold >= 0)
        if not keep.any():
            raise ValueError("no answer has both a letter and a gold letter")
        g = self.generations
        with np.errstate(divide="ignore"):
            loglik = np.log(self.sources.letters[keep])
        origin = np.array([g.origin[i].split(",")[0] for i in np.flatnonzero(keep)], dtype=object)
        return ChoiceData(g.task[keep], g.ids[keep], loglik, self.gold[keep], None, None, origin)

    def summary(self) -> dict[str, Any]:
        """Return what the letters leave unknown: the outside mass and the bound on the ECE.

        Returns
        -------
        dict
            ``answers``, ``with_letter`` (answers with a letter position), ``outside_mass_mean``,
            ``outside_mass_max``, ``absent_bound_max`` and ``ece_bound``
            (:attr:`LogprobSources.ece_bound`); the last four None without letters.
        """
        s = self.sources
        out: dict[str, Any] = {"answers": len(self.chosen), "with_letter": int((self.chosen >= 0).sum())}
        found = self.chosen >= 0
        if self.letters is None or not found.any():
            return {**out, **dict.fromkeys(("outside_mass_mean", "outside_mass_max", "absent_bound_max", "ece_bound"))}
        return {
            **out,
            "outside_mass_mean": float(np.nanmean(s.outside_mass)),
            "outside_mass_max": float(np.nanmax(s.outside_mass)),
            "absent_bound_max": float(np.nanmax(s.absent_bound)),
            "ece_bound": s.ece_bound,
        }


def read_served(
    file: str | Path,
    *,
    gold: str | Path | Mapping[str, Any] | None = None,
    letters: str | None = None,
    top_logprobs: int | None = None,
    batch_input: str | Path | None = None,
) -> ServedAnswers:
    """Read a served model's responses with their log-probabilities (OpenAI's schema, vLLM's server).

    Parameters
    ----------
    file : str or Path
        Chat or legacy completions: one JSON (a response or a list), JSON Lines, or the Batch
        API's output (see the module docstring).
    gold : path or mapping, required
        The right answers: a file (JSON Lines, CSV, Parquet) with ``id`` and ``gold`` (the right
        answer, or with ``letters`` its letter or 0-based index) or ``correct`` (0/1 or a score in
        [0, 1]); or a mapping of id to the right answer (a string) or to a correctness (a number
        or a bool).
    letters : str, optional
        The choice letters of a multiple-choice task (``"ABCD"``): the answer is the letter at its
        letter position, and the source ``letter`` its share of the letters' distribution.
    top_logprobs : int, optional
        The number of alternatives requested (a token with fewer is refused); by default the
        batch input's ``top_logprobs`` (chat) or ``logprobs`` (legacy) where given.
    batch_input : str or Path, optional
        The Batch API's input file: the prompts (``question``), what was requested, and the
        prompt to drop from echoed legacy completions.

    Returns
    -------
    ServedAnswers

    Raises
    ------
    ValueError
        One line naming the file, the line and the field: no log-probabilities requested (a null
        ``logprobs``), a tokens / log-probabilities length mismatch, fewer ``top_logprobs`` than
        asked, a batch response with an error body, a null log-probability other than an echoed
        first one, an id without gold, a response of no known form.
    """
    file = Path(file)
    requests = _read_batch_input(Path(batch_input)) if batch_input is not None else {}
    contents, answers, ids, where, questions, asked_each = [], [], [], [], [], []
    for place, ident, body in _records(file):
        request = requests.get(ident) if requests else None
        if requests and request is None:
            raise ValueError(f"{OPTION}: {place}: custom_id {ident!r} is not in the batch input {batch_input}")
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices:
            raise ValueError(f"{OPTION}: {place}: no choices (a response of no known form)")
        asked = top_logprobs if top_logprobs is not None else _requested(request)
        for c, choice in enumerate(choices):
            at = f"{place}, choices[{c}]"
            content, text = _choice(choice, body.get("object"), request, at)
            if asked is not None:
                _check_asked(content, asked, at)
            contents.append(content)
            asked_each.append(asked)  # known, it tells whether the chosen token is one of the top k
            answers.append(text)
            ids.append(ident if len(choices) == 1 else f"{ident}#{c}")
            where.append(f"{at}.logprobs")
            questions.append(_prompt(request))
    if not contents:
        raise ValueError(f"{OPTION}: {file} holds no response")
    sources = logprob_sources(
        contents, letters=letters, top_logprobs=asked_each, where=[f"{OPTION}: {w}" for w in where]
    )
    return _answers(file, sources, contents, answers, ids, where, questions, gold, letters)


def _answers(file, sources, contents, answers, ids, where, questions, gold, letters) -> ServedAnswers:
    """Put the sources, the answers and their correctness together."""
    n = len(answers)
    chosen = np.full(n, -1, dtype=np.int64)
    if letters is not None:
        for i in np.flatnonzero(sources.letter_position >= 0):
            chosen[i] = letter_of(contents[i][sources.letter_position[i]]["token"], letters)
    base = [i.rpartition("#")[0] if "#" in i and i.rpartition("#")[0] else i for i in ids]
    correct, gold_index = _correctness(gold, base, answers, chosen, letters, where)
    confidence = {name: getattr(sources, name) for name in SOURCES}
    if letters is not None:
        at_chosen = np.take_along_axis(sources.letters, np.maximum(chosen, 0)[:, None], axis=1)[:, 0]
        confidence[LETTER] = np.where(chosen >= 0, at_chosen, np.nan)
    task = np.array([task_of(file)] * n, dtype=object)
    generations = Generations(
        task, np.array(ids, dtype=object), answers, correct, confidence, {k: source_kind(k) for k in confidence},
        questions if all(q is not None for q in questions) else None, [w.rsplit(", choices", 1)[0] for w in where],
    )  # fmt: skip
    return ServedAnswers(generations, sources, letters, chosen, gold_index)


def _records(file: Path):
    """Yield (location, id, response body) for each response of the file, batch errors refused."""
    if not file.is_file():
        raise ValueError(f"{OPTION}: no such file: {file}")
    text = file.read_text(encoding="utf-8")
    lines, unit = None, "items"
    if file.suffix.lower() != ".jsonl":  # one JSON: a response or a list of them
        try:
            whole = json.loads(text)
            lines = [(f"{file}", n, r) for n, r in enumerate(whole if isinstance(whole, list) else [whole])]
        except ValueError:
            pass  # JSON Lines under another name
    if lines is None:
        lines, unit = [], "lines"
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                lines.append((f"{file}, line {number}", number, json.loads(line)))
            except ValueError as exc:
                raise ValueError(f"{OPTION}: {file}, line {number} is not JSON: {exc}") from None
    seen: dict[str, int] = {}  # custom_id -> where it was first read: a repeat would count a question twice
    for position, (place, number, record) in enumerate(lines):
        kind = _record_kind(record)
        if kind == "batch":
            ident = str(record["custom_id"])
            if ident in seen:
                raise ValueError(
                    f"{OPTION}: {file}: custom_id {ident!r} appears twice ({unit} {seen[ident]} and {number})"
                )
            seen[ident] = number
            yield place, ident, _batch_body(record, place)
        elif kind == "response":
            yield place, str(position), record
        else:
            raise ValueError(
                f"{OPTION}: {place}: neither a chat or legacy completion (object, choices) nor a Batch API line "
                "(custom_id, response)"
            )


def _batch_body(record: dict, place: str) -> dict:
    """Return a Batch API line's response body, refusing a request that failed."""
    error = record.get("error")
    response = record.get("response")
    if error:
        raise ValueError(f"{OPTION}: {place}: error: {_message(error)} (custom_id {record['custom_id']!r})")
    body = response.get("body") if isinstance(response, dict) else None
    if not isinstance(body, dict):
        raise ValueError(f"{OPTION}: {place}: response.body: missing (custom_id {record['custom_id']!r})")
    if body.get("error") or response.get("status_code", 200) != 200:
        raise ValueError(
            f"{OPTION}: {place}: response.body.error (status {response.get('status_code')}): "
            f"{_message(body.get('error'))} (custom_id {record['custom_id']!r})"
        )
    return body


def _message(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error.get("code") or error)
    return str(error)


def _choice(choice: Any, kind: Any, request: dict | None, at: str) -> tuple[list[dict], str]:
    """Return one choice's tokens in the chat shape and its answer text."""
    if not isinstance(choice, dict):
        raise ValueError(f"{OPTION}: {at}: expected an object")
    logprobs = choice.get("logprobs")
    chat = kind == "chat.completion" or "message" in choice
    field = "logprobs.content" if chat else "logprobs"
    if logprobs is None or (chat and logprobs.get("content") is None):
        ask = "logprobs=true, top_logprobs=k" if chat else "logprobs=k"
        raise ValueError(f"{OPTION}: {at}.{field}: null: no log-probabilities were requested (ask {ask})")
    if chat:
        message = choice.get("message") or {}
        return list(logprobs["content"]), str(message.get("content") or "")
    return _legacy(logprobs, str(choice.get("text") or ""), _prompt(request, legacy=True), at)


def _legacy(logprobs: dict, text: str, prompt: str | None, at: str) -> tuple[list[dict], str]:
    """Return a legacy completion's tokens in the chat shape, the echoed prompt's tokens dropped."""
    tokens, values = logprobs.get("tokens"), logprobs.get("token_logprobs")
    top, offsets = logprobs.get("top_logprobs"), logprobs.get("text_offset")
    if not isinstance(tokens, list) or not isinstance(values, list):
        raise ValueError(f"{OPTION}: {at}.logprobs.tokens: missing: no log-probabilities were requested (logprobs=k)")
    for name, column in (("token_logprobs", values), ("top_logprobs", top), ("text_offset", offsets)):
        if column is not None and len(column) != len(tokens):
            raise ValueError(
                f"{OPTION}: {at}.logprobs.{name}: {len(column)} entries for {len(tokens)} tokens (a length mismatch)"
            )
    start = 0
    if values and values[0] is None:  # echo: the prompt's tokens come first, the first without a value
        if prompt is None or offsets is None or not text.startswith(prompt):
            raise ValueError(
                f"{OPTION}: {at}.logprobs.token_logprobs[0]: null (echo): the prompt's tokens cannot be told from "
                "the answer's without the request's prompt (give the batch input file, or ask without echo)"
            )
        start = int(np.searchsorted(np.asarray(offsets), len(prompt)))
        text = text[len(prompt) :]
    nulls = [j for j in range(start, len(values)) if values[j] is None]
    if nulls:
        raise ValueError(f"{OPTION}: {at}.logprobs.token_logprobs[{nulls[0]}]: null")
    content = [
        {
            "token": tokens[j],
            "logprob": values[j],
            "top_logprobs": [{"token": t, "logprob": v} for t, v in (top[j] or {}).items()] if top else [],
        }
        for j in range(start, len(tokens))
    ]
    return content, text


def _check_asked(content: list, asked: int, at: str) -> None:
    """Refuse a token with fewer alternatives than requested (the request's own number)."""
    for j, token in enumerate(content):
        found = token.get("top_logprobs") if isinstance(token, dict) else None
        if len(found or ()) < asked:
            raise ValueError(
                f"{OPTION}: {at}.logprobs.content[{j}].top_logprobs: {len(found or ())} alternatives, fewer than "
                f"the top_logprobs={asked} asked"
            )


def _read_batch_input(file: Path) -> dict[str, dict]:
    """Return the Batch API input's request bodies by ``custom_id``, checked: log-probabilities asked."""
    if not file.is_file():
        raise ValueError(f"`batch_input`: no such file: {file}")
    requests, first = {}, {}
    with open(file, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                ident, body = str(record["custom_id"]), record["body"]
            except (ValueError, KeyError, TypeError):
                raise ValueError(
                    f"`batch_input`: {file}, line {number}: not a Batch API request (custom_id, body)"
                ) from None
            if ident in requests:
                raise ValueError(
                    f"`batch_input`: {file}: custom_id {ident!r} appears twice (lines {first[ident]} and {number})"
                )
            first[ident] = number
            chat = "messages" in body
            if (chat and not body.get("logprobs")) or (not chat and body.get("logprobs") is None):
                raise ValueError(
                    f"`batch_input`: {file}, line {number}: body.logprobs: no log-probabilities were requested "
                    f"(custom_id {ident!r})"
                )
            requests[ident] = body
    return requests


def _requested(request: dict | None) -> int | None:
    """Return the number of alternatives a request asked for (chat ``top_logprobs``, legacy ``logprobs``)."""
    if request is None:
        return None
    value = request.get("top_logprobs") if "messages" in request else request.get("logprobs")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _prompt(request: dict | None, legacy: bool = False) -> str | None:
    """Return a request's prompt: the legacy ``prompt``, or the chat's last user message."""
    if request is None:
        return None
    if "prompt" in request:
        prompt = request["prompt"]
        return (
            prompt[0] if isinstance(prompt, list) and len(prompt) == 1 else prompt if isinstance(prompt, str) else None
        )
    if legacy:
        return None
    users = [m for m in request.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    if isinstance(content, list):  # content parts: the text ones
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else None


def _read_gold(gold: Any) -> tuple[dict[str, Any], str, str]:
    """Return the gold by id, its column (``gold`` or ``correct``, or ``mixed`` for a mapping) and its name."""
    if isinstance(gold, Mapping):
        by_id = {str(k): v for k, v in gold.items()}
        if len(by_id) < len(gold):  # 1 and "1": one id
            keys = [k for k in gold if [str(o) for o in gold].count(str(k)) > 1]
            raise ValueError(f"`gold`: the id {str(keys[0])!r} appears twice (as {keys[0]!r} and {keys[1]!r})")
        return by_id, "mixed", "gold"
    path = Path(gold)
    if not path.is_file():
        raise ValueError(f"`gold`: no such file: {gold}")
    table = read_table(path, option="`gold`")
    column = "gold" if "gold" in table.column_names else "correct" if "correct" in table.column_names else None
    if "id" not in table.column_names or column is None:
        raise ValueError(
            f"`gold`: {path} needs an id column and a gold or correct column (columns: {table.column_names})"
        )
    ids = [str(i) for i in table.column("id").to_pylist()]
    by_id = dict(zip(ids, table.column(column).to_pylist()))
    if len(by_id) < len(ids):  # the last line would win: the correctness would depend on the order
        first: dict[str, int] = {}
        for row, ident in enumerate(ids):
            if ident in first:
                raise ValueError(
                    f"`gold`: {path}: id {ident!r} appears twice ({_rows(path, first[ident], row, len(ids))})"
                )
            first[ident] = row
    return by_id, column, str(path)


def _rows(path: Path, a: int, b: int, count: int) -> str:
    """Say where rows ``a`` and ``b`` of a table file of ``count`` rows are: lines where each row is one, else rows."""
    if path.suffix.lower() in (".csv", ".jsonl", ".json"):
        with open(path, encoding="utf-8", errors="replace") as handle:
            numbers = [n for n, line in enumerate(handle, start=1) if line.strip()]
        numbers = numbers[1:] if path.suffix.lower() == ".csv" else numbers  # the header
        if len(numbers) == count:  # a row a line (not one JSON document, nor a CSV field over lines)
            return f"lines {numbers[a]} and {numbers[b]}"
    return f"rows {a} and {b}"


def _correctness(gold, ids, answers, chosen, letters, where) -> tuple[np.ndarray, np.ndarray]:
    """Return each answer's correctness and, with letters, the gold letter's index."""
    if gold is None:
        raise ValueError(
            f"{OPTION}: served responses carry no correctness: give the right answers (`gold`: a file with id and "
            "gold or correct columns)"
        )
    table, column, name = _read_gold(gold)
    correct = np.empty(len(ids))
    gold_index = np.full(len(ids), -1, dtype=np.int64)
    for i, ident in enumerate(ids):
        if ident not in table:
            raise ValueError(f"`gold`: {name} has no id {ident!r} ({where[i].rsplit(', choices', 1)[0]})")
        value = table[ident]
        is_score = column == "correct" or (column == "mixed" and isinstance(value, bool | int | float))
        if is_score:
            correct[i] = float(value) if value is not None else np.nan
            if not 0 <= correct[i] <= 1:
                raise ValueError(f"`gold`: {name}, id {ident!r}: correct = {value!r} is neither 0/1 nor in [0, 1]")
        elif letters is not None:
            gold_index[i] = _gold_letter(value, letters, name, ident)
            correct[i] = float(chosen[i] == gold_index[i])
        else:
            correct[i] = float(_plain(answers[i]) == _plain(str(value)))
    return correct, gold_index


def _gold_letter(value: Any, letters: str, name: str, ident: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(letters):
        return value
    index = letter_of(str(value), letters)
    if index < 0:
        raise ValueError(f"`gold`: {name}, id {ident!r}: gold = {value!r} is none of the letters {letters!r}")
    return index


def _plain(text: str) -> str:
    """Return an answer for comparison: case folded, white space collapsed, outer punctuation stripped."""
    return " ".join(text.casefold().split()).strip(LETTER_STRIP + "\"'!?;")
