"""Generate real lighteval 0.13 ``--save-details`` fixtures with lighteval's own code.

Run with a venv that has lighteval==0.13.0 (and torch==2.13.0) installed:

    python3.11 -m venv /work/ltvenv
    /work/ltvenv/bin/pip install torch==2.13.0 lighteval==0.13.0 "xxhash<4"
    /work/ltvenv/bin/python tests/data/lighteval/make_details.py

(xxhash<4: lighteval 0.13's DetailsLogger.log calls xxhash.xxh64(str); xxhash
4.x raises "Strings must be encoded before hashing".  Tested with xxhash 3.8.2,
datasets 5.2.0, pyarrow 26.0.1, huggingface_hub 2.4.0.)

Nothing here imitates lighteval's file layout: the script runs lighteval's real
``Pipeline`` (Registry -> LightevalTask.get_docs -> model.loglikelihood ->
apply_metric -> MetricsLogger/DetailsLogger.log -> aggregate ->
EvaluationTracker.save) on two tiny multiple-choice tasks.  Only three things
are substituted, all from the outside (lighteval's installed sources are not
edited):

* the dataset download: ``LightevalTask.download_dataset_worker`` is replaced
  by a function returning an in-memory ``DatasetDict`` (lighteval's own
  comment in ``LightevalTask.load_datasets`` names this as the mocking point);
  the Hugging Face Hub is not needed.
* the model: ``SyntheticMCModel`` is a ``LightevalModel`` written after
  lighteval's ``DummyModel``, returning deterministic log-probabilities from a
  fixed numpy seed (no tokenizer / weights are downloaded).
* import-time failures of built-in task modules (offline, huggingface_hub 2.x):
  see ``_offline_workarounds`` (one empty stand-in module, one kwarg shim).
* the clock: ``datetime`` inside ``lighteval.logging.evaluation_tracker`` is
  frozen so the written file names carry a fixed date id.

Environment: HF_HUB_OFFLINE=1 and HF_DATASETS_OFFLINE=1 are set before
importing lighteval (no network is used).

Output (relative to this folder):
    details/calibkit-org/synthetic-lm/<date>/details_<task>|0_<date>.parquet
    results/calibkit-org/synthetic-lm/results_<date>.json
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import types  # noqa: E402

import lighteval  # noqa: E402
import lighteval.logging.evaluation_tracker as et_mod  # noqa: E402
import numpy as np  # noqa: E402
from datasets import Dataset, DatasetDict  # noqa: E402
from lighteval.logging.evaluation_tracker import EvaluationTracker  # noqa: E402
from lighteval.metrics.dynamic_metrics import LogLikelihoodAccMetric, NormalizedMultiChoiceProbMetric  # noqa: E402
from lighteval.metrics.metrics import Metrics  # noqa: E402
from lighteval.metrics.normalizations import LogProbCharNorm, LogProbPMINorm, LogProbTokenNorm  # noqa: E402
from lighteval.models.abstract_model import LightevalModel  # noqa: E402
from lighteval.models.dummy.dummy_model import DummyModelConfig  # noqa: E402
from lighteval.models.model_output import ModelResponse  # noqa: E402
from lighteval.pipeline import ParallelismManager, Pipeline, PipelineParameters  # noqa: E402
from lighteval.tasks.lighteval_task import LightevalTask, LightevalTaskConfig  # noqa: E402
from lighteval.tasks.requests import Doc  # noqa: E402
from lighteval.utils.cache_management import SampleCache  # noqa: E402

assert lighteval.__version__ == "0.13.0" if hasattr(lighteval, "__version__") else True

HERE = Path(__file__).resolve().parent
SEED = 20240601
MODEL_NAME = "calibkit-org/synthetic-lm"
FIXED_NOW = _dt.datetime(2025, 1, 2, 3, 4, 5, 678901)  # -> date_id "2025-01-02T03-04-05.678901"

# --------------------------------------------------------------------------- data
# Task A: always 4 choices.  Task B: 3, 4 or 5 choices, PMI (unconditioned query).
MC4_ROWS = [
    {"q": "What is the capital of France?", "choices": ["Paris", "Lyon", "Nice", "Lille"], "gold": 0},
    {"q": "2 + 2 =", "choices": ["3", "4", "5", "22"], "gold": 1},
    {"q": "Which gas do plants absorb?", "choices": ["oxygen", "nitrogen", "carbon dioxide", "helium"], "gold": 2},
    {"q": "Largest planet?", "choices": ["Mars", "Venus", "Earth", "Jupiter"], "gold": 3},
    {"q": "Which city hosts the ETH?", "choices": ["Zürich", "Basel", "Bern", "Geneva"], "gold": 0},
    {"q": "Opposite of hot?", "choices": ["warm", "cold", "spicy", "red"], "gold": 1},
    {"q": "H2O is", "choices": ["salt", "sugar", "water", "sand"], "gold": 2},
    {"q": "Number of legs of a spider?", "choices": ["4", "6", "10", "8"], "gold": 3},
    {"q": "Color of the sky on a clear day?", "choices": ["blue", "green", "yellow", "purple"], "gold": 0},
    {"q": "Fastest land animal?", "choices": ["lion", "cheetah", "horse", "gazelle"], "gold": 1},
    {"q": "Author of Hamlet?", "choices": ["Dickens", "Austen", "Shakespeare", "Joyce"], "gold": 2},
    {"q": "Freezing point of water (C)?", "choices": ["100", "32", "-10", "0"], "gold": 3},
]
MCVAR_ROWS = [
    {"q": "Is the sun a star?", "choices": ["yes", "no", "unknown"], "gold": 0},
    {"q": "Pick the prime.", "choices": ["4", "6", "7", "9"], "gold": 2},
    {"q": "Which is a fruit?", "choices": ["carrot", "potato", "apple", "onion", "leek"], "gold": 2},
    {"q": "A naïve approach is", "choices": ["simple", "optimal", "illegal"], "gold": 0},
    {"q": "Which is a mammal?", "choices": ["shark", "whale", "trout", "eel"], "gold": 1},
    {"q": "Which word means happy?", "choices": ["sad", "glad", "mad", "bad", "cad"], "gold": 1},
    {"q": "10 / 2 =", "choices": ["2", "5", "20"], "gold": 1},
    {"q": "Which is a metal?", "choices": ["wood", "iron", "glass", "paper"], "gold": 1},
    {"q": "Which month has 28 days?", "choices": ["all of them", "February", "none", "June", "May"], "gold": 0},
    {"q": "The plural of mouse is", "choices": ["mouses", "mice", "meese"], "gold": 1},
    {"q": "Which is a continent?", "choices": ["Asia", "Paris", "Nile", "Alps"], "gold": 0},
    {"q": "Which is the largest?", "choices": ["ant", "cat", "dog", "horse", "elephant"], "gold": 4},
]


def mc4_prompt(line: dict, task_name: str = None) -> Doc:
    return Doc(
        task_name=task_name,
        query=f"Question: {line['q']}\nAnswer:",
        choices=[f" {c}" for c in line["choices"]],
        gold_index=line["gold"],
    )


def mcvar_prompt(line: dict, task_name: str = None) -> Doc:
    # like lighteval.tasks.templates.multichoice: unconditioned_query="Answer:" for PMI
    return Doc(
        task_name=task_name,
        query=f"Question: {line['q']}\nAnswer:",
        choices=[f" {c}" for c in line["choices"]],
        gold_index=line["gold"],
        unconditioned_query="Answer:",
    )


DATA = {"calibkit_mc4": MC4_ROWS, "calibkit_mcvar": MCVAR_ROWS}

calibkit_mc4 = LightevalTaskConfig(
    name="calibkit_mc4",
    prompt_function=mc4_prompt,
    hf_repo="calibkit/synthetic_mc4",  # never downloaded: see fake_download below
    hf_subset="default",
    hf_avail_splits=["test"],
    evaluation_splits=["test"],
    few_shots_split=None,
    few_shots_select=None,
    generation_size=-1,
    metrics=[
        Metrics.loglikelihood_acc,  # metric name "acc"
        LogLikelihoodAccMetric(normalization=LogProbCharNorm()),  # "acc_norm"
        LogLikelihoodAccMetric(normalization=LogProbTokenNorm()),  # "acc_norm_token"
        NormalizedMultiChoiceProbMetric(),  # "normalized_mc_prob"
    ],
    stop_sequence=["\n"],
    version=0,
)

calibkit_mcvar = LightevalTaskConfig(
    name="calibkit_mcvar",
    prompt_function=mcvar_prompt,
    hf_repo="calibkit/synthetic_mcvar",
    hf_subset="default",
    hf_avail_splits=["test"],
    evaluation_splits=["test"],
    few_shots_split=None,
    few_shots_select=None,
    generation_size=-1,
    metrics=[
        Metrics.loglikelihood_acc,  # "acc"
        LogLikelihoodAccMetric(normalization=LogProbCharNorm()),  # "acc_norm"
        LogLikelihoodAccMetric(normalization=LogProbPMINorm()),  # "acc_norm_pmi"
        NormalizedMultiChoiceProbMetric(normalization=LogProbPMINorm()),  # "normalized_mc_prob_norm_pmi"
    ],
    stop_sequence=["\n"],
    version=0,
)

TASKS_TABLE = [calibkit_mc4, calibkit_mcvar]


def fake_download(task: LightevalTask) -> DatasetDict:
    """Stand-in for LightevalTask.download_dataset_worker (no Hub access)."""
    return DatasetDict({"test": Dataset.from_list(DATA[task.name])})


# -------------------------------------------------------------------------- model
class SyntheticMCModel(LightevalModel):
    """Deterministic stand-in model, written after lighteval.models.dummy.DummyModel.

    loglikelihood returns one summed log-probability per choice.  For docs with an
    ``unconditioned_query`` (PMI tasks) it returns 2n values in ``logprobs``:
    n conditioned then n unconditioned, which is what lighteval 0.13's
    LoglikelihoodAcc / NormalizedMultiChoiceProbability read
    (``model_response.logprobs[n:2n]``); it additionally fills the
    ``unconditioned_logprobs`` field with the same n unconditioned values.
    """

    def __init__(self, config: DummyModelConfig):
        self.config = config
        self._rng = np.random.default_rng(config.seed)
        self._cache = SampleCache(config)

    @property
    def tokenizer(self):
        return None

    @property
    def add_special_tokens(self):
        return False

    @property
    def max_length(self) -> int:
        return 2048

    def greedy_until(self, docs: list[Doc]) -> list[ModelResponse]:
        raise NotImplementedError

    def loglikelihood_rolling(self, docs: list[Doc]) -> list[ModelResponse]:
        raise NotImplementedError

    @staticmethod
    def _toks(text: str) -> list[int]:
        # toy "tokenizer": one id per whitespace-separated word (ids from utf-8 bytes)
        return [sum(w.encode("utf-8")) % 50000 for w in text.split()] or [0]

    def loglikelihood(self, docs: list[Doc]) -> list[ModelResponse]:
        out = []
        for doc in docs:
            n = len(doc.choices)
            gold = doc.gold_index if isinstance(doc.gold_index, int) else doc.gold_index[0]
            # summed log-probs; gold gets a boost most of the time so acc ~ 0.6-0.8
            lp = -self._rng.gamma(2.0, 2.0, size=n) - 0.05
            if self._rng.random() < 0.7:
                lp[gold] = max(lp) + self._rng.random() * 1.5 + 0.01
                lp[gold] = min(lp[gold], -0.01)
            logprobs = [round(float(x), 6) for x in lp]
            uncond = None
            if doc.unconditioned_query is not None:
                u = -self._rng.gamma(2.0, 2.5, size=n) - 0.5
                uncond = [round(float(x), 6) for x in u]
            greedy = [bool(i == int(np.argmax(lp)) and lp[i] > -1.5) for i in range(n)]
            out.append(
                ModelResponse(
                    input=doc.query,
                    input_tokens=self._toks(doc.query),
                    output_tokens=[self._toks(c) for c in doc.choices],
                    logprobs=logprobs + (uncond or []),
                    argmax_logits_eq_gold=greedy,
                    unconditioned_logprobs=uncond,
                )
            )
        return out


# -------------------------------------------------------------------------- main
class _FrozenDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return FIXED_NOW


# Two work-arounds needed because lighteval 0.13's Registry imports *every*
# built-in task module (Registry.load_all_task_configs), and two of them fail
# at import time here.  lighteval's installed files are not edited.
#
# 1. lighteval/tasks/tasks/tiny_benchmarks.py: TinyCorpusAggregator.download()
#    fetches tinyBenchmarks.pkl from raw.githubusercontent.com (no network here).
#    -> an empty stand-in module (TASKS_TABLE = []) is put in sys.modules under
#       that name, so importlib.import_module returns it.
# 2. lighteval/metrics/metrics_sample.py (JudgeLLM.__init__, used by the
#    mt_bench / mix_eval / ... task modules) calls
#    HfApi.list_models(model_name=...), a keyword removed in huggingface_hub 2.x.
#    -> HfApi.list_models is wrapped to map model_name= to search= (it returns
#       a lazy iterator, so nothing is fetched).
def _offline_workarounds() -> None:
    name = "lighteval.tasks.tasks.tiny_benchmarks"
    stub = types.ModuleType(name)
    stub.TASKS_TABLE = []
    sys.modules[name] = stub

    import huggingface_hub

    original = huggingface_hub.HfApi.list_models

    def list_models(self, *args, model_name=None, **kwargs):
        if model_name is not None:
            kwargs.setdefault("search", model_name)
        return original(self, *args, **kwargs)

    huggingface_hub.HfApi.list_models = list_models


def main() -> None:
    _offline_workarounds()
    for sub in ("details", "results"):
        shutil.rmtree(HERE / sub, ignore_errors=True)

    LightevalTask.download_dataset_worker = staticmethod(fake_download)
    et_mod.datetime = _FrozenDatetime

    with tempfile.TemporaryDirectory() as cache_dir:
        model_config = DummyModelConfig(model_name=MODEL_NAME, seed=SEED, cache_dir=cache_dir)
        model = SyntheticMCModel(model_config)
        tracker = EvaluationTracker(output_dir=str(HERE), save_details=True, push_to_hub=False)
        params = PipelineParameters(
            launcher_type=ParallelismManager.NONE,
            custom_tasks_directory=sys.modules[__name__],
            bootstrap_iters=100,
        )
        pipeline = Pipeline(
            tasks="calibkit_mc4|0,calibkit_mcvar|0",
            pipeline_parameters=params,
            evaluation_tracker=tracker,
            model=model,
        )
        pipeline.evaluate()
        pipeline.save_and_push_results()
        pipeline.show_results()

    for p in sorted(HERE.rglob("*")):
        if p.is_file() and p.suffix in (".parquet", ".json"):
            print(p.relative_to(HERE), p.stat().st_size)


if __name__ == "__main__":
    main()
