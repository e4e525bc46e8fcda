"""Answers that agree, in ``calibkit demo --task llm``: the confidence left when a model gives only its answers.

lm-evaluation-harness puts each BIG-bench ``general_knowledge`` question to the model
:data:`REPEATS` times with sampling (the demo's ``generate_until`` task with ``repeats`` and
``do_sample`` at temperature :data:`TEMPERATURE`: the model's own distribution, so that the share
of samples agreeing estimates the probability the model puts on that answer's meaning). Its
samples file is read as ``calibkit generations --confidence agreement,semantic_entropy`` reads any
(:func:`calibkit.lm.generations.read_agreement`): the majority answer (answers grouped by
:func:`calibkit.lm.generations.normalize_answer`), right when it holds the gold answer (the task's
metric applied to it), its ``agreement`` and ``semantic_entropy`` confidences, and every consistency
score of the samples (:mod:`calibkit.lm.generations.consistency`: LexSim, NumSemSets, EigV, Deg, Ecc,
KLE; :data:`SIMILARITY` similarity); beside them, on the
same answers, the sequence probability the model gives the majority answer (white-box), so that
the two kinds of confidence are judged on the same questions and the same correctness.

:data:`REPEATS` samples of the first :data:`QUESTIONS` questions are what the 2-core budget allows
(docs/guide/generations/agreement.rst states the run's time and numbers).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.lm.generations.consistency import CONSISTENCY
from calibkit.lm.sources import names

REPEATS = 5
"""Sampled answers a question (``repeats`` of the harness's task)."""

QUESTIONS = 40
"""The first questions of the task that are sampled (what the 2-core budget allows with :data:`REPEATS`)."""

TEMPERATURE = 1.0
"""The sampling temperature: the model's own distribution."""

SIMILARITY = "jaccard"
"""The similarity of the graph consistency scores (``read_agreement``'s default: LM-Polygraph's model-free one)."""

COMPARED = names("model", kind="log-probabilities")
"""The white-box sources of the majority answer the agreement is compared with (its log-probabilities': ``sequence``
and ``sequence_normalized``)."""


def sampled_answers(
    model: Any,
    tokenizer: Any,
    examples: list[dict[str, Any]],
    folder: Path,
    *,
    shots: str,
    is_right: Callable[[str, str], bool],
    repeats: int = REPEATS,
    temperature: float = TEMPERATURE,
) -> Any:
    """Sample ``repeats`` answers a question with lm-evaluation-harness and read the log's agreement.

    Parameters
    ----------
    model, tokenizer
        A causal LM and its tokenizer.
    examples : list of dict
        BIG-bench questions (``input``, ``target_scores``).
    folder : Path
        Where the harness task and its output go.
    shots : str
        The worked examples before each question.
    is_right : callable
        ``is_right(answer, gold) -> bool``: the task's metric (``holds_gold``), applied to the
        majority answer.
    repeats : int, default :data:`REPEATS`
    temperature : float, default :data:`TEMPERATURE`

    Returns
    -------
    calibkit.lm.generations.Generations
        One row a question (in the questions' order): the majority answer, its correctness, and
        the sources ``agreement``, ``semantic_entropy``, ``sequence`` and ``sequence_normalized``
        (NaN where the majority answer is empty: the model stopped at once).
    """
    from calibkit.demos.llm_harness import run_generate_until, write_task
    from calibkit.lm.generations import read_agreement
    from calibkit.lm.generations.whitebox import whitebox_confidence

    golds = [next(c for c, v in e["target_scores"].items() if v == 1) for e in examples]
    tasks = write_task(folder, [e["input"] for e in examples], golds, shots, repeats=repeats, temperature=temperature)
    out = run_generate_until(model, tokenizer, tasks, folder / "output")
    data = read_agreement(out, score=lambda answer, gold: float(is_right(answer, str(gold))), similarity=SIMILARITY)
    data = data.subset(np.argsort(data.ids.astype(int)))  # the questions' order, for the re-splits' seeds
    said = np.flatnonzero([bool(a.strip()) for a in data.answers])  # an empty majority has no sequence probability
    computed = whitebox_confidence(
        model, tokenizer, [data.questions[i] for i in said], [data.answers[i] for i in said], COMPARED
    )
    for name, values in computed.items():
        column = np.full(len(data), np.nan)
        column[said] = values
        data = data.with_source(name, column)
    return data


def agreement_section(
    model: Any,
    tokenizer: Any,
    *,
    examples: list[dict[str, Any]],
    shots: str,
    is_right: Callable[[str, str], bool],
    resplits: int,
    seed: int,
    folder: Path,
    repeats: int = REPEATS,
    temperature: float = TEMPERATURE,
    questions: int = QUESTIONS,
) -> dict[str, Any]:
    """Judge the agreement of sampled answers against the majority answer's sequence probability.

    Parameters
    ----------
    model, tokenizer, examples, shots, is_right, folder, repeats, temperature
        As :func:`sampled_answers`.
    resplits : int
        Halvings of the questions: each source (and its recalibrations) judged on held-out halves.
    seed : int
    questions : int, default :data:`QUESTIONS`
        The first questions of ``examples`` that are sampled.

    Returns
    -------
    dict
        ``text`` (Markdown), ``json`` (the numbers; ``best_ranking``: the source of the samples of
        lowest AURC) and ``verdicts`` (``(verdict, sentence)``): on held-out halves, each source of
        the samples against each sequence probability on AURC (and, for ``agreement`` and
        ``semantic_entropy``, on ECE, with their recalibrations against them raw).
    """
    from calibkit.demos.llm_text import source_table
    from calibkit.lm.generations import AGREEMENT_SOURCES, generations_report, recalibration_resplits
    from calibkit.verdicts.claims import verdict_from_shares

    total, examples = len(examples), examples[:questions]
    n = len(examples)
    print(f"  lm-evaluation-harness samples {repeats} answers to each of the {n} questions", flush=True)
    start = time.perf_counter()
    data = sampled_answers(
        model, tokenizer, examples, folder, shots=shots, is_right=is_right, repeats=repeats, temperature=temperature
    )
    seconds = time.perf_counter() - start
    report = generations_report(data)
    recal = recalibration_resplits(data, resplits=resplits, seed=seed)
    raw = {s: v["raw"] for s, v in recal["values"].items()}
    verdicts, claims = [], []
    for mine in AGREEMENT_SOURCES:
        for other in COMPARED:
            for metric, what in _judged_on(mine):
                a, b = raw[mine][metric], raw[other][metric]
                both = ~np.isnan(a) & ~np.isnan(b)
                better = float(np.mean(a[both] < b[both])) if both.any() else math.nan
                worse = float(np.mean(a[both] > b[both])) if both.any() else math.nan
                verdict = verdict_from_shares(better, worse)
                claim = f"{mine} {what} than {other} ({metric.upper()} on held-out halves)"
                claims.append({"claim": claim, "verdict": verdict, "better": better, "worse": worse})
                verdicts.append((verdict, f"sampled answers: {claim}: {verdict}{_shares(better, worse)}"))
    for v in recal["verdicts"]:
        named = v["claim"].split(" ")[-1]
        if named in AGREEMENT_SOURCES and named not in CONSISTENCY:  # a recalibration of a count's source
            verdicts.append((v["verdict"], f"sampled answers: {v['claim']}: {v['verdict']}"
                                           f"{_shares(v['better'], v['worse'])}"))  # fmt: skip
    ranked = {s: row["aurc"] for s, row in report["pooled"]["sources"].items() if s in AGREEMENT_SOURCES}
    best = min((s for s in ranked if ranked[s] is not None), key=ranked.get, default=None)
    unanimous = float(np.mean(data.confidence["agreement"] == 1.0))
    lines = [
        f"Sampled answers (lm-evaluation-harness, repeats {repeats}, do_sample at temperature {temperature:g}; "
        f"{seconds:.0f} s): the majority answer to the first {n} of the {total} questions, grouped by "
        f"normalisation, right when it holds the gold answer: accuracy {data.correct.mean():.3f}; all {repeats} "
        f"samples agree on {unanimous:.0%} of the questions. Its agreement and exp(-semantic entropy), and the "
        f"samples' consistency scores ({', '.join(CONSISTENCY)}; {SIMILARITY} similarity for the graph's), beside "
        "the sequence probability of the same answer. Of the sources of the samples, "
        f"{best} ranks the answers best (lowest AURC), on this one small model:",
        "",
        *source_table(report, answers=False),
    ]
    out = {
        "questions": n, "repeats": repeats, "temperature": temperature, "seconds": seconds,
        "accuracy": float(data.correct.mean()), "unanimous": unanimous, "answers": list(data.answers),
        "report": report, "claims": claims, "best_ranking": best, "similarity": SIMILARITY,
        "recalibration_verdicts": recal["verdicts"],
        "harness_samples": str(folder / "output"),
    }  # fmt: skip
    return {"text": "\n".join(lines), "json": out, "verdicts": verdicts}


def _judged_on(source: str) -> tuple[tuple[str, str], ...]:
    """Return what a source of the samples is judged on against the sequence probability: AURC, and ECE for the counts'.

    The consistency scores are monotone maps of LM-Polygraph's uncertainties, not probabilities: they are
    judged on how they rank answers (the field's measure); the counts' shares on their calibration too.
    """
    ranking = (("aurc", "ranks answers better"),)
    return ranking if source in CONSISTENCY else (*ranking, ("ece", "is better calibrated"))


def _shares(better: float, worse: float) -> str:
    return "" if math.isnan(better) else f" (better in {better:.0%}, worse in {worse:.0%} of the re-splits)"
