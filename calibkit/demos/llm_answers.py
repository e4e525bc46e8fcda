"""The answers part of ``calibkit demo --task llm``: a small LM's answers to real questions, two ways.

BIG-bench's ``general_knowledge`` task (pip ``bigbench``: 70 questions with 2 to 6 choices each,
"How many legs do horses have?") is put to the model after three worked examples
(:data:`SHOTS`), and read two ways:

1. **multiple choice**: each choice's log-likelihood after the prompt, the softmax over a
   question's choices its confidence (:mod:`calibkit.lm.multiple_choice`), temperature scaling
   over the choices judged over re-splits;
2. **free text**: the model's greedy answer (its first line, at most 8 tokens), right when it
   holds the gold choice as a whole word (case-insensitive), and its confidence from the
   white-box sources (sequence probability, its geometric mean, P(True);
   :mod:`calibkit.lm.generations`), each judged and recalibrated over re-splits.

A task where the model is at chance is said to be so: its calibration numbers are then about
scores that carry no information, and a fitted temperature only flattens them.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

SHOTS = (
    "Q: What colour is the sky on a clear day?\nA: blue\n\n"
    "Q: How many wheels does a bicycle have?\nA: two\n\n"
    "Q: What do bees make?\nA: honey\n\n"
)
"""The worked examples before each question (none of them is in the task)."""

TASK = "general_knowledge"
MAX_NEW_TOKENS = 8


def load_questions() -> list[dict[str, Any]]:
    """Read BIG-bench's ``general_knowledge`` examples from the installed ``bigbench`` package.

    Returns
    -------
    list of dict
        ``input`` (the question) and ``target_scores`` (choice -> 1 for the right one, else 0).

    Raises
    ------
    ValueError
        When ``bigbench`` is not installed, with the command that installs its data alone.
    """
    spec = importlib.util.find_spec("bigbench")
    if spec is None or spec.origin is None:
        raise ValueError(
            "the llm demo's answers need BIG-bench's questions: pip install --no-deps bigbench "
            "(its own dependencies include TensorFlow, which calibkit does not use)"
        )
    path = Path(spec.origin).parent / "benchmark_tasks" / TASK / "task.json"
    return json.loads(path.read_text(encoding="utf-8"))["examples"]


def _prompt(question: str) -> str:
    return f"{SHOTS}Q: {question}\nA:"


def generate(model: Any, tokenizer: Any, prompts: list[str]) -> list[str]:
    """Return the model's greedy continuation of each prompt, up to its first line break.

    Parameters
    ----------
    model : transformers.PreTrainedModel
    tokenizer : transformers.PreTrainedTokenizerBase
    prompts : list of str

    Returns
    -------
    list of str
        The continuations, as decoded (a leading space kept: it is the first token's).
    """
    import torch

    out = []
    for prompt in prompts:  # one question at a time: no padding to get wrong in a left-to-right model
        ids = tokenizer(prompt, return_tensors="pt").to(model.device)
        with torch.inference_mode():
            tokens = model.generate(**ids, max_new_tokens=MAX_NEW_TOKENS, do_sample=False, pad_token_id=0)
        text = tokenizer.decode(tokens[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
        out.append(text.split("\n")[0])
    return out


def is_right(answer: str, gold: str) -> bool:
    """Tell whether an answer holds the gold answer as a whole word, ignoring case.

    Parameters
    ----------
    answer, gold : str

    Returns
    -------
    bool

    Examples
    --------
    >>> is_right(" Four legs", "four"), is_right(" fourteen", "four")
    (True, False)
    """
    return re.search(rf"\b{re.escape(gold.lower())}\b", answer.lower()) is not None


def choice_data(model: Any, tokenizer: Any, examples: list[dict[str, Any]]) -> Any:
    """Score every choice of every question by its log-likelihood after the prompt (``" " + choice``).

    Parameters
    ----------
    model, tokenizer
        A causal LM and its tokenizer.
    examples : list of dict
        From :func:`load_questions`.

    Returns
    -------
    calibkit.lm.multiple_choice.ChoiceData
    """
    from calibkit.lm.generations.whitebox import answer_logprobs
    from calibkit.lm.multiple_choice import ChoiceData

    choices = [list(e["target_scores"]) for e in examples]
    prompts = [_prompt(e["input"]) for e, cs in zip(examples, choices) for _ in cs]
    sums, _ = answer_logprobs(model, tokenizer, prompts, [" " + c for cs in choices for c in cs])
    width = max(len(cs) for cs in choices)
    loglik = np.full((len(examples), width), np.nan)
    chars = np.full_like(loglik, np.nan)
    where = np.repeat(np.arange(len(examples)), [len(cs) for cs in choices])
    column = np.concatenate([np.arange(len(cs)) for cs in choices])
    loglik[where, column] = sums
    chars[where, column] = [len(c) for cs in choices for c in cs]
    gold = np.array([list(e["target_scores"].values()).index(1) for e in examples])
    n = len(examples)
    return ChoiceData(
        np.array([TASK] * n, dtype=object), np.arange(n).astype(object), loglik, gold, chars,
        chars.copy(), np.array(["bigbench"] * n, dtype=object),
    )  # fmt: skip


def answers_section(
    model: Any, tokenizer: Any, *, resplits: int, seed: int, examples: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Put the questions to the model both ways and judge its confidence.

    Parameters
    ----------
    model, tokenizer
        A causal LM and its tokenizer.
    resplits : int
        Re-splits of the questions for temperature scaling and the recalibrations.
    seed : int
    examples : list of dict, optional
        Questions as BIG-bench writes them (``input``, ``target_scores``); default: the
        ``general_knowledge`` task (:func:`load_questions`).

    Returns
    -------
    dict
        ``text`` (Markdown), ``json`` (the numbers) and ``verdicts`` (``(verdict, sentence)``).
    """
    from calibkit.lm.generations import Generations, generations_report, recalibration_resplits
    from calibkit.lm.generations.whitebox import answer_logprobs, p_true
    from calibkit.lm.multiple_choice import at_chance, choice_temperature_scaling, multiple_choice_report
    from calibkit.metrics.registry import CONFIDENCE_METRICS

    examples = load_questions() if examples is None else examples
    n = len(examples)
    print(f"  {n} BIG-bench {TASK} questions: scoring their choices, then generating answers", flush=True)
    choices = choice_data(model, tokenizer, examples)
    mc = multiple_choice_report(choices)["pooled"]
    chance = float(np.mean(1.0 / choices.n_choices))
    ts = choice_temperature_scaling(choices, resplits=resplits, seed=seed)["tasks"][TASK]
    prompts = [_prompt(e["input"]) for e in examples]
    answers = generate(model, tokenizer, prompts)
    gold = [next(c for c, v in e["target_scores"].items() if v == 1) for e in examples]
    right = np.array([is_right(a, g) for a, g in zip(answers, gold)], dtype=np.float64)
    said = np.array([bool(a.strip()) for a in answers])  # an empty answer is wrong, and has no confidence
    kept = np.flatnonzero(said)
    sources = {name: np.full(n, np.nan) for name in ("sequence", "sequence_normalized", "ptrue")}
    if kept.size:
        sums, counts = answer_logprobs(model, tokenizer, [prompts[i] for i in kept], [answers[i] for i in kept])
        sources["sequence"][kept], sources["sequence_normalized"][kept] = np.exp(sums), np.exp(sums / counts)
        questions = [examples[i]["input"] for i in kept]
        sources["ptrue"][kept] = p_true(model, tokenizer, questions, [answers[i].strip() for i in kept])
    data = Generations(
        np.array([TASK] * n, dtype=object), np.arange(n).astype(str).astype(object), answers, right, sources,
        {name: name for name in sources}, prompts, [f"{TASK} question {i}" for i in range(n)],
    )  # fmt: skip
    report = generations_report(data)
    recal = recalibration_resplits(data, resplits=resplits, seed=seed)
    verdicts = []
    if at_chance(mc["accuracy"], chance, n):
        verdicts.append(("inconclusive", f"multiple choice: accuracy {mc['accuracy']:.2f} is at chance ({chance:.2f}): "
                         "the scores carry no information, and calibrating them only flattens them"))  # fmt: skip
    for metric in ("ece", "nll"):
        row = ts.get(metric, {})
        if row.get("verdict"):
            share = f"lower in {row['paired']['better']:.0%} of {row['paired']['n']} re-splits"
            verdicts.append((row["verdict"], f"multiple choice: TS over the choices lowers {metric.upper()}: "
                             f"{row['verdict']} ({share})"))  # fmt: skip
    for v in recal["verdicts"]:
        share = "" if math.isnan(v["better"]) else f" (lower in {v['better']:.0%}, higher in {v['worse']:.0%})"
        verdicts.append((v["verdict"], f"free text: {v['claim']}: {v['verdict']}{share}"))
    lines = [
        f"SmolLM2 answered {n} BIG-bench {TASK} questions ({SHOTS.count('Q:')} worked examples before each).",
        "",
        f"Multiple choice (softmax over each question's choices of their log-likelihoods): accuracy "
        f"{mc['accuracy']:.3f} (chance {chance:.3f}), ECE {_number(mc['ece'])}, NLL {_number(mc['nll'])}; temperature "
        f"scaling over the choices fitted on the whole task: T = {_number(ts.get('temperature'))}.",
        "",
        f"Free text (greedy, first line; right when it holds the gold answer): accuracy {right.mean():.3f}.",
        "",
        "| source | answers | mean confidence | ece | brier | nll | aurc |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in report["pooled"]["sources"].items():
        cells = [row["mean_confidence"], row["ece"], row["brier"], row["nll"], row["aurc"]]
        lines.append(f"| {name} | {row['answers']} | " + " | ".join(_number(c) for c in cells) + " |")
    out = {
        "questions": n, "chance": chance, "multiple_choice": {k: mc[k] for k in ("accuracy", *CONFIDENCE_METRICS)},
        "multiple_choice_at_chance": at_chance(mc["accuracy"], chance, n), "ts_over_choices": ts,
        "free_text": {"accuracy": float(right.mean()), "answers": answers, "report": report,
                      "verdicts": recal["verdicts"]},
    }  # fmt: skip
    return {"text": "\n".join(lines), "json": out, "verdicts": verdicts}


def _number(value: Any) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4g}"
