"""Issue 45, trust part three: the edges a new user's audit found at last round's doors (multi-label,
multiple-choice logs, selective metrics). Each test fails on 75fd235."""

import inspect
import json

import numpy as np
import pytest

import calibkit
from calibkit.cli import main
from calibkit.lm.multiple_choice import ChoiceData, multiple_choice_report, read_choices
from calibkit.metrics.backends import use_backend
from tests.test_multiple_choice import sample, write_samples

# ---- 1. selective accuracy answers ceil(coverage * N) of an exact product -------------------


def top_k_accuracy(p, y, k):
    conf = np.maximum(p, 1 - p)
    right = (p > 0.5).astype(int) == y
    order = np.argsort(-conf, kind="stable")
    return right[order[:k]].mean()


@pytest.mark.parametrize("engine", ["numba", "torch"])
@pytest.mark.parametrize(
    "coverage, n, answered",
    [(0.50000000005, 10, 6), (0.8000000000005, 1000, 801), (0.7, 10, 7), (0.8, 10, 8), (0.3, 10, 3), (1.0, 7, 7)],
)
def test_selective_accuracy_answers_the_ceiling_of_the_exact_product(engine, coverage, n, answered):
    rng = np.random.default_rng(n)
    p = rng.permutation(np.linspace(0.51, 0.99, n))  # distinct confidences: no tie at the cut
    y = (rng.random(n) < p).astype(int)
    with use_backend(engine):
        got = calibkit.selective_accuracy(p, y, coverage=coverage)
        streamed = calibkit.CalibrationAccumulator(["selective_accuracy"], coverage=coverage).update(p, y).compute()
    assert got == pytest.approx(top_k_accuracy(p, y, answered), abs=1e-12)
    assert got != pytest.approx(top_k_accuracy(p, y, answered - 1), abs=1e-12) or answered == 1
    # the accumulator keeps buckets, not rows: its value lies within its stated bound of the exact one
    assert abs(streamed["selective_accuracy"] - got) <= streamed["selective_accuracy_error_bound"] + 1e-12


# ---- 2. a task whose questions all have one choice is skipped with its reason --------------


def one_choice_data():
    rng = np.random.default_rng(0)
    ll = np.full((30, 3), np.nan)
    ll[:24] = -rng.gamma(2.0, 1.0, (24, 3))
    ll[24:, 0] = -1.0  # task "given": one choice each
    gold = np.r_[ll[:24].argmax(1) * (rng.random(24) < 0.7), np.zeros(6, int)]
    task = np.array(["real"] * 24 + ["given"] * 6, dtype=object)
    return ChoiceData(task, np.arange(30).astype(object), ll, gold, None, None, np.array(["f"] * 30, dtype=object))


def test_a_one_choice_task_is_skipped_and_the_others_reported():
    report = multiple_choice_report(one_choice_data())
    assert list(report["tasks"]) == ["real"] and "one choice" in report["skipped"]["given"]
    assert report["pooled"]["questions"] == 30


def test_the_cli_reports_the_other_tasks_of_a_run_with_a_one_choice_task(tmp_path, capsys):
    rows = [{"task": "given", "choice_logprobs": [-1.0], "gold": 0}] * 5
    rows += [{"task": "real", "choice_logprobs": [-1.0 - i % 3, -2.0, -1.5], "gold": i % 3} for i in range(24)]
    path = tmp_path / "choices.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["report", "--predictions", str(path), "--calibrate", "--resplits", "2"]) == 0
    out = capsys.readouterr().out
    assert "| real |" in out and "given: every question has one choice" in out and "2 tasks" in out


def test_no_question_with_two_choices_is_one_line(tmp_path):
    data = one_choice_data().select(np.arange(30) >= 24)
    with pytest.raises(ValueError, match="one choice"):
        multiple_choice_report(data)


# ---- 3. a doc_id repeated within one samples file is refused -------------------------------


def test_a_repeated_doc_id_is_refused_naming_the_file_and_the_id(tmp_path, capsys):
    samples = [sample(0, [-1.0, -2.0], 0, acc=1.0), sample(1, [-2.0, -1.0], 1, acc=1.0)]
    file = write_samples(tmp_path / "run", "dup", [*samples, sample(0, [-1.0, -2.0], 0, acc=1.0)])
    with pytest.raises(ValueError, match=r"doc_id 0: appears twice \(lines 1 and 3\)") as info:
        read_choices(file)
    assert str(file) in str(info.value)
    assert main(["report", "--predictions", str(tmp_path / "run")]) == 2
    assert "appears twice" in capsys.readouterr().err


# ---- 4. --multilabel on multiple-choice logs is refused in one line ------------------------


def test_multilabel_on_choice_logs_is_refused_before_reading_shards(tmp_path, capsys):
    write_samples(tmp_path / "run", "t", [sample(0, [-1.0, -2.0], 0, acc=1.0)])
    assert main(["multilabel", "--predictions", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "multiple-choice logs" in err and "calibkit choices" in err and len(err.strip().splitlines()) == 1
    # The old form says first, in one more line, which command replaces it; then the same refusal.
    assert main(["report", "--predictions", str(tmp_path / "run"), "--multilabel"]) == 2
    old = capsys.readouterr().err.strip().splitlines()
    assert len(old) == 2 and "calibkit multilabel" in old[0] and old[1] == err.strip()


# ---- 5. the evaluate module names the multilabel configuration for multi-hot references ----


def test_the_evaluate_module_names_the_multilabel_configuration():
    from calibkit.evaluate_modules import evaluate_module_path

    evaluate = pytest.importorskip("evaluate")
    ece = evaluate.load(evaluate_module_path("ece"))
    p = np.array([[0.9, 0.2, 0.7], [0.1, 0.8, 0.6]])
    y = np.array([[1, 0, 1], [0, 1, 0]])
    with pytest.raises(ValueError, match='evaluate.load\\("ece", "multilabel"\\)'):
        ece.compute(predictions=p, references=y)


# ---- 6. the command line names `calibkit multilabel` for a multi-hot .npz ---------------------------


def test_the_cli_names_its_own_option_for_multi_hot_labels(tmp_path, capsys):
    np.savez(tmp_path / "ml.npz", probs=np.array([[0.9, 0.2], [0.3, 0.8]]), labels=np.array([[1, 0], [0, 1]]))
    assert main(["report", "--predictions", str(tmp_path / "ml.npz")]) == 2
    err = capsys.readouterr().err
    assert "use `calibkit multilabel`" in err and "multilabel=True" not in err


# ---- 7. the guide's claims about where multilabel and the settings are taken ----------------


def test_every_door_the_guide_names_takes_multilabel():
    from calibkit.callbacks import CalibrationCallback
    from calibkit.io.dask import calibration_report as dask_report
    from calibkit.io.shards import stream_report
    from calibkit.metrics.bootstrap import bootstrap_intervals

    for door in (calibkit.calibration_report, calibkit.CalibrationAccumulator, bootstrap_intervals, stream_report,
                 dask_report, CalibrationCallback):  # fmt: skip
        assert "multilabel" in inspect.signature(door).parameters, door


def test_the_one_metric_functions_do_not_take_multilabel_as_the_guide_says():
    from calibkit.metrics import functional

    functions = [getattr(functional, name) for name in functional.__all__]
    functions = [f for f in functions if inspect.isfunction(f)]
    assert len(functions) > 15
    takers = [f.__name__ for f in functions if "multilabel" in inspect.signature(f).parameters]
    assert set(takers) <= {"calibration_report", "multilabel_report"}
    with pytest.raises(TypeError):
        calibkit.ece(np.array([[0.9, 0.1]]), np.array([[1, 0]]), multilabel=True)


def test_fce_variant_is_a_setting_at_every_door_the_guide_lists():
    from calibkit.callbacks import CalibrationCallback
    from calibkit.metrics.bootstrap import bootstrap_intervals
    from calibkit.verdicts.comparison import compare_calibrators
    from calibkit.verdicts.resplits import resplit_comparison

    for door in (calibkit.fce, calibkit.calibration_report, calibkit.CalibrationAccumulator, bootstrap_intervals,
                 compare_calibrators, resplit_comparison, CalibrationCallback):  # fmt: skip
        assert "fce_variant" in inspect.signature(door).parameters, door


def test_settings_object_is_taken_where_getting_started_says():
    from calibkit.metrics.bootstrap import bootstrap_intervals

    for door in (calibkit.calibration_report, calibkit.CalibrationAccumulator, bootstrap_intervals):
        assert "settings" in inspect.signature(door).parameters, door


# ---- 8. a Dask partition or a shard with other classes is named ----------------------------


def test_a_dask_partition_with_other_classes_is_named():
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    dd = pytest.importorskip("dask.dataframe")
    from calibkit.io.dask import calibration_report

    rows = [list(np.full(4, 0.25))] * 10 + [list(np.full(5, 0.2))] * 5
    lists = pd.array(rows, dtype=pd.ArrowDtype(pa.list_(pa.float64())))
    frame = dd.from_pandas(pd.DataFrame({"probs": lists, "labels": [0] * 15}), npartitions=3, sort=False)
    with pytest.raises(ValueError, match="partition 2 has 5 classes but partition 0 has 4 classes"):
        calibration_report(frame, scheduler="synchronous")


def test_a_shard_with_other_classes_is_named(tmp_path, capsys):
    np.savez(tmp_path / "a.npz", probs=np.full((5, 4), 0.25), labels=np.zeros(5, int))
    np.savez(tmp_path / "b.npz", probs=np.full((5, 5), 0.2), labels=np.zeros(5, int))
    assert main(["report", "--predictions", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "b.npz (rows from 0)" in err and "the shards before it had 4" in err


# ---- 9. the engines agree to about 1e-15 relative, as README and the guide now say ----------


def test_a_first_call_on_torch_and_a_later_one_on_the_kernels_agree_as_documented():
    rng = np.random.default_rng(9)
    worst = 0.0
    for _ in range(40):
        k = int(rng.integers(2, 6))
        p = rng.dirichlet(np.ones(k), int(rng.integers(20, 80))).round(2)
        p = p / p.sum(1, keepdims=True)
        y = rng.integers(0, k, len(p))
        with use_backend("torch"):
            first = calibkit.calibration_report(p, y, metrics=["ece", "mce", "brier", "nll", "ecd"])
        with use_backend("numba"):
            later = calibkit.calibration_report(p, y, metrics=["ece", "mce", "brier", "nll", "ecd"])
        for name in ("ece", "mce", "brier", "nll", "ecd"):
            a, b = first[name], later[name]
            worst = max(worst, abs(a - b) / max(abs(b), 1e-300))
    assert worst <= 1e-14  # "about 1e-15 relative" (README, GPUs and engines); not promised to the bit


# ---- Also: a warning about absent classes stays short at a vocabulary's width ---------------


def test_the_missing_class_warning_gives_a_count_and_the_first_ids():
    k = 16_000
    p = np.full((4, k), 1.0 / k)
    y = np.array([0, 1, 2, 3])
    with pytest.warns(calibkit.MissingClassWarning) as caught:
        calibkit.cece(p, y)
    message = str(caught[0].message)
    assert message.startswith("15996 classes ([4, 5, 6, 7, 8, 9, 10, 11, 12, 13, ...]) have no sample")
    assert len(message) < 200
    with pytest.warns(calibkit.MissingClassWarning, match=r"^classes \[2\] have no sample"):
        calibkit.cece(np.full((2, 3), 1 / 3), np.array([0, 1]))


# ---- Also: a binary probability of exactly 0.5 predicts class 0 for the selective metrics too --


@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_selective_accuracy_at_full_coverage_is_the_accuracy_with_ties_at_one_half(engine):
    p = np.array([0.5, 0.5, 0.5, 0.8, 0.3, 0.5])
    y = np.array([0, 1, 0, 1, 0, 1])  # at 0.5 the prediction is class 0: right, wrong, right, ..., wrong
    with use_backend(engine):
        report = calibkit.calibration_report(p, y, metrics=["ece", "selective_accuracy"], coverage=1.0)
        assert report["accuracy"] == pytest.approx(4 / 6)
        assert calibkit.selective_accuracy(p, y, coverage=1.0) == pytest.approx(4 / 6, abs=1e-12)
        assert report["selective_accuracy"] == pytest.approx(4 / 6, abs=1e-12)
