"""calibkit's lighteval metrics, run through lighteval's own classes (0.13) on its Doc and ModelResponse.

The questions are the ones lighteval's real Pipeline wrote in tests/data/lighteval (make_details.py):
each row's Doc and ModelResponse are rebuilt, scored by lighteval's ``apply_metric`` and aggregated by
its ``MetricsLogger``, and the results must equal ``calibkit choices`` on the same details file.
Importing lighteval takes about 4 seconds.
"""

from __future__ import annotations

import json
import math
import pickle
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

pytest.importorskip("lighteval")

from calibkit.cli import main  # noqa: E402
from calibkit.lm.multiple_choice import choice_probabilities, read_choices  # noqa: E402
from calibkit.metrics.bootstrap import bootstrap_intervals  # noqa: E402

DETAILS = Path(__file__).parents[1] / "data" / "lighteval" / "details"


def details_file(task: str) -> Path:
    return next(DETAILS.rglob(f"details_{task}|0_*.parquet"))


def docs_and_responses(file: Path):
    """lighteval's Doc and ModelResponse of each question of a details file, as its pipeline made them."""
    from lighteval.models.model_output import ModelResponse
    from lighteval.tasks.requests import Doc

    docs, responses = [], []
    for row in pq.read_table(file).to_pylist():
        d, r = row["doc"], row["model_response"]
        docs.append(Doc(query=d["query"], choices=d["choices"], gold_index=d["gold_index"], id=d["id"],
                        task_name=d["task_name"]))  # fmt: skip
        responses.append(ModelResponse(logprobs=r["logprobs"], output_tokens=r["output_tokens"]))
    return docs, responses


def lighteval_results(metrics, docs, responses, name="t"):
    """Score and aggregate as lighteval's Pipeline does: apply_metric, MetricsLogger.log, aggregate."""
    from lighteval.logging.info_loggers import MetricsLogger
    from lighteval.metrics import apply_metric
    from lighteval.tasks.lighteval_task import LightevalTask, LightevalTaskConfig

    config = LightevalTaskConfig(name=name, prompt_function=lambda line, task_name=None: None, hf_repo="none/none",
                                 hf_subset="default", metrics=metrics, evaluation_splits=["test"])  # fmt: skip
    logger = MetricsLogger()
    for output in apply_metric(responses=responses, docs=docs, metrics=metrics):
        logger.log(name, output)
    logger.aggregate({name: LightevalTask(config)}, bootstrap_iters=1000)
    return dict(logger.metric_aggregated[name])


def calibkit_choices(file: Path, score: str, capsys) -> dict:
    assert main(["choices", "--predictions", str(file), "--score", score, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["pooled"]


@pytest.mark.parametrize(
    "task, score", [("calibkit_mc4", "loglik"), ("calibkit_mc4", "chars"), ("calibkit_mc4", "tokens"),
                    ("calibkit_mcvar", "loglik"), ("calibkit_mcvar", "chars")],
)  # fmt: skip
def test_lighteval_results_equal_calibkit_choices_on_the_details_file(task, score, capsys):
    from calibkit.plugins.lighteval import CHOICE_METRICS, CLASSWISE, choice_calibration

    file = details_file(task)
    results = lighteval_results([choice_calibration(score, bootstrap=200)], *docs_and_responses(file))
    expected = calibkit_choices(file, score, capsys)
    fixed = task == "calibkit_mc4"  # 4 choices each; mcvar has 3 to 5
    suffix = "" if score == "loglik" else f"_{score}"
    names = [*CHOICE_METRICS, *(CLASSWISE if fixed else ())]
    assert {k for k in results if not k.endswith(("_ci_lower", "_ci_upper"))} == {f"{m}{suffix}" for m in names}
    for m in names:
        assert results[f"{m}{suffix}"] == pytest.approx(expected[m], abs=1e-12, rel=0), m
    assert not [k for k in results if k.endswith("_stderr")]  # lighteval's own 32x-too-small stderr is off
    # the interval is calibkit's bootstrap on the same probabilities
    data = read_choices(file)
    ci = bootstrap_intervals(choice_probabilities(data, score), data.gold, metrics=tuple(names), bootstrap=200)
    for m in names:
        assert (results[f"{m}{suffix}_ci_lower"], results[f"{m}{suffix}_ci_upper"]) == pytest.approx(ci["intervals"][m])
        assert results[f"{m}{suffix}_ci_lower"] <= results[f"{m}{suffix}_ci_upper"]


def test_several_scores_of_one_task_share_its_table_and_equal_calibkit_on_many_questions(tmp_path, capsys):
    """300 questions of fixed log-probabilities; two scores side by side; equal to ``calibkit choices``."""
    from lighteval.models.model_output import ModelResponse
    from lighteval.tasks.requests import Doc

    from calibkit.plugins.lighteval import choice_calibration

    rng = np.random.default_rng(7)
    ll = -rng.gamma(2.0, 2.0, (300, 4))
    gold = np.where(rng.random(300) < 0.6, ll.argmax(1), rng.integers(0, 4, 300))
    choices = [[" a", " bb", " ccc", " dddd"]] * 300
    docs = [Doc(query="q", choices=c, gold_index=int(g), id=str(i)) for i, (c, g) in enumerate(zip(choices, gold))]
    responses = [ModelResponse(logprobs=row.tolist()) for row in ll]
    metrics = [choice_calibration(bootstrap=0), choice_calibration("chars", metrics=("ece", "aurc"), bootstrap=0)]
    results = lighteval_results(metrics, docs, responses)
    file = tmp_path / "choices.jsonl"
    file.write_text("".join(json.dumps({"choice_logprobs": r.tolist(), "gold": int(g), "choice_chars": [2, 3, 4, 5]})
                            + "\n" for r, g in zip(ll, gold)))  # fmt: skip
    loglik, chars = calibkit_choices(file, "loglik", capsys), calibkit_choices(file, "chars", capsys)
    for m in ("ece", "brier", "nll", "aurc", "cece", "sce"):
        assert results[m] == pytest.approx(loglik[m], abs=1e-12), m
    assert results["ece_chars"] == pytest.approx(chars["ece"], abs=1e-12)
    assert results["aurc_chars"] == pytest.approx(chars["aurc"], abs=1e-12)
    assert results["ece"] != pytest.approx(results["ece_chars"])  # two scores, two different numbers
    assert "brier_chars" not in results and "ece_ci_lower" not in results  # metrics= and bootstrap=0 are heeded


@pytest.mark.parametrize(
    ("logprobs", "gold", "words"),
    [
        ([-1.0, -2.0], 3, "2 log-probabilities for 4 choices"),
        ([-1.0, float("nan"), -3.0, -4.0], 3, r"a log-probability is not finite: \[-1.0, nan, -3.0, -4.0\]"),
        ([-1.0, -2.0, -3.0, -4.0], 4, "`gold_index` 4 is not one index of the 4 choices"),
    ],
)
def test_the_plugin_and_the_details_reader_refuse_a_question_in_the_same_words(tmp_path, logprobs, gold, words):
    """One question check (check_question): lighteval's details file and the plugin's question say the same."""
    import pyarrow as pa
    from lighteval.models.model_output import ModelResponse
    from lighteval.tasks.requests import Doc

    from calibkit.plugins.lighteval import ChoiceLogprobs

    source = details_file("calibkit_mc4")
    table = pq.read_table(source)
    rows = table.to_pylist()
    rows[0]["doc"]["gold_index"], rows[0]["model_response"]["logprobs"] = gold, logprobs
    bad = tmp_path / source.name
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), bad)
    d = rows[0]["doc"]
    with pytest.raises(ValueError, match=rf"question {d['id']}: {words}$"):
        read_choices(bad)
    doc = Doc(query=d["query"], choices=d["choices"], gold_index=gold, id=d["id"], task_name=d["task_name"])
    with pytest.raises(ValueError, match=rf"doc {d['id']!r}: {words}$"):
        ChoiceLogprobs().compute(doc=doc, model_response=ModelResponse(logprobs=logprobs))


def test_bad_questions_are_refused_naming_the_doc():
    from lighteval.models.model_output import ModelResponse
    from lighteval.tasks.requests import Doc

    from calibkit.plugins.lighteval import ChoiceLogprobs

    doc = Doc(query="q", choices=[" a", " b", " c"], gold_index=[0, 2], id="q7", task_name="t|0")
    with pytest.raises(ValueError, match=r"task t\|0, doc 'q7': `gold_index` \[0, 2\] is not one index"):
        ChoiceLogprobs().compute(doc=doc, model_response=ModelResponse(logprobs=[-1.0, -2.0, -3.0]))
    doc = Doc(query="q", choices=[" a", " b", " c"], gold_index=1, id="q8", task_name="t|0")
    with pytest.raises(ValueError, match="doc 'q8': 2 log-probabilities for 3 choices"):
        ChoiceLogprobs().compute(doc=doc, model_response=ModelResponse(logprobs=[-1.0, -2.0]))
    with pytest.raises(ValueError, match="not finite"):
        ChoiceLogprobs().compute(doc=doc, model_response=ModelResponse(logprobs=[-1.0, -np.inf, -3.0]))
    pmi = ChoiceLogprobs().compute(doc=doc, model_response=ModelResponse(logprobs=[-1.0, -2.0, -3.0, -9, -9, -9]))
    assert pmi["logprobs"] == [-1.0, -2.0, -3.0] and pmi["gold"] == 1 and pmi["chars"] == [2, 2, 2]


def test_bad_settings_are_refused_where_the_task_is_defined():
    """Not after the model has answered every question: choice_calibration checks its settings at once."""
    from calibkit.plugins.lighteval import choice_calibration, hle_calibration

    for kwargs, message in [
        ({"score": "words"}, "`score`"),
        ({"bootstrap": -1}, "`bootstrap`"),
        ({"level": 1.5}, "`level`"),
        ({"seed": -2}, "`seed`"),
        ({"n_bins": 0}, "n_bins"),
        ({"metrics": ["ece", "nonsense"]}, "unknown names"),
        ({"metrics": ["subset_ece"]}, "one number per class"),
    ]:
        with pytest.raises(ValueError, match=message):
            choice_calibration(**kwargs)
    with pytest.raises(ValueError, match="`bootstrap`"):
        hle_calibration(bootstrap=2.5, sample_level_fn=object())
    assert choice_calibration(bootstrap=0, metrics=["ece"]).corpus_level_fn.bootstrap == 0


def test_the_old_names_n_boot_and_confidence_still_work_with_a_future_warning():
    from calibkit.plugins.lighteval import ChoiceCalibration, choice_calibration, hle_calibration

    with pytest.warns(FutureWarning, match="`n_boot` is renamed `bootstrap`"):
        corpus = choice_calibration(n_boot=0, metrics=["ece"]).corpus_level_fn
    assert corpus.bootstrap == corpus.n_boot == 0
    with pytest.warns(FutureWarning, match="`confidence` is renamed `level`"):
        assert ChoiceCalibration(confidence=0.9).level == 0.9
    with pytest.warns(FutureWarning, match="`n_boot` is renamed `bootstrap`"):
        assert hle_calibration(n_boot=7, sample_level_fn=object()).corpus_level_fn.bootstrap == 7
    with pytest.raises(ValueError, match="`n_boot=5` and `bootstrap=5`"):
        choice_calibration(n_boot=5, bootstrap=5)


def test_the_metric_pickles_and_the_module_loads_as_lightevals_custom_tasks():
    """Blocker 4: lighteval pickles metrics for its bootstrap; a class from a file path cannot be. Ours live in
    calibkit.plugins.lighteval, which --custom-tasks also takes by name (its TASKS_TABLE: ARC with calibkit)."""
    from lighteval.tasks.registry import Registry

    from calibkit.plugins.lighteval import ChoiceCalibration, choice_calibration

    metric = pickle.loads(pickle.dumps(choice_calibration("chars", bootstrap=10)))
    assert isinstance(metric.corpus_level_fn, ChoiceCalibration) and metric.corpus_level_fn.score == "chars"
    configs = Registry._extract_configs(Registry.create_custom_tasks_module("calibkit.plugins.lighteval"))
    assert sorted(configs) == ["calibkit_arc:challenge", "calibkit_arc:easy"]
    names = [m.metric_name for m in configs["calibkit_arc:easy"].metrics]
    assert names == ["acc", "calibkit"]  # lighteval's accuracy kept, calibkit's metrics added


def test_lightevals_stderr_is_the_replicates_std_over_sqrt_their_number():
    """What the guide says of lighteval's bootstrap stderr: mean_stderr of the 1000 replicates (32x too small)."""
    from lighteval.metrics.utils.stderr import mean_stderr

    replicates = np.random.default_rng(0).normal(0.2, 0.03, 1000)
    assert mean_stderr(replicates) == pytest.approx(np.std(replicates, ddof=1) / math.sqrt(1000), rel=1e-12)
    assert np.std(replicates, ddof=1) / mean_stderr(replicates) == pytest.approx(31.62, abs=0.01)


# ----------------------------------------------------------------------------------------------
# HLE: lighteval's calibration error skips the last, most confident bin and keeps percent


def hle_verdicts(n=250, seed=3):
    """The judge's verdict per answer, as lighteval's JudgeLLMHLE logs it; the most confident answers all wrong."""
    rng = np.random.default_rng(seed)
    confidence = rng.integers(10, 90, n)
    confidence[-60:] = 95 + rng.integers(0, 5, 60)
    right = rng.random(n) < confidence / 100
    right[-60:] = False
    return [{"correct": "yes" if r else "no", "confidence": int(c)} for r, c in zip(right, confidence)]


def all_bins_loop(confidence, right, beta=100):
    """HLE's calib_err as its authors meant it: every bin (a loop, sorted as theirs)."""
    idx = np.argsort(confidence)
    confidence, right = confidence[idx], right[idx]
    bins = [[i * beta, (i + 1) * beta] for i in range(len(confidence) // beta)]
    bins[-1][1] = len(confidence)
    return math.sqrt(
        sum((b - a) / len(confidence) * (confidence[a:b].mean() - right[a:b].mean()) ** 2 for a, b in bins)
    )


def test_hle_keeps_lightevals_numbers_beside_the_error_over_every_bin():
    from lighteval.tasks.tasks.hle import JudgeLLMHLE, calib_err

    from calibkit.lm.generations import source_metrics
    from calibkit.plugins.lighteval import HLE_NAMES, hle_calibration

    verdicts = hle_verdicts()
    metric = hle_calibration(bootstrap=100)
    # lighteval's pipeline logs the judge's dict under each of its three names; aggregate as it does
    from lighteval.logging.info_loggers import MetricsLogger
    from lighteval.tasks.lighteval_task import LightevalTask, LightevalTaskConfig

    config = LightevalTaskConfig(name="hle", prompt_function=lambda line, task_name=None: None, hf_repo="none/none",
                                 hf_subset="default", metrics=[metric], evaluation_splits=["test"])  # fmt: skip
    logger = MetricsLogger()
    for verdict in verdicts:
        logger.log("hle", dict.fromkeys(HLE_NAMES, verdict))
    logger.aggregate({"hle": LightevalTask(config)})
    results = dict(logger.metric_aggregated["hle"])

    original = JudgeLLMHLE.compute_corpus(None, verdicts)  # lighteval's own number
    assert {k: results[k] for k in HLE_NAMES} == original
    stated = np.array([v["confidence"] for v in verdicts], dtype=float)
    right = np.array([v["correct"] == "yes" for v in verdicts], dtype=float)
    assert original["calibration_error"] == round(calib_err(stated, right, p="2", beta=100), 2)
    skipped = 100 * calib_err(stated / 100, right, p="2", beta=100)  # the authors' scale, last bin still skipped
    # lighteval leaves the stated confidence in percent against a 0/1 accuracy: 19.68 where the authors' scale says 2.77
    assert original["calibration_error"] > skipped + 10
    corrected = results["calibration_error_all_bins"]
    assert corrected == pytest.approx(100 * all_bins_loop(stated / 100, right), rel=1e-12)
    # the last bin holds the 60 answers stated 95-99% sure and all wrong: skipping it hides them
    assert corrected > skipped + 20 and abs(corrected - original["calibration_error"]) > 5
    judged = source_metrics(stated / 100, right, bootstrap=100)
    for m in ("ece", "brier", "nll", "aurc"):
        assert results[m] == pytest.approx(judged[m], abs=1e-12)
    assert (results["ece_ci_lower"], results["ece_ci_upper"]) == pytest.approx(judged["intervals"]["ece"])
    assert not [k for k in results if k.endswith("_stderr")]
    assert metric.higher_is_better["calibration_error_all_bins"] is False


def test_hle_error_over_every_bin_moves_with_the_last_bin_where_lightevals_does_not():
    from lighteval.tasks.tasks.hle import calib_err

    from calibkit.plugins.lighteval import hle_rms_calibration_error

    verdicts = hle_verdicts()
    stated = np.array([v["confidence"] for v in verdicts], dtype=float) / 100
    right = np.array([v["correct"] == "yes" for v in verdicts], dtype=float)
    fixed = right.copy()
    fixed[-60:] = np.random.default_rng(1).random(60) < stated[-60:]  # the confident answers now mostly right
    assert calib_err(stated, right, beta=100) == calib_err(stated, fixed, beta=100)  # blind to the last bin
    assert hle_rms_calibration_error(stated, fixed) < hle_rms_calibration_error(stated, right) - 0.2
    assert math.isnan(hle_rms_calibration_error(stated[:99], right[:99]))  # no bin of 100, as the authors' -1


@pytest.mark.slow
def test_lightevals_pipeline_prints_calibkits_rows_equal_to_calibkit_choices(tmp_path, monkeypatch, capsys):
    """lighteval's own Pipeline (Registry, model.loglikelihood, apply_metric, aggregate, save, show_results), offline:
    the synthetic model of tests/data/lighteval/make_details.py, lighteval's two import-time blockers patched in-process
    (as that script does, undone after the test). About 40 s: the Registry imports every built-in task."""
    import torch

    # lighteval.models.transformers.transformers_model calls torch.set_grad_enabled(False) at import, for the
    # whole process: restored after the test, so that later tests (and a user's training) can still train
    grad = torch.is_grad_enabled()
    try:
        _run_lightevals_pipeline(tmp_path, monkeypatch, capsys)
    finally:
        torch.set_grad_enabled(grad)


def _run_lightevals_pipeline(tmp_path, monkeypatch, capsys):
    import importlib.util
    import sys
    import types

    import huggingface_hub
    import nltk

    from calibkit.plugins.lighteval import choice_calibration, with_calibration

    stub = types.ModuleType("lighteval.tasks.tasks.tiny_benchmarks")  # blocker 1: downloads a pickle at import
    stub.TASKS_TABLE = []
    monkeypatch.setitem(sys.modules, stub.__name__, stub)
    list_models = huggingface_hub.HfApi.list_models  # blocker 2: list_models(model_name=) under huggingface_hub 2.x

    def renamed(self, *args, model_name=None, **kwargs):
        return list_models(self, *args, **({"search": model_name} if model_name else {}), **kwargs)

    monkeypatch.setattr(huggingface_hub.HfApi, "list_models", renamed)
    # the ifeval task asks nltk for punkt at import: offline nltk prints its failure and goes on, to the stdout it
    # bound when first imported (by an earlier test: closed by now); answered here without printing
    monkeypatch.setattr(nltk, "download", lambda *args, **kwargs: False)
    spec = importlib.util.spec_from_file_location("make_details", DETAILS.parent / "make_details.py")
    md = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(md)
    monkeypatch.setattr(md.LightevalTask, "download_dataset_worker", staticmethod(md.fake_download))
    md.TASKS_TABLE = [with_calibration(c, choice_calibration(bootstrap=100), prefix="") for c in md.TASKS_TABLE]
    model = md.SyntheticMCModel(md.DummyModelConfig(model_name=md.MODEL_NAME, seed=md.SEED, cache_dir=str(tmp_path)))
    tracker = md.EvaluationTracker(output_dir=str(tmp_path / "out"), save_details=True, push_to_hub=False)
    params = md.PipelineParameters(launcher_type=md.ParallelismManager.NONE, custom_tasks_directory=md)
    pipeline = md.Pipeline(tasks="calibkit_mc4|0,calibkit_mcvar|0", pipeline_parameters=params,
                           evaluation_tracker=tracker, model=model)  # fmt: skip
    pipeline.evaluate()
    pipeline.save_and_push_results()
    pipeline.show_results()
    table = capsys.readouterr().out
    for row in ("ece", "ece_ci_lower", "ece_ci_upper", "cece", "aurc"):  # lighteval's printed table has calibkit's rows
        assert re.search(rf"\|{row}\s+\|\d+\.\d{{4}}\|", table), row
    results = json.loads(next((tmp_path / "out" / "results").rglob("results_*.json")).read_text())["results"]
    for task in ("calibkit_mc4", "calibkit_mcvar"):
        got = results[f"{task}|0"]
        expected = calibkit_choices(next((tmp_path / "out" / "details").rglob(f"details_{task}|0_*.parquet")), "loglik",
                                    capsys)  # fmt: skip
        for m in ("ece", "brier", "nll", "aurc"):
            assert got[m] == pytest.approx(expected[m], abs=1e-12, rel=0), (task, m)
            assert f"{m}_stderr" not in got and got[f"{m}_ci_lower"] <= got[f"{m}_ci_upper"]
        assert ("cece" in got) == (task == "calibkit_mc4")  # class-wise only where the number of choices is fixed
        assert got["acc_stderr"] > 0  # lighteval's own rows keep their standard error
