"""A calibrated reward model (issue 64, item 3): rewards / T, saved, reloaded without calibkit, pushed, carded."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from transformers import (
    AutoModelForSequenceClassification,
    BertConfig,
    BertForSequenceClassification,
    GPT2Config,
    GPT2ForSequenceClassification,
)

from calibkit.calibrators import (
    CalibratedModelForSequenceClassification,
    CalibrationHead,
    PreferenceTemperature,
    TemperatureScaling,
    calibrate,
    fold_into_classifier,
)
from calibkit.calibrators.preference import fit_preference_temperature
from calibkit.metrics.preferences import PREFERENCE_METRICS, preference_metrics, preference_probability

PAD = 0
T = 1.7


def reward_model(arch="gpt2", seed=0):
    """A tiny reward model from a config (num_labels=1), its head scaled to rewards of a trained model's size."""
    torch.manual_seed(seed)
    if arch == "gpt2":
        config = GPT2Config(
            vocab_size=64, n_embd=32, n_layer=1, n_head=2, n_positions=64, num_labels=1, bos_token_id=1, eos_token_id=1
        )
        model = GPT2ForSequenceClassification(config).eval()
        layer = model.score
    else:
        config = BertConfig(
            vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37,
            max_position_embeddings=64, num_labels=1,
        )  # fmt: skip
        model = BertForSequenceClassification(config).eval()
        layer = model.classifier
    with torch.no_grad():
        spread = model(**padded_batch(seed=99, n=24)).logits.std() if arch == "bert" else 0.04
        layer.weight.mul_(2.0 / spread)
    return model


def padded_batch(seed=0, n=12, length=9):
    """Right-padded sequences of different lengths (PAD = 0 never occurs inside a sequence)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, 64, (n, length), generator=g)
    lengths = torch.randint(3, length + 1, (n,), generator=g)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
    ids[mask == 0] = PAD
    return {"input_ids": ids, "attention_mask": mask}


def rewards(model, batch):
    with torch.no_grad():
        return model(**batch).logits[:, 0].double().numpy()


def one_at_a_time(model, batch):
    """Each sequence alone, unpadded: the reward at its own last token."""
    out = []
    for ids, mask in zip(batch["input_ids"], batch["attention_mask"]):
        keep = mask.bool()
        out.append(rewards(model, {"input_ids": ids[keep][None], "attention_mask": mask[keep][None]})[0])
    return np.array(out)


@pytest.mark.parametrize("arch", ["gpt2", "bert"])
def test_rewards_are_divided_by_t_rankings_kept_preferences_calibrated(arch):
    base = reward_model(arch)
    base.config.pad_token_id = PAD
    batch = padded_batch()
    before = rewards(base, batch)
    model = calibrate(base, T).eval()
    after = rewards(model, batch)
    assert model.model is base and isinstance(model, CalibratedModelForSequenceClassification)
    np.testing.assert_allclose(after, before / T, rtol=1e-6, atol=1e-6)
    assert before.std() > 1.0  # rewards of a trained model's size: the division is seen
    np.testing.assert_array_equal(np.argsort(after, kind="stable"), np.argsort(before, kind="stable"))
    # pairs (0, 1), (2, 3), ...: the calibrated preference probability is sigmoid((r_a - r_b) / T)
    margins = before[0::2] - before[1::2]
    got = 1 / (1 + np.exp(-(after[0::2] - after[1::2])))
    np.testing.assert_allclose(got, preference_probability(margins, T), rtol=1e-6)
    np.testing.assert_array_equal(got > 0.5, margins > 0)


def test_a_fitted_preference_temperature_is_the_pairwise_fit_and_the_block_counts_its_pairs():
    margins = np.random.default_rng(0).normal(1.0, 3.0, 200)
    fitted = PreferenceTemperature().fit(margins)
    assert fitted.temperature_ == fit_preference_temperature(margins) and fitted.n_pairs_ == 200
    np.testing.assert_allclose(fitted.predict_proba(margins), preference_probability(margins, fitted.temperature_))
    np.testing.assert_allclose(fitted.transform([[2.0], [-4.0]]), np.array([[2.0], [-4.0]]) / fitted.temperature_)
    model = calibrate(reward_model(), fitted)
    assert model.config.calibration == {"method": "reward-ts", "temperature": fitted.temperature_, "pairs": 200}
    assert calibrate(reward_model(), np.float32(2.0)).config.calibration == {"method": "reward-ts", "temperature": 2.0}


def test_a_pad_token_set_on_the_calibrated_config_as_trl_sets_it_reaches_the_base_model():
    """RewardTrainer and GRPOTrainer set ``model.config.get_text_config().pad_token_id``
    (trl/trainer/reward_trainer.py, grpo_trainer.py in TRL 1.16): on a calibrated model that is its
    own config. The GPT-2 base must then read the reward at the last non-pad token; it never saw
    the pad token and refused batches ("Cannot handle batch sizes > 1 if no padding token is defined")."""
    base = reward_model("gpt2")
    assert base.config.pad_token_id is None
    model = calibrate(base, T).eval()
    model.config.get_text_config().pad_token_id = PAD  # what TRL does
    batch = padded_batch(seed=1)
    got = rewards(model, batch)
    np.testing.assert_allclose(got, one_at_a_time(base, batch) / T, rtol=1e-5, atol=1e-6)
    assert base.config.pad_token_id == PAD  # the base model now reads the pad token itself


LOAD_WITHOUT_CALIBKIT = textwrap.dedent(
    """
    import sys, importlib.abc
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "calibkit" or name.startswith("calibkit."):
                raise ImportError("calibkit is not installed here")
    sys.meta_path.insert(0, Block())
    import torch
    from transformers import AutoModelForSequenceClassification
    folder, out = sys.argv[1:]
    model = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True).eval()
    batch = torch.load(folder + "/batch.pt")
    with torch.no_grad():
        torch.save(model(**batch).logits, out)
    print(type(model).__module__, model.config.calibration["method"])
    """
)


@pytest.mark.parametrize("arch", ["gpt2", "bert"])
def test_save_and_reload_without_calibkit_gives_the_rewards_divided_by_t(tmp_path, arch):
    base = reward_model(arch)
    model = calibrate(base, PreferenceTemperature.from_temperature(T)).eval()
    model.config.get_text_config().pad_token_id = PAD  # as TRL sets it, before saving
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    assert json.loads((folder / "config.json").read_text())["calibration"] == {"method": "reward-ts", "temperature": T}
    batch = padded_batch(seed=2)
    torch.save(batch, folder / "batch.pt")
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", LOAD_WITHOUT_CALIBKIT, str(folder), str(tmp_path / "out.pt")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "transformers_modules" in done.stdout and "reward-ts" in done.stdout
    reloaded = torch.load(tmp_path / "out.pt")[:, 0].double().numpy()
    np.testing.assert_allclose(reloaded, one_at_a_time(base, batch) / T, rtol=1e-5, atol=1e-6)
    # with calibkit: the registered class, no remote code
    again = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    assert type(again) is CalibratedModelForSequenceClassification
    np.testing.assert_allclose(rewards(again, batch), reloaded, rtol=1e-6, atol=1e-7)


METRICS = {
    "n": 42,
    "before": {"accuracy": 0.595, "ece": 0.1234, "brier": 0.2612, "nll": 0.7311},
    "after": {"accuracy": 0.595, "ece": 0.0456, "brier": 0.2377, "nll": 0.6702},
}


def test_the_model_card_states_t_the_data_and_the_numbers_before_and_after(tmp_path):
    fitted = PreferenceTemperature().fit([2.0, 1.0, -0.5, 3.0, -1.0])
    data = "210 pairs from BIG-bench general_knowledge (a right answer preferred to a wrong one)"
    model = calibrate(reward_model(), fitted, metrics=METRICS, fitted_on=data)
    model.save_pretrained(tmp_path)
    card = (tmp_path / "README.md").read_text()
    assert "# Calibrated gpt2 reward model (reward-ts)" in card
    assert f"T = {fitted.temperature_:.6g}" in card and "T = 1.33" in card
    assert f"fitted on: {data} (5 pairs)" in card
    assert "## Preference metrics (42 pairs)" in card
    for name in ("accuracy", "ece", "brier", "nll"):
        assert f"| {name} | {METRICS['before'][name]:.4f} | {METRICS['after'][name]:.4f} |" in card
    assert "sigmoid((r_a - r_b) / T)" in card and "trust_remote_code=True" in card
    assert json.loads((tmp_path / "config.json").read_text())["calibration"]["metrics"] == METRICS


def test_the_card_takes_preference_metrics_before_and_after_and_they_are_the_calibrated_models(tmp_path):
    """T fitted on a tiny reward model's pairs; the card's numbers are preference_metrics' before and
    after T, and the calibrated model's own margins give the "after" numbers at temperature 1."""
    base = reward_model("gpt2")
    base.config.pad_token_id = PAD
    batch = padded_batch(seed=5, n=80)
    r = rewards(base, batch)
    first, second = r[0::2], r[1::2]
    right = np.random.default_rng(0).random(first.size) < 0.75  # people prefer the higher reward 3 times in 4
    chosen_first = right == (first > second)
    margins = np.where(chosen_first, first - second, second - first)
    fitted = PreferenceTemperature().fit(margins)
    metrics = {
        "before": preference_metrics(margins),
        "after": preference_metrics(margins, temperature=fitted.temperature_),
    }
    model = calibrate(base, fitted, metrics=metrics, fitted_on="40 tiny pairs").eval()
    block = model.config.calibration
    assert block["metrics"]["n"] == 40 and set(block["metrics"]["before"]) == set(PREFERENCE_METRICS)
    after = rewards(model, batch)
    own = np.where(chosen_first, after[0::2] - after[1::2], after[1::2] - after[0::2])
    again = preference_metrics(own)
    for name in PREFERENCE_METRICS:
        assert block["metrics"]["after"][name] == pytest.approx(again[name], rel=1e-5, abs=1e-6), name
    assert block["metrics"]["after"]["nll"] <= block["metrics"]["before"]["nll"]
    assert block["metrics"]["after"]["accuracy"] == block["metrics"]["before"]["accuracy"]  # ranking unchanged
    model.save_pretrained(tmp_path)
    card = (tmp_path / "README.md").read_text()
    for name in ("accuracy", "ece", "brier", "nll"):
        assert f"| {name} | {metrics['before'][name]:.4f} | {metrics['after'][name]:.4f} |" in card
    with pytest.raises(ValueError, match=r'"after" was measured at temperature 1.0, expected'):
        calibrate(base, fitted, metrics={"before": metrics["before"], "after": metrics["before"]})


def test_push_to_hub_uploads_the_reward_card_and_the_remote_code(monkeypatch):
    import transformers.utils.hub as hub

    uploaded = {}

    class FakeApi:
        def create_repo(self, repo_id, **kwargs):
            return type("Repo", (), {"repo_id": repo_id})()

        def create_commit(self, repo_id, operations, **kwargs):
            for op in operations:
                with open(op.path_or_fileobj, "rb") as f:
                    uploaded[op.path_in_repo] = f.read()

    class Card:
        def save(self, path):
            with open(path, "w") as f:
                f.write("generic card")

    monkeypatch.setattr(hub, "hf_api", lambda: FakeApi())
    monkeypatch.setattr(hub, "create_and_tag_model_card", lambda *a, **k: Card())
    model = calibrate(reward_model(), 1.5, fitted_on="held-out pairs", metrics=METRICS)
    model.push_to_hub("someone/calibrated-reward")
    assert {"config.json", "model.safetensors", "modeling_calibkit.py", "modeling_calibkit_heads.py"} <= set(uploaded)
    card = uploaded["README.md"].decode()
    assert "reward model (reward-ts)" in card and "fitted on: held-out pairs" in card and "| ece |" in card
    block = json.loads(uploaded["config.json"])["calibration"]
    assert {k: block[k] for k in ("method", "temperature", "fitted_on")} == {
        "method": "reward-ts",
        "temperature": 1.5,
        "fitted_on": "held-out pairs",
    }


def test_folding_gives_a_plain_reward_model_with_the_rewards_divided_by_t(tmp_path):
    base = reward_model("gpt2")
    base.config.pad_token_id = PAD
    model = calibrate(base, T).eval()
    plain = fold_into_classifier(model)
    assert type(plain) is GPT2ForSequenceClassification
    batch = padded_batch(seed=3)
    np.testing.assert_allclose(rewards(plain, batch), rewards(model, batch), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("calibrator", "kwargs", "match"),
    [
        (0.0, {}, r"`calibrator`: the temperature must be a finite number > 0, got 0.0"),
        (float("nan"), {}, r"`calibrator`: the temperature must be"),
        (True, {}, r"`calibrator`: a reward model is calibrated by its pairwise temperature"),
        ("ts", {}, r"`calibrator`: a reward model is calibrated by its pairwise temperature"),
        (None, {"method": "ts"}, r"`method`: a reward model is calibrated by its pairwise temperature alone"),
        (PreferenceTemperature(), {}, r"not fitted: call .fit\(margins\)"),
        (TemperatureScaling.from_temperature(2.0, 2), {}, r"`calibrator`: a reward model"),
        (2.0, {"logits": np.zeros((3, 1)), "labels": [0, 0, 0]}, r"`labels`: a reward model is calibrated by"),
        (2.0, {"metrics": {"before": {"ece": 0.1}}}, r'"after" must be a non-empty dict'),
        (2.0, {"metrics": {"before": {"ece": 0.1}, "after": {"ece": float("nan")}}}, r"'ece' must be a finite"),
        (2.0, {"metrics": {"before": {"ece": 0.1}, "after": {"brier": 0.1}}}, r"must name the same metrics"),
        (2.0, {"metrics": {"before": {"a": 1}, "after": {"a": 1}, "n": 0}}, r'"n" must be the number of pairs'),
        (2.0, {"metrics": {"before": {"a": 1}, "after": {"a": 1}, "N": 3}}, r"unknown keys \['N'\]"),
        (2.0, {"fitted_on": " "}, r"`fitted_on` must be a non-empty string"),
    ],
)
def test_bad_input_to_calibrate_a_reward_model_is_refused_naming_the_argument(calibrator, kwargs, match):
    with pytest.raises(ValueError, match=match):
        calibrate(reward_model(), calibrator, **kwargs)


def test_a_temperature_for_a_classifier_or_reward_arguments_for_a_classifier_are_refused():
    classifier = GPT2ForSequenceClassification(GPT2Config(vocab_size=64, n_embd=32, n_layer=1, n_head=2, num_labels=3))
    with pytest.raises(ValueError, match=r"`model`: a pairwise temperature calibrates a reward model .*num_labels=3"):
        calibrate(classifier, 2.0)
    with pytest.raises(ValueError, match=r"`metrics` and `fitted_on` are a reward model's"):
        calibrate(classifier, TemperatureScaling.from_temperature(2.0, 3), fitted_on="x")


def test_the_reward_head_takes_one_output_and_the_class_heads_refuse_one():
    with pytest.raises(ValueError, match=r"`num_labels` must be 1 for method 'reward-ts'"):
        CalibrationHead({"method": "reward-ts", "temperature": 2.0}, 3)
    with pytest.raises(ValueError, match=r">= 2, got 1; a reward model \(one output\) takes method 'reward-ts'"):
        CalibrationHead({"method": "ts", "temperature": 2.0}, 1)
    with pytest.raises(ValueError, match=r"`temperature` must be > 0"):
        CalibrationHead({"method": "reward-ts", "temperature": -1.0}, 1)


def test_labels_are_refused_a_calibrated_reward_model_computes_no_loss():
    model = calibrate(reward_model(), T)
    with pytest.raises(ValueError, match=r"`labels`: a calibrated reward model computes no loss"):
        model(input_ids=torch.ones(1, 3, dtype=torch.long), labels=torch.zeros(1))
