import os

import numpy as np
import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (derandomize): a test that fails at random
# could block a good submission. CALIBKIT_HYPOTHESIS=explore draws new ones, to hunt locally;
# pin what it finds with @example.
settings.register_profile("deterministic", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", print_blob=True)
settings.load_profile(os.environ.get("CALIBKIT_HYPOTHESIS", "deterministic"))

# The suite runs the compiled kernels unless a test picks an engine: "auto" would answer a
# kind's first call on torch while the kernels compile, mixing engines between assertions.
# tests/metrics/test_backends.py checks torch against numba, and "auto" itself.
os.environ.setdefault("CALIBKIT_BACKEND", "numba")


def pytest_configure(config):
    """One torch thread for the default run: its models and tensors are tiny (a few hundred rows).

    With two, every op of an L-BFGS fit waits at an OpenMP barrier for the second thread; on a
    busy 2-core machine that made ``MatrixScaling().fit`` on 120 x 3 logits 10x slower (2.6 s
    against 0.24 s) and the ``compare`` tests minutes long. Fresh processes that the tests start
    get the same (OMP_NUM_THREADS). ``-m slow`` keeps torch's default: the MiniLM demo trains.
    """
    if "not slow" not in (config.getoption("markexpr") or ""):
        return
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is in the test extra
        return
    torch.set_num_threads(1)


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (pyproject's addopts): a worker a core, at most 8.

    Each worker imports torch, transformers and the compiled kernels (about 1 GB); beyond 8 the
    suite's few long tests, not the worker count, set its time.
    """
    return max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


@pytest.fixture(autouse=True)
def _autograd_left_as_found(request):
    """Fail the test that leaves autograd off for the process (lighteval's transformers model does at import):
    every later test that trains would fail instead, far from the cause."""
    import torch

    before = torch.is_grad_enabled()
    yield
    if torch.is_grad_enabled() != before:
        torch.set_grad_enabled(before)
        pytest.fail(f"{request.node.nodeid} left torch.is_grad_enabled() at {not before}", pytrace=False)


def softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def make_data(seed, kind, n=200, num_classes=4, from_logits=False, length=6, sharpness=2.0):
    """Random predictions: 'binary' (N,), 'multiclass' (N, K) or 'token' (N, L, K) with -100 labels."""
    rng = np.random.default_rng(seed)
    if kind == "binary":
        z = rng.normal(size=n) * sharpness
        labels = rng.integers(0, 2, n)
        return (z if from_logits else 1 / (1 + np.exp(-z))), labels
    shape = (n, num_classes) if kind == "multiclass" else (n, length, num_classes)
    z = rng.normal(size=shape) * sharpness
    labels = rng.integers(0, num_classes, shape[:-1])
    if kind == "token":
        pad = rng.random(shape[:-1]) < 0.3
        labels[pad] = -100
        z[pad] = -100.0  # Trainer pads logits with -100: masked on labels only
    return (z if from_logits else softmax(z)), labels


TINY_WORDS = [f"w{i}" for i in range(59)]


def tiny_tokenizer(folder):
    """A WordPiece tokenizer over w0..w58 (ids 5..63, for 64-token tiny models), built offline in ``folder``.

    The vocabulary goes positionally: transformers 5 renamed ``vocab_file`` to ``vocab`` and
    ignores the old keyword, which left a 5-token tokenizer mapping every word to [UNK].
    """
    from transformers import BertTokenizer

    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *TINY_WORDS]) + "\n")
    tokenizer = BertTokenizer(str(folder / "vocab.txt"))
    assert len(tokenizer) == 5 + len(TINY_WORDS), "the tiny vocabulary was not read"
    return tokenizer


@pytest.fixture
def data():
    return make_data
