"""Judged samples read from real Inspect AI runs of its model graders, offline.

Inspect's own ``model_graded_qa`` and ``model_graded_fact`` (default template, instructions and
grade pattern) grade the answers of a mock model (``mockllm``); the grader is a second mock
model whose replies are written here: a chain of thought with the word "I" in it, then
``GRADE: C`` or ``GRADE: I``, with the tokens' log-probabilities (the grade token's alternatives
C, I and a non-grade token) for most samples, a stated ``CONFIDENCE: 80%`` for some, nothing for
others, and no grade at all for one (Inspect leaves it unscored). The reader's verdicts and
confidences are checked against the numbers the replies were built from.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

inspect_ai = pytest.importorskip("inspect_ai")

from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.log import read_eval_log, write_eval_log  # noqa: E402
from inspect_ai.model import (  # noqa: E402
    ChatCompletionChoice,
    ChatMessageAssistant,
    Logprob,
    Logprobs,
    ModelOutput,
    ModelUsage,
    TopLogprob,
    get_model,
)
from inspect_ai.scorer import model_graded_fact, model_graded_qa  # noqa: E402
from inspect_ai.solver import generate  # noqa: E402

from calibkit.lm.judges.inspect_logs import grade_probability, read_inspect_judged, stated_confidence  # noqa: E402

N = 12
RNG = np.random.default_rng(7)
P_GRADE = RNG.uniform(0.3, 0.95, N)  # the probability of the grade the judge gives
PASSES = RNG.random(N) < 0.6  # C or I
OTHER = 0.02  # the probability of the non-grade token among the alternatives


def kind(i: int) -> str:
    """How sample ``i``'s judge reply carries its confidence."""
    return {0: "stated", 1: "nothing"}.get(i % 6, "logprobs") if i != N - 1 else "nograde"


USAGE = ModelUsage(input_tokens=10, output_tokens=10, total_tokens=20)  # mockllm counts with tiktoken (online) without


def plain(content: str, model: str) -> ModelOutput:
    output = ModelOutput.from_content(model=model, content=content)
    output.usage = USAGE
    return output


def reply(i: int) -> ModelOutput:
    """The judge's reply to sample ``i``, built token by token (the tokens spell the reply)."""
    grade = "C" if PASSES[i] else "I"
    if kind(i) == "nograde":
        return plain("I cannot tell.", "judge")
    thought = ["I", " think", " it", " is", " fine", ".", "\n"]
    tail = ["GRADE", ":", " " + grade]
    stated = ["\n", "CONFIDENCE", ":", " 80", "%"] if kind(i) == "stated" else []
    tokens = thought + tail + stated
    text = "".join(tokens)
    if kind(i) != "logprobs":
        return plain(text, "judge")
    p, q = P_GRADE[i], 1 - P_GRADE[i] - OTHER
    content = []
    for t in tokens:
        if t == " " + grade:
            other = " I" if grade == "C" else " C"
            alternatives = [(t, math.log(p)), (other, math.log(q)), (" maybe", math.log(OTHER))]
        else:
            alternatives = [(t, -0.01)]
        content.append(
            Logprob(
                token=t, logprob=alternatives[0][1],
                top_logprobs=[TopLogprob(token=a, logprob=lp) for a, lp in alternatives],
            )
        )  # fmt: skip
    message = ChatMessageAssistant(content=text, model="judge", source="generate")
    choice = ChatCompletionChoice(message=message, stop_reason="stop", logprobs=Logprobs(content=content))
    return ModelOutput(model="judge", choices=[choice], usage=USAGE)


def expected_confidence(i: int) -> float:
    """P(pass) as the judge gave it: P(C) / (P(C) + P(I)), the non-grade token left out."""
    if kind(i) == "logprobs":
        p, q = P_GRADE[i], 1 - P_GRADE[i] - OTHER
        return (p if PASSES[i] else q) / (p + q)
    if kind(i) == "stated":
        return 0.8 if PASSES[i] else 0.2
    return math.nan


def grader(messages, tools, tool_choice, config):
    """The judge: finds the sample in its grading prompt and replies as built."""
    i = int(re.search(r"question number (\d+)", messages[-1].text).group(1))
    return reply(i)


def answerer(messages, tools, tool_choice, config):
    i = int(re.search(r"question number (\d+)", messages[-1].text).group(1))
    return plain(f"answer {i}", "answers")


def task(scorer, name):
    data = [Sample(input=f"This is question number {i}.", target=f"gold {i}", id=f"s{i:02d}") for i in range(N)]
    return inspect_ai.Task(dataset=data, solver=generate(), scorer=scorer, name=name)


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("judged")
    judge = get_model("mockllm/model", custom_outputs=grader)
    runs = inspect_ai.eval(
        [task(model_graded_qa(model=judge), "qa_judged"), task(model_graded_fact(model=judge), "fact_judged")],
        model=get_model("mockllm/model", custom_outputs=answerer), log_dir=str(folder), display="none",
    )  # fmt: skip
    return folder, {log.eval.task: log.location for log in runs}


@pytest.mark.parametrize("name", ["qa_judged", "fact_judged"])
@pytest.mark.parametrize("form", ["eval", "json"])
def test_verdicts_and_the_grade_tokens_probability_are_read_from_the_log(logs, name, form, tmp_path):
    _, locations = logs
    location = locations[name]
    if form == "json":
        location = str(tmp_path / "log.json")
        write_eval_log(read_eval_log(locations[name]), location, format="json")
    with pytest.warns(UserWarning, match=r"^1 sample\(s\) left out: the grader found no grade"):
        judged = read_inspect_judged(location)
    scored = [i for i in range(N) if kind(i) != "nograde"]
    assert judged.ids.tolist() == [f"s{i:02d}" for i in scored] and set(judged.task) == {name}
    assert judged.verdict.tolist() == [float(PASSES[i]) for i in scored]
    expected = [expected_confidence(i) for i in scored]
    np.testing.assert_allclose(judged.confidence, expected, rtol=0, atol=1e-12)
    assert all(e.endswith(("GRADE: C", "GRADE: I", "80%")) for e in judged.explanation)
    assert judged.origin[0].endswith(", sample s00")
    # only the stated confidence, or none
    by_stated = read_inspect_judged(location, confidence="stated")
    stated = [(0.8 if PASSES[i] else 0.2) if kind(i) == "stated" else math.nan for i in scored]
    np.testing.assert_allclose(by_stated.confidence, stated, rtol=0, atol=1e-12)
    assert np.isnan(read_inspect_judged(location, confidence="none").confidence).all()


def test_the_grade_token_is_the_last_one_that_spells_the_verdict():
    tokens = [
        {"token": "I", "logprob": -0.1, "top_logprobs": []},  # the pronoun in the chain of thought
        {"token": " C", "logprob": math.log(0.6), "top_logprobs": [{"token": " I", "logprob": math.log(0.3)}]},
    ]
    assert grade_probability(tokens, 1.0) == pytest.approx(0.6 / 0.9, abs=1e-12)  # the token itself counted
    assert math.isnan(grade_probability(tokens[1:], 0.0))  # no token spells I
    yes = [{"token": "Yes", "logprob": math.log(0.5), "top_logprobs": [
        {"token": "Yes", "logprob": math.log(0.5)}, {"token": " no", "logprob": math.log(0.25)},
        {"token": "NO", "logprob": math.log(0.25)}]}]  # fmt: skip
    assert grade_probability(yes, 1.0) == pytest.approx(0.5, abs=1e-12)


def test_a_stated_confidence_is_the_verdicts_and_one_outside_the_unit_interval_is_refused():
    assert stated_confidence("GRADE: I\nconfidence = 0.9", 0.0, "s") == pytest.approx(0.1, abs=1e-12)
    assert stated_confidence("Confidence: 30% ... CONFIDENCE: 75%", 1.0, "s") == 0.75
    assert math.isnan(stated_confidence("GRADE: C", 1.0, "s"))
    with pytest.raises(ValueError, match=r"^log\.eval, sample 3: the judge states confidence 'CONFIDENCE: 7'"):
        stated_confidence("CONFIDENCE: 7", 1.0, "log.eval, sample 3")


def test_bad_logs_and_arguments_are_refused_in_one_line(logs, tmp_path):
    folder, locations = logs
    with pytest.warns(UserWarning):
        both = read_inspect_judged(folder)
    assert sorted(set(both.task)) == ["fact_judged", "qa_judged"]
    with pytest.raises(ValueError, match=r"sample s00: the judge's log-probabilities were not logged"):
        read_inspect_judged(locations["qa_judged"], confidence="logprobs")
    with pytest.raises(ValueError, match=r"^`confidence`: 'verbal' is none of auto, logprobs, stated, none$"):
        read_inspect_judged(locations["qa_judged"], confidence="verbal")
    with pytest.raises(ValueError, match=r"no score 'choice' \(the sample has \['model_graded_qa'\]\)"):
        read_inspect_judged(locations["qa_judged"], scorer="choice")
    copy = tmp_path / "twice"
    copy.mkdir()
    for name in ("a", "b"):
        write_eval_log(read_eval_log(locations["qa_judged"]), str(copy / f"{name}.json"), format="json")
    with pytest.raises(
        ValueError, match=r"a\.json, sample s00 and .*b\.json, sample s00: two verdicts on sample \'s00\'"
    ):
        with pytest.warns(UserWarning):
            read_inspect_judged(copy)
    (tmp_path / "notes.json").write_text('{"a": 1}')
    with pytest.raises(ValueError, match=r"`location`: .*notes\.json is not an Inspect log"):
        read_inspect_judged(tmp_path / "notes.json")


def test_read_judged_knows_inspect_logs_and_words_their_refusals_as_its_own(logs, tmp_path):
    from calibkit.lm.judges import read_judged

    _, locations = logs
    with pytest.warns(UserWarning):
        direct = read_inspect_judged(locations["qa_judged"])
    with pytest.warns(UserWarning):
        dispatched = read_judged(locations["qa_judged"])
    assert dispatched.ids.tolist() == direct.ids.tolist() and dispatched.origin == direct.origin
    np.testing.assert_array_equal(dispatched.confidence, direct.confidence)
    log = read_eval_log(locations["qa_judged"])
    log.samples[3].scores["model_graded_qa"].value = 3.0
    write_eval_log(log, str(tmp_path / "bad.json"), format="json")
    with pytest.raises(ValueError, match=r"^`judged`: .*bad\.json, sample s03: the score value 3\.0 is 3"):
        read_judged(tmp_path / "bad.json")
