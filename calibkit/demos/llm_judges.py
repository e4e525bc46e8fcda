"""A judge checked against people, in ``calibkit demo --task llm``: SmolLM2 grades its own answers through Inspect.

The model answers BIG-bench's ``general_knowledge`` questions in free text (Inspect AI's
``generate`` solver, greedy, on Inspect's ``hf`` provider, offline), and the same model judges
each answer through Inspect's own ``model_graded_qa`` scorer, run over the answers' log with
``inspect_ai.score`` (the judge's prompt: :data:`JUDGE_TEMPLATE`; its grade ``Yes`` or ``No``,
its confidence the grade token's probability, logged with the judge's log-probabilities). The
questions' gold answers stand in for the people: every answer's human label is known (right
when it holds the gold answer, :func:`calibkit.demos.llm_answers.is_right`), so the report shows
the true pass rate beside the judge's naive rate and the rates corrected from a
:data:`SLICE` share of the labels (PPI++, Rogan-Gladen: :func:`calibkit.lm.judges.judge_report`),
and Inspect's own results show the ``ppi`` metric (:func:`calibkit.plugins.inspect_ai.ppi`) on
the same slice.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.demos.llm_text import number

SLICE = 0.1
"""The share of the answers whose (gold) label the corrections are given: the people's slice."""

JUDGE_TEMPLATE = """Question: {question}
Reference answer: {criterion}
Submitted answer: {answer}
{instructions}"""
"""The judge's prompt (``model_graded_qa``'s ``template``): short, for a 135M model."""

JUDGE_INSTRUCTIONS = "Is the submitted answer the same as the reference answer? Answer Yes or No."
"""The judge's instructions; its reply's first ``yes`` or ``no`` is the grade (:data:`GRADE_PATTERN`)."""

GRADE_PATTERN = r"(?i)\b(yes|no)\b"
"""``model_graded_qa``'s ``grade_pattern``: Inspect maps ``yes`` to 1 and ``no`` to 0."""

MAX_TOKENS = 8
"""Tokens generated per answer and per judgement."""


def _inspect_model(model: Any, tokenizer: Any, folder: Path) -> Any:
    """Save the model where Inspect's ``hf`` provider loads it, and return Inspect's model (greedy, with logprobs)."""
    from inspect_ai.model import GenerateConfig, get_model

    path = folder / "model"
    tokenizer.save_pretrained(path)
    source = str(getattr(model, "name_or_path", "") or "")
    gguf = sorted(Path(source).glob("*.gguf")) if source and Path(source).is_dir() else []
    if len(gguf) == 1:  # SmolLM2 as the demo loads it: not serializable, Inspect reads the same GGUF file
        where = {"model_path": source, "gguf_file": gguf[0].name, "tokenizer_path": str(path)}
    else:
        model.save_pretrained(path)
        where = {"model_path": str(path)}
        _own_end_of_text(model, tokenizer, path)
    config = GenerateConfig(logprobs=True, top_logprobs=5, max_tokens=MAX_TOKENS, stop_seqs=["\n"])
    return get_model("hf/local", config=config, do_sample=False, device="cpu", dtype="float32", **where)


def _own_end_of_text(model: Any, tokenizer: Any, path: Path) -> None:
    """Save the tokenizer's end of text as the generation's, where the model's config names an id past its vocabulary.

    A small model built on GPT-2's config keeps GPT-2's end-of-text id (50256): generating a batch, Inspect's ``hf``
    provider pads the rows that finished with it, an index outside a smaller vocabulary.
    """
    import copy

    vocabulary = model.get_input_embeddings().num_embeddings
    generation = getattr(model, "generation_config", None)
    ends = np.atleast_1d(np.asarray(generation.eos_token_id if generation else [], dtype=float))
    if tokenizer.eos_token_id is None or not (ends >= vocabulary).any():
        return
    generation = copy.deepcopy(generation)
    generation.eos_token_id = generation.pad_token_id = generation.bos_token_id = tokenizer.eos_token_id
    generation.save_pretrained(path)


def _slice(n: int, seed: int) -> np.ndarray:
    """Draw the labelled answers: :data:`SLICE` of ``n``, at least 2, with ``seed``."""
    size = min(n, max(2, int(round(SLICE * n))))
    return np.sort(np.random.default_rng(seed).choice(n, size=size, replace=False))


def judged_run(
    model: Any, tokenizer: Any, examples: list[dict[str, Any]], *, shots: str, is_right: Callable[[str, str], bool],
    seed: int, folder: Path,
) -> dict[str, Any]:  # fmt: skip
    """Answer the questions, judge the answers, and read the judged log with the gold labels.

    Parameters
    ----------
    model, tokenizer
        A causal LM and its tokenizer (saved under ``folder`` for Inspect's ``hf`` provider).
    examples : list of dict
        BIG-bench questions (``input``, ``target_scores``).
    shots : str
        The worked examples before each question.
    is_right : callable
        ``is_right(answer, gold)``: the people's label the gold answer stands in for.
    seed : int
        Draws the labelled slice.
    folder : Path
        Where the model, the labels and Inspect's logs go.

    Returns
    -------
    dict
        ``judged`` (:class:`calibkit.lm.judges.Judged`; None when the judge graded no answer),
        ``gold`` (every judged answer's label), ``labels`` (the slice's
        :class:`calibkit.lm.judges.HumanLabels`, of the graded answers), ``log`` (the judged
        log's path), ``inspect_metrics`` (Inspect's results of the judge's scorer),
        ``unscored`` (answers the judge gave no grade), ``seconds``.
    """
    import inspect_ai
    from inspect_ai.dataset import Sample
    from inspect_ai.log import write_eval_log
    from inspect_ai.scorer import accuracy, model_graded_qa, stderr
    from inspect_ai.solver import generate

    from calibkit.lm.judges import HumanLabels, read_inspect_judged, read_labels
    from calibkit.plugins.inspect_ai import ppi

    start = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    grader = _inspect_model(model, tokenizer, folder)
    gold = [next(k for k, v in e["target_scores"].items() if v == 1) for e in examples]
    data = [
        Sample(input=f"{shots}Q: {e['input']}\nA:", target=g, id=f"gk{i:03d}")
        for i, (e, g) in enumerate(zip(examples, gold))
    ]
    task = inspect_ai.Task(dataset=data, solver=generate(), name="general_knowledge_judged")
    (answered,) = inspect_ai.eval(task, model=grader, log_dir=str(folder / "logs"), display="none")
    right = {str(s.id): float(is_right(s.output.completion, str(s.target))) for s in answered.samples}
    ids = sorted(right)
    labelled = [ids[i] for i in _slice(len(ids), seed)]
    labels_file = folder / "labels.csv"
    labels_file.write_text("id,label\n" + "".join(f"{i},{right[i]:g}\n" for i in labelled))
    judge = model_graded_qa(template=JUDGE_TEMPLATE, instructions=JUDGE_INSTRUCTIONS, grade_pattern=GRADE_PATTERN)
    scored = inspect_ai.score(
        answered, [judge], metrics=[accuracy(), stderr(), ppi(labels=str(labels_file))], model=grader,
        display="none",
    )  # fmt: skip
    log = folder / "logs" / "judged.json"
    write_eval_log(scored, str(log), format="json")
    (result,) = [r for r in scored.results.scores if r.name == "model_graded_qa"]
    out = {"log": str(log), "inspect_metrics": {k: m.value for k, m in result.metrics.items()}, "judged": None,
           "unscored": int(result.unscored_samples or 0)}  # fmt: skip
    if result.scored_samples:
        with warnings.catch_warnings():  # the ungraded answers: counted in ``unscored``
            warnings.simplefilter("ignore", UserWarning)
            judged = read_inspect_judged(log)
        labels = read_labels(labels_file)
        graded = np.isin(labels.ids.astype(str), judged.ids.astype(str))  # people's slice of the graded answers
        labels = HumanLabels(labels.ids[graded], labels.label[graded], [o for o, g in zip(labels.origin, graded) if g])
        out.update(judged=judged, gold=np.array([right[i] for i in judged.ids]), labels=labels)
    return {**out, "seconds": time.perf_counter() - start}


def _interval(rate: dict[str, Any]) -> str:
    if "refused" in rate:
        return f"refused: {rate['refused']}"
    return f"{rate['estimate']:.3f} [{rate['ci_lower']:.3f}, {rate['ci_upper']:.3f}]"


def judges_section(
    model: Any, tokenizer: Any, *, examples: list[dict[str, Any]], shots: str, is_right: Callable[[str, str], bool],
    seed: int, folder: Path,
) -> dict[str, Any]:  # fmt: skip
    """Judge the model's answers with the model through Inspect, and check the judge against the gold labels.

    Parameters
    ----------
    model, tokenizer, examples, shots, is_right, seed, folder
        As :func:`judged_run`.

    Returns
    -------
    dict
        ``text`` (Markdown), ``json`` (the numbers: ``true_rate``, the report's rates and
        agreement, Inspect's results) and ``verdicts`` (``(verdict, sentence)``: the corrected
        interval covers the true rate, or not).
    """
    from calibkit.lm.judges import answer_sentence, judge_report

    print(f"  Inspect: the model answers {len(examples)} questions and grades them (model_graded_qa)", flush=True)
    run = judged_run(model, tokenizer, examples, shots=shots, is_right=is_right, seed=seed, folder=folder)
    if run["judged"] is None:
        claim = f"judge: the model graded none of its {len(examples)} answers (no yes or no in its replies)"
        out = {"questions": len(examples), "unscored": run["unscored"], "report": None, "log": run["log"]}
        return {"text": claim, "json": out, "verdicts": [("inconclusive", claim)]}
    report = judge_report(run["judged"], run["labels"], seed=seed)
    pooled = report["pooled"]
    true_rate = float(run["gold"].mean())
    rates = pooled["rates"]
    names = {"naive": "the judge's rate (naive)", "human": "people's labels alone (the slice)", "ppi": "PPI++",
             "rogan_gladen": "Rogan-Gladen"}  # fmt: skip
    covered = {k: "refused" not in r and r["ci_lower"] <= true_rate <= r["ci_upper"] for k, r in rates.items()}
    agreement = pooled["against_people"]
    shown = run["inspect_metrics"]
    lines = [
        f"An LLM judge checked against people (the gold answers stand in for them): the model answered "
        f"{len(examples)} BIG-bench questions through Inspect, and the same model graded each answer with Inspect's "
        f"model_graded_qa ({run['unscored']} left ungraded); {pooled['labelled']} labels ({SLICE:.0%}) are given to "
        f"the corrections, the other gold labels kept for the truth.",
        "",
        answer_sentence(report),
        "",
        f"| pass rate | estimate [95% interval] | covers the true {true_rate:.3f} |",
        "|---|---|---|",
        f"| true (every gold label) | {true_rate:.3f} | |",
        *(f"| {names[k]} | {_interval(r)} | {'yes' if covered[k] else 'no'} |" for k, r in rates.items()),
        "",
        f"The judge on the slice: agreement {number(agreement.get('agreement'))}, kappa "
        f"{number(agreement.get('kappa'))}, TPR {number(agreement.get('tpr'))}, FPR {number(agreement.get('fpr'))}; "
        f"its confidence (the grade token's probability): ECE {number(pooled.get('calibration', {}).get('ece'))}.",
        f"In Inspect's own results (calibkit's ppi metric): ppi_pass_rate {number(shown.get('ppi_pass_rate'))} "
        f"[{number(shown.get('ppi_pass_rate_ci_lower'))}, {number(shown.get('ppi_pass_rate_ci_upper'))}] with "
        f"{number(shown.get('ppi_labelled'))} labels; accuracy (the judge's) {number(shown.get('accuracy'))}.",
    ]
    verdict = "holds" if covered["ppi"] else "does not hold"
    claim = f"judge: PPI++'s 95% interval from {pooled['labelled']} labels covers the true pass rate: {verdict}"
    out = {"questions": len(examples), "true_rate": true_rate, "unscored": run["unscored"], "covered": covered,
           "report": report, "inspect_metrics": shown, "log": run["log"], "seconds": run["seconds"]}  # fmt: skip
    return {"text": "\n".join(lines), "json": out, "verdicts": [(verdict, claim)]}
