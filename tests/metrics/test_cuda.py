"""The torch engine on CUDA tensors against the compiled kernels on a host copy.

Skipped where torch sees no CUDA device (CI never has one); run on a GPU machine with
``python -m pytest tests/metrics/test_cuda.py``. The same code path runs on CPU tensors in
tests/metrics/test_backends.py, in CI.
"""

import warnings

import numpy as np
import pytest
import torch

import calibkit
from calibkit.metrics.accumulator import CalibrationAccumulator
from calibkit.metrics.backends import use_backend
from calibkit.metrics.settings import CalibrationSettings
from tests.conftest import make_data
from tests.metrics.test_backends import FUNCTIONS, KINDS, close

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(autouse=True)
def device_engine():
    """The CUDA side on the engine users get ("auto": torch, on the device), whatever CALIBKIT_BACKEND
    the test run set (conftest sets "numba", which would copy the tensors to the host)."""
    with use_backend("auto"):
        yield


def host(fn):
    with use_backend("numba"):
        return fn()


@pytest.mark.parametrize("kind,from_logits,k", KINDS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16])
def test_report_on_cuda_equals_kernels_on_host(kind, from_logits, k, dtype):
    probs, labels = make_data(3, kind, n=3000, num_classes=k, from_logits=from_logits)
    p = torch.from_numpy(probs).to(dtype)
    host_p = p.numpy() if dtype != torch.float16 else p.numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = calibkit.calibration_report(p.cuda(), torch.from_numpy(labels).cuda(), from_logits=from_logits)
        b = host(lambda: calibkit.calibration_report(host_p, labels, from_logits=from_logits))
    assert a.keys() == b.keys()
    for key in b:
        assert close(a[key], b[key]), (key, a[key], b[key])


@pytest.mark.parametrize("kind,from_logits,k", KINDS)
def test_every_function_on_cuda(kind, from_logits, k):
    probs, labels = make_data(4, kind, n=800, num_classes=k, from_logits=from_logits)
    p, y = torch.from_numpy(probs).cuda(), torch.from_numpy(labels).cuda()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in FUNCTIONS:
            fn = getattr(calibkit, name)
            a = fn(p, y, from_logits=from_logits)
            b = host(lambda fn=fn: fn(probs, labels, from_logits=from_logits))
            assert close(a, b), (name, a, b)


def test_accumulator_on_cuda_adds_and_merges():
    probs, labels = make_data(6, "token", n=300, num_classes=4, from_logits=True)
    acc = CalibrationAccumulator(settings=CalibrationSettings(from_logits=True))
    for i in range(0, 300, 70):
        acc.update(torch.from_numpy(probs[i : i + 70]).cuda(), torch.from_numpy(labels[i : i + 70]).cuda())

    def on_host():  # the same batches on the host: streaming ACE is the bucketed estimate, with its bound
        host_acc = CalibrationAccumulator(from_logits=True)
        for i in range(0, 300, 70):
            host_acc.update(probs[i : i + 70], labels[i : i + 70])
        return host_acc.compute()

    a, b = acc.compute(), host(on_host)
    assert a.keys() == b.keys()
    assert all(close(a[key], b[key]) for key in b), {key: (a[key], b[key]) for key in b}
    merged = CalibrationAccumulator(from_logits=True).update(probs[:10], labels[:10]).merge(acc)
    assert merged.compute()["n"] == b["n"] + (labels[:10] != -100).sum()


def test_exact_ace_ties_on_cuda():
    rng = np.random.default_rng(5)
    p = np.round(rng.random((4000, 3)), 1) + 0.1
    p = p / p.sum(axis=1, keepdims=True)
    y = rng.integers(0, 3, 4000)
    a = calibkit.ace(torch.from_numpy(p).cuda(), torch.from_numpy(y).cuda(), ace_ranges=7)
    assert close(a, host(lambda: calibkit.ace(p, y, ace_ranges=7)))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_bin_edge_values_on_cuda(dtype):
    # p = k/15 and p = j/10: values on the bin edges of 10 and 15 bins, from probabilities and logits
    rng = np.random.default_rng(7)
    counts = rng.integers(1, 8, size=(2000, 3))
    counts[:, 2] = 15 - counts[:, 0] - counts[:, 1]
    counts = counts[counts[:, 2] > 0]
    probs = counts / 15.0
    labels = rng.integers(0, 3, len(probs))
    for values, kw in ((probs, {}), (np.log(counts.astype(np.float64)), {"from_logits": True})):
        t = torch.from_numpy(values).to(dtype)
        a = calibkit.calibration_report(t.cuda(), torch.from_numpy(labels).cuda(), **kw)
        b = host(lambda t=t, kw=kw: calibkit.calibration_report(t.numpy(), labels, **kw))
        bad = {key: (a[key], b[key]) for key in b if not close(a[key], b[key])}
        if kw:  # softmax of log-counts: values equal in exact arithmetic differ by an ulp between the
            # engines' exps (torch's, the kernels' SLEEF-style one), and ACE's rule "tied values share
            # their mean outcome" then groups them differently (8e-4 seen on an H200, CPU and CUDA alike)
            ace = bad.pop("ace", None)
            assert ace is None or abs(ace[0] - ace[1]) < 2e-3, ace
        assert not bad, bad


@pytest.mark.parametrize("kind,from_logits,k", KINDS)
def test_selective_metrics_on_cuda(kind, from_logits, k):
    from calibkit.metrics.registry import ON_REQUEST

    probs, labels = make_data(8, kind, n=2000, num_classes=k, from_logits=from_logits)
    p, y = torch.from_numpy(probs).cuda(), torch.from_numpy(labels).cuda()
    a = calibkit.calibration_report(p, y, from_logits=from_logits, metrics=ON_REQUEST, coverage=0.7)
    b = host(
        lambda: calibkit.calibration_report(probs, labels, from_logits=from_logits, metrics=ON_REQUEST, coverage=0.7)
    )
    assert a.keys() == b.keys() and all(close(a[key], b[key]) for key in b), (a, b)

    def stream(values, targets):  # the buckets stay on the device until compute()
        acc = CalibrationAccumulator(ON_REQUEST, from_logits=from_logits, coverage=0.7)
        for i in range(0, len(targets), 600):
            acc.update(values[i : i + 600], targets[i : i + 600])
        return acc.compute()

    c, d = stream(p, y), host(lambda: stream(probs, labels))
    assert c.keys() == d.keys() and all(close(c[key], d[key]) for key in d), (c, d)
    assert all(abs(c[m] - b[m]) <= c[f"{m}_error_bound"] + 1e-12 for m in ON_REQUEST)


def test_multilabel_accumulator_on_cuda_equals_the_host():
    rng = np.random.default_rng(9)
    z = rng.normal(size=(3000, 5)) * 2
    y = (rng.random((3000, 5)) < 1 / (1 + np.exp(-z / 2))).astype(np.float32)
    y[::7, 3] = -100

    def stream(values, targets):
        acc = CalibrationAccumulator(from_logits=True, multilabel=True)
        for i in range(0, 3000, 700):
            acc.update(values[i : i + 700], targets[i : i + 700])
        return acc.compute()

    a = stream(torch.from_numpy(z).cuda(), torch.from_numpy(y).cuda())
    b = host(lambda: stream(z, y))
    for avg in ("macro", "weighted", "micro"):
        assert all(close(a[avg][m], b[avg][m]) for m in b[avg]), (avg, a[avg], b[avg])
    assert a["n"] == b["n"] and close(a["cece"], b["cece"])
    one = calibkit.calibration_report(
        torch.from_numpy(z).cuda(), torch.from_numpy(y).cuda(), from_logits=True, multilabel=True
    )
    assert close(one["micro"]["brier"], b["micro"]["brier"])


# -- causal LMs (next_token=True): the paths of tests/metrics/test_next_token.py and
# tests/calibrators/test_causal_lm.py, on the device


def causal_logits(n=4, t=64, v=5000, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn((n, t, v), generator=g) * 2.5).to(torch.bfloat16)
    labels = torch.randint(0, v, (n, t), generator=g)
    labels[0, :9] = -100
    return logits, labels


def test_next_token_batches_on_cuda_equal_the_host():
    logits, labels = causal_logits()
    want = host(
        lambda: calibkit.calibration_report(logits.float().numpy(), labels.numpy(), from_logits=True, next_token=True)
    )
    acc = CalibrationAccumulator(from_logits=True, next_token=True)
    for b in range(4):
        acc.update(logits[b : b + 1].cuda(), labels[b : b + 1].cuda())
    assert isinstance(acc.statistics.scalars, torch.Tensor)  # the sums stayed on the device
    got = acc.compute()
    for name in ("ece", "cece", "wsece", "nll", "brier", "sce", "fce", "rbece"):
        assert got[name] == pytest.approx(want[name], rel=1e-9, abs=1e-12, nan_ok=True), name


def test_a_streamed_temperature_fit_on_cuda_equals_the_host():
    from calibkit.calibrators import TemperatureScaling, WeightedTemperatureScaling

    logits, labels = causal_logits(seed=1)
    labels = logits.float().argmax(-1).roll(1, dims=1)  # the logits favour their labels
    for cls in (TemperatureScaling, WeightedTemperatureScaling):
        on_host = cls().fit_batches(lambda: [(logits[:2], labels[:2]), (logits[2:], labels[2:])], next_token=True)
        on_cuda = cls().fit_batches(
            lambda: [(logits[:2].cuda(), labels[:2].cuda()), (logits[2:].cuda(), labels[2:].cuda())], next_token=True
        )
        assert on_cuda.temperature_ == pytest.approx(on_host.temperature_, rel=1e-9)


def test_a_calibrated_causal_lm_generates_on_cuda():
    from transformers import GPT2Config, GPT2LMHeadModel

    from calibkit.calibrators import TemperatureScaling

    torch.manual_seed(0)
    base = GPT2LMHeadModel(GPT2Config(vocab_size=300, n_positions=32, n_embd=16, n_layer=2, n_head=2)).cuda().eval()
    model = calibkit.calibrate(base, TemperatureScaling.from_temperature(1.8, 300)).eval()
    prompt = torch.tensor([[3, 7, 11]], device="cuda")
    settings = dict(max_new_tokens=4, do_sample=False, output_scores=True, return_dict_in_generate=True, pad_token_id=0)
    ours, theirs = model.generate(prompt, **settings), base.generate(prompt, **settings)
    for a, b in zip(ours.scores, theirs.scores):
        torch.testing.assert_close(a, b / 1.8, rtol=1e-5, atol=1e-6)
