"""Generate real lighteval 0.10.0 (flat, pre-0.11 layout) ``--save-details`` fixtures.

Uses lighteval 0.10.0's own classes and saving code: LightevalTaskConfig /
LightevalTask, Doc, LoglikelihoodResponse, the real multichoice metric function
(lighteval.metrics.apply_multichoice_metric with Metrics.loglikelihood_acc,
Metrics.loglikelihood_acc_norm and the PMI metric), MetricsLogger/DetailsLogger
.log(...) called exactly as lighteval/pipeline.py:_compute_metrics (0.10.0,
lines 517-541) calls them -- one call per (sample, metric category) -- then
EvaluationTracker.save().  The model run is replaced by deterministic
LoglikelihoodResponse objects (result=(summed logprob, is_greedy)), ordered as
the 0.10 pipeline groups them: for MULTICHOICE metrics the n conditioned
responses; for MULTICHOICE_PMI metrics n conditioned + n unconditioned (2n).

Environment (lighteval 0.10 pins numpy<2; pyarrow/datasets/transformers must match):
    python3.11 -m venv /work/ltvenv_old
    /work/ltvenv_old/bin/pip install torch==2.13.0 lighteval==0.10.0
    /work/ltvenv_old/bin/pip install pyarrow==19.0.1 xxhash==3.8.2 datasets==3.6.0 \
        "huggingface_hub<1" requests transformers==4.51.3
    /work/ltvenv_old/bin/python tests/data/lighteval/old/make_details_old.py
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import lighteval.logging.evaluation_tracker as et_mod  # noqa: E402
import numpy as np  # noqa: E402
from lighteval.logging.evaluation_tracker import EvaluationTracker  # noqa: E402
from lighteval.metrics import apply_multichoice_metric  # noqa: E402
from lighteval.metrics.dynamic_metrics import loglikelihood_acc_metric  # noqa: E402
from lighteval.metrics.metrics import Metrics  # noqa: E402
from lighteval.metrics.normalizations import LogProbPMINorm  # noqa: E402
from lighteval.metrics.utils.metric_utils import MetricCategory  # noqa: E402
from lighteval.models.abstract_model import ModelInfo  # noqa: E402
from lighteval.models.model_output import LoglikelihoodResponse  # noqa: E402
from lighteval.tasks.lighteval_task import LightevalTask, LightevalTaskConfig  # noqa: E402
from lighteval.tasks.requests import Doc  # noqa: E402

HERE = Path(__file__).resolve().parent
SEED = 20240601
MODEL_NAME = "calibkit-org/synthetic-lm"
FIXED_NOW = _dt.datetime(2025, 1, 2, 3, 4, 5, 678901)

ROWS = {
    "calibkit_mc4": [
        ("What is the capital of France?", ["Paris", "Lyon", "Nice", "Lille"], 0),
        ("2 + 2 =", ["3", "4", "5", "22"], 1),
        ("Which gas do plants absorb?", ["oxygen", "nitrogen", "carbon dioxide", "helium"], 2),
        ("Largest planet?", ["Mars", "Venus", "Earth", "Jupiter"], 3),
        ("Which city hosts the ETH?", ["Zürich", "Basel", "Bern", "Geneva"], 0),
        ("Opposite of hot?", ["warm", "cold", "spicy", "red"], 1),
        ("H2O is", ["salt", "sugar", "water", "sand"], 2),
        ("Number of legs of a spider?", ["4", "6", "10", "8"], 3),
        ("Color of the sky on a clear day?", ["blue", "green", "yellow", "purple"], 0),
        ("Fastest land animal?", ["lion", "cheetah", "horse", "gazelle"], 1),
        ("Author of Hamlet?", ["Dickens", "Austen", "Shakespeare", "Joyce"], 2),
        ("Freezing point of water (C)?", ["100", "32", "-10", "0"], 3),
    ],
    "calibkit_mcvar": [
        ("Is the sun a star?", ["yes", "no", "unknown"], 0),
        ("Pick the prime.", ["4", "6", "7", "9"], 2),
        ("Which is a fruit?", ["carrot", "potato", "apple", "onion", "leek"], 2),
        ("A naïve approach is", ["simple", "optimal", "illegal"], 0),
        ("Which is a mammal?", ["shark", "whale", "trout", "eel"], 1),
        ("Which word means happy?", ["sad", "glad", "mad", "bad", "cad"], 1),
        ("10 / 2 =", ["2", "5", "20"], 1),
        ("Which is a metal?", ["wood", "iron", "glass", "paper"], 1),
        ("Which month has 28 days?", ["all of them", "February", "none", "June", "May"], 0),
        ("The plural of mouse is", ["mouses", "mice", "meese"], 1),
        ("Which is a continent?", ["Asia", "Paris", "Nile", "Alps"], 0),
        ("Which is the largest?", ["ant", "cat", "dog", "horse", "elephant"], 4),
    ],
}


def prompt(line: dict, task_name: str = None) -> Doc:
    return Doc(
        task_name=task_name,
        query=f"Question: {line['q']}\nAnswer:",
        choices=[f" {c}" for c in line["choices"]],
        gold_index=line["gold"],
        unconditioned_query="Answer:" if line["pmi"] else None,
    )


CONFIGS = {
    "calibkit_mc4": LightevalTaskConfig(
        name="calibkit_mc4",
        suite=["custom"],
        prompt_function=prompt,
        hf_repo="calibkit/synthetic_mc4",
        hf_subset="default",
        hf_avail_splits=["test"],
        evaluation_splits=["test"],
        generation_size=-1,
        stop_sequence=["\n"],
        metric=[Metrics.loglikelihood_acc, Metrics.loglikelihood_acc_norm],  # "acc", "acc_norm"
    ),
    "calibkit_mcvar": LightevalTaskConfig(
        name="calibkit_mcvar",
        suite=["custom"],
        prompt_function=prompt,
        hf_repo="calibkit/synthetic_mcvar",
        hf_subset="default",
        hf_avail_splits=["test"],
        evaluation_splits=["test"],
        generation_size=-1,
        stop_sequence=["\n"],
        # "acc", "acc_norm" (MULTICHOICE) and "acc_norm_pmi" (MULTICHOICE_PMI)
        metric=[Metrics.loglikelihood_acc, Metrics.loglikelihood_acc_norm, loglikelihood_acc_metric(LogProbPMINorm())],
    ),
}


def toks(text: str) -> list[int]:
    return [sum(w.encode("utf-8")) % 50000 for w in text.split()] or [0]


class _FrozenDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return FIXED_NOW


def main() -> None:
    for sub in ("details", "results"):
        shutil.rmtree(HERE / sub, ignore_errors=True)
    et_mod.datetime = _FrozenDatetime
    rng = np.random.default_rng(SEED)

    tracker = EvaluationTracker(output_dir=str(HERE), save_details=True, push_to_hub=False)
    tracker.general_config_logger.log_args_info(num_fewshot_seeds=1, max_samples=None, job_id="0")
    tracker.general_config_logger.log_model_info({}, ModelInfo(model_name=MODEL_NAME))

    task_dict = {}
    for short, cfg in CONFIGS.items():
        task = LightevalTask(name=f"custom|{short}", cfg=cfg)
        task_dict[task.name] = task
        task_name = f"{task.name}|0"  # as LightevalTask.construct_requests names requests
        pmi = task.has_metric_category[MetricCategory.MULTICHOICE_PMI]
        by_cat = {
            c: {"ids": [], "responses": [], "docs": []}
            for c in (MetricCategory.MULTICHOICE, MetricCategory.MULTICHOICE_PMI)
        }
        for ix, (q, choices, gold) in enumerate(ROWS[short]):
            doc = prompt({"q": q, "choices": choices, "gold": gold, "pmi": pmi}, task.name)
            doc.ctx, doc.num_asked_few_shots, doc.num_effective_few_shots = doc.query, 0, 0
            n = len(doc.choices)
            lp = -rng.gamma(2.0, 2.0, size=n) - 0.05
            if rng.random() < 0.7:
                lp[gold] = min(max(lp) + rng.random() * 1.5 + 0.01, -0.01)
            cond = [
                LoglikelihoodResponse(
                    result=(round(float(lp[i]), 6), bool(i == int(np.argmax(lp)) and lp[i] > -1.5)),
                    input_tokens=toks(doc.ctx),
                    generated_tokens=toks(doc.choices[i]),
                )
                for i in range(n)
            ]
            by_cat[MetricCategory.MULTICHOICE]["ids"].append(str(ix))
            by_cat[MetricCategory.MULTICHOICE]["responses"].append(cond)
            by_cat[MetricCategory.MULTICHOICE]["docs"].append(doc)
            if pmi:
                u = -rng.gamma(2.0, 2.5, size=n) - 0.5
                uncond = [
                    LoglikelihoodResponse(
                        result=(round(float(u[i]), 6), False),
                        input_tokens=toks(doc.unconditioned_query),
                        generated_tokens=toks(doc.choices[i]),
                    )
                    for i in range(n)
                ]
                by_cat[MetricCategory.MULTICHOICE_PMI]["ids"].append(str(ix))
                by_cat[MetricCategory.MULTICHOICE_PMI]["responses"].append(cond + uncond)
                by_cat[MetricCategory.MULTICHOICE_PMI]["docs"].append(doc)
        # lighteval/pipeline.py (0.10.0) _compute_metrics, lines 525-541
        for category, samples in by_cat.items():
            metrics = [m for m in task.metrics if m.category == category]
            if not samples["ids"] or not metrics:
                continue
            outputs = apply_multichoice_metric(
                sample_ids=samples["ids"],
                responses=samples["responses"],
                formatted_docs=samples["docs"],
                metrics=metrics,
            )
            for output, doc, response in zip(outputs, samples["docs"], samples["responses"]):
                tracker.metrics_logger.log(task_name, output)
                tracker.details_logger.log(task_name, task, doc, response, output)

    tracker.general_config_logger.log_end_time()
    tracker.metrics_logger.aggregate(task_dict=task_dict, bootstrap_iters=100)
    tracker.details_logger.aggregate()
    tracker.save()

    for p in sorted(HERE.rglob("*")):
        if p.is_file() and p.suffix in (".parquet", ".json"):
            print(p.relative_to(HERE), p.stat().st_size)


if __name__ == "__main__":
    main()
