"""Inspect AI, run for real offline: calibkit's metrics in its results, and its logs read back.

A tiny GPT-2 (a BPE tokenizer trained here, weights set so that it answers ``ANSWER: <letter>``
with a letter that depends on the prompt's length) runs through ``inspect_ai.eval`` with the
``hf`` provider: a multiple-choice task (Inspect's ``multiple_choice`` solver and ``choice``
scorer, C/I) and a generation task (a scorer of 1/0), both wrapped by ``calibrated``, greedy; and
the same multiple-choice task sampled (the ``hf`` provider's default), whose logged tokens are the
most likely ones, not the answer's. Every source is checked against a plain loop over the log's
JSON, and the metrics in Inspect's results against ``generations_report`` on the reader's output.
"""

import json
import math
import random
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest

inspect_ai = pytest.importorskip("inspect_ai")

from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.log import read_eval_log, write_eval_log  # noqa: E402
from inspect_ai.model import GenerateConfig  # noqa: E402
from inspect_ai.scorer import Score, accuracy, choice, scorer  # noqa: E402
from inspect_ai.solver import generate, multiple_choice  # noqa: E402

from calibkit.lm.generations import generations_report  # noqa: E402
from calibkit.lm.inspect_logs import BYTE_LEVEL, read_inspect_logs  # noqa: E402
from calibkit.plugins.inspect_ai import KEY, calibrated  # noqa: E402

WORDS = "alpha beta gamma delta red green blue cat dog bird one two three four five".split()
CONFIG = GenerateConfig(logprobs=True, top_logprobs=5, max_tokens=6)
N = 12


def build_model(folder: Path) -> Path:
    """Return a folder with a tiny GPT-2 that answers ``ANSWER: X`` and then ends.

    The block's outputs are zeroed, so the next token depends on the last token and its position
    only: any prompt is followed by ``ANSWER``, ``ANSWER`` by ``:``, ``:`` by a letter whose
    probabilities move with the position (the prompt's length), a letter by the end of text.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    texts = [" ".join(WORDS[i : i + 5]) for i in range(len(WORDS))] + [f"ANSWER: {x}" for x in "ABCD"] * 50
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["[UNK]", "<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(texts * 5, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", unk_token="[UNK]")
    fast.save_pretrained(folder)
    torch.manual_seed(0)
    eos = fast.eos_token_id
    config = GPT2Config(
        vocab_size=len(fast), n_positions=512, n_embd=64, n_layer=1, n_head=2, tie_word_embeddings=False,
        bos_token_id=eos, eos_token_id=eos,
    )  # fmt: skip
    model = GPT2LMHeadModel(config)
    answer, colon, _ = fast.encode("ANSWER: A")
    letters = [fast.encode(f"ANSWER: {x}")[-1] for x in "ABCD"]
    with torch.no_grad():
        block = model.transformer.h[0]
        for layer in (block.attn.c_proj, block.mlp.c_proj):
            layer.weight.zero_()
            layer.bias.zero_()
        wte, wpe, head = model.transformer.wte.weight, model.transformer.wpe.weight, model.lm_head.weight
        wte.normal_(0, 1.0)
        wte[:, :8] = 0  # dimensions 0-2 flag the tokens of the answer's chain, 4-7 carry the position
        wte[answer, 0] = wte[colon, 1] = 10.0
        wte[letters, 2] = 10.0
        wpe.zero_()
        wpe[:, 4:8] = torch.randn(wpe.shape[0], 4) * 2
        head.normal_(0, 0.02)
        model.transformer.ln_f.bias.zero_()
        model.transformer.ln_f.bias[3] = 1.0
        head[answer, 3] = 10.0  # after any prompt
        head[colon, 0] = 2.0
        head[letters, 1] = 2.0
        head[letters, 4:8] = torch.randn(4, 4)  # which letter: by position
        head[eos, 2] = 2.0
    model.save_pretrained(folder)
    return folder


def questions() -> list[tuple[str, str]]:
    return [(" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(2 + i % 5)), "ABCD"[i % 4]) for i in range(N)]


@scorer(metrics=[accuracy()])
def same_text():
    """1.0 when the completion is the target, 0.0 otherwise: a scorer of numbers, not C/I."""

    async def score(state, target):
        return Score(value=float(state.output.completion.strip() == target.text), answer=state.output.completion)

    return score


def mc_task(scorer_, shuffle=False):
    data = [
        Sample(input=q, choices=["red", "blue", "cat", "dog"], target=t, id=f"q{i}")
        for i, (q, t) in enumerate(questions())
    ]
    solver = multiple_choice(shuffle=random.Random(0) if shuffle else False)
    name = "tiny_mc_shuffled" if shuffle else "tiny_mc"
    return inspect_ai.Task(dataset=data, solver=solver, scorer=scorer_, config=CONFIG, name=name)


def gen_task():
    data = [Sample(input=q, target=f"ANSWER: {t}", id=f"g{i}") for i, (q, t) in enumerate(questions())]
    return inspect_ai.Task(
        dataset=data, solver=generate(), scorer=calibrated(same_text()), config=CONFIG, name="tiny_gen"
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two real runs: greedy (calibrated MC and generation tasks) and sampled (MC, plain and calibrated, with
    and without shuffled choices)."""
    import os

    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    folder = tmp_path_factory.mktemp("inspect")
    model = build_model(folder / "model")
    greedy = inspect_ai.eval(
        [mc_task(calibrated(choice())), gen_task()], model="hf/tiny",
        model_args=dict(model_path=str(model), do_sample=False), log_dir=str(folder / "greedy"), display="none",
    )  # fmt: skip
    sampled = inspect_ai.eval(
        [mc_task(choice()), mc_task(calibrated(choice())), mc_task(choice(), shuffle=True),
         mc_task(calibrated(choice()), shuffle=True)], model="hf/tiny", model_args=dict(model_path=str(model)),
        log_dir=str(folder / "sampled"), display="none", fail_on_error=False, temperature=20.0,
    )  # fmt: skip
    logs = {"mc": greedy[0], "gen": greedy[1], "sampled": sampled[0], "sampled_calibrated": sampled[1]}
    logs.update(shuffled=sampled[2], shuffled_calibrated=sampled[3])
    return folder, model, logs


def plain_samples(location: str) -> list[dict]:
    """The log's samples as JSON, read without Inspect: a ``.json`` log's list, a ``.eval`` zip's files."""
    if location.endswith(".json"):
        return json.loads(Path(location).read_text())["samples"]
    with zipfile.ZipFile(location) as archive:
        names = [n for n in archive.namelist() if n.startswith("samples/")]
        return [json.loads(archive.read(n)) for n in names]


def plain_sources(sample: dict) -> dict[str, float]:
    """Each source of one sample by a plain loop over its JSON, GPT-2's byte-level tokens decoded by hand."""

    def text(token: str) -> str:
        return bytes(BYTE_LEVEL[c] for c in token).decode("utf-8")

    completion = sample["output"]["completion"]
    content = sample["output"]["choices"][0]["logprobs"]["content"]
    spelled, tokens = "", []
    for entry in content:
        if spelled == completion:
            break
        spelled += text(entry["token"])
        tokens.append(entry)
    assert spelled == completion
    logprobs = [t["logprob"] for t in tokens]
    out = {
        "sequence": math.exp(sum(logprobs)),
        "sequence_normalized": math.exp(sum(logprobs) / len(logprobs)),
        "least_token": math.exp(min(logprobs)),
    }
    if sample.get("choices"):
        (score,) = sample["scores"].values()
        letters = "ABCD"[: len(sample["choices"])]
        chosen = score["answer"]
        at = [t for t in tokens if text(t["token"]).strip() == chosen][-1]
        mass = dict.fromkeys(letters, 0.0)
        for alternative in at["top_logprobs"]:
            word = text(alternative["token"]).strip()
            if word in mass:
                mass[word] += math.exp(alternative["logprob"])
        out["letter"] = mass[chosen] / sum(mass.values())
    return out


@pytest.mark.parametrize("which", ["mc", "gen"])
@pytest.mark.parametrize("form", ["eval", "json"])
def test_each_source_equals_a_plain_loop_over_the_logs_json(runs, which, form, tmp_path):
    _, _, logs = runs
    location = logs[which].location
    if form == "json":  # the same log, written by Inspect as .json
        location = str(tmp_path / "log.json")
        write_eval_log(read_eval_log(logs[which].location), location, format="json")
    data = read_inspect_logs(location)
    samples = {str(s["id"]): s for s in plain_samples(location)}
    assert sorted(data.ids) == sorted(samples) and len(data) == N
    expected_sources = {"sequence", "sequence_normalized", "least_token"} | ({"letter"} if which == "mc" else set())
    assert set(data.confidence) == expected_sources
    for row, ident in enumerate(data.ids):
        sample = samples[ident]
        (score,) = sample["scores"].values()
        value = score["value"]
        assert data.correct[row] == ({"C": 1.0, "I": 0.0}[value] if isinstance(value, str) else float(value))
        expected = plain_sources(sample)
        for name, value in expected.items():
            assert data.confidence[name][row] == pytest.approx(value, abs=1e-12, rel=0), (ident, name)
    # the scores are what the runs wrote: C/I for the choice scorer, numbers for the other
    values = {v["value"] for s in samples.values() for v in s["scores"].values()}
    assert values <= ({"C", "I"} if which == "mc" else {0.0, 1.0}) and len(values) == 2


@pytest.mark.parametrize("which", ["mc", "gen"])
def test_inspect_results_show_calibkits_metrics_equal_to_the_report_of_the_log(runs, which):
    _, _, logs = runs
    log = read_eval_log(logs[which].location)
    assert log.status == "success"
    (scores,) = log.results.scores
    shown = {name: m.value for name, m in scores.metrics.items()}
    assert {"accuracy", "ece", "brier", "nll", "aurc"} <= set(shown)
    source = "letter" if which == "mc" else "sequence"
    report = generations_report(read_inspect_logs(log.location), sources=[source])
    judged = report["pooled"]["sources"][source]
    for name in ("ece", "brier", "nll", "aurc"):
        assert shown[name] == pytest.approx(judged[name], abs=1e-12, rel=0), name
    assert shown["accuracy"] == pytest.approx(report["pooled"]["accuracy"], abs=1e-12)
    assert 0 < judged["ece"] < 1 and 0 < judged["aurc"] < 1


def test_the_scorer_records_the_confidence_the_reader_reads(runs):
    _, _, logs = runs
    for which, source in (("mc", "letter"), ("gen", "sequence")):
        log = read_eval_log(logs[which].location)
        data = read_inspect_logs(log.location)
        recorded = {str(s.id): next(iter(s.scores.values())).metadata[KEY] for s in log.samples}
        for row, ident in enumerate(data.ids):
            assert recorded[ident]["source"] == source
            assert recorded[ident]["confidence"] == pytest.approx(data.confidence[source][row], abs=1e-12, rel=0)


def test_a_sampled_hf_run_is_refused_with_the_reason_and_the_fix(runs):
    _, _, logs = runs
    log = read_eval_log(logs["sampled"].location)
    assert log.status == "success"  # Inspect itself says nothing
    with pytest.raises(ValueError, match=r"sample q\d+: the logged tokens spell .* do_sample=False"):
        read_inspect_logs(log.location)
    # the calibrated scorer refuses it while scoring: the samples error with the same reason
    errored = read_eval_log(logs["sampled_calibrated"].location)
    messages = [s.error.message for s in errored.samples if s.error is not None]
    assert messages and all("do_sample=False" in m for m in messages)


def test_shuffled_choices_are_refused_since_inspect_rewrites_the_completion(runs):
    _, _, logs = runs
    with pytest.raises(ValueError, match=r"sample q\d+: the choices were shuffled, .* without shuffle"):
        read_inspect_logs(logs["shuffled"].location)
    errored = read_eval_log(logs["shuffled_calibrated"].location)
    messages = [s.error.message for s in errored.samples if s.error is not None]
    # a question whose shuffle left the choices in place is refused for the run's sampling instead
    assert len(messages) == N and all("the choices were shuffled" in m or "do_sample=False" in m for m in messages)
    assert sum("the choices were shuffled" in m for m in messages) > N // 2
    with pytest.raises(ValueError, match=r"no score, the sample failed: .*the choices were shuffled"):
        read_inspect_logs(errored.location)


def test_the_letters_details_give_the_mass_outside_the_returned_alternatives(runs):
    _, _, logs = runs
    location = logs["mc"].location
    data, details = read_inspect_logs(location, details=True)
    samples = {str(s["id"]): s for s in plain_samples(location)}
    for row, ident in enumerate(data.ids):
        content = samples[ident]["output"]["choices"][0]["logprobs"]["content"]
        letter = next(t for t in content if bytes(BYTE_LEVEL[c] for c in t["token"]).decode().strip() in "ABCD")
        returned = sum(math.exp(a["logprob"]) for a in letter["top_logprobs"])
        assert details["outside_mass"][row] == pytest.approx(1 - returned, abs=1e-12)
        assert details["n_tokens"][row] == 3  # ANSWER, :, the letter; the end of text is not the answer's
    assert np.all(details["absent_bound"] <= details["outside_mass"] + 1e-15)


def edited(log_location: str, folder: Path, edit) -> str:
    log = read_eval_log(log_location)
    edit(log)
    out = str(folder / "edited.json")
    write_eval_log(log, out, format="json")
    return out


def test_bad_logs_are_refused_naming_the_file_the_sample_and_the_fix(runs, tmp_path):
    _, _, logs = runs
    mc = logs["mc"].location

    def no_logprobs(log):
        log.samples[0].output.choices[0].logprobs = None

    with pytest.raises(ValueError, match=r"edited\.json, sample q\d+: no log-probabilities.*logprobs=True"):
        read_inspect_logs(edited(mc, tmp_path, no_logprobs))

    def two_scores(log):
        for s in log.samples:
            s.scores["other"] = Score(value="C")

    location = edited(mc, tmp_path, two_scores)
    with pytest.raises(ValueError, match=r"the scores \['choice', 'other'\]: name one"):
        read_inspect_logs(location)
    assert read_inspect_logs(location, scorer="other").correct.tolist() == [1.0] * N
    with pytest.raises(ValueError, match=r"no score 'gone'"):
        read_inspect_logs(location, scorer="gone")

    def dict_score(log):
        log.samples[1].scores["choice"] = Score(value={"a": 1})

    with pytest.raises(ValueError, match=r"is not one number"):
        read_inspect_logs(edited(mc, tmp_path, dict_score))

    def text_changed(log):
        log.samples[2].output.completion = "ANSWER: Z"

    with pytest.raises(
        ValueError,
        match=r"sample q\d+: the logged tokens spell 'ANSWER: [A-D]<\|endoftext\|>' but the answer is 'ANSWER: Z'",
    ):
        read_inspect_logs(edited(mc, tmp_path, text_changed))

    (tmp_path / "notes.json").write_text('{"a": 1}')
    with pytest.raises(ValueError, match=r"`location`: .*notes\.json is not an Inspect log"):
        read_inspect_logs(tmp_path / "notes.json")
    with pytest.raises(ValueError, match=r"`location`: no such file"):
        read_inspect_logs(tmp_path / "gone")


def test_a_folder_reads_every_log_and_two_runs_of_one_task_are_refused(runs, tmp_path):
    folder, _, logs = runs
    data = read_inspect_logs(folder / "greedy")
    assert sorted(set(data.task)) == ["tiny_gen", "tiny_mc"] and len(data) == 2 * N
    report = generations_report(data)
    assert set(report["tasks"]) == {"tiny_gen", "tiny_mc"}
    assert np.isnan(data.confidence["letter"][data.task == "tiny_gen"]).all()  # letters: multiple choice only
    copy = tmp_path / "twice"
    copy.mkdir()
    for name in ("a", "b"):
        write_eval_log(read_eval_log(logs["mc"].location), str(copy / f"{name}.json"), format="json")
    (copy / "notes.json").write_text('{"a": 1}')  # another JSON file in the folder is left alone
    with pytest.raises(ValueError, match=r"two answers to one sample of task 'tiny_mc'"):
        read_inspect_logs(copy)
    (copy / "b.json").unlink()
    assert len(read_inspect_logs(copy)) == N


def test_a_partial_score_is_right_as_the_guide_says():
    """Right when value_to_float gives at least 0.5: C 1, P 0.5, I 0, numbers as they are."""
    from inspect_ai.scorer import SampleScore

    from calibkit.plugins.inspect_ai import brier, confidence_and_right

    values = ["C", "P", "I", 0.5, 0.49, 1.0]
    record = {KEY: {"source": "sequence", "confidence": 0.8}}
    scores = [SampleScore(score=Score(value=v, metadata=record), sample_id=f"s{i}") for i, v in enumerate(values)]
    confidence, right = confidence_and_right(scores)
    assert right.tolist() == [1.0, 1.0, 0.0, 1.0, 0.0, 1.0] and confidence.tolist() == [0.8] * 6
    assert brier()(scores) == pytest.approx((4 * 0.2**2 + 2 * 0.8**2) / 6, abs=1e-12)  # P counted right


def test_prr_and_augrc_on_request_equal_the_rejection_metrics():
    from inspect_ai.scorer import SampleScore

    from calibkit.metrics.rejection import rejection_metrics
    from calibkit.plugins.inspect_ai import augrc, prr

    rng = np.random.default_rng(4)
    confidence = rng.random(60)
    values = np.where(rng.random(60) < confidence, "C", "I")
    scores = [
        SampleScore(score=Score(value=v, metadata={KEY: {"source": "sequence", "confidence": float(c)}}), sample_id=i)
        for i, (v, c) in enumerate(zip(values, confidence))
    ]
    want = rejection_metrics(confidence, (values == "C").astype(float))
    assert prr()(scores) == pytest.approx(want["prr"], abs=1e-12)
    assert augrc()(scores) == pytest.approx(want["augrc"], abs=1e-12)


UNKNOWN = r"^`source`: unknown confidence source 'entropy'; known: sequence, sequence_normalized, least_token, letter$"
"""The one message of an unknown source (:func:`calibkit.lm.sources.check_source`), listing the known ones."""


def test_the_letters_old_spelling_is_still_read_with_a_warning(runs, capsys):
    """``letters``, the Inspect reader's and plugin's name of the letters' source, is ``letter`` (the registry's)."""
    from calibkit.cli import main

    _, _, logs = runs
    data = read_inspect_logs(logs["mc"].location)
    assert "letter" in data.confidence and "letters" not in data.confidence
    new = generations_report(data, sources=["letter"])["pooled"]["sources"]["letter"]
    with pytest.warns(FutureWarning, match=r"`sources`: the confidence source 'letters' is renamed 'letter'"):
        old = generations_report(data, sources=["letters"])["pooled"]["sources"]["letter"]
    assert old == new
    with pytest.warns(FutureWarning, match=r"`source`: the confidence source 'letters' is renamed 'letter'"):
        calibrated(choice(), source="letters")
    capsys.readouterr()
    argv = ["generations", "--answers", logs["mc"].location, "--resplits", "0", "--json", "--confidence"]
    assert main([*argv, "letters"]) == 0
    shown, err = capsys.readouterr()
    assert err.startswith("calibkit: --confidence: the confidence source 'letters' is renamed 'letter'")
    assert main([*argv, "letter"]) == 0
    assert json.loads(shown) == json.loads(capsys.readouterr().out)


def test_calibrated_refuses_an_unknown_source():
    with pytest.raises(ValueError, match=UNKNOWN):
        calibrated(choice(), source="entropy")


def test_read_generations_and_the_command_line_read_inspect_logs(runs, tmp_path, capsys):
    from calibkit.cli import main
    from calibkit.lm.generations import read_generations

    folder, _, logs = runs
    direct = read_inspect_logs(folder / "greedy")
    for location in (folder / "greedy", logs["mc"].location):
        data = read_generations(location)
        mine = direct.subset(np.isin(direct.task, np.unique(data.task)))
        assert data.ids.tolist() == mine.ids.tolist() and data.correct.tolist() == mine.correct.tolist()
        for name, values in mine.confidence.items():
            assert np.array_equal(data.confidence[name], values, equal_nan=True)
    as_json = tmp_path / "log.json"
    write_eval_log(read_eval_log(logs["mc"].location), str(as_json), format="json")
    assert read_generations(as_json).ids.tolist() == read_inspect_logs(logs["mc"].location).ids.tolist()
    capsys.readouterr()
    assert main(["generations", "--answers", logs["mc"].location, "--resplits", "0", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    judged = generations_report(direct.subset(direct.task == "tiny_mc"))["pooled"]["sources"]["letter"]
    assert shown["pooled"]["sources"]["letter"]["ece"] == pytest.approx(judged["ece"], abs=1e-12)


def test_the_scorer_refuses_an_output_without_log_probabilities_and_passes_on_no_output():
    from inspect_ai.model import ModelOutput
    from inspect_ai.solver import TaskState

    from calibkit.plugins.inspect_ai import sample_confidence

    state = TaskState(model="m", sample_id="s1", epoch=1, input="x", messages=[])
    state.output = ModelOutput.from_content(model="m", content="ANSWER: A")
    with pytest.raises(ValueError, match=r"sample s1 epoch 1: no log-probabilities.*logprobs=True"):
        sample_confidence(state, "A")
    state.output = ModelOutput(model="m")  # the model gave nothing
    assert sample_confidence(state, None) == ("sequence", None)
    with pytest.raises(ValueError, match=UNKNOWN):
        sample_confidence(state, None, "entropy")


def test_tokens_are_read_as_text_bytes_byte_level_or_sentencepiece_whichever_spells_the_answer():
    from inspect_ai.model import Logprob, TopLogprob

    from calibkit.lm.inspect_logs import answer_tokens

    def content(tokens, byte_lists=None):
        byte_lists = byte_lists or [None] * len(tokens)
        return [
            Logprob(
                token=t, logprob=-0.1 * (j + 1), bytes=b, top_logprobs=[TopLogprob(token=t, logprob=-0.1 * (j + 1))]
            )
            for j, (t, b) in enumerate(zip(tokens, byte_lists))
        ]

    def spelled(tokens):
        return [t["token"] for t in tokens]

    # OpenAI: text, an accented character split across two tokens given by its bytes
    e = list("é".encode())
    text = answer_tokens(
        content([" caf", "bytes:\\xc3", "bytes:\\xa9", "<eos>"], [None, e[:1], e[1:], None]), " café", "s"
    )
    assert len(text) == 3 and "".join(spelled(text)).startswith(" caf")
    # hf with GPT-2's byte-level alphabet, and with SentencePiece (its decoder drops the first space)
    assert spelled(answer_tokens(content(["ĠParis", "Ċ", "<|endoftext|>"]), " Paris\n", "s")) == [" Paris", "\n"]
    pieces = answer_tokens(content(["▁Paris", "<0x0A>", "▁is", "</s>"]), "Paris\n is", "s")
    assert spelled(pieces) == [" Paris", "\n", " is"] and [t["logprob"] for t in pieces] == [
        -0.1,
        -0.2,
        -0.30000000000000004,
    ]
    # tokens past the answer (the end of text, a batch's padding) are not the answer's; an empty answer has none
    assert answer_tokens(content(["<|endoftext|>", "ĠA"]), "", "s") == []
    with pytest.raises(ValueError, match=r"^s: the logged tokens spell ' Paris' but the answer is ' Rome'"):
        answer_tokens(content(["ĠParis"]), " Rome", "s")


TASK_FILE = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import GenerateConfig
from inspect_ai.scorer import choice
from inspect_ai.solver import multiple_choice

from calibkit.plugins.inspect_ai import calibrated

QUESTIONS = {questions!r}


@task
def tiny_mc():
    choices = ["red", "blue", "cat", "dog"]
    data = [Sample(input=q, choices=choices, target=t, id=f"q{{i}}") for i, (q, t) in enumerate(QUESTIONS)]
    return Task(dataset=data, solver=multiple_choice(), scorer=calibrated(choice()),
                config=GenerateConfig(logprobs=True, top_logprobs=5, max_tokens=6))
"""


@pytest.mark.slow  # a second process importing torch, transformers and Inspect: 20 s
def test_inspect_eval_on_the_command_line_prints_calibkits_metrics(runs, tmp_path):
    import os
    import subprocess
    import sys

    _, model, _ = runs
    (tmp_path / "task.py").write_text(TASK_FILE.format(questions=questions()))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(Path.cwd())}
    command = [
        sys.executable, "-m", "inspect_ai", "eval", "task.py", "--model", "hf/tiny", "-M", f"model_path={model}",
        "-M", "do_sample=False", "--log-dir", "logs", "--display", "plain",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (log,) = (tmp_path / "logs").glob("*.eval")
    report = generations_report(read_inspect_logs(log), sources=["letter"])["pooled"]["sources"]["letter"]
    for name in ("ece", "brier", "nll", "aurc"):
        assert re.search(rf"^{name}\s+{report[name]:.3f}\s*$", done.stdout, re.M), (name, done.stdout[-2000:])
