"""Served models' responses: files built through the ``openai`` package's own types from a tiny
random GPT-2's real log-probabilities, each source checked against a plain loop over the same JSON."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from calibkit.lm.served import LETTER_STRIP, SENTINEL, logprob_sources, read_served, served_kind

pytest.importorskip("openai")
torch = pytest.importorskip("torch")

from openai.types import Completion, CompletionChoice  # noqa: E402
from openai.types.chat import ChatCompletion, ChatCompletionTokenLogprob  # noqa: E402
from openai.types.chat.chat_completion import Choice, ChoiceLogprobs  # noqa: E402
from openai.types.chat.chat_completion_message import ChatCompletionMessage  # noqa: E402
from openai.types.chat.chat_completion_token_logprob import TopLogprob  # noqa: E402
from openai.types.completion_choice import Logprobs  # noqa: E402

VOCAB = [" A", " B", " C", " D", "A", "B", "(C", "D.", "The", " answer", " is", " yes", " no", " a", "x", "?", " the"]
LETTERS = "ABCD"
K = 4
QUESTIONS = 12


@pytest.fixture(scope="module")
def model_logprobs():
    """Per question: the prompt's ids, the answer's ids, and the model's log-softmax at each answer token."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(VOCAB), n_positions=32, n_embd=32, n_layer=2, n_head=2)).eval()
    rng = np.random.default_rng(0)
    out = []
    for q in range(QUESTIONS):
        prompt = rng.integers(len(VOCAB), size=4).tolist()
        # "The answer is" and a letter in one of its spellings; two answers without any letter
        tail = [int(rng.integers(4)) + 4 * int(rng.integers(2))] if q % 6 else [11, 12]
        answer = [8, 9, 10, *tail]
        ids = torch.tensor([prompt + answer])
        with torch.no_grad():
            logp = torch.log_softmax(model(ids).logits[0].double(), dim=-1)
        # the distribution of answer token j is the output at the position before it
        steps = logp[len(prompt) - 1 : len(prompt) + len(answer) - 1].numpy()
        out.append((prompt, answer, steps))
    return out


def _text(ids):
    return "".join(VOCAB[i] for i in ids)


def chat_response(prompt, answer, steps, k=K, ident="chatcmpl-0") -> ChatCompletion:
    tokens = []
    for token, step in zip(answer, steps):
        top = np.argsort(-step, kind="stable")[:k]
        tokens.append(
            ChatCompletionTokenLogprob(
                token=VOCAB[token],
                logprob=float(step[token]),
                bytes=list(VOCAB[token].encode()),
                top_logprobs=[
                    TopLogprob(token=VOCAB[t], logprob=float(step[t]), bytes=list(VOCAB[t].encode())) for t in top
                ],
            )
        )
    choice = Choice(
        index=0,
        finish_reason="stop",
        message=ChatCompletionMessage(role="assistant", content=_text(answer)),
        logprobs=ChoiceLogprobs(content=tokens),
    )
    return ChatCompletion(id=ident, object="chat.completion", created=0, model="tiny-gpt2", choices=[choice])


def legacy_response(prompt, answer, steps, k=K) -> Completion:
    tops = [{VOCAB[t]: float(step[t]) for t in np.argsort(-step, kind="stable")[:k]} for step in steps]
    offsets = np.cumsum([0] + [len(VOCAB[t]) for t in answer])[:-1].tolist()
    logprobs = Logprobs(
        tokens=[VOCAB[t] for t in answer],
        token_logprobs=[float(step[t]) for t, step in zip(answer, steps)],
        top_logprobs=tops,
        text_offset=offsets,
    )
    choice = CompletionChoice(index=0, finish_reason="stop", text=_text(answer), logprobs=logprobs)
    return Completion(id="cmpl-0", object="text_completion", created=0, model="tiny-gpt2", choices=[choice])


def gold_letters(model_logprobs):
    """A right letter per question, half of them the model's own."""
    gold = {}
    for q, (_, answer, _) in enumerate(model_logprobs):
        given = VOCAB[answer[-1]].strip(LETTER_STRIP)
        gold[str(q)] = given if (q % 2 and given in LETTERS) else LETTERS[q % 4]
    return gold


def loop_sources(contents, letters, k=None):
    """The sources by a plain loop over the JSON tokens, one answer at a time (``k``: top_logprobs asked)."""
    rows = []
    for tokens in contents:
        values = [t["logprob"] for t in tokens]
        row = {
            "sequence": math.exp(sum(values)),
            "sequence_normalized": math.exp(sum(values) / len(values)),
            "least_token": math.exp(min(values)),
        }
        for j, t in enumerate(tokens):
            text = t["token"].strip(LETTER_STRIP)
            if len(text) == 1 and text in letters:
                returned = {a["token"]: a["logprob"] for a in t["top_logprobs"] if a["logprob"] > SENTINEL}
                returned.setdefault(t["token"], t["logprob"])
                mass = [0.0] * len(letters)
                for tok, lp in returned.items():
                    s = tok.strip(LETTER_STRIP)
                    if len(s) == 1 and s in letters:
                        mass[letters.index(s)] += math.exp(lp)
                outside = max(0.0, 1 - sum(math.exp(lp) for lp in returned.values()))
                # the top k: the chosen token among them where k were returned with it, not vLLM's extra
                chosen_in_top = k is not None and len(t["top_logprobs"]) <= k
                others = [
                    math.exp(a["logprob"]) for a in t["top_logprobs"] if a["token"] != t["token"] or chosen_in_top
                ]
                row.update(
                    position=j,
                    letters=[m / sum(mass) for m in mass],
                    outside=outside,
                    bound=min(min(others), outside),
                    shift=outside / (sum(mass) + outside),
                )
                break
        rows.append(row)
    return rows


def test_chat_sources_equal_a_plain_loop_over_the_json(model_logprobs, tmp_path):
    file = tmp_path / "chat.jsonl"
    file.write_text("".join(chat_response(*m).model_dump_json() + "\n" for m in model_logprobs))
    assert served_kind(file) == "response"
    contents = [json.loads(line)["choices"][0]["logprobs"]["content"] for line in file.read_text().splitlines()]
    got = read_served(file, gold=gold_letters(model_logprobs), letters=LETTERS, top_logprobs=K)
    expected = loop_sources(contents, LETTERS, k=K)
    s = got.sources
    for name in ("sequence", "sequence_normalized", "least_token"):
        np.testing.assert_allclose(s.__getattribute__(name), [r[name] for r in expected], rtol=0, atol=1e-12)
        np.testing.assert_array_equal(got.generations.confidence[name], s.__getattribute__(name))
    with_letter = [i for i, r in enumerate(expected) if "position" in r]
    assert len(with_letter) == QUESTIONS - 2 and (s.letter_position < 0).sum() == 2
    assert s.letter_position[with_letter].tolist() == [expected[i]["position"] for i in with_letter]
    np.testing.assert_allclose(s.letters[with_letter], [expected[i]["letters"] for i in with_letter], atol=1e-12)
    for field, key in (("outside_mass", "outside"), ("absent_bound", "bound"), ("confidence_shift", "shift")):
        np.testing.assert_allclose(getattr(s, field)[with_letter], [expected[i][key] for i in with_letter], atol=1e-12)
    assert s.ece_bound == pytest.approx(np.mean([expected[i]["shift"] for i in with_letter]), abs=1e-12)
    # the random model spreads its mass: some letters fall outside the top 4 and mass is left out
    assert (s.letter_mass[with_letter] == 0).any() and (s.outside_mass[with_letter] > 0.1).all()
    # correctness: the letter given against the gold; the letter source is the distribution there
    gold = gold_letters(model_logprobs)
    given = [VOCAB[a[-1]].strip(LETTER_STRIP) for _, a, _ in model_logprobs]
    assert got.generations.correct.tolist() == [float(g == gold[str(q)]) for q, g in enumerate(given)]
    letter = got.generations.confidence["letter"]
    for i in with_letter:
        assert letter[i] == pytest.approx(expected[i]["letters"][LETTERS.index(given[i])], abs=1e-12)
    assert np.isnan(letter[[0, 6]]).all()


def test_legacy_completions_equal_the_chat_form(model_logprobs, tmp_path):
    chat, legacy = tmp_path / "chat.jsonl", tmp_path / "legacy.jsonl"
    chat.write_text("".join(chat_response(*m).model_dump_json() + "\n" for m in model_logprobs))
    legacy.write_text("".join(legacy_response(*m).model_dump_json() + "\n" for m in model_logprobs))
    gold = gold_letters(model_logprobs)
    a = read_served(chat, gold=gold, letters=LETTERS)
    b = read_served(legacy, gold=gold, letters=LETTERS)
    for name in ("sequence", "sequence_normalized", "least_token", "letter"):
        np.testing.assert_allclose(a.generations.confidence[name], b.generations.confidence[name], atol=1e-12)
    assert a.generations.answers == b.generations.answers
    np.testing.assert_array_equal(a.generations.correct, b.generations.correct)
    # and the legacy JSON itself, by the plain loop (its top_logprobs a mapping of token to log-probability)
    contents = []
    for line in legacy.read_text().splitlines():
        lp = json.loads(line)["choices"][0]["logprobs"]
        contents.append([
            {"token": t, "logprob": v, "top_logprobs": [{"token": x, "logprob": y} for x, y in top.items()]}
            for t, v, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"])
        ])  # fmt: skip
    expected = loop_sources(contents, LETTERS)
    for name in ("sequence", "sequence_normalized", "least_token"):
        np.testing.assert_allclose(getattr(b.sources, name), [r[name] for r in expected], rtol=0, atol=1e-12)
    found = [i for i, r in enumerate(expected) if "position" in r]
    np.testing.assert_allclose(b.sources.letters[found], [expected[i]["letters"] for i in found], atol=1e-12)
    np.testing.assert_allclose(b.sources.outside_mass[found], [expected[i]["outside"] for i in found], atol=1e-12)


def test_one_json_and_free_text_gold(model_logprobs, tmp_path):
    file = tmp_path / "one.json"
    file.write_text(chat_response(*model_logprobs[0]).model_dump_json(indent=2))
    assert served_kind(file) == "response"
    answer = _text(model_logprobs[0][1])
    right = read_served(file, gold={"0": answer.upper() + "."})  # case and punctuation do not count
    wrong = read_served(file, gold={"0": "no"})
    assert right.generations.correct.tolist() == [1.0] and wrong.generations.correct.tolist() == [0.0]
    scored = read_served(file, gold={"0": 0.5})
    assert scored.generations.correct.tolist() == [0.5]


def batch_files(model_logprobs, tmp_path, k=K):
    inputs, outputs = [], []
    for q, (prompt, answer, steps) in enumerate(model_logprobs):
        body = {
            "model": "tiny-gpt2",
            "messages": [{"role": "user", "content": _text(prompt)}],
            "logprobs": True,
            "top_logprobs": k,
        }
        inputs.append({"custom_id": f"q{q}", "method": "POST", "url": "/v1/chat/completions", "body": body})
        response = chat_response(prompt, answer, steps).model_dump(mode="json")
        outputs.append(
            {
                "id": f"batch_req_{q}",
                "custom_id": f"q{q}",
                "response": {"status_code": 200, "body": response},
                "error": None,
            }
        )
    files = tmp_path / "batch_input.jsonl", tmp_path / "batch_output.jsonl"
    files[0].write_text("".join(json.dumps(r) + "\n" for r in inputs))
    files[1].write_text("".join(json.dumps(r) + "\n" for r in outputs[::-1]))
    return *files, inputs, outputs


def test_batch_output_with_its_input_file(model_logprobs, tmp_path):
    input_file, output_file, _, _ = batch_files(model_logprobs, tmp_path)
    assert served_kind(output_file) == "batch" and served_kind(input_file) is None
    gold = tmp_path / "gold.csv"
    gold.write_text("id,correct\n" + "".join(f"q{q},{q % 2}\n" for q in range(QUESTIONS)))
    got = read_served(output_file, gold=gold, batch_input=input_file).generations
    assert got.ids.tolist() == [f"q{q}" for q in reversed(range(QUESTIONS))]
    assert got.questions == [_text(p) for p, _, _ in reversed(model_logprobs)]
    assert got.correct.tolist() == [float(q % 2) for q in reversed(range(QUESTIONS))]
    assert got.origin[0] == f"{output_file}, line 1"


def test_vllm_sentinel_and_echo(model_logprobs, tmp_path):
    prompt, answer, steps = model_logprobs[1]
    response = chat_response(prompt, answer, steps).model_dump(mode="json")
    content = response["choices"][0]["logprobs"]["content"]
    letter_at = 3
    # vLLM: -9999 for an alternative of -inf; it is left out, never read as exp(-9999) = 0 mass of a letter
    content[letter_at]["top_logprobs"][-1]["logprob"] = SENTINEL
    file = tmp_path / "vllm.json"
    file.write_text(json.dumps(response))
    got = read_served(file, gold={"0": "A"}, letters=LETTERS).sources
    expected = loop_sources([content], LETTERS)[0]
    np.testing.assert_allclose(got.outside_mass, [expected["outside"]], atol=1e-12)
    # a sentinel on the answer's own token: no sequence probability
    content[0]["logprob"] = SENTINEL
    file.write_text(json.dumps(response))
    got = read_served(file, gold={"0": "A"}).sources
    assert np.isnan(got.sequence).all() and got.sentinels.tolist() == [1]
    # legacy echo: the prompt's tokens first, the first with a null log-probability (built from the
    # openai type's dump: Completion.model_validate refuses the null)
    legacy = legacy_response(prompt, answer, steps).model_dump(mode="json")
    lp = legacy["choices"][0]["logprobs"]
    plen = len(_text(prompt))
    lp["tokens"] = [VOCAB[t] for t in prompt] + lp["tokens"]
    lp["token_logprobs"] = [None] + [-1.0] * (len(prompt) - 1) + lp["token_logprobs"]
    lp["top_logprobs"] = [None] + [{"x": -1.0}] * (len(prompt) - 1) + lp["top_logprobs"]
    lp["text_offset"] = np.cumsum([0] + [len(VOCAB[t]) for t in prompt]).tolist()[:-1] + [
        plen + o for o in lp["text_offset"]
    ]
    legacy["choices"][0]["text"] = _text(prompt) + legacy["choices"][0]["text"]
    with pytest.raises(ValueError):
        Completion.model_validate(legacy)
    echo = tmp_path / "echo.jsonl"
    echo.write_text(
        json.dumps({"custom_id": "e", "response": {"status_code": 200, "body": legacy}, "error": None}) + "\n"
    )
    request = tmp_path / "echo_input.jsonl"
    request.write_text(
        json.dumps({"custom_id": "e", "body": {"prompt": _text(prompt), "logprobs": K, "echo": True}}) + "\n"
    )
    got = read_served(echo, gold={"e": "A"}, batch_input=request)
    plain = tmp_path / "plain.jsonl"
    plain.write_text(legacy_response(prompt, answer, steps).model_dump_json() + "\n")
    want = read_served(plain, gold={"0": "A"})
    assert got.generations.answers == want.generations.answers == [_text(answer)]
    np.testing.assert_allclose(got.sources.sequence, want.sources.sequence, atol=1e-12)
    with pytest.raises(
        ValueError, match=r"echo\.jsonl, line 1, choices\[0\]\.logprobs\.token_logprobs\[0\]: null \(echo\)"
    ):
        read_served(echo, gold={"e": "A"})


def _one_line(file, record):
    file.write_text(json.dumps(record) + "\n")
    return file


def test_bad_input_names_the_file_the_line_and_the_field(model_logprobs, tmp_path):
    m = model_logprobs[1]
    chat = chat_response(*m).model_dump(mode="json")
    gold = {"0": "A", "q0": "A"}
    f = tmp_path / "bad.jsonl"

    no_logprobs = json.loads(json.dumps(chat))
    no_logprobs["choices"][0]["logprobs"] = None
    with pytest.raises(
        ValueError, match=r"bad\.jsonl, line 1, choices\[0\]\.logprobs\.content: null: no log-probabilities"
    ):
        read_served(_one_line(f, no_logprobs), gold=gold)

    few = json.loads(json.dumps(chat))
    del few["choices"][0]["logprobs"]["content"][2]["top_logprobs"][1:]
    with pytest.raises(
        ValueError,
        match=r"line 1, choices\[0\]\.logprobs\.content\[2\]\.top_logprobs: 1 alternatives, fewer than the top_logprobs=4",  # noqa: E501
    ):
        read_served(_one_line(f, few), gold=gold, top_logprobs=K)
    _, _, inputs, outputs = batch_files(model_logprobs[:1], tmp_path)
    outputs[0]["response"]["body"] = few
    with pytest.raises(ValueError, match=r"content\[2\]\.top_logprobs: 1 alternatives, fewer than the top_logprobs=4"):
        read_served(_one_line(f, outputs[0]), gold=gold, batch_input=_one_line(tmp_path / "in.jsonl", inputs[0]))
    not_asked = dict(inputs[0], body={**inputs[0]["body"], "logprobs": False})
    with pytest.raises(ValueError, match=r"in\.jsonl, line 1: body\.logprobs: no log-probabilities were requested"):
        read_served(f, gold=gold, batch_input=_one_line(tmp_path / "in.jsonl", not_asked))

    legacy = legacy_response(*m).model_dump(mode="json")
    legacy["choices"][0]["logprobs"]["token_logprobs"].pop()
    with pytest.raises(ValueError, match=r"line 1, choices\[0\]\.logprobs\.token_logprobs: 3 entries for 4 tokens"):
        read_served(_one_line(f, legacy), gold=gold)

    from openai.types import BatchError

    error = {
        "id": "b",
        "custom_id": "q0",
        "response": None,
        "error": BatchError(code="server_error", message="boom").model_dump(),
    }
    with pytest.raises(ValueError, match=r"bad\.jsonl, line 1: error: boom \(custom_id 'q0'\)"):
        read_served(_one_line(f, error), gold=gold)
    body_error = {
        "custom_id": "q0",
        "response": {"status_code": 400, "body": {"error": {"message": "bad model"}}},
        "error": None,
    }
    with pytest.raises(ValueError, match=r"line 1: response\.body\.error \(status 400\): bad model"):
        read_served(_one_line(f, body_error), gold=gold)

    with pytest.raises(ValueError, match=r"^`gold`: gold has no id '0'"):  # the argument, not a flag
        read_served(_one_line(f, chat), gold={"1": "A"})
    with pytest.raises(ValueError, match=r"carry no correctness"):
        read_served(f)
    with pytest.raises(ValueError, match=r"gold = 'E' is none of the letters"):
        read_served(f, gold={"0": "E"}, letters=LETTERS)
    positive = json.loads(json.dumps(chat))
    positive["choices"][0]["logprobs"]["content"][1]["logprob"] = 0.5
    with pytest.raises(
        ValueError, match=r"line 1, choices\[0\]\.logprobs\.content\[1\]\.logprob: a log-probability must be"
    ):
        read_served(_one_line(f, positive), gold=gold)
    empty_top = json.loads(json.dumps(chat))
    empty_top["choices"][0]["logprobs"]["content"][3]["top_logprobs"] = []
    with pytest.raises(ValueError, match=r"content\[3\]\.top_logprobs: empty at the letter position"):
        read_served(_one_line(f, empty_top), gold=gold, letters=LETTERS)


def test_a_repeated_custom_id_is_refused_naming_the_file_the_id_and_the_lines(model_logprobs, tmp_path):
    """Both rows were read before: the report counted that question twice (issue 62, item 1)."""
    input_file, _, inputs, outputs = batch_files(model_logprobs[:4], tmp_path)
    out = tmp_path / "out.jsonl"
    ids = ["q0", "dup", "q2", "dup"]
    out.write_text("".join(json.dumps({**r, "custom_id": i}) + "\n" for r, i in zip(outputs, ids)))
    gold = {i: "A" for i in ids}
    with pytest.raises(
        ValueError, match=rf"^`file`: {re.escape(str(out))}: custom_id 'dup' appears twice \(lines 2 and 4\)$"
    ):
        read_served(out, gold=gold)
    doubled = tmp_path / "in.jsonl"
    doubled.write_text("".join(json.dumps({**r, "custom_id": i}) + "\n" for r, i in zip(inputs, ids)))
    with pytest.raises(
        ValueError, match=r"^`batch_input`: .*in\.jsonl: custom_id 'dup' appears twice \(lines 2 and 4\)$"
    ):
        read_served(out, gold=gold, batch_input=doubled)


@pytest.mark.parametrize(
    "suffix, where", [(".jsonl", "lines 2 and 4"), (".csv", "lines 3 and 5"), (".parquet", "rows 1 and 3")]
)
def test_a_gold_file_that_gives_one_id_twice_is_refused(model_logprobs, tmp_path, suffix, where):
    """The last line won before: the correctness depended on the order of the lines."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    file = tmp_path / "answers.jsonl"
    file.write_text("".join(chat_response(*m).model_dump_json() + "\n" for m in model_logprobs[:3]))
    rows = [("0", "A"), ("1", "B"), ("2", "C"), ("1", "D")]
    gold = tmp_path / f"gold{suffix}"
    if suffix == ".parquet":
        pq.write_table(pa.table({"id": [r[0] for r in rows], "gold": [r[1] for r in rows]}), gold)
    elif suffix == ".csv":
        gold.write_text("id,gold\n" + "".join(f"{i},{g}\n" for i, g in rows))
    else:
        gold.write_text("".join(json.dumps({"id": i, "gold": g}) + "\n" for i, g in rows))
    with pytest.raises(ValueError, match=rf"^`gold`: {re.escape(str(gold))}: id '1' appears twice \({where}\)$"):
        read_served(file, gold=gold, letters=LETTERS)
    same = tmp_path / "same.jsonl"  # the same gold twice: refused too, a repeat is a mistake of the file
    same.write_text("".join(json.dumps({"id": i, "correct": 1}) + "\n" for i in ("0", "1", "2", "0")))
    with pytest.raises(ValueError, match=r"same\.jsonl: id '0' appears twice \(lines 1 and 4\)"):
        read_served(file, gold=same)
    with pytest.raises(ValueError, match=r"^`gold`: the id '1' appears twice \(as 1 and '1'\)$"):
        read_served(file, gold={0: "A", 1: "B", "1": "C", 2: "D"})


def test_logprob_sources_reads_objects_and_empty_answers():
    """The ``openai`` objects themselves (Inspect's are alike) read as their dumps do."""
    tokens = [
        ChatCompletionTokenLogprob(
            token=" B",
            logprob=math.log(0.5),
            top_logprobs=[TopLogprob(token=" B", logprob=math.log(0.5)), TopLogprob(token="C", logprob=math.log(0.25))],
        )
    ]
    a = logprob_sources([tokens, []], letters=LETTERS, top_logprobs=2)
    b = logprob_sources([[t.model_dump() for t in tokens], []], letters=LETTERS, top_logprobs=2)
    np.testing.assert_array_equal(a.letters, b.letters)
    assert a.letters[0].tolist() == pytest.approx([0, 2 / 3, 1 / 3, 0]) and np.isnan(a.sequence[1])
    assert a.absent_bound[0] == pytest.approx(0.25) and a.outside_mass[0] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="letters must be distinct single characters"):
        logprob_sources([tokens], letters="AAB")


def test_the_served_command_reads_served_responses(model_logprobs, tmp_path, capsys):
    from calibkit.cli import main
    from calibkit.lm.generations import generations_report, kind_of, read_generations
    from calibkit.lm.multiple_choice import multiple_choice_report

    input_file, output_file, _, _ = batch_files(model_logprobs, tmp_path)
    gold = tmp_path / "gold.jsonl"
    letters = gold_letters(model_logprobs)
    gold.write_text("".join(json.dumps({"id": f"q{q}", "gold": letters[str(q)]}) + "\n" for q in range(QUESTIONS)))
    assert kind_of(output_file) == "served" and kind_of(input_file) is None
    argv = ["served", "--answers", str(output_file), "--gold", str(gold), "--letters", LETTERS, "--resplits", "0"]
    assert main([*argv, "--batch-input", str(input_file), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    served = {"gold": gold, "letters": LETTERS, "batch_input": input_file}
    want = generations_report(read_generations(output_file, served=served))
    for source in ("sequence", "sequence_normalized", "least_token", "letter"):
        assert got["kinds"][source] == "log-probabilities"
        assert got["pooled"]["sources"][source]["ece"] == pytest.approx(want["pooled"]["sources"][source]["ece"])
    read = read_served(output_file, **served)
    choices = multiple_choice_report(read.choices())
    assert got["letters"]["report"]["pooled"]["ece"] == pytest.approx(choices["pooled"]["ece"])
    assert got["letters"]["ece_bound"] == pytest.approx(read.sources.ece_bound)
    assert got["letters"]["with_letter"] == QUESTIONS - 2
    assert main(argv) == 0
    assert "the top-label ECE over the letters could differ by at most" in capsys.readouterr().out
    assert main(argv[:3]) == 2  # no gold
    err = capsys.readouterr().err
    assert "served responses carry no correctness" in err and err.count("\n") == 1
    assert "(--gold: a file with id and gold or correct columns)" in err  # the argument `gold`, named as typed


def test_the_served_command_names_its_flags_in_the_readers_errors(model_logprobs, tmp_path, capsys):
    from calibkit.cli import main
    from tests.test_generations import answers, write_jsonl

    def error(*argv):
        capsys.readouterr()
        assert main(["served", *map(str, argv), "--resplits", "0"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("calibkit: error: ") and err.count("\n") == 1, err
        return err[len("calibkit: error: ") : -1]

    input_file, output_file, _, outputs = batch_files(model_logprobs[:4], tmp_path)
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps({"id": i, "correct": 1}) + "\n" for i in ("q0", "q1", "q2", "q1", "q3")))
    assert error("--answers", output_file, "--gold", gold) == f"--gold: {gold}: id 'q1' appears twice (lines 2 and 4)"
    out = tmp_path / "dup" / "out.jsonl"
    out.parent.mkdir()
    out.write_text("".join(json.dumps({**r, "custom_id": i}) + "\n" for r, i in zip(outputs, ["q0", "q1", "q2", "q1"])))
    assert error("--answers", out, "--gold", gold) == f"--answers: {out}: custom_id 'q1' appears twice (lines 2 and 4)"
    assert error("--answers", output_file, "--gold", gold, "--batch-input", tmp_path / "none.jsonl").startswith(
        "--batch-input: no such file: "
    )
    assert error("--answers", tmp_path / "none.jsonl", "--gold", gold).startswith("--answers: no such file or folder")
    gold.write_text("".join(json.dumps({"id": f"q{q}", "correct": 1}) + "\n" for q in range(4)))
    assert error("--answers", output_file, "--gold", gold, "--confidence", "ptrue").startswith(
        "--confidence: unknown confidence source 'ptrue'; known: least_token (in the data), "
    )
    table = tmp_path / "table" / "table.jsonl"
    table.parent.mkdir()
    write_jsonl(table, answers(4))  # another kind of answers, and no response
    assert error("--answers", table.parent, "--gold", gold) == (
        f"--answers: {table} holds a generations table, not a served model's responses: calibkit generations reads it"
    )
    mixed = tmp_path / "mixed"  # beside the responses: read with them, as generations read such a folder
    mixed.mkdir()
    (mixed / "out.jsonl").write_text(output_file.read_text())
    write_jsonl(mixed / "table.jsonl", answers(4))
    capsys.readouterr()
    assert main(["served", "--answers", str(mixed), "--gold", str(gold), "--resplits", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pooled"]["questions"] == 8


@pytest.mark.parametrize(
    "old, line",
    [
        (
            ["generations", "--answers"],
            "`calibkit generations` of a served model's responses is deprecated: use `calibkit served`",
        ),
        (["generations", "--answers=FILE"], "`calibkit generations` of a served model's responses is deprecated"),
        (["report", "--generations"], "`calibkit report --generations` is deprecated: use `calibkit served --answers`"),
    ],
)
def test_the_old_generations_form_of_served_responses_still_works(model_logprobs, tmp_path, capsys, old, line):
    """Served responses had calibkit generations' options until the command had 21: one release more."""
    from calibkit.cli import main

    input_file, output_file, _, _ = batch_files(model_logprobs, tmp_path)
    gold = tmp_path / "gold.jsonl"
    letters = gold_letters(model_logprobs)
    gold.write_text("".join(json.dumps({"id": f"q{q}", "gold": letters[str(q)]}) + "\n" for q in range(QUESTIONS)))
    given = [old[1].replace("FILE", str(output_file))] if "=" in old[1] else [old[1], str(output_file)]
    rest = ["--gol", str(gold), "--letters", LETTERS, "--batch-input", str(input_file), "--resplits", "0", "--json"]
    capsys.readouterr()
    assert main([old[0], *given, *rest]) == 0
    was = capsys.readouterr()
    assert was.err.count("\n") == 1 and was.err.startswith(f"calibkit: {line}"), was.err
    assert "will be removed in the next release" in was.err
    assert main(["served", "--answers", str(output_file), *rest]) == 0
    now = capsys.readouterr()
    assert now.err == "" and json.loads(now.out) == json.loads(was.out)
    # the responses alone tell the old form: the served command then asks for the gold
    assert main([old[0], *given, "--resplits", "0"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"calibkit: {line}") and "carry no correctness" in err[1] and "(--gold: " in err[1]


def test_the_generations_command_without_served_responses_is_not_deprecated(tmp_path, capsys):
    from calibkit.cli import main
    from tests.test_generations import answers, write_jsonl

    file = write_jsonl(tmp_path / "gen.jsonl", answers(30))
    assert main(["generations", "--answers", str(file), "--resplits", "0", "--json"]) == 0
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit):  # a flag of the served command's only
        main(["served", "--answers", str(file), "--metric", "exact_match"])


def test_the_demos_served_part_writes_the_models_own_log_probabilities(tmp_path):
    """The demo's server: greedy answers written in OpenAI's schema hold the model's own log-softmax,
    and the report is read back from those files through read_served."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from calibkit.demos.llm_answers import mmlu_questions
    from calibkit.demos.llm_served import served_section
    from tests.test_generations_harness import build_model

    rng = np.random.default_rng(0)
    words = ["paris", "lyon", "capital", "A", "B", "C", "D"]
    folder = build_model(tmp_path, [f"capital {i} ?\nA. paris\nB. lyon\nAnswer: B" for i in range(8)], positions=256)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    rows = [
        {"question": f"capital {i} ?", **{f"answer_{x}": str(rng.choice(words)) for x in "abcd"},
         "correct_answer": "ABCD"[i % 4], "topic": "geography"}
        for i in range(6)
    ]  # fmt: skip
    part = served_section(model, tokenizer, questions=mmlu_questions(rows), folder=tmp_path / "served", limit=5)
    out = part["json"]
    lines = [json.loads(x) for x in open(out["files"]["batch_output"])]
    assert len(lines) == 5 and out["summary"]["answers"] == 5
    prompt = json.loads(open(out["files"]["batch_input"]).readline())["body"]["messages"][0]["content"]
    content = lines[0]["response"]["body"]["choices"][0]["logprobs"]["content"]
    ids = tokenizer(prompt)["input_ids"]
    answer = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t["token"]))[0] for t in content]
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids + answer])).logits[0].double(), dim=-1)
    for j, (t, token) in enumerate(zip(answer, content)):
        step = logp[len(ids) - 1 + j]
        assert token["logprob"] == pytest.approx(float(step[t]), abs=1e-5)
        assert [a["logprob"] for a in token["top_logprobs"]] == pytest.approx(step.topk(20).values.tolist(), abs=1e-5)
    back = read_served(out["files"]["batch_output"], gold=out["files"]["gold"], letters="ABCD")
    assert out["report"]["pooled"]["sources"]["sequence"]["answers"] == 5
    assert out["report"]["pooled"]["sources"]["sequence"]["mean_confidence"] == pytest.approx(
        back.sources.sequence.mean()
    )
    assert "read back by calibkit.lm.served" in part["text"]


def test_several_choices_are_answers_to_one_question(model_logprobs, tmp_path):
    first, second = (chat_response(*m) for m in model_logprobs[1:3])
    two = first.model_copy(update={"choices": [first.choices[0], second.choices[0].model_copy(update={"index": 1})]})
    file = tmp_path / "n2.json"
    file.write_text(two.model_dump_json())
    got = read_served(file, gold={"0": "B"}, letters=LETTERS)
    assert got.generations.ids.tolist() == ["0#0", "0#1"]
    given = [VOCAB[model_logprobs[q][1][-1]].strip(LETTER_STRIP) for q in (1, 2)]
    assert got.generations.correct.tolist() == [float(g == "B") for g in given]
    files = [_one_line(tmp_path / f"{q}.jsonl", json.loads(r.model_dump_json())) for q, r in ((1, first), (2, second))]
    alone = [read_served(f, gold={"0": "B"}, letters=LETTERS) for f in files]
    for name in ("sequence", "least_token", "letter"):
        assert got.generations.confidence[name].tolist() == [a.generations.confidence[name][0] for a in alone]


def test_the_absent_letter_bound_counts_the_chosen_token_where_it_is_one_of_the_k():
    """The least of the top k bounds every token not returned: the chosen token is one of them when
    it is among the k returned, not when it is vLLM's extra (k+1)-th (sampled from outside the top
    k: a token not returned may lie between it and the k-th), nor when k is not known."""

    def answer(chosen, p, top):
        alternatives = [{"token": t, "logprob": math.log(q)} for t, q in top]
        return [{"token": chosen, "logprob": math.log(p), "top_logprobs": alternatives}]

    among = answer(" D", 0.1, [(" A", 0.5), (" B", 0.2), (" D", 0.1)])  # the issue's: 0.2 outside
    got = logprob_sources([among], letters=LETTERS, top_logprobs=3)
    assert got.outside_mass[0] == pytest.approx(0.2) and got.absent_bound[0] == pytest.approx(0.1)
    assert got.absent_bound[0] == pytest.approx(loop_sources([among], LETTERS, k=3)[0]["bound"])
    extra = answer(" D", 0.1, [(" A", 0.4), (" B", 0.2), (" D", 0.1)])  # 0.3 outside
    got = logprob_sources([extra], letters=LETTERS, top_logprobs=2)  # 3 returned for 2 asked: D is the extra
    assert got.outside_mass[0] == pytest.approx(0.3) and got.absent_bound[0] == pytest.approx(0.2)
    assert logprob_sources([extra], letters=LETTERS, top_logprobs=3).absent_bound[0] == pytest.approx(0.1)
    unknown = logprob_sources([among, extra, []], letters=LETTERS)  # without k: the chosen left out, still a bound
    assert unknown.absent_bound[:2].tolist() == pytest.approx([0.2, 0.2]) and np.isnan(unknown.absent_bound[2])
    each = logprob_sources([among, extra], letters=LETTERS, top_logprobs=[3, 2])  # a Batch API file's own k each
    assert each.absent_bound.tolist() == pytest.approx([0.1, 0.2])
    with pytest.raises(ValueError, match=r"`top_logprobs`: one whole number >= 0 \(or None\) per answer, 2 answers"):
        logprob_sources([among, extra], letters=LETTERS, top_logprobs=[3])
    outside = answer(" D", 0.1, [(" A", 0.4), (" B", 0.2)])  # sampled from outside, not returned among them
    got = logprob_sources([outside], letters=LETTERS, top_logprobs=2)
    assert got.outside_mass[0] == pytest.approx(0.3) and got.absent_bound[0] == pytest.approx(0.2)


def test_a_positive_log_probability_is_refused_above_the_round_off_of_1e_6():
    """A token of probability 1 computed in float32 may come back a hair above 0: up to 1e-6 it is read
    as it is (the guide's refusal table says so), above it refused."""
    from calibkit.lm.served.sources import ROUND_OFF

    def answer(value):
        return [[{"token": " A", "logprob": value, "top_logprobs": [{"token": " A", "logprob": value}]}]]

    assert ROUND_OFF == 1e-6
    edge = logprob_sources(answer(1e-6), letters=LETTERS, top_logprobs=1)
    assert edge.sequence[0] == pytest.approx(math.exp(1e-6), abs=0) and edge.letters[0].tolist() == [1, 0, 0, 0]
    above = float(np.nextafter(1e-6, 1.0))
    with pytest.raises(
        ValueError, match=r"answer 0\.content\[0\]\.logprob: a log-probability must be a number at most 0"
    ):
        logprob_sources(answer(above), letters=LETTERS, top_logprobs=1)
    with pytest.raises(ValueError, match=r"top_logprobs\[0\]\.logprob: a log-probability must be"):
        logprob_sources(
            [[{"token": " A", "logprob": 0.0, "top_logprobs": [{"token": " A", "logprob": 2e-6}]}]], letters=LETTERS
        )


def test_the_generations_command_honours_top_logprobs(model_logprobs, tmp_path, capsys):
    """Issue 62: `calibkit generations --top-logprobs K` was tested only through read_served. Responses with
    K = 4 alternatives a token: asking for 5 is refused naming the token, asking for 4 (or nothing) reads them."""
    from calibkit.cli import main

    _, output_file, _, _ = batch_files(model_logprobs, tmp_path)
    gold = tmp_path / "gold.csv"
    gold.write_text("id,correct\n" + "".join(f"q{q},{q % 2}\n" for q in range(QUESTIONS)))
    argv = ["generations", "--answers", str(output_file), "--gold", str(gold), "--resplits", "0", "--json"]
    assert main([*argv, "--top-logprobs", str(K + 1)]) == 2
    err = capsys.readouterr().err
    assert f"top_logprobs: {K} alternatives, fewer than the top_logprobs={K + 1} asked" in err, err
    assert main([*argv, "--top-logprobs", str(K)]) == 0
    asked = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out) == asked


def test_a_source_the_responses_give_is_read_from_them_not_asked_of_a_model(model_logprobs, tmp_path, capsys):
    """`calibkit served --confidence sequence,verbalized` judges the responses' own sequence probability: it
    once asked for a causal LM (--model, a flag the command does not have), as for a white-box source."""
    from calibkit.cli import main

    _, output_file, _, _ = batch_files(model_logprobs, tmp_path)
    gold = tmp_path / "gold.csv"
    gold.write_text("id,correct\n" + "".join(f"q{q},{q % 2}\n" for q in range(QUESTIONS)))
    argv = ["served", "--answers", str(output_file), "--gold", str(gold), "--resplits", "0", "--json"]
    assert main([*argv, "--confidence", "sequence,verbalized"]) == 0, capsys.readouterr().err
    both = json.loads(capsys.readouterr().out)["pooled"]["sources"]
    assert main([*argv, "--confidence", "sequence"]) == 0
    alone = json.loads(capsys.readouterr().out)["pooled"]["sources"]
    assert set(both) == {"sequence", "verbalized"} and both["sequence"] == alone["sequence"]
