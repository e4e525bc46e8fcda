"""Calibrated PreTrainedModels: outputs, save/load (also without calibkit), pipelines, folding, bad checkpoints."""

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
    AutoModelForTokenClassification,
    BertConfig,
    BertForSequenceClassification,
    BertForTokenClassification,
    DebertaV2Config,
    DebertaV2ForSequenceClassification,
    DebertaV2ForTokenClassification,
    DistilBertConfig,
    DistilBertForSequenceClassification,
    DistilBertForTokenClassification,
    RobertaConfig,
    RobertaForSequenceClassification,
    RobertaForTokenClassification,
    pipeline,
)

import calibkit
from calibkit.calibrators import (
    CALIBRATORS,
    CalibratedModelForSequenceClassification,
    CalibratedModelForTokenClassification,
    TemperatureScaling,
    calibrate,
    classifier_layer,
    fold_into_classifier,
    make_calibrator,
)
from tests.conftest import tiny_tokenizer

NUM_LABELS = 3
SMALL = dict(vocab_size=64, hidden_size=32, num_attention_heads=2, intermediate_size=37, max_position_embeddings=64)
ARCHITECTURES = {
    "bert": (BertConfig(num_hidden_layers=1, **SMALL), BertForSequenceClassification, BertForTokenClassification),
    "roberta": (
        RobertaConfig(num_hidden_layers=1, pad_token_id=1, **SMALL),
        RobertaForSequenceClassification,
        RobertaForTokenClassification,
    ),
    "distilbert": (
        DistilBertConfig(vocab_size=64, dim=32, n_layers=1, n_heads=2, hidden_dim=37, max_position_embeddings=64),
        DistilBertForSequenceClassification,
        DistilBertForTokenClassification,
    ),
    "deberta-v2": (
        DebertaV2Config(num_hidden_layers=1, **SMALL),
        DebertaV2ForSequenceClassification,
        DebertaV2ForTokenClassification,
    ),
}


def tiny(arch="bert", task="sequence", seed=0):
    torch.manual_seed(seed)
    config, seq_cls, tok_cls = ARCHITECTURES[arch]
    settings = {k: v for k, v in config.to_dict().items() if k not in ("id2label", "label2id")}
    config = config.__class__(**settings, num_labels=NUM_LABELS)
    model = (seq_cls if task == "sequence" else tok_cls)(config).eval()
    # Random heads give logits of ~0.02: scale them to a trained model's range (std ~2).
    layer = classifier_layer(model)[1]
    with torch.no_grad():
        layer.weight.mul_(2.0 / logits_of(model, inputs(seed=99)).std())
    return model


def inputs(seed=0, n=24, length=9):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 64, (n, length), generator=g)
    mask = torch.ones_like(ids)
    mask[: n // 3, length - 3 :] = 0  # some padding
    return {"input_ids": ids, "attention_mask": mask}


def logits_of(model, batch):
    with torch.no_grad():
        return model(**batch).logits


def validation_set(model, seed=1):
    """Base logits and labels that follow the argmax 80% of the time (random models are unsure)."""
    batch = inputs(seed=seed, n=64)
    z = logits_of(model, batch).numpy()
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(z.shape[:-1]) < 0.8, z.argmax(axis=-1), rng.integers(0, NUM_LABELS, z.shape[:-1]))
    if z.ndim == 3:
        y[batch["attention_mask"].numpy() == 0] = -100
    return z, y


@pytest.mark.parametrize("task", ["sequence", "token"])
@pytest.mark.parametrize("method", sorted(CALIBRATORS))
def test_wrapped_logits_are_the_calibrators_and_survive_save_and_load(tmp_path, task, method):
    base = tiny(task=task)
    z, y = validation_set(base)
    calibrator = make_calibrator(method).fit(z, y)
    model = calibrate(base, calibrator).eval()
    batch = inputs(seed=2)
    expected = calibrator.transform(logits_of(base, batch).numpy())
    out = logits_of(model, batch)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)
    assert type(model(**batch)).__name__ == type(base(**batch)).__name__
    if method == "ts":  # the defining property: base logits / T
        np.testing.assert_allclose(out.numpy(), logits_of(base, batch).numpy() / calibrator.temperature_, rtol=1e-6)

    model.save_pretrained(tmp_path)
    assert sorted(os.listdir(tmp_path)) == [
        "README.md",
        "config.json",
        "model.safetensors",
        "modeling_calibkit.py",
        "modeling_calibkit_heads.py",  # the heads, imported by modeling_calibkit.py
    ]
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["calibration"]["method"] == method and "temperature" not in config
    auto = AutoModelForSequenceClassification if task == "sequence" else AutoModelForTokenClassification
    for reloaded in (type(model).from_pretrained(tmp_path), auto.from_pretrained(tmp_path)):
        assert type(reloaded) is type(model)
        np.testing.assert_array_equal(logits_of(reloaded.eval(), batch).numpy(), out.numpy())


def test_loss_is_the_calibrated_cross_entropy():
    base = tiny()
    model = calibrate(base, TemperatureScaling.from_temperature(2.0, NUM_LABELS))
    batch = inputs()
    labels = torch.arange(24) % NUM_LABELS
    out = model(**batch, labels=labels)
    expected = torch.nn.functional.cross_entropy(logits_of(base, batch) / 2.0, labels)
    assert out.loss.item() == pytest.approx(float(expected), rel=1e-5)
    # the loss first, as every transformers head: `loss, logits = model(..., return_dict=False)`
    # got them swapped (the loss was set after the logits, and return_dict=False was ignored)
    assert list(out.keys())[:2] == ["loss", "logits"] and out[0] is out.loss
    with torch.no_grad():
        as_tuple = model(**batch, labels=labels, return_dict=False)
        base_tuple = base(**batch, labels=labels, return_dict=False)
    assert isinstance(as_tuple, tuple) and len(as_tuple) == len(base_tuple)
    loss, logits = as_tuple
    assert loss.ndim == 0 and torch.allclose(logits, base_tuple[1] / 2.0)


def test_trainer_runs_a_calibrated_model_with_its_default_arguments(tmp_path):
    """Trainer keeps the dataset columns the model's forward names (remove_unused_columns, on by
    default): the calibrated forward shows the base model's inputs, so input_ids and the mask are
    kept (they were dropped: 'You must specify exactly one of input_ids or inputs_embeds')."""
    import inspect

    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    base = tiny()
    model = calibrate(base, TemperatureScaling.from_temperature(2.0, NUM_LABELS))
    assert {"input_ids", "attention_mask", "labels"} <= set(inspect.signature(model.forward).parameters)
    batch = inputs()
    rows = {name: value.tolist() for name, value in batch.items()}
    data = Dataset.from_dict({**rows, "labels": [i % NUM_LABELS for i in range(24)], "text": ["unused"] * 24})
    args = TrainingArguments(str(tmp_path / "out"), report_to=[], use_cpu=True, per_device_eval_batch_size=8)
    out = Trainer(model=model, args=args).predict(data)
    np.testing.assert_allclose(out.predictions, logits_of(base, batch).numpy() / 2.0, rtol=1e-5, atol=1e-6)


LOAD_WITHOUT_CALIBKIT = textwrap.dedent(
    """
    import sys, importlib.abc
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "calibkit" or name.startswith("calibkit."):
                raise ImportError("calibkit is not installed here")
    sys.meta_path.insert(0, Block())
    import torch
    from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification
    folder, task, out = sys.argv[1:]
    auto = AutoModelForSequenceClassification if task == "sequence" else AutoModelForTokenClassification
    model = auto.from_pretrained(folder, trust_remote_code=True).eval()
    batch = torch.load(folder + "/batch.pt")
    with torch.no_grad():
        torch.save(model(**batch).logits, out)
    print(type(model).__module__)
    """
)


@pytest.mark.parametrize(("task", "method"), [("sequence", "rd-ts"), ("token", "ir")])
def test_trust_remote_code_loads_without_calibkit(tmp_path, task, method):
    base = tiny(task=task)
    model = calibrate(base, method=method, logits=validation_set(base)[0], labels=validation_set(base)[1]).eval()
    assert_reloads_without_calibkit(model, task, tmp_path)


def assert_reloads_without_calibkit(model, task, tmp_path):
    """Save ``model``, load it in a process where calibkit cannot be imported, and compare the logits."""
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    batch = inputs(seed=3)
    torch.save(batch, folder / "batch.pt")
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", LOAD_WITHOUT_CALIBKIT, str(folder), task, str(tmp_path / "out.pt")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "transformers_modules" in result.stdout
    np.testing.assert_allclose(torch.load(tmp_path / "out.pt").numpy(), logits_of(model, batch).numpy(), atol=1e-6)


def test_pipelines_return_calibrated_scores(tmp_path):
    tok = tiny_tokenizer(tmp_path)
    text = "w1 w2 w3 w4"
    encoded = tok(text, return_tensors="pt")
    for task, name in (("sequence", "text-classification"), ("token", "token-classification")):
        base = tiny(task=task)
        model = calibrate(base, TemperatureScaling.from_temperature(0.25, NUM_LABELS)).eval()
        expected = torch.softmax(logits_of(base, encoded) / 0.25, dim=-1)[0]
        pipe = pipeline(name, model=model, tokenizer=tok, device="cpu")
        if task == "sequence":
            scores = pipe(text, top_k=None)
            got = {s["label"]: s["score"] for s in scores}
            for k in range(NUM_LABELS):
                assert got[model.config.id2label[k]] == pytest.approx(float(expected[k]), rel=1e-5)
        else:
            entities = pipe(text, ignore_labels=[])
            assert len(entities) == 4
            for entity in entities:
                assert entity["score"] == pytest.approx(float(expected[entity["index"]].max()), rel=1e-5)


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
@pytest.mark.parametrize("task", ["sequence", "token"])
@pytest.mark.parametrize("method", ["ts", "vs", "ms"])  # WTS folds exactly as TS
def test_folded_export_equals_the_wrapper_and_loads_without_custom_code(tmp_path, arch, task, method):
    base = tiny(arch, task)
    z, y = validation_set(base)
    model = calibrate(base, method=method, logits=z, labels=y, report=False).eval()
    folded = fold_into_classifier(model)
    assert type(folded) is type(base)
    batch = inputs(seed=4)
    np.testing.assert_allclose(logits_of(folded, batch).numpy(), logits_of(model, batch).numpy(), atol=1e-5)
    # The wrapper's base model is untouched.
    np.testing.assert_allclose(logits_of(model.model, batch).numpy(), logits_of(base, batch).numpy(), atol=0)
    folded.save_pretrained(tmp_path)
    auto = AutoModelForSequenceClassification if task == "sequence" else AutoModelForTokenClassification
    plain = auto.from_pretrained(tmp_path).eval()
    assert type(plain) is type(base)
    assert "auto_map" not in json.loads((tmp_path / "config.json").read_text())
    np.testing.assert_allclose(logits_of(plain, batch).numpy(), logits_of(model, batch).numpy(), atol=1e-5)


def test_classifier_layer_names():
    expected = {"bert": "classifier", "roberta": "classifier.out_proj", "distilbert": "classifier"}
    expected["deberta-v2"] = "classifier"
    for arch, name in expected.items():
        assert classifier_layer(tiny(arch))[0] == name
        assert classifier_layer(tiny(arch, "token"))[0] == "classifier"


def test_non_affine_methods_cannot_be_folded():
    base = tiny()
    model = calibrate(base, method="rd-ts", logits=validation_set(base)[0], labels=validation_set(base)[1])
    with pytest.raises(ValueError, match="not affine"):
        fold_into_classifier(model)


def test_model_card_states_method_parameters_and_metrics(tmp_path):
    base = tiny()
    z, y = validation_set(base)
    model = calibrate(base, method="wts", logits=z, labels=y)
    model.save_pretrained(tmp_path)
    card = (tmp_path / "README.md").read_text()
    assert "weighted temperature scaling" in card
    assert f"`temperature` = {model.config.calibration['temperature']:.6g}" in card
    metrics = model.config.calibration["metrics"]
    assert metrics["n"] == 64
    assert metrics["before"]["ece"] == pytest.approx(calibkit.ece(z, y, from_logits=True))
    assert f"| ece | {metrics['before']['ece']:.4f} | {metrics['after']['ece']:.4f} |" in card


def test_push_to_hub_uploads_the_calibrated_card(monkeypatch):
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
    model = calibrate(tiny(), TemperatureScaling.from_temperature(1.5, NUM_LABELS))
    model.push_to_hub("someone/calibrated-bert")
    assert {
        "config.json",
        "model.safetensors",
        "modeling_calibkit.py",
        "modeling_calibkit_heads.py",
        "README.md",
    } <= set(uploaded)
    assert b"temperature scaling" in uploaded["README.md"]
    assert json.loads(uploaded["config.json"])["calibration"] == {"method": "ts", "temperature": 1.5}


def test_calibrate_from_a_dataset_runs_the_model(tmp_path):
    datasets = pytest.importorskip("datasets")
    base = tiny(task="token")
    batch = inputs(seed=5, n=64)  # the batch validation_set(seed=5) runs
    z, y = validation_set(base, seed=5)
    data = datasets.Dataset.from_dict(
        {"input_ids": batch["input_ids"].tolist(), "attention_mask": batch["attention_mask"].tolist(), "labels": y}
    )
    model = calibrate(base, method="ts", dataset=data, batch_size=16, progress=False)
    direct = TemperatureScaling().fit(z, y)
    assert model.config.calibration["temperature"] == pytest.approx(direct.temperature_, rel=1e-6)
    assert model.config.calibration["metrics"]["n"] == int((y != -100).sum())


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda c: c.pop("calibration"), "no valid `calibration` block"),
        (lambda c: c["calibration"].update(temperature=-1.0), "must be > 0"),
        (lambda c: c["calibration"].update(temperature="hot"), "finite number"),
        (lambda c: c["calibration"].update(method="platt"), "unknown method"),
        (lambda c: c.update(calibration={"method": "rd-ts", "slope": -1.5}), "slope"),
        (lambda c: c.update(calibration={"method": "vs", "scale": [1.0], "bias": [0, 0, 0]}), "shape"),
    ],
)
def test_bad_checkpoints_fail_at_load(tmp_path, edit, match):
    calibrate(tiny(), TemperatureScaling.from_temperature(1.5, NUM_LABELS)).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    edit(config)
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=match):
        CalibratedModelForSequenceClassification.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match=match):
        AutoModelForSequenceClassification.from_pretrained(tmp_path)


@pytest.mark.filterwarnings("ignore:the NLL keeps decreasing")
def test_calibrate_rejects_mismatches():
    base = tiny()
    with pytest.raises(ValueError, match="4 classes"):
        calibrate(base, TemperatureScaling.from_temperature(1.5, 4))
    with pytest.raises(ValueError, match="calibrator"):
        calibrate(base)
    with pytest.raises(ValueError, match="sequence- or token-classification"):
        calibrate(torch.nn.Linear(2, 2), method="ts")
    with pytest.raises(ValueError, match="task"):
        CalibratedModelForTokenClassification(calibrate(base, method="ts", logits=np.eye(3), labels=[0, 1, 2]).config)


# ------------------------------------------------------------------------------------------
# Multi-label heads (problem_type="multi_label_classification"): a sigmoid per label


def tiny_multilabel(seed=0):
    torch.manual_seed(seed)
    config, seq_cls, _ = ARCHITECTURES["bert"]
    settings = {k: v for k, v in config.to_dict().items() if k not in ("id2label", "label2id", "problem_type")}
    model = seq_cls(config.__class__(**settings, num_labels=NUM_LABELS, problem_type="multi_label_classification"))
    model = model.eval()
    layer = classifier_layer(model)[1]
    with torch.no_grad():
        layer.weight.mul_(2.0 / logits_of(model, inputs(seed=99)).std())
    return model


def multilabel_validation_set(model, seed=1):
    """Base logits and multi-hot labels drawn from sigmoid(z / 2): the model is over-confident."""
    z = logits_of(model, inputs(seed=seed, n=64)).numpy()
    rng = np.random.default_rng(seed)
    return z, (rng.random(z.shape) < 1 / (1 + np.exp(-z / 2))).astype(np.float32)


@pytest.mark.parametrize("method", ["temperature", "label_temperature", "platt", "weighted_temperature"])
def test_multilabel_wrapper_saves_reloads_folds_and_takes_the_bce_loss(tmp_path, method):
    from calibkit.calibrators.multilabel import MultiLabelScaling

    base = tiny_multilabel()
    z, y = multilabel_validation_set(base)
    fitted = MultiLabelScaling(method).fit(z, y)
    model = calibrate(base, method=method, logits=z, labels=y).eval()
    assert model.config.problem_type == "multi_label_classification"
    assert model.config.calibration["mode"] == method
    batch = inputs(seed=3)
    got = logits_of(model, batch).numpy()
    want = logits_of(base, batch).numpy() * fitted.scale_ + fitted.bias_
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(1 / (1 + np.exp(-got)), fitted.predict_proba(logits_of(base, batch)), atol=1e-5)
    labels = torch.from_numpy(y[:24])
    with torch.no_grad():
        loss = model(**batch, labels=labels).loss
    expected = torch.nn.functional.binary_cross_entropy_with_logits(torch.from_numpy(got), labels)
    assert float(loss) == pytest.approx(float(expected), rel=1e-5)
    masked = labels.clone()
    masked[0, 1] = -100  # a skipped decision: left out of the loss, as everywhere in calibkit
    with torch.no_grad():
        loss = model(**batch, labels=masked).loss
    keep = masked != -100
    expected = torch.nn.functional.binary_cross_entropy_with_logits(torch.from_numpy(got)[keep], labels[keep])
    assert float(loss) == pytest.approx(float(expected), rel=1e-5)
    metrics = model.config.calibration["metrics"]
    assert metrics["after"]["nll_macro"] < metrics["before"]["nll_macro"]  # fitted on this data: NLL drops
    model.save_pretrained(tmp_path / "m")
    again = AutoModelForSequenceClassification.from_pretrained(tmp_path / "m").eval()
    np.testing.assert_allclose(logits_of(again, batch).numpy(), got, atol=1e-6)
    folded = fold_into_classifier(model)
    assert type(folded) is type(base) and folded.config.problem_type == "multi_label_classification"
    np.testing.assert_allclose(logits_of(folded, batch).numpy(), got, atol=1e-5)
    assert "per-label sigmoid scaling" in (tmp_path / "m" / "README.md").read_text()


def test_multilabel_reloads_with_remote_code_and_pipelines_apply_the_sigmoid(tmp_path):
    from calibkit.calibrators.multilabel import MultiLabelScaling

    base = tiny_multilabel(seed=2)
    model = calibrate(base, MultiLabelScaling("platt").fit(*multilabel_validation_set(base))).eval()
    assert_reloads_without_calibkit(model, "sequence", tmp_path)
    tok = tiny_tokenizer(tmp_path)
    text = "w1 w2 w3 w4"
    expected = torch.sigmoid(logits_of(model, tok(text, return_tensors="pt")))[0]
    scores = pipeline("text-classification", model=model, tokenizer=tok, device="cpu")(text, top_k=None)
    got = {s["label"]: s["score"] for s in scores}
    for k in range(NUM_LABELS):  # independent probabilities, not a softmax over the labels
        assert got[model.config.id2label[k]] == pytest.approx(float(expected[k]), rel=1e-5)
    assert sum(got.values()) != pytest.approx(1.0, abs=1e-3)


def test_multilabel_heads_and_softmax_calibrators_do_not_mix():
    from calibkit.calibrators.multilabel import MultiLabelScaling

    multi, single = tiny_multilabel(), tiny()
    z, y = multilabel_validation_set(multi)
    with pytest.raises(
        ValueError, match="needs a MultiLabelScaling or MultiLabelIsotonic calibrator, got TemperatureScaling"
    ):
        calibrate(multi, TemperatureScaling.from_temperature(2.0, NUM_LABELS))
    with pytest.raises(ValueError, match="needs a multi-label model"):
        calibrate(single, MultiLabelScaling().fit(z, y))
    with pytest.raises(ValueError, match="not `dataset`"):
        calibrate(multi, method="temperature", dataset=object())
    with pytest.raises(ValueError, match="`method` must be one of"):
        calibrate(multi, method="hb", logits=z, labels=y)


def test_multilabel_isotonic_head_reloads_and_is_not_folded(tmp_path):
    from calibkit.calibrators.multilabel import MultiLabelIsotonic

    base = tiny_multilabel(seed=4)
    z, y = multilabel_validation_set(base)
    fitted = MultiLabelIsotonic().fit(z, y)
    model = calibrate(base, method="ir", logits=z, labels=y).eval()
    batch = inputs(seed=5)
    probs = torch.sigmoid(logits_of(model, batch)).numpy()
    np.testing.assert_allclose(probs, fitted.predict_proba(logits_of(base, batch)).clip(1e-30, 1 - 1e-16), atol=1e-6)
    model.save_pretrained(tmp_path / "m")
    again = AutoModelForSequenceClassification.from_pretrained(tmp_path / "m").eval()
    np.testing.assert_allclose(logits_of(again, batch).numpy(), logits_of(model, batch).numpy(), atol=1e-6)
    with pytest.raises(ValueError, match="not affine"):
        fold_into_classifier(model)
