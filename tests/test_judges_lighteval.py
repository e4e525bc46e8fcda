"""Judged samples read from lighteval details files written by lighteval's own judge metrics and tracker, offline.

lighteval's ``JudgeLLMSimpleQA`` (its SimpleQA judge: the prompt built by its template, the reply
read by its ``process_judge_response``) and ``JudgeLLMMixEval`` (a 1-to-5 score) compute each
sample's metrics; the only stand-in is the judge's API client (no network), which replies as
written here. lighteval's ``EvaluationTracker`` writes the details files, as ``--save-details``
does.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("lighteval")

from calibkit.lm.judges.lighteval import read_lighteval_judged  # noqa: E402

N = 9
REPLIES = {f"Q-{i:04d}": "ABC"[i % 3] + ("\nCONFIDENCE: 70%" if i % 4 == 1 else "") for i in range(N)}
SCORES = {f"Q-{i:04d}": 1 + i % 5 for i in range(N)}


class Completions:
    """The judge's API: the reply written for the question found in the prompt (OpenAI's parse call)."""

    def __init__(self, replies):
        self.replies = replies

    def parse(self, model, messages, **kwargs):
        text = messages[-1]["content"]
        reply = next(v for k, v in self.replies.items() if k in text)
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(parsed=reply))])


def client(replies):
    return SimpleNamespace(beta=SimpleNamespace(chat=SimpleNamespace(completions=Completions(replies))))


def write_details(folder, metric, task, questions):
    from lighteval.logging.evaluation_tracker import EvaluationTracker
    from lighteval.models.dummy.dummy_model import DummyModelConfig
    from lighteval.models.model_output import ModelResponse
    from lighteval.tasks.requests import Doc

    docs = [
        Doc(query=f"What is {q}?", choices=[f"gold {q}"], gold_index=0, task_name=task, id=f"d{j}",
            specific={"question": f"What is {q}?"})
        for j, q in enumerate(questions)
    ]  # fmt: skip
    responses = [ModelResponse(text=[f"answer to {q}"]) for q in questions]
    rows = metric.compute(responses=responses, docs=docs)
    tracker = EvaluationTracker(output_dir=str(folder), save_details=True)
    tracker.general_config_logger.log_model_info(model_config=DummyModelConfig(model_name="org/judged-lm", seed=0))
    for doc, response, row in zip(docs, responses, rows):
        tracker.details_logger.log(task, doc, response, row)
    tracker.save()
    (file,) = (folder / "details").rglob(f"details_{task}_*.parquet")
    return file


@pytest.fixture(scope="module")
def details(tmp_path_factory):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from lighteval.metrics.metrics_sample import JudgeLLMMixEval, JudgeLLMSimpleQA

    folder = tmp_path_factory.mktemp("lighteval")
    simpleqa = JudgeLLMSimpleQA()
    simpleqa.judge.client = client(REPLIES)
    simpleqa.judge.process_judge_response = lambda reply: 1.0 if reply.startswith("A") else 0.0  # with a confidence

    def template(question, answer, options, gold):
        return [{"role": "user", "content": question}]

    mixeval = JudgeLLMMixEval(
        judge_model_name="gpt-4o", template=template, process_judge_response=int, judge_backend="openai",
        short_judge_name="local",
    )  # fmt: skip
    mixeval.judge.client = client({k: str(v) for k, v in SCORES.items()})
    questions = list(REPLIES)
    return {
        "simpleqa": write_details(folder / "a", simpleqa, "lighteval|simpleqa_local|0", questions),
        "mixeval": write_details(folder / "b", mixeval, "lighteval|mixeval_local|0", questions),
    }


def test_the_verdicts_replies_and_stated_confidences_of_lightevals_simpleqa_judge(details):
    judged = read_lighteval_judged(details["simpleqa"])
    replies = list(REPLIES.values())
    assert judged.ids.tolist() == [f"d{j}" for j in range(N)] and set(judged.task) == {"lighteval|simpleqa_local|0"}
    assert judged.verdict.tolist() == [1.0 if r.startswith("A") else 0.0 for r in replies]
    assert judged.explanation == replies
    stated = [(0.7 if r.startswith("A") else 0.3) if "CONFIDENCE" in r else math.nan for r in replies]
    np.testing.assert_allclose(judged.confidence, stated, rtol=0, atol=1e-12)
    assert np.isnan(read_lighteval_judged(details["simpleqa"], confidence="none").confidence).all()
    assert judged.origin[2].endswith(", row 2")


def test_a_score_on_another_scale_is_mapped_by_its_scale_and_refused_without_it(details):
    judged = read_lighteval_judged(details["mixeval"], scale=(1, 5))
    assert judged.verdict.tolist() == [(s - 1) / 4 for s in SCORES.values()]
    assert judged.explanation == [""] * N  # JudgeLLMMixEval keeps no reply
    with pytest.raises(ValueError, match=r"details_lighteval\|mixeval_local\|0_.*\.parquet, row 1: the judge's score "
                       r"judge_score_local=2 is outside \[0, 1\]; give its scale \(`scale`\)$"):  # fmt: skip
        read_lighteval_judged(details["mixeval"])
    with pytest.raises(ValueError, match=r"row 4: the judge's score judge_score_local=5 is on the scale 1 to 4$"):
        read_lighteval_judged(details["mixeval"], scale=(1, 4))
    with pytest.raises(ValueError, match=r"^`scale`: \(5, 1\) is not \(lowest, highest\)"):
        read_lighteval_judged(details["mixeval"], scale=(5, 1))


def test_a_folder_reads_every_file_and_bad_details_are_refused_naming_the_file_and_row(details, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    both = read_lighteval_judged(details["simpleqa"].parents[3], scale=(0, 1), metric="simpleqa_judge")
    assert len(both) == N
    with pytest.raises(ValueError, match=r"row 0: no metric 'judge' \(the sample has \['judgement_gpt4o', "):
        read_lighteval_judged(details["simpleqa"], metric="judge")
    two = tmp_path / "details_two_2025-01-02T03-04-05.678901.parquet"
    pq.write_table(pa.table({"doc": [{"id": "a"}], "metric": [{"judge_a": 1.0, "judge_b": 0.0}]}), two)
    with pytest.raises(ValueError, match=r"row 0: the judge scores \['judge_a', 'judge_b'\]: name one \(`metric`\)$"):
        read_lighteval_judged(two)
    assert read_lighteval_judged(two, metric="judge_b").task.tolist() == ["two"]
    pq.write_table(pa.table({"doc": [{"id": "a"}, {"id": "a"}], "metric": [{"judge": 1.0}] * 2}), two)
    with pytest.raises(ValueError, match=r"row 0 and .*row 1: two verdicts on sample 'a' of task 'two'"):
        read_lighteval_judged(two)
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"x": [1]}), other)
    with pytest.raises(ValueError, match=r"^`location`: .*other\.parquet is no lighteval details file"):
        read_lighteval_judged(other)
    (tmp_path / "notes.parquet").write_text("not parquet")
    with pytest.raises(ValueError, match=r"^`location`: .*notes\.parquet cannot be read as Parquet"):
        read_lighteval_judged(tmp_path / "notes.parquet")
    with pytest.raises(ValueError, match=r"^`location`: no lighteval details file"):
        read_lighteval_judged(tmp_path / "empty" if (tmp_path / "empty").mkdir() is None else None)


def test_read_judged_knows_judge_details_and_leaves_other_details_alone(details):
    from calibkit.lm.judges import read_judged
    from calibkit.lm.judges.lighteval import is_judge_details

    dispatched = read_judged(details["simpleqa"])
    assert dispatched.ids.tolist() == read_lighteval_judged(details["simpleqa"]).ids.tolist()
    with pytest.raises(ValueError, match=r"^`judged`: .*row 1: the judge's score judge_score_local=2 is outside"):
        read_judged(details["mixeval"])
    multiple_choice = next(Path(__file__).parent.joinpath("data", "lighteval", "details").rglob("details_*.parquet"))
    assert not is_judge_details(multiple_choice) and is_judge_details(details["simpleqa"])
