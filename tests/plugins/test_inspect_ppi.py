"""The Inspect ``ppi`` metric: people's pass rate corrected from a model grader's, in Inspect's own results.

A real offline Inspect eval (mockllm answers, Inspect's ``model_graded_qa`` graded by a second
mockllm whose replies tests/test_judges_inspect.py builds), with human labels for some samples
given two ways: a labels file, and the samples' metadata. The rate and its interval in Inspect's
results equal ``ppi-python``'s ``ppi_mean_ci`` and ``ppi_mean_pointestimate`` on the same
numbers, and ``calibkit judge`` on the eval's log.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

inspect_ai = pytest.importorskip("inspect_ai")
ppi_py = pytest.importorskip("ppi_py")

from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.model import get_model  # noqa: E402
from inspect_ai.scorer import SampleScore, Score, accuracy, model_graded_qa  # noqa: E402
from inspect_ai.solver import generate  # noqa: E402

from calibkit.plugins.inspect_ai import ppi  # noqa: E402
from tests.test_judges_inspect import PASSES, N, answerer, grader, kind  # noqa: E402

LABELLED = [1, 2, 3, 5, 6, 8]
"""The samples people labelled: each label the judge's verdict, except two the judge got wrong."""
WRONG = {2, 6}


def label(i: int) -> float:
    return float(PASSES[i] != (i in WRONG))


def task(name, metrics, with_metadata=False):
    data = [
        Sample(input=f"This is question number {i}.", target=f"gold {i}", id=f"s{i:02d}",
               metadata={"human_label": label(i)} if with_metadata and i in LABELLED else {})
        for i in range(N)
    ]  # fmt: skip
    judge = get_model("mockllm/model", custom_outputs=grader)
    return inspect_ai.Task(dataset=data, solver=generate(), scorer=model_graded_qa(model=judge), metrics=metrics,
                           name=name)  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ppi")
    labels = folder / "labels.csv"
    labels.write_text("id,label\n" + "".join(f"s{i:02d},{label(i):g}\n" for i in LABELLED))
    logs = inspect_ai.eval(
        [task("from_file", [accuracy(), ppi(labels=str(labels))]), task("from_metadata", [ppi()], True)],
        model=get_model("mockllm/model", custom_outputs=answerer), log_dir=str(folder / "logs"), display="none",
    )  # fmt: skip
    return labels, {log.eval.task: log for log in logs}


def reference() -> dict[str, float]:
    """ppi-python on the scored samples: the labelled ones' labels and verdicts, the others' verdicts."""
    scored = [i for i in range(N) if kind(i) != "nograde"]
    y = np.array([label(i) for i in LABELLED])
    f = np.array([float(PASSES[i]) for i in LABELLED])
    u = np.array([float(PASSES[i]) for i in scored if i not in LABELLED])
    lo, hi = ppi_py.ppi_mean_ci(y, f, u, alpha=0.05)
    return {"ppi_pass_rate": float(ppi_py.ppi_mean_pointestimate(y, f, u)[0]), "ppi_pass_rate_ci_lower": float(lo[0]),
            "ppi_pass_rate_ci_upper": float(hi[0]), "ppi_labelled": float(len(LABELLED))}  # fmt: skip


@pytest.mark.parametrize("name", ["from_file", "from_metadata"])
def test_inspect_results_show_the_ppi_rate_equal_to_ppi_python(runs, name):
    _, logs = runs
    log = logs[name]
    assert log.status == "success"
    (scores,) = log.results.scores
    shown = {key: m.value for key, m in scores.metrics.items()}
    expected = reference()
    for key, value in expected.items():
        assert shown[key] == pytest.approx(value, abs=1e-9, rel=0), key
    # the judge passes more than people do here: the correction moves the rate down from the judge's
    judge_rate = np.mean([float(PASSES[i]) for i in range(N) if kind(i) != "nograde"])
    if name == "from_file":
        assert shown["accuracy"] == pytest.approx(judge_rate, abs=1e-12)
    assert expected["ppi_pass_rate_ci_lower"] < expected["ppi_pass_rate"] < expected["ppi_pass_rate_ci_upper"]


def test_calibkit_judge_on_the_log_gives_the_same_corrected_rate(runs, capsys):
    from calibkit.cli import main

    labels, logs = runs
    capsys.readouterr()
    with pytest.warns(UserWarning, match="1 sample"):
        assert main(["judge", "--judged", logs["from_file"].location, "--labels", str(labels), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rate = report["pooled"]["rates"]["ppi"]
    expected = reference()
    assert rate["estimate"] == pytest.approx(expected["ppi_pass_rate"], abs=1e-9)
    assert rate["ci_lower"] == pytest.approx(expected["ppi_pass_rate_ci_lower"], abs=1e-9)


def scores(values, metadata=None):
    return [
        SampleScore(score=Score(value=v), sample_id=f"s{i}", sample_metadata=(metadata or {}).get(i))
        for i, v in enumerate(values)
    ]


def test_too_few_labels_give_nan_and_bad_labels_are_refused(tmp_path):
    metric = ppi()
    out = metric(scores(["C", "I", "C"], {0: {"human_label": 1}}))
    assert out["ppi_labelled"] == 1.0 and math.isnan(out["ppi_pass_rate"])
    every = metric(scores(["C", "I"], {0: {"human_label": 1}, 1: {"human_label": 0}}))
    assert math.isnan(every["ppi_pass_rate"])  # every sample labelled: people's own rate is the answer
    with pytest.raises(ValueError, match=r"^`labels`: sample s1, metadata\['human_label'\]: 'yes' is not a label"):
        metric(scores(["C", "I", "C"], {1: {"human_label": "yes"}}))
    file = tmp_path / "labels.csv"
    file.write_text("id,label\ns0,1\ns1,0.5\ns9,0\n")
    with pytest.raises(ValueError, match=r"^`labels`: .*labels\.csv line 3"):  # a score where verdicts are 0/1
        ppi(labels=str(file))(scores(["C", "I", "C"]))
    file.write_text("id,label\ns0,1\ns1,0\ns9,0\n")  # s9: not (yet) scored, set aside
    assert ppi(labels=str(file))(scores(["C", "I", "C"]))["ppi_labelled"] == 2.0
    with pytest.raises(ValueError, match=r"^`labels`: no such file or folder: .*gone\.csv$"):
        ppi(labels=str(tmp_path / "gone.csv"))
