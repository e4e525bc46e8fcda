"""A calibrated causal LM: logits / T everywhere the base model uses them, streamed fits, save/reload, folding."""

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch

from calibkit.calibrators import TemperatureScaling, WeightedTemperatureScaling
from calibkit.calibrators.base import prepare_fit
from calibkit.calibrators.calibrated import calibrate, fold_into_classifier
from calibkit.calibrators.streamed import nll_derivatives_torch, nll_sums
from calibkit.metrics.validation import shift_labels

VOCAB = 48
IGNORE = -100


def tiny_lm(tied=True, seed=0):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=32,
        n_embd=16,
        n_layer=2,
        n_head=2,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
        tie_word_embeddings=tied,
    )
    return GPT2LMHeadModel(config).eval()


def token_batch(n=4, t=12, seed=1):
    ids = torch.randint(1, VOCAB, (n, t), generator=torch.Generator().manual_seed(seed))
    labels = ids.clone()
    labels[0, :4] = IGNORE  # a prompt
    return ids, labels


def logits_of(model, ids):
    with torch.no_grad():
        return model(ids).logits


# -- streamed fits -------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [TemperatureScaling, WeightedTemperatureScaling])
def test_a_streamed_fit_equals_the_fit_on_all_the_shifted_tokens(cls):
    rng = np.random.default_rng(0)
    z = rng.normal(size=(6, 40, 20)) * 3
    y = np.argmax(z / 2.0 + rng.gumbel(size=z.shape), axis=-1)  # sampled at T = 2, so the fit is near 2
    y = np.roll(y, 1, axis=1)  # the label at t + 1 is what the logits at t predict
    y[0, :5] = IGNORE
    streamed = cls().fit_batches(lambda: ((z[i : i + 2], y[i : i + 2]) for i in range(0, 6, 2)), next_token=True)
    held = cls().fit(z.reshape(-1, 20), shift_labels(y, IGNORE))
    assert streamed.temperature_ == pytest.approx(held.temperature_, rel=1e-9)
    assert streamed.temperature_ == pytest.approx(2.0, rel=0.15)
    assert streamed.n_iter_ >= 2


def test_wts_takes_known_class_counts_and_skips_its_counting_pass():
    rng = np.random.default_rng(1)
    z = rng.normal(size=(300, 5)) * 2
    y = np.argmax(z + rng.gumbel(size=z.shape), axis=1)
    read = []

    def batches():
        read.append(1)
        return iter([(z[:150], y[:150]), (z[150:], y[150:])])

    fitted = WeightedTemperatureScaling().fit_batches(batches, class_counts=np.bincount(y, minlength=5))
    assert len(read) == fitted.n_iter_
    assert fitted.temperature_ == pytest.approx(WeightedTemperatureScaling().fit(z, y).temperature_, rel=1e-9)


def test_the_device_sums_equal_the_compiled_kernels_on_cpu_tensors():
    """The torch sums serve CUDA batches; here the same code on CPU tensors, in small chunks."""
    rng = np.random.default_rng(2)
    z = rng.normal(size=(200, 30)) * 4
    y = rng.integers(0, 30, size=200)
    y[:7] = IGNORE
    data = prepare_fit(z, y, IGNORE)
    weight = rng.uniform(0.5, 1.0, size=30)
    for beta in (0.3, 1.0, 2.5):
        kernel = nll_sums(data, weight, beta=beta)
        on_torch = nll_derivatives_torch(
            torch.from_numpy(z), torch.from_numpy(y), torch.from_numpy(weight), beta, IGNORE, chunk_entries=900
        )
        np.testing.assert_allclose(on_torch, kernel, rtol=1e-12, atol=1e-12)


def test_a_streamed_fit_names_the_bad_batch():
    z = np.zeros((2, 5, 6))
    y = np.ones((2, 5), dtype=np.int64)
    bad = y.copy()
    bad[1, 2] = 6
    with pytest.raises(ValueError, match=r"batch 1 \(counting from 0\)"):
        TemperatureScaling().fit_batches(lambda: iter([(z, y), (z, bad)]), next_token=True)
    with pytest.raises(
        ValueError, match=r"`logits` of batch 1 \(counting from 0\) has 5 classes but earlier batches had 6"
    ):
        TemperatureScaling().fit_batches(lambda: iter([(z, y), (z[:, :, :5], y % 5)]), next_token=True)
    with pytest.raises(ValueError, match="no sample to fit on"):
        TemperatureScaling().fit_batches(lambda: iter([(z, np.full_like(y, IGNORE))]), next_token=True)


@pytest.mark.parametrize("cls", [TemperatureScaling, WeightedTemperatureScaling])
def test_batches_given_as_a_list_is_refused_naming_the_argument(cls):
    z = np.zeros((2, 5, 6))
    y = np.ones((2, 5), dtype=np.int64)
    with pytest.raises(ValueError, match=r"`batches` must be a callable .*got list"):
        cls().fit_batches([(z, y)], next_token=True)


# -- the calibrated causal LM ------------------------------------------------------------------------


def test_calibrate_divides_the_lm_heads_logits_and_the_loss_is_theirs():
    base = tiny_lm()
    ids, labels = token_batch()
    model = calibrate(base, TemperatureScaling.from_temperature(1.7, VOCAB)).eval()
    with torch.no_grad():
        out = model(ids, labels=labels)
    np.testing.assert_allclose(out.logits.numpy(), logits_of(base, ids).numpy() / 1.7, rtol=1e-5, atol=1e-6)
    shifted = torch.nn.functional.cross_entropy(
        (logits_of(base, ids)[:, :-1] / 1.7).reshape(-1, VOCAB), labels[:, 1:].reshape(-1), ignore_index=IGNORE
    )
    assert out.loss.item() == pytest.approx(shifted.item(), rel=1e-5)
    # the base model is not changed: outside the wrapper its logits are its own
    with torch.no_grad():
        again = base(ids).logits
    np.testing.assert_allclose(again.numpy(), logits_of(tiny_lm(), ids).numpy(), rtol=1e-6)


def test_generate_samples_from_the_calibrated_distribution():
    base = tiny_lm()
    model = calibrate(base, TemperatureScaling.from_temperature(2.5, VOCAB)).eval()
    prompt = torch.tensor([[3, 7, 11]])
    settings = dict(
        max_new_tokens=5, do_sample=False, output_scores=True, output_logits=True, return_dict_in_generate=True
    )
    calibrated = model.generate(prompt, **settings)
    raw = base.generate(prompt, **settings)
    assert torch.equal(calibrated.sequences, raw.sequences)  # greedy: a temperature keeps the argmax
    for ours, theirs in zip(calibrated.scores, raw.scores):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy() / 2.5, rtol=1e-5, atol=1e-6)
    torch.manual_seed(0)
    sampled = model.generate(prompt, max_new_tokens=4, do_sample=True, top_k=0)
    assert sampled.shape == (1, 7)


def test_calibrates_docstring_names_the_causal_lm_it_wraps():
    # the docstring said sequence or token classifiers only, while calibrate wraps causal LMs too
    model = calibrate(tiny_lm(), TemperatureScaling().fit(3 * np.eye(4, VOCAB), np.array([0, 1, 2, 0])))
    doc = " ".join(calibrate.__doc__.split())
    assert type(model).__name__ in doc
    assert "*ForCausalLM" in doc


def test_calibrate_fits_on_next_token_logits_and_reports_before_and_after():
    base = tiny_lm()
    torch.manual_seed(4)  # text the model itself wrote at temperature 0.5: its logits favour it
    ids = base.generate(torch.randint(1, VOCAB, (6, 2)), do_sample=True, temperature=0.5, top_k=0, max_new_tokens=14)
    labels = ids.clone()
    labels[0, :4] = IGNORE
    logits = logits_of(base, ids)
    model = calibrate(base, method="ts", logits=logits, labels=labels)
    ts = TemperatureScaling().fit_batches(lambda: [(logits, labels)], next_token=True)
    block = model.config.calibration
    assert block["temperature"] == pytest.approx(ts.temperature_, rel=1e-12)
    assert block["metrics"]["before"]["nll"] >= block["metrics"]["after"]["nll"] - 1e-12
    assert block["metrics"]["n"] == int((labels[:, 1:] != IGNORE).sum())
    assert block["temperature"] < 1  # the text is sharper than the model's own distribution


@pytest.mark.parametrize("method", ["rd-ts", "vs", "ir"])
def test_methods_that_do_not_mean_a_temperature_are_refused_for_a_vocabulary(method):
    base = tiny_lm()
    ids, labels = token_batch()
    with pytest.raises(ValueError, match="a causal LM is calibrated by a temperature"):
        calibrate(base, method=method, logits=logits_of(base, ids), labels=labels)


def test_a_vocabulary_that_is_not_the_models_is_refused():
    with pytest.raises(ValueError, match=f"the calibrator has 10 classes, the model's vocabulary {VOCAB}"):
        calibrate(tiny_lm(), TemperatureScaling.from_temperature(1.5, 10))


LOAD_WITHOUT_CALIBKIT = textwrap.dedent(
    """
    import sys

    class Block:
        def find_spec(self, name, path, target=None):
            if name == "calibkit" or name.startswith("calibkit."):
                raise ImportError("calibkit is not installed here")
    sys.meta_path.insert(0, Block())
    import torch
    from transformers import AutoModelForCausalLM
    folder, out = sys.argv[1:]
    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()
    ids = torch.load(folder + "/ids.pt")
    with torch.no_grad():
        settings = dict(max_new_tokens=3, do_sample=False, output_scores=True, return_dict_in_generate=True)
        generated = model.generate(ids, **settings)
        torch.save({"logits": model(ids).logits, "scores": generated.scores[0]}, out)
    print(type(model).__module__)
    """
)


def test_save_and_reload_without_calibkit_gives_the_same_logits(tmp_path):
    base = tiny_lm()
    model = calibrate(base, TemperatureScaling.from_temperature(1.9, VOCAB)).eval()
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    ids, _ = token_batch()
    torch.save(ids, folder / "ids.pt")
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", LOAD_WITHOUT_CALIBKIT, str(folder), str(tmp_path / "out.pt")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "transformers_modules" in result.stdout
    got = torch.load(tmp_path / "out.pt")
    np.testing.assert_allclose(got["logits"].numpy(), logits_of(model, ids).numpy(), atol=1e-6)
    with torch.no_grad():
        ours = model.generate(ids, max_new_tokens=3, do_sample=False, output_scores=True, return_dict_in_generate=True)
    np.testing.assert_allclose(got["scores"].numpy(), ours.scores[0].numpy(), atol=1e-6)
    card = (folder / "README.md").read_text()
    assert "pipeline_tag: text-generation" in card and "AutoModelForCausalLM" in card


@pytest.mark.parametrize("tied", [True, False])
def test_folding_divides_the_lm_head_and_unties_it_first_when_tied(tmp_path, tied):
    from transformers import AutoModelForCausalLM

    base = tiny_lm(tied=tied)
    model = calibrate(base, TemperatureScaling.from_temperature(1.6, VOCAB)).eval()
    ids, _ = token_batch()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        folded = fold_into_classifier(model).eval()
    untied = [w for w in caught if "unties" in str(w.message)]
    assert len(untied) == (1 if tied else 0)
    np.testing.assert_allclose(logits_of(folded, ids).numpy(), logits_of(model, ids).numpy(), rtol=1e-5, atol=1e-6)
    # the inputs are unchanged: the embeddings of the folded copy are the base model's
    np.testing.assert_array_equal(
        folded.get_input_embeddings().weight.detach().numpy(), base.get_input_embeddings().weight.detach().numpy()
    )
    folded.save_pretrained(tmp_path / "plain")
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "plain").eval()
    np.testing.assert_allclose(logits_of(reloaded, ids).numpy(), logits_of(model, ids).numpy(), rtol=1e-5, atol=1e-6)
