"""RLCR's calibration reward (issue 64, item 6): the reference's values, and a GRPO run offline that takes them.

The reference is ``reward_fns.py`` of github.com/damanimehul/RLCR at 8904bed (lines cited per
case); its code is not copied here: each expected value is worked out by hand from the lines cited.
"""

import math
import sys
import types

import numpy as np
import pytest

from calibkit.lm.generations.rlcr import (
    FORMAT_PATTERNS,
    RLCR_REWARD_WEIGHTS,
    accuracy_reward,
    brier_reward,
    exact_match_score,
    format_reward,
    rlcr_reward_funcs,
)


def chat(*texts):
    """Completions in the reference's form: one assistant message each (it reads ``completion[0]["content"]``)."""
    return [[{"role": "assistant", "content": text}] for text in texts]


TAC = "reasoning </think> <answer>{a}</answer> <confidence>{c}</confidence>"
GOLD = "Paris"


def rewards_of(texts, pattern="tac", gold=GOLD, **kwargs):
    completions = chat(*texts)
    answers = [gold] * len(texts)
    return (
        format_reward(completions, format_pattern=pattern),
        accuracy_reward(completions, answers, format_pattern=pattern, checker="exact_match", **kwargs),
        brier_reward(completions, answers, format_pattern=pattern, checker="exact_match", **kwargs),
    )


def test_the_references_own_example_matches_the_tac_pattern():
    # lines 162-167: its __main__ matches this text against the tac pattern (lines 34-35)
    s = (
        "    h   ello whatever </think> <answer> The number of non-empty subsets 31 </answer> "
        "<confidence> 0.9 </confidence>   \n \n  "
    )
    f, a, b = rewards_of([s], gold="the number of non-empty subsets 31")
    assert f == [1.0] and a == [1.0]  # " 0.9 " parses (float strips spaces); exact match after normalising
    assert b == [pytest.approx(1 - (1 - 0.9) ** 2)]  # line 107


@pytest.mark.parametrize(
    ("confidence", "formatted", "brier_if_right"),
    [
        ("0.8", 1.0, 1 - 0.2**2),  # lines 55-59, 107
        ("0", 1.0, 0.0),  # the ends are in: not < 0, not > 1 (line 56)
        ("1", 1.0, 1.0),
        ("1e-1", 1.0, 1 - 0.9**2),  # Python's float (line 55)
        ("1.5", 0.0, 0.0),  # > 1: format 0 (lines 56-57), so the Brier reward is gated to 0 (lines 96-97)
        ("-0.1", 0.0, 0.0),  # < 0
        ("high", 0.0, 0.0),  # float() fails: format 0 (lines 61-62)
        ("80%", 0.0, 0.0),
        ("", 0.0, 0.0),  # empty: format 0 (lines 51-52)
        ("nan", 1.0, math.nan),  # NaN < 0 and NaN > 1 are False: the gate passes, the Brier reward is NaN
        ("inf", 0.0, 0.0),  # inf > 1
    ],
)
def test_the_confidence_gate_and_the_brier_reward_of_each_stated_confidence(confidence, formatted, brier_if_right):
    text = TAC.format(a="paris", c=confidence)
    f, a, b = rewards_of([text])
    assert f == [formatted]
    assert a == [formatted]  # the answer is right, counted only through the gate (lines 74-75)
    np.testing.assert_equal(b, [brier_if_right])
    wrong = TAC.format(a="rome", c=confidence)
    f, a, b = rewards_of([wrong])
    expected = formatted and (math.nan if confidence == "nan" else 1 - float(confidence) ** 2)
    assert a == [0.0]
    np.testing.assert_allclose(b, [expected])


def test_the_format_patterns_are_the_references_with_their_tag_order():
    right = {
        "tabc": "x </think> <answer>Paris</answer> <analysis>sure</analysis> <confidence>0.7</confidence>",
        "tbac": "x </think> <analysis>sure</analysis> <answer>Paris</answer> <confidence>0.7</confidence>",
        "tac": "x </think> <answer>Paris</answer> <confidence>0.7</confidence>",
        "ta": "x </think> <answer>Paris</answer>",
    }
    assert set(FORMAT_PATTERNS) == set(right)
    for pattern, text in right.items():
        others = [p for p in right if p != pattern]
        assert format_reward(chat(text), format_pattern=pattern) == [1.0], pattern
        # each other order fails (lines 31-37)
        for other in others:
            got = format_reward(chat(right[other]), format_pattern=pattern)
            assert got == [0.0], (pattern, other)
    # text after the last tag, or no </think>, fails: the patterns end in \s*\Z and start with .*?</think>
    assert format_reward(chat(right["tac"] + " more"), format_pattern="tac") == [0.0]
    assert format_reward(chat(right["tac"].replace("</think>", "")), format_pattern="tac") == [0.0]
    assert format_reward(chat(right["tac"] + " \n\n "), format_pattern="tac") == [1.0]


def test_the_last_tags_count():
    # lines 49-50, 77-78, 100-101: the last <confidence> and the last <answer>
    text = "x </think> <answer>Rome</answer> <answer>Paris</answer> <confidence>0.2</confidence> "
    text += "<confidence>0.9</confidence>"
    f, a, b = rewards_of([text])
    assert (f, a) == ([1.0], [1.0])
    assert b == [pytest.approx(1 - 0.1**2)]
    # an out-of-range confidence before a good last one passes the gate; after it, fails it
    good_last = "x </think> <answer>Paris</answer> <confidence>7</confidence> <confidence>0.5</confidence>"
    bad_last = "x </think> <answer>Paris</answer> <confidence>0.5</confidence> <confidence>7</confidence>"
    assert format_reward(chat(good_last, bad_last), format_pattern="tac") == [1.0, 0.0]


def test_the_ta_pattern_checks_no_confidence_and_brier_takes_it_unclipped():
    # 'c' not in "ta": the gate is the pattern alone (line 48); the Brier reward is 0 without a
    # confidence (lines 102-103) and 1 - (c - q)^2 with any float, unclipped (lines 105-107)
    bare = "x </think> <answer>Paris</answer>"
    f, a, b = rewards_of([bare], pattern="ta")
    assert (f, a, b) == ([1.0], [1.0], [0.0])
    stated = "x <confidence>5</confidence> </think> <answer>Paris</answer>"
    f, a, b = rewards_of([stated], pattern="ta")
    assert (f, a, b) == ([1.0], [1.0], [1 - (1 - 5) ** 2])
    f, a, b = rewards_of(["x <confidence>sure</confidence> </think> <answer>Paris</answer>"], pattern="ta")
    assert b == [0.0]  # not a float: 0 (lines 109-111)


def test_exact_match_is_squads_normalisation_as_the_reference_writes_it():
    # lines 7-25: lower case, punctuation removed, articles dropped, white space collapsed
    assert exact_match_score("  The  Eiffel-Tower!", "eiffeltower")
    assert exact_match_score("an apple", "Apple")
    assert not exact_match_score("3.0", "3")  # no number rule (calibkit's normalize_answer has one)
    assert not exact_match_score("Paris France", "Paris")


def test_the_references_correctness_rule_hotpot_by_exact_match_else_math_verify(monkeypatch):
    # lines 80-84: the batch's first source decides
    text = TAC.format(a="The Paris", c="0.5")
    completions, answers = chat(text, text), ["paris", "paris"]
    assert accuracy_reward(completions, answers, "tac", source=["hotpot", "math"]) == [1.0, 1.0]
    calls = []
    fake = types.ModuleType("math_verify")
    fake.parse = lambda text: ("parsed", text)
    fake.verify = lambda gold, target: calls.append((gold, target)) or gold == "paris"
    monkeypatch.setitem(sys.modules, "math_verify", fake)
    assert accuracy_reward(completions, answers, "tac", source=["math", "hotpot"]) == [1.0, 1.0]
    assert calls == [("paris", ("parsed", "The Paris"))] * 2  # verify(gold, parse(last answer)), line 83-84
    assert brier_reward(completions, ["rome", "paris"], "tac") == [1 - 0.5**2, 1 - 0.5**2]
    monkeypatch.setitem(sys.modules, "math_verify", None)  # not installed
    with pytest.raises(ValueError, match=r"`checker`: the reference checks a non-hotpot batch with math_verify"):
        accuracy_reward(completions, answers, "tac")
    assert accuracy_reward(completions, answers, "tac", checker=lambda text, gold: text.endswith("Paris")) == [1, 1]


def test_a_batch_is_scored_at_once_plain_strings_too():
    texts = [TAC.format(a=a, c=c) for a, c in [("Paris", "0.9"), ("Rome", "0.9"), ("Paris", "2"), ("Rome", "0.1")]]
    texts.append("no format at all")
    golds = ["paris"] * 5
    got = brier_reward(chat(*texts), golds, "tac", checker="exact_match")
    np.testing.assert_allclose(got, [1 - 0.1**2, 1 - 0.9**2, 0.0, 1 - 0.1**2, 0.0])
    assert brier_reward(texts, golds, "tac", checker="exact_match") == got  # TRL's standard (string) completions
    assert brier_reward(texts, np.array(golds), "tac", checker="exact_match") == got
    assert isinstance(got, list) and all(isinstance(x, float) for x in got)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: format_reward(chat("x"), format_pattern="tc"), r"`format_pattern` must be one of"),
        (lambda: format_reward([{"content": "x"}]), r"`completions`: completion 0 is neither a string"),
        (lambda: accuracy_reward(chat("x", "y"), ["a"]), r"`answer` must be a list of 2 gold answers"),
        (lambda: accuracy_reward(chat("x"), "a"), r"`answer` must be a list of 1 gold answers"),
        (lambda: rlcr_reward_funcs(checker="fuzzy"), r"`checker` must be None"),
        (lambda: rlcr_reward_funcs(format_pattern="abc"), r"`format_pattern` must be one of"),
    ],
)
def test_bad_input_is_refused_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


FORMATTED = [
    "</think> <answer>Paris</answer> <analysis>sure</analysis> <confidence>0.9</confidence>",
    "</think> <answer>Rome</answer> <analysis>unsure</analysis> <confidence>0.3</confidence>",
    "</think> <answer>Paris</answer> <analysis>too sure</analysis> <confidence>1.5</confidence>",
    "Paris, no tags",
]


@pytest.fixture(scope="module")
def grpo_run(tmp_path_factory):
    """Two GRPO steps offline on a tiny random GPT-2 whose sampling is steered to whole formatted answers.

    Each formatted answer is one added token of a tokenizer trained here; the generation's
    ``sequence_bias`` makes the first token one of them (at random) and the next one the end of text.
    Beside RLCR's three rewards: a spy (weight 0) that records what TRL passes, and a calibrated
    GPT-2 reward model whose base has no pad token (TRL sets it on the calibrated config).
    """
    pytest.importorskip("trl")
    import torch
    from datasets import Dataset
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2ForSequenceClassification, GPT2LMHeadModel, PreTrainedTokenizerFast
    from trl import GRPOConfig, GRPOTrainer

    from calibkit.calibrators import calibrate

    folder = tmp_path_factory.mktemp("grpo")
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    special = ["[UNK]", "<|endoftext|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=200, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(["what is the capital of france italy"] * 20, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", unk_token="[UNK]")
    fast.add_tokens(FORMATTED)
    fast.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    ids = fast.convert_tokens_to_ids(FORMATTED)
    eos = fast.eos_token_id
    bias = [[[i], 40.0] for i in ids] + [[[i, eos], 60.0] for i in ids]
    torch.manual_seed(0)
    small = dict(
        vocab_size=len(fast), n_positions=64, n_embd=32, n_layer=1, n_head=2, bos_token_id=eos, eos_token_id=eos
    )
    policy = GPT2LMHeadModel(GPT2Config(**small, pad_token_id=eos))
    base = GPT2ForSequenceClassification(GPT2Config(**small, num_labels=1)).eval()
    reward_model = calibrate(base, 2.0)
    questions = [("what is the capital of france", "Paris"), ("what is the capital of italy", "Rome")] * 4
    rows = [{"prompt": [{"role": "user", "content": q}], "answer": a, "source": "hotpot"} for q, a in questions]
    calls = []

    def spy(prompts, completions, **kwargs):
        calls.append({"prompts": prompts, "completions": completions, **kwargs})
        return [0.0] * len(completions)

    args = GRPOConfig(
        output_dir=str(folder / "out"), per_device_train_batch_size=4, num_generations=4, max_completion_length=3,
        max_steps=2, use_cpu=True, bf16=False, report_to=[], logging_steps=1, seed=0, save_strategy="no",
        reward_weights=[*RLCR_REWARD_WEIGHTS, 0.0, 0.0], generation_kwargs={"sequence_bias": bias},
    )  # fmt: skip
    grpo = GRPOTrainer(
        model=policy,
        reward_funcs=[*rlcr_reward_funcs(), spy, reward_model],
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=fast,
        reward_processing_classes=[None, None, None, None, fast],
    )
    grpo.train()
    logs = [log for log in grpo.state.log_history if "rewards/brier_reward/mean" in log]
    return {"logs": logs, "calls": calls, "fast": fast, "base": base, "reward_model": reward_model}


def test_a_grpo_run_takes_rlcrs_rewards_as_the_functions_give_them(grpo_run):
    logs, calls = grpo_run["logs"], grpo_run["calls"]
    assert len(logs) == len(calls) == 2
    seen = set()
    for log, call in zip(logs, calls):
        completions, answer, source = call["completions"], call["answer"], call["source"]
        seen.update(c[0]["content"] for c in completions)
        by_name = {
            "format_reward": format_reward(completions),
            "accuracy_reward": accuracy_reward(completions, answer, source=source),
            "brier_reward": brier_reward(completions, answer, source=source),
        }
        for name, values in by_name.items():
            assert log[f"rewards/{name}/mean"] == pytest.approx(np.mean(values), rel=1e-6), name
        total = sum(w * np.asarray(v) for w, v in zip(RLCR_REWARD_WEIGHTS, by_name.values()))
        assert log["reward"] == pytest.approx(total.mean(), rel=1e-6)  # the spy and the reward model weigh 0
    assert len(seen) >= 3 and seen <= set(FORMATTED)  # whole formatted answers, several of them


def test_grpo_reads_a_calibrated_gpt2_reward_model_at_the_last_non_pad_token(grpo_run):
    """GRPOTrainer sets ``reward_func.config.get_text_config().pad_token_id`` (trl 1.16,
    grpo_trainer.py) and pads the texts on the right: the calibrated model's base must read it."""
    from trl.data_utils import apply_chat_template

    fast, base = grpo_run["fast"], grpo_run["base"]
    assert base.config.pad_token_id == fast.pad_token_id  # passed on by the calibrated model
    import torch

    for log, call in zip(grpo_run["logs"], grpo_run["calls"]):
        alone = []
        for prompt, completion in zip(call["prompts"], call["completions"]):
            text = apply_chat_template({"messages": prompt + completion}, fast)["text"]
            encoded = fast(text=[text], return_tensors="pt", add_special_tokens=False)
            with torch.no_grad():
                alone.append(float(base(**encoded).logits[0, 0]))
        known = {f"rewards/{name}/mean" for name in ("format_reward", "accuracy_reward", "brier_reward", "spy")}
        name = [key for key in log if key.startswith("rewards/") and key.endswith("/mean") and key not in known]
        assert len(name) == 1, name  # the reward model's (TRL names it by its config's name_or_path)
        assert log[name[0]] == pytest.approx(np.mean(alone) / 2.0, rel=1e-5, abs=1e-6)
