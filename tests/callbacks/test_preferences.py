"""The TRL callbacks: TRL's RewardTrainer and DPOTrainer run offline on a tiny GPT-2, every pair read exactly."""

import os
import warnings

import numpy as np
import pytest
import torch
from datasets import Dataset

os.environ.setdefault("HF_HUB_OFFLINE", "1")
trl = pytest.importorskip("trl")

from calibkit.calibrators.preference import fit_preference_temperature  # noqa: E402
from calibkit.callbacks.preferences import (  # noqa: E402
    DPOPreferenceCallback,
    PreferenceCallback,
    dpo_batch_pairs,
    reward_batch_pairs,
)
from calibkit.metrics.preferences import preference_metrics  # noqa: E402

WORDS = "alpha beta gamma delta red green blue cat dog bird one two three four five is the a of what which".split()
EVAL_BATCH = 8  # the evaluation sets below (21 and 10 pairs) end on a partial batch


def tokenizer():
    """A byte-level BPE tokenizer trained here (offline), with its own pad token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=120,
        special_tokens=["[UNK]", "<|endoftext|>", "[PAD]"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([" ".join(WORDS)] * 20, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|endoftext|>", unk_token="[UNK]", pad_token="[PAD]"
    )


def pairs(n, seed):
    """Preference pairs: a prompt of random words; answers of 1 to 4 words, the chosen one mostly of the first ten."""
    rng = np.random.default_rng(seed)
    rows = {"prompt": [], "chosen": [], "rejected": []}
    for _ in range(n):
        rows["prompt"].append(" ".join(rng.choice(WORDS, 3)) + "?")
        for key, words in (("chosen", WORDS[:10] * 3 + WORDS[10:]), ("rejected", WORDS[10:] * 3 + WORDS[:10])):
            rows[key].append(" " + " ".join(rng.choice(words, int(rng.integers(1, 5)))))
    return Dataset.from_dict(rows)


def gpt2(tok, seed, **config):
    from transformers import GPT2Config

    torch.manual_seed(seed)
    return GPT2Config(
        vocab_size=len(tok),
        n_positions=64,
        n_embd=16,
        n_layer=1,
        n_head=2,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.eos_token_id,
        **config,
    )


def run_args(config_class, tmp_path, **overrides):
    settings = dict(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        bf16=False,
        report_to=[],
        max_steps=4,
        per_device_train_batch_size=8,
        per_device_eval_batch_size=EVAL_BATCH,
        eval_strategy="steps",
        eval_steps=2,
        logging_steps=2,
        save_strategy="no",
        learning_rate=1e-2,
        disable_tqdm=True,
        seed=0,
    )
    settings.update(overrides)
    return config_class(**settings)


def reward_trainer(tmp_path, callback, eval_dataset=None, attach=True, **overrides):
    from transformers import GPT2ForSequenceClassification

    tok = tokenizer()
    model = GPT2ForSequenceClassification(gpt2(tok, 0, num_labels=1))
    trainer = trl.RewardTrainer(
        model=model,
        args=run_args(trl.RewardConfig, tmp_path, **overrides),
        train_dataset=pairs(32, 1),
        eval_dataset=eval_dataset if eval_dataset is not None else {"a": pairs(21, 2), "b": pairs(10, 3)},
        processing_class=tok,
        callbacks=None if attach else [callback],
    )
    if attach:
        callback.attach(trainer)
    return trainer


def dpo_trainer(tmp_path, callback, attach=True, **overrides):
    from transformers import GPT2LMHeadModel

    tok = tokenizer()
    policy, ref = GPT2LMHeadModel(gpt2(tok, 0)), GPT2LMHeadModel(gpt2(tok, 1))
    if not attach:
        callback.ref_model = ref
    trainer = trl.DPOTrainer(
        model=policy,
        ref_model=ref,
        args=run_args(trl.DPOConfig, tmp_path, beta=0.5, **overrides),
        train_dataset=pairs(32, 1),
        eval_dataset={"a": pairs(21, 2), "b": pairs(10, 3)},
        processing_class=tok,
        callbacks=None if attach else [callback],
    )
    if attach:
        callback.attach(trainer)
    return trainer


def one_reward(model, ids):
    with torch.no_grad():
        return float(model.eval()(input_ids=torch.tensor([ids])).logits[0, 0])


def reward_margins(trainer, name):
    """Margins and lengths read one pair at a time, one sequence a forward pass (no batch, no padding)."""
    return reward_margins_of(trainer, trainer.eval_dataset[name])


def reward_margins_of(trainer, data):
    m = [
        one_reward(trainer.model, c) - one_reward(trainer.model, r)
        for c, r in zip(data["chosen_ids"], data["rejected_ids"])
    ]
    return np.array(m), np.array([len(c) for c in data["chosen_ids"]]), np.array([len(r) for r in data["rejected_ids"]])


def one_logp(model, prompt, completion):
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logp = torch.log_softmax(model.eval()(input_ids=ids).logits[0, :-1].double(), dim=-1)
    targets = ids[0, 1:]
    return float(logp[torch.arange(len(targets)), targets][len(prompt) - 1 :].sum())


def dpo_margins(trainer, name, beta):
    data, policy, ref = trainer.eval_dataset[name], trainer.model, trainer.ref_model
    margins = []
    for p, c, r in zip(data["prompt_ids"], data["chosen_ids"], data["rejected_ids"]):
        chosen = one_logp(policy, p, c) - one_logp(ref, p, c)
        rejected = one_logp(policy, p, r) - one_logp(ref, p, r)
        margins.append(beta * (chosen - rejected))
    lengths = np.array([len(c) for c in data["chosen_ids"]]), np.array([len(r) for r in data["rejected_ids"]])
    return np.array(margins), *lengths


def train(trainer):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()


def eval_entries(trainer, prefix):
    return [e for e in trainer.state.log_history if f"{prefix}_runtime" in e]


def assert_logged_equal(entry, prefix, margins, lc, lr):
    want = preference_metrics(margins, length_chosen=lc, length_rejected=lr)
    assert entry[f"{prefix}_preference_pairs"] == len(margins)
    for name in ("accuracy", "ece", "brier", "nll", "ties", "aurc", "mean_confidence"):
        assert entry[f"{prefix}_preference_{name}"] == pytest.approx(want[name], abs=1e-6), name
    bias = want["length_bias"]
    for name in ("accuracy_chosen_longer", "accuracy_chosen_shorter", "correlation", "chosen_longer"):
        assert entry[f"{prefix}_preference_length_bias_{name}"] == pytest.approx(bias[name], abs=1e-6), name


@pytest.mark.parametrize("attach", [True, False], ids=["attached", "callbacks-list"])
def test_reward_trainer_logs_every_pair_per_eval_dataset(tmp_path, attach):
    cb = PreferenceCallback()
    trainer = reward_trainer(tmp_path, cb, attach=attach)
    train(trainer)
    for name, size in (("a", 21), ("b", 10)):
        prefix = f"eval_{name}"
        margins, lc, lr = reward_margins(trainer, name)
        pairs = cb.last_pairs[prefix]
        assert len(pairs) == size  # the last, partial batch's rejected rows included
        np.testing.assert_allclose(pairs.margins, margins, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(pairs.length_chosen, lc)
        np.testing.assert_array_equal(pairs.length_rejected, lr)
        entries = eval_entries(trainer, prefix)
        assert len(entries) == 2  # every evaluation
        assert_logged_equal(entries[-1], prefix, margins, lc, lr)
        # the Bradley-Terry loss is the preference NLL: the Trainer's evaluation loss, pooled the same way
        assert entries[-1][f"{prefix}_preference_nll"] == pytest.approx(entries[-1][f"{prefix}_loss"], abs=1e-6)
        assert not any(key.startswith("eval_preference") for key in entries[-1])  # each dataset's own prefix


def test_reward_trainer_fits_the_pairwise_temperature_at_the_end(tmp_path):
    cb = PreferenceCallback(fit_dataset="b")
    trainer = reward_trainer(tmp_path, cb)
    train(trainer)
    margins, _, _ = reward_margins(trainer, "b")
    want = fit_preference_temperature(margins)
    assert cb.temperature_fitted == pytest.approx(want, rel=1e-6)
    fit_entry = [e for e in trainer.state.log_history if "preference/temperature" in e][-1]
    assert fit_entry["preference/temperature"] == pytest.approx(want, rel=1e-6)
    assert fit_entry["preference/fit_pairs"] == 10
    assert fit_entry["preference/after_nll"] == pytest.approx(preference_metrics(margins, temperature=want)["nll"])
    assert fit_entry["preference/after_nll"] <= fit_entry["preference/before_nll"]


def test_a_calibrate_hook_gets_the_model_and_the_temperature_and_is_saved(tmp_path):
    calls = []

    def calibrate(model, temperature):
        calls.append(temperature)
        return model

    cb = PreferenceCallback(calibrate=calibrate)
    trainer = reward_trainer(tmp_path, cb, eval_dataset=pairs(10, 3))
    train(trainer)
    assert cb.temperature_fitted is not None
    assert calls == [cb.temperature_fitted]
    assert cb.calibrated_model is trainer.model
    assert (tmp_path / "out" / "calibrated-preference" / "config.json").exists()


def test_calibrate_true_wraps_the_reward_model_with_the_fitted_temperature_and_saves_it(tmp_path):
    cb = PreferenceCallback(calibrate=True)
    trainer = reward_trainer(tmp_path, cb, eval_dataset=pairs(10, 3))
    train(trainer)
    t = cb.temperature_fitted
    assert t is not None and cb.calibrated_dir == str(tmp_path / "out" / "calibrated-preference")
    ids = trainer.eval_dataset["chosen_ids"][0]
    with torch.no_grad():
        calibrated = float(cb.calibrated_model.eval()(input_ids=torch.tensor([ids])).logits[0, 0])
    assert calibrated == pytest.approx(one_reward(trainer.model, ids) / t, rel=1e-6)
    block = cb.calibrated_model.config.calibration
    assert block["temperature"] == pytest.approx(t)
    assert "10 pairs" in block["fitted_on"]
    folder = tmp_path / "out" / "calibrated-preference"
    assert (folder / "config.json").exists() and (folder / "tokenizer.json").exists()


@pytest.mark.parametrize(
    "margins, reason",
    [([1.0, 2.0, 0.0], "no margin < 0"), ([-1.0, -2.0, 0.5], "do not favour")],
    ids=["all-right", "rejected-favoured"],
)
def test_a_refused_fit_warns_and_fits_nothing(margins, reason):
    from types import SimpleNamespace

    from calibkit.callbacks.preferences import PreferencePairs

    cb = PreferenceCallback(calibrate=lambda model, t: pytest.fail("calibrated without a temperature"))
    cb.last_pairs["eval"] = PreferencePairs(np.array(margins), np.ones(3, dtype=np.int64), np.ones(3, dtype=np.int64))
    state = SimpleNamespace(log_history=[], global_step=4, is_world_process_zero=True)
    args = SimpleNamespace(load_best_model_at_end=False, output_dir="/nonexistent")
    with pytest.warns(RuntimeWarning, match=f"no pairwise temperature fitted on 'eval'.*{reason}"):
        cb.on_train_end(args, state, None, model=torch.nn.Linear(1, 1))
    assert cb.temperature_fitted is None
    assert state.log_history == []


def test_predict_leaves_the_evaluations_alone(tmp_path):
    cb = PreferenceCallback(fit=False)
    trainer = reward_trainer(tmp_path, cb, eval_dataset=pairs(21, 2), max_steps=2)
    train(trainer)
    before = cb.last_pairs["eval"].margins.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.predict(trainer.eval_dataset)
        metrics = trainer.evaluate()
    np.testing.assert_array_equal(cb.last_pairs["eval"].margins, before)
    assert metrics["eval_preference_pairs"] == 21


@pytest.mark.parametrize(
    "attach, precompute",
    [(True, False), (False, False), (True, True)],
    ids=["attached", "callbacks-list", "attached-precomputed-reference"],
)
def test_dpo_trainer_logs_implicit_reward_calibration(tmp_path, attach, precompute):
    cb = DPOPreferenceCallback()
    trainer = dpo_trainer(tmp_path, cb, attach=attach, precompute_ref_log_probs=precompute)
    train(trainer)
    assert cb.beta == 0.5  # from the run's DPOConfig
    for name, size in (("a", 21), ("b", 10)):
        prefix = f"eval_{name}"
        margins, lc, lr = dpo_margins(trainer, name, 0.5)
        pairs = cb.last_pairs[prefix]
        assert len(pairs) == size
        # four float32 sums of log-probabilities of about 70 nats each: 1e-5 is 1e-7 of their size
        np.testing.assert_allclose(pairs.margins, margins, rtol=0, atol=1e-5)
        np.testing.assert_array_equal(pairs.length_chosen, lc)
        np.testing.assert_array_equal(pairs.length_rejected, lr)
        entries = eval_entries(trainer, prefix)
        assert len(entries) == 2
        assert_logged_equal(entries[-1], prefix, pairs.margins, lc, lr)
        # the sigmoid loss is the preference NLL: the Trainer's evaluation loss, pooled the same way
        assert entries[-1][f"{prefix}_preference_nll"] == pytest.approx(entries[-1][f"{prefix}_loss"], abs=1e-5)
    t = fit_preference_temperature(cb.last_pairs["eval_a"].margins)
    assert cb.temperature_fitted == pytest.approx(t)
    fit_entry = [e for e in trainer.state.log_history if "preference/temperature" in e][-1]
    assert fit_entry["preference/calibrated_beta"] == pytest.approx(0.5 / t)


@pytest.mark.parametrize("attach", [True, False], ids=["attached", "callbacks-list"])
def test_evaluate_on_another_set_under_its_own_prefix(tmp_path, attach):
    cb = PreferenceCallback(fit=False)
    trainer = reward_trainer(tmp_path, cb, eval_dataset=pairs(21, 2), attach=attach)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        metrics = trainer.evaluate(eval_dataset=pairs(9, 4), metric_key_prefix="test")
    assert metrics["test_preference_pairs"] == 9
    assert len(cb.last_pairs["test"]) == 9
    assert eval_entries(trainer, "test")[-1]["test_preference_pairs"] == 9


def test_load_best_model_at_end_fits_on_the_pairs_of_the_model_loaded(tmp_path):
    from types import SimpleNamespace

    cb = PreferenceCallback(fit=False)
    trainer = reward_trainer(tmp_path, cb, eval_dataset=pairs(10, 3))
    train(trainer)
    with torch.no_grad():  # another checkpoint "loaded" at the end: the last evaluation's pairs are stale
        trainer.model.score.weight.mul_(0.5)  # every reward halved: T halves too
    cb.fit = True
    state = SimpleNamespace(log_history=[], global_step=4, is_world_process_zero=True)
    args = SimpleNamespace(load_best_model_at_end=True, output_dir=str(tmp_path), push_to_hub=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cb.on_train_end(args, state, None, model=trainer.model)
    margins, _, _ = reward_margins_of(trainer, trainer.eval_dataset)
    assert cb.temperature_fitted == pytest.approx(fit_preference_temperature(margins), rel=1e-6)


def test_save_calibrated_pushes_with_push_to_hub(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import huggingface_hub

    from calibkit.callbacks.preference_fitting import save_calibrated

    calls = []
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", lambda self, **kw: calls.append(kw))
    model = SimpleNamespace(save_pretrained=lambda folder: os.makedirs(folder, exist_ok=True))
    args = SimpleNamespace(output_dir=str(tmp_path), push_to_hub=True, hub_model_id="me/rm", hub_token=None)
    folder = save_calibrated(model, args)
    assert folder == str(tmp_path / "calibrated-preference")
    assert calls == [
        dict(
            repo_id="me/rm",
            folder_path=folder,
            path_in_repo="calibrated-preference",
            commit_message="calibkit: calibrated reward model (pairwise temperature)",
        )
    ]
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", lambda self, **kw: 1 / 0)
    with pytest.warns(RuntimeWarning, match="pushing calibrated-preference to me/rm failed"):
        save_calibrated(model, args)


def test_a_batch_that_is_not_a_preference_batch_warns_and_training_goes_on(tmp_path):
    cb = PreferenceCallback(fit=False)
    trainer = reward_trainer(tmp_path, cb, eval_dataset=pairs(10, 3), max_steps=2)
    cb.captured_pairs = lambda inputs, hooks: reward_batch_pairs(torch.zeros(3, 1), torch.ones(3, 2))  # odd rows
    with pytest.warns(RuntimeWarning, match="pairs could not be read .*even number of rows"):
        trainer.train()
    assert "eval_preference_ece" not in eval_entries(trainer, "eval")[-1]
    assert "eval" not in cb.last_pairs


def test_an_unknown_fit_dataset_warns_at_the_end():
    from types import SimpleNamespace

    from calibkit.callbacks.preferences import PreferencePairs

    cb = PreferenceCallback(fit_dataset="c")
    cb.last_pairs["eval_a"] = PreferencePairs(
        np.array([1.0, -1.0]), np.ones(2, dtype=np.int64), np.ones(2, dtype=np.int64)
    )
    state = SimpleNamespace(log_history=[], global_step=4, is_world_process_zero=True)
    with pytest.warns(RuntimeWarning, match="`fit_dataset`: 'c' was not evaluated"):
        cb.on_train_end(SimpleNamespace(load_best_model_at_end=False), state, None)
    assert cb.temperature_fitted is None


def test_batch_layout_chosen_rows_then_rejected_rows():
    pairs = reward_batch_pairs(torch.tensor([[2.0], [0.5], [1.0], [1.5]]), torch.tensor([[1, 1, 1], [1, 0, 0]] * 2))
    assert pairs.margins.tolist() == [1.0, -1.0]
    assert pairs.length_chosen.tolist() == [3, 1]
    dpo = dpo_batch_pairs(torch.tensor([-3.0, -5.0]), torch.tensor([-4.0, -4.0]), torch.ones(2, 4), 0.5)
    assert dpo.margins.tolist() == [pytest.approx(0.5 * ((-3 + 4) - (-5 + 4)))]


def test_bad_input_is_refused_naming_the_argument():
    with pytest.raises(ValueError, match="`rewards`.*even"):
        reward_batch_pairs(torch.zeros(3, 1), torch.ones(3, 2))
    with pytest.raises(ValueError, match="`rewards`.*one reward a row"):
        reward_batch_pairs(torch.zeros(4, 2), torch.ones(4, 2))
    with pytest.raises(ValueError, match="`n_bins`"):
        PreferenceCallback(n_bins=0)
    with pytest.raises(ValueError, match="`temperature`"):
        PreferenceCallback(temperature=float("nan"))
    with pytest.raises(ValueError, match="`beta`"):
        DPOPreferenceCallback(beta=-1.0)
    with pytest.raises(ValueError, match="`fit`"):
        PreferenceCallback(fit="yes")
    with pytest.raises(ValueError, match="`calibrate`"):
        PreferenceCallback(calibrate="yes")
    with pytest.raises(ValueError, match="`calibrate=True`.*DPO"):
        DPOPreferenceCallback(calibrate=True)


def test_dpo_without_a_reference_says_so(tmp_path):
    cb = DPOPreferenceCallback(beta=0.1)
    batch = {"input_ids": torch.ones(2, 3, dtype=torch.long), "attention_mask": torch.ones(2, 3)}
    batch["completion_mask"] = torch.ones(2, 3)
    from transformers import GPT2LMHeadModel

    model = GPT2LMHeadModel(gpt2(tokenizer(), 0))
    with pytest.raises(ValueError, match="`ref_model`"):
        cb.read_pairs(model, [batch])


def test_dpo_padding_free_is_refused():
    args = trl.DPOConfig(output_dir="/tmp/unused", padding_free=True, use_cpu=True, bf16=False, report_to=[])
    with pytest.raises(ValueError, match="padding_free"):
        DPOPreferenceCallback().check_args(args)


def test_another_dpo_loss_is_warned_about():
    args = trl.DPOConfig(output_dir="/tmp/unused", loss_type=["hinge"], use_cpu=True, bf16=False, report_to=[])
    with pytest.warns(RuntimeWarning, match="loss_type"):
        DPOPreferenceCallback().check_args(args)


def test_lightning_gets_the_same_numbers_through_calibration_metrics():
    """docs/guide/reward_models/training.rst's call: the top-label reading of each batch into CalibrationMetrics."""
    from calibkit.metrics.preferences import top_label_reading
    from calibkit.plugins.torchmetrics import CalibrationMetrics

    margins = np.random.default_rng(0).normal(0.3, 1.5, 500)
    margins[:3] = 0.0  # ties
    metric = CalibrationMetrics(metrics=["ece", "brier", "nll", "accuracy"], n_bins=15)
    for batch in np.array_split(margins, 7):
        confidence, right = top_label_reading(batch, temperature=1.3)
        metric.update(torch.as_tensor(confidence), torch.as_tensor(right, dtype=torch.long))
    got = {name: float(value) for name, value in metric.compute().items()}
    want = preference_metrics(margins, temperature=1.3)
    for name in ("ece", "brier", "nll"):
        assert got[name] == pytest.approx(want[name], abs=1e-12), name
    # the binary reading counts a tie (confidence 0.5, label 0) as right; the preference accuracy does not
    assert got["accuracy"] == pytest.approx(want["accuracy"] + want["ties"] / len(margins))
    assert want["accuracy"] == pytest.approx((margins > 0).mean())
