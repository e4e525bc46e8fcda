"""Read Inspect AI logs (``.eval`` and ``.json``): answers, their scores, and confidence from the logged tokens.

An Inspect task run with ``GenerateConfig(logprobs=True, top_logprobs=k)`` logs, for each sample,
the answer's tokens with their log-probabilities and top-k alternatives
(``samples[i].output.choices[0].logprobs.content[j]``: ``token``, ``logprob``, ``top_logprobs``),
in the shape of OpenAI's chat completions. Each sample becomes one answer of
:class:`~calibkit.lm.generations.Generations`:

- the answer: the scorer's ``answer`` for a multiple-choice sample (the letter the ``choice``
  scorer read), the completion otherwise;
- whether it is right: the sample's score value as Inspect maps it to a number
  (``value_to_float``: ``C`` 1, ``I`` 0, ``P`` 0.5, ``N`` 0, numbers as they are);
- confidence sources computed by :func:`calibkit.lm.served.logprob_sources` on the answer's
  tokens: ``sequence``, ``sequence_normalized`` and ``least_token``, and for a multiple-choice
  sample ``letter`` (spelled ``letters`` before): the probability of the chosen letter in the
  distribution over the choice letters found in ``top_logprobs`` at the letter's position (the
  last token of the answer that spells the scored letter); :mod:`calibkit.lm.sources` describes
  every source.

The answer's tokens are those whose text makes the completion: tokens past it (the end-of-text
token, and in a batch the positions generated after a row had finished) are not the answer's. A
log whose tokens do not spell its completion is refused: Inspect's ``hf`` provider samples by
default and logs the most likely token at each step, not the sampled one, so its
log-probabilities are those of another answer (rerun with ``-M do_sample=False``). Tokens are
read as text, as GPT-2's byte-level alphabet (``"Ġcat"``, the ``hf`` provider's form) or as
SentencePiece pieces (``"▁cat"``, ``<0x0A>``), whichever spells the completion.
"""

from __future__ import annotations

import glob
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.lm.generations.data import Generations, concat
from calibkit.lm.served import letter_of, logprob_sources
from calibkit.lm.sources import LETTER, TOKENS, source_kind

__all__ = [
    "BYTE_LEVEL",
    "FIX",
    "SHUFFLED",
    "LETTERS",
    "SOURCES",
    "answer_tokens",
    "choice_letters",
    "letter_token",
    "output_sources",
    "read_inspect_logs",
    "score_value",
]

SOURCES = TOKENS
"""The sources of every answer with logged log-probabilities, in the order of every output."""

LETTERS = LETTER
"""The source of a multiple-choice answer: its letter's probability among the choice letters
(:data:`calibkit.lm.sources.LETTER`, ``letter``; spelled ``letters`` before the registry, still read with a warning)."""

FIX = (
    "Inspect's hf provider samples by default (do_sample=True) and logs the most likely token at each step, "
    "not the sampled one; rerun with -M do_sample=False (model_args=dict(do_sample=False))"
)
"""How to get a log whose tokens are the answer's: said by every refusal of a mismatched log."""

SHUFFLED = (
    "the choices were shuffled, and Inspect's multiple_choice(shuffle=True) replaces the model's completion with "
    "'ANSWER: <the letter in the original order>', so the logged tokens cannot be checked against the answer; "
    "run the task without shuffle to read its confidence"
)
"""Why a sample of shuffled choices is refused."""


def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-to-unicode table, inverted: the character a byte-level BPE token shows for each byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


BYTE_LEVEL = _byte_level_alphabet()
_PIECE_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _as_text(token: Any) -> bytes | None:
    """Read the token as text; its ``bytes`` field when that holds real bytes (a character split across tokens)."""
    raw = getattr(token, "bytes", None)
    if raw and all(isinstance(b, int) and 0 <= b < 256 for b in raw):
        return bytes(raw)
    return token.token.encode("utf-8")


def _as_byte_level(token: Any) -> bytes | None:
    """Read the token in GPT-2's byte-level alphabet (``"Ġcat"`` is ``b" cat"``), None if it is not one."""
    try:
        return bytes(BYTE_LEVEL[c] for c in token.token)
    except KeyError:
        return None


def _as_pieces(token: Any) -> bytes | None:
    """Read the token as a SentencePiece piece (``"▁cat"`` is ``b" cat"``, ``"<0x0A>"`` a byte)."""
    found = _PIECE_BYTE.fullmatch(token.token)
    return bytes([int(found.group(1), 16)]) if found else token.token.replace("\u2581", " ").encode("utf-8")


DECODERS = (_as_text, _as_byte_level, _as_pieces)


def _answer_length(pieces: list[bytes | None], text: bytes) -> int | None:
    """Count the leading tokens that spell ``text`` (exactly, else up to leading white space), or None."""
    if any(p is None for p in pieces):
        return None
    whole = b"".join(pieces)  # type: ignore[arg-type]
    ends = np.cumsum([len(p) for p in pieces])  # type: ignore[arg-type]
    for start, target in ((0, text), (len(whole) - len(whole.lstrip()), text.lstrip())):
        if whole[start:].startswith(target):
            end = start + len(target)
            if end == 0:
                return 0
            hit = np.flatnonzero(ends == end)
            if hit.size:
                return int(hit[0]) + 1
    return None


def answer_tokens(content: list[Any], completion: str, where: str) -> list[dict[str, Any]]:
    """Return the answer's own tokens, as text, in OpenAI's chat shape.

    Parameters
    ----------
    content : list of Inspect ``Logprob``
        ``output.choices[0].logprobs.content``.
    completion : str
        The answer's text (``output.completion``).
    where : str
        The sample's location, for the error message.

    Returns
    -------
    list of dict
        ``{"token", "logprob", "top_logprobs": [{"token", "logprob"}, ...]}`` for the tokens that
        spell the completion, each token's text decoded.

    Raises
    ------
    ValueError
        When no leading run of the tokens spells the completion: the log-probabilities are
        another answer's (the ``hf`` provider's sampling, see ``FIX``).
    """
    text = completion.encode("utf-8")
    for decode in DECODERS:
        n = _answer_length([decode(t) for t in content], text)
        if n is None:
            continue

        def word(token: Any, decode: Any = decode) -> str:
            return decode(token).decode("utf-8", errors="replace")

        return [
            {
                "token": word(t),
                "logprob": t.logprob,
                "top_logprobs": [{"token": word(a), "logprob": a.logprob} for a in (t.top_logprobs or [])],
            }
            for t in content[:n]
        ]
    spelled = b"".join(_as_byte_level(t) or _as_text(t) for t in content).decode("utf-8", errors="replace")  # type: ignore[misc]
    raise ValueError(
        f"{where}: the logged tokens spell {spelled[:80]!r} but the answer is {completion[:80]!r}: the "
        f"log-probabilities are not the answer's. {FIX}"
    )


def choice_letters(n: int) -> str:
    """Return the letters of ``n`` choices as Inspect writes them (``A``, ``B``, ...).

    Parameters
    ----------
    n : int
        The number of choices, 1 to 26.

    Returns
    -------
    str
        ``"ABCD"`` for 4.
    """
    if not 1 <= n <= 26:
        raise ValueError(f"a multiple-choice sample has {n} choices; calibkit reads 1 to 26 (letters A-Z)")
    return "".join(chr(ord("A") + i) for i in range(n))


def letter_token(tokens: list[dict[str, Any]], answer: str | None, letters: str) -> int:
    """Return the index of the answer's letter token: the last token that spells the scored letter, -1 if none.

    Parameters
    ----------
    tokens : list of dict
        From :func:`answer_tokens`.
    answer : str or None
        The scorer's answer (``"B"``); anything but one of ``letters`` gives -1.
    letters : str

    Returns
    -------
    int
    """
    answer = (answer or "").strip()
    if len(answer) != 1 or answer not in letters:
        return -1
    hits = [j for j, t in enumerate(tokens) if letter_of(t["token"], letters) == letters.index(answer)]
    return hits[-1] if hits else -1


def output_sources(
    tokens: list[list[dict[str, Any]]],
    answers: list[str | None],
    n_choices: list[int],
    where: list[str],
    *,
    top_logprobs: int | None = None,
) -> dict[str, np.ndarray]:
    """Compute the confidence sources of answers from their own tokens.

    Parameters
    ----------
    tokens : list of lists of dict
        Each answer's tokens (:func:`answer_tokens`).
    answers : list of str or None
        The scorer's answer of each (the letter, for a multiple-choice sample).
    n_choices : list of int
        The number of choices of each sample, 0 for a generation.
    where : list of str
        Each sample's location, for error messages.
    top_logprobs : int, optional
        The alternatives asked per token: a token with fewer is refused.

    Returns
    -------
    dict of str to ndarray
        ``sequence``, ``sequence_normalized``, ``least_token`` (shape (N,)); with a
        multiple-choice sample, ``letter`` (the chosen letter's probability among the letters;
        NaN for a generation, or where no token spells the scored letter), and the letter
        position's ``outside_mass`` and ``absent_bound`` and the ``confidence_shift`` that
        ``calibkit.lm.served.LogprobSources.ece_bound`` averages (NaN likewise).
    """
    every = logprob_sources(tokens, top_logprobs=top_logprobs, where=where)
    out = {name: getattr(every, name) for name in SOURCES}
    if not any(n_choices):
        return out
    n = len(tokens)
    extra = {k: np.full(n, np.nan) for k in (LETTERS, "outside_mass", "absent_bound", "confidence_shift")}
    for count in sorted(set(n_choices) - {0}):  # one call per number of choices: the letters differ
        letters = choice_letters(count)
        rows = [i for i in range(n) if n_choices[i] == count]
        at = [letter_token(tokens[i], answers[i], letters) for i in rows]
        found = [(i, j) for i, j in zip(rows, at) if j >= 0]
        if not found:
            continue
        # the letter token alone: logprob_sources reads the letters at the first token spelling one
        part = logprob_sources(
            [tokens[i][j : j + 1] for i, j in found], letters=letters, top_logprobs=top_logprobs,
            where=[f"{where[i]}, token {j}" for i, j in found],
        )  # fmt: skip
        index = np.array([i for i, _ in found])
        chosen = np.array([letters.index(str(answers[i]).strip()) for i, _ in found])
        extra[LETTERS][index] = part.letters[np.arange(len(found)), chosen]  # type: ignore[index]
        for key in ("outside_mass", "absent_bound", "confidence_shift"):
            extra[key][index] = getattr(part, key)
    return {**out, **extra}


def score_value(score: Any, where: str) -> float:
    """Return a sample's score as a number, mapped as Inspect maps it (``value_to_float``), in [0, 1].

    Parameters
    ----------
    score : inspect_ai.scorer.Score
    where : str

    Returns
    -------
    float

    Raises
    ------
    ValueError
        When the value is a list or a dict, or its number is outside [0, 1].
    """
    from inspect_ai.scorer import value_to_float

    value = score.value
    if isinstance(value, list | dict):
        raise ValueError(f"{where}: the score value {value!r} is not one number; name a scorer with one value")
    number = float(value_to_float()(value))
    if not 0 <= number <= 1:
        raise ValueError(f"{where}: the score value {value!r} is {number:g}, neither C/I nor a number in [0, 1]")
    return number


def _log_files(location: str | Path) -> list[Path]:
    path = Path(location)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and _looks_like_a_log(p))
    elif glob.has_magic(str(location)):
        files = sorted(Path(p) for p in glob.glob(str(location), recursive=True) if _looks_like_a_log(Path(p)))
    elif path.is_file():
        files = [path]
    else:
        raise ValueError(f"`location`: no such file or folder: {location}")
    if not files:
        raise ValueError(f"`location`: no Inspect log (.eval or .json) in {location}")
    return files


def _looks_like_a_log(file: Path) -> bool:
    """Tell an Inspect log in a folder: a ``.eval`` file, or a ``.json`` one opening with version, status, eval."""
    if file.suffix == ".eval":
        return True
    if file.suffix != ".json":
        return False
    with open(file, encoding="utf-8", errors="replace") as handle:
        head = handle.read(1 << 10)
    return head.lstrip().startswith("{") and all(f'"{key}"' in head for key in ("version", "status", "eval"))


def _input_text(sample: Any) -> str:
    if isinstance(sample.input, str):
        return sample.input
    return "\n".join(m.text for m in sample.input)


def _read_one(file: Path, scorer: str | None) -> tuple[Generations, dict[str, np.ndarray]]:
    from inspect_ai.log import read_eval_log

    try:
        log = read_eval_log(str(file), resolve_attachments=True)
    except Exception as exc:  # Inspect raises many kinds; the reader says one line
        raise ValueError(f"`location`: {file} is not an Inspect log ({type(exc).__name__}: {exc})") from None
    samples = log.samples or []
    if not samples:
        raise ValueError(f"{file}: the log has no samples (status {log.status!r})")
    epochs = max(s.epoch for s in samples)
    where = [f"{file}, sample {s.id}" + (f" epoch {s.epoch}" if epochs > 1 else "") for s in samples]
    top = _asked_top(log)
    tokens, answers, correct, choices = [], [], [], []
    for sample, place in zip(samples, where):
        name = _scorer_name(sample, scorer, place)
        score = sample.scores[name]
        choice = sample.output.choices[0] if sample.output.choices else None
        if choice is None or choice.logprobs is None:
            raise ValueError(
                f"{place}: no log-probabilities were logged; run the task with "
                "GenerateConfig(logprobs=True, top_logprobs=5)"
            )
        if (score.explanation or "").startswith("Choices were shuffled"):  # the choice scorer's words
            raise ValueError(f"{place}: {SHUFFLED}")
        tokens.append(answer_tokens(choice.logprobs.content, sample.output.completion, place))
        choices.append(len(sample.choices or []))
        answers.append(score.answer if choices[-1] else sample.output.completion)
        correct.append(score_value(score, place))
    sources = output_sources(tokens, answers, choices, where, top_logprobs=top)
    confidence = {k: sources[k] for k in (*SOURCES, LETTERS) if k in sources}
    ids = [str(s.id) if epochs == 1 else f"{s.id}#{s.epoch}" for s in samples]
    data = Generations(
        np.array([log.eval.task] * len(samples), dtype=object), np.array(ids, dtype=object),
        [a or "" for a in answers], np.array(correct, dtype=np.float64), confidence,
        {k: source_kind(k) for k in confidence}, [_input_text(s) for s in samples], where,
    )  # fmt: skip
    extra = {k: v for k, v in sources.items() if k not in confidence}
    extra["n_tokens"] = np.array([len(t) for t in tokens], dtype=np.int64)
    return data, extra


def _asked_top(log: Any) -> int | None:
    """Return the ``top_logprobs`` the run asked: the eval's model config over the task's (Inspect's order)."""
    for config in (log.eval.model_generate_config, log.plan.config if log.plan else None):
        value = getattr(config, "top_logprobs", None)
        if value is not None:
            return int(value)
    return None


def _scorer_name(sample: Any, scorer: str | None, where: str) -> str:
    names = list(sample.scores or {})
    if not names and sample.error is not None:
        raise ValueError(f"{where}: no score, the sample failed: {sample.error.message}")
    if scorer is None:
        if len(names) != 1:
            raise ValueError(f"{where}: {'no score' if not names else f'the scores {names}'}: name one (`scorer`)")
        return names[0]
    if scorer not in names:
        raise ValueError(f"{where}: no score {scorer!r} (the sample has {names})")
    return scorer


def read_inspect_logs(
    location: str | Path, *, scorer: str | None = None, details: bool = False
) -> Generations | tuple[Generations, dict[str, np.ndarray]]:
    """Read Inspect logs: a ``.eval`` or ``.json`` file, a folder (searched recursively) or a quoted glob.

    Parameters
    ----------
    location : str or Path
    scorer : str, optional
        The score that says whether an answer is right, where a sample has several (default:
        the only one).
    details : bool, default False
        Also return the per-answer details of the multiple-choice letters: ``outside_mass`` (the
        probability the model put on tokens it did not return at the letter's position),
        ``absent_bound`` (the most a letter absent from them can have), ``confidence_shift``,
        and each answer's ``n_tokens``.

    Returns
    -------
    Generations or (Generations, dict of str to ndarray)
        One answer per sample (and epoch: its id is ``id#epoch`` when a task ran several), its
        task the Inspect task's name, its confidence sources ``sequence``,
        ``sequence_normalized``, ``least_token`` and, with multiple-choice samples,
        ``letter``. ``calibkit.lm.generations.generations_report`` judges them.

    Raises
    ------
    ValueError
        One line naming the file and the sample: not an Inspect log, no log-probabilities logged,
        tokens that do not spell the answer (the ``hf`` provider's sampling: rerun with
        ``do_sample=False``), several scores and none named, a score that is not one number in
        [0, 1], fewer ``top_logprobs`` than the run asked, two answers with one id in a task.

    Examples
    --------
    >>> from calibkit.lm.generations import generations_report
    >>> data = read_inspect_logs("logs/")  # doctest: +SKIP
    >>> generations_report(data)["pooled"]["sources"]["letters"]["ece"]  # doctest: +SKIP
    """
    parts = [_read_one(f, scorer) for f in _log_files(location)]
    data = concat([p for p, _ in parts])
    keys = [f"{t}\x1f{i}" for t, i in zip(data.task, data.ids)]
    if len(set(keys)) != len(keys):
        seen: dict[str, int] = {}
        for r, key in enumerate(keys):  # the first repeat, for the message
            if key in seen:
                raise ValueError(
                    f"{data.origin[seen[key]]} and {data.origin[r]}: two answers to one sample of task "
                    f"{data.task[r]!r} (two runs of one task: read them apart)"
                )
            seen[key] = r
    if not details:
        return data
    names = list(dict.fromkeys(k for _, extra in parts for k in extra))
    extra = {k: np.concatenate([e.get(k, np.full(len(p), math.nan)) for p, e in parts]) for k in names}
    return data, extra
