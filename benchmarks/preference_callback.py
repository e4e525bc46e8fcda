"""Added time of the TRL preference callbacks per evaluation, as a ratio to the evaluation itself.

    python benchmarks/preference_callback.py            # 512 evaluation pairs, 15 rounds (~1 min)
    python benchmarks/preference_callback.py --quick    # 128 pairs, 5 rounds

Cases, each a real ``trainer.evaluate()`` of TRL 1.16 on CPU (``use_cpu=True``, ``bf16=False``,
evaluation batch 16 pairs), the tiny models of ``tests/callbacks/test_preferences.py`` (a GPT-2
from a config, hidden 16, one layer, a byte-level BPE tokenizer trained here on 21 words; pairs of
a 3-word prompt and answers of 1 to 4 words):

- ``RewardTrainer``: a ``GPT2ForSequenceClassification`` reward model;
- ``DPOTrainer``: a ``GPT2LMHeadModel`` policy and an explicit reference model (``beta=0.1``).

Variants: ``bare`` (no callback), ``attached`` (``cb.attach(trainer)``: the pairs are read from the
evaluation's own forward passes) and ``callbacks=[cb]`` (``on_evaluate`` reads the evaluation
data loader again with the model, and the reference model for DPO: one more forward pass).

What is timed: the end-to-end ``evaluate()`` of every variant, in interleaved rounds (each round
calls every variant once; the ratio is taken per round, then the median), and, directly, the time
the callback's own code adds to an attached evaluation: its wrappers of ``evaluation_loop`` and
``compute_loss`` timed around the trainer's methods they wrap, so everything the callback does
(hooks on and off, each batch's outputs read, ``preference_metrics`` on the pooled pairs) and
nothing else; the *own time* column is that over the bare evaluation's time, taken per round. The
end-to-end difference of two evaluations on a shared machine moves by several percent from round
to round; the own time is the measure of the cost. The issue's bound (issue 64, item 8) is 5% of
an evaluation of the tiny model for the attached callback. Torch runs on one thread
(``--threads``), as ``benchmarks/callback.py`` explains.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from tests.callbacks.test_preferences import gpt2, pairs, run_args, tokenizer  # noqa: E402


def build(kind: str, folder: str, n_pairs: int, callback=None, attach: bool = False):
    """A RewardTrainer or DPOTrainer on the tiny models, ``n_pairs`` evaluation pairs, the callback if any."""
    import trl
    from transformers import GPT2ForSequenceClassification, GPT2LMHeadModel

    tok = tokenizer()
    common = dict(
        train_dataset=pairs(32, 1),
        eval_dataset=pairs(n_pairs, 2),
        processing_class=tok,
        callbacks=None if (callback is None or attach) else [callback],
    )
    overrides = dict(per_device_eval_batch_size=16, max_steps=1)
    if kind == "reward":
        model = GPT2ForSequenceClassification(gpt2(tok, 0, num_labels=1))
        trainer = trl.RewardTrainer(model=model, args=run_args(trl.RewardConfig, Path(folder), **overrides), **common)
    else:
        policy, ref = GPT2LMHeadModel(gpt2(tok, 0)), GPT2LMHeadModel(gpt2(tok, 1))
        if callback is not None and not attach:
            callback.ref_model = ref
        args = run_args(trl.DPOConfig, Path(folder), beta=0.1, **overrides)
        trainer = trl.DPOTrainer(model=policy, ref_model=ref, args=args, **common)
    if callback is not None and attach:
        stopwatch = Stopwatch()
        stopwatch.wrap(trainer, "inner")  # the trainer's own methods, then the callback's wrappers around them
        callback.attach(trainer)
        stopwatch.wrap(trainer, "outer")
        trainer.stopwatch = stopwatch
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # disable_tqdm prints every log entry
    return trainer


class Stopwatch:
    """Time spent inside the methods it wraps: ``inner`` (the trainer's own) and ``outer`` (the callback's wrappers)."""

    def __init__(self) -> None:
        self.spent = {"inner": 0.0, "outer": 0.0}

    def wrap(self, trainer, side: str) -> None:
        """Wrap ``trainer.evaluation_loop`` and ``trainer.compute_loss`` as they are now, adding to ``side``."""
        for name in ("evaluation_loop", "compute_loss"):
            original = getattr(trainer, name)

            def timed(*args, _original=original, **kwargs):
                start = time.perf_counter()
                try:
                    return _original(*args, **kwargs)
                finally:
                    self.spent[side] += time.perf_counter() - start

            setattr(trainer, name, timed)

    def own(self) -> float:
        """The callback's own time: what its wrappers add around the trainer's methods (hooks, reading, metrics)."""
        return self.spent["outer"] - self.spent["inner"]


def run_case(kind: str, n_pairs: int, rounds: int) -> dict[str, float]:
    from calibkit.callbacks.preferences import DPOPreferenceCallback, PreferenceCallback

    make = PreferenceCallback if kind == "reward" else DPOPreferenceCallback
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        attached_cb, listed_cb = make(fit=False), make(fit=False)
        trainers = {
            "bare": build(kind, folder, n_pairs),
            "attached": build(kind, folder, n_pairs, attached_cb, attach=True),
            "callbacks=[cb]": build(kind, folder, n_pairs, listed_cb),
        }
        stopwatch = trainers["attached"].stopwatch
        for trainer in trainers.values():
            trainer.evaluate()  # warm-up: first calls, the kernels' compilation
        times: dict[str, list[float]] = {name: [] for name in trainers}
        own: list[float] = []
        for r in range(rounds):
            order = list(trainers)[r % 3 :] + list(trainers)[: r % 3]
            for name in order:
                stopwatch.spent = {"inner": 0.0, "outer": 0.0}
                start = time.perf_counter()
                trainers[name].evaluate()
                times[name].append(time.perf_counter() - start)
                if name == "attached":
                    own.append(stopwatch.own())
        assert len(attached_cb.last_pairs["eval"]) == n_pairs
    bare = np.array(times["bare"])
    out = {"bare s": statistics.median(bare)}
    for name in ("attached", "callbacks=[cb]"):
        out[f"{name} added"] = statistics.median((np.array(times[name]) - bare) / bare)
    out["attached cost"] = statistics.median(np.array(own) / bare)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="128 pairs, 5 rounds")
    parser.add_argument("--threads", type=int, default=1)
    options = parser.parse_args()
    torch.set_num_threads(options.threads)
    n_pairs, rounds = (128, 5) if options.quick else (512, 15)
    print(f"{n_pairs} evaluation pairs, batch 16 pairs, {rounds} interleaved rounds, {options.threads} torch thread(s)")
    print(
        "| trainer | bare evaluate() | attached: added end-to-end | attached: callback's own time "
        "| callbacks=[cb]: added |"
    )
    print("|---|---|---|---|---|")
    for kind, label in (("reward", "RewardTrainer"), ("dpo", "DPOTrainer")):
        r = run_case(kind, n_pairs, rounds)
        print(
            f"| {label} | {r['bare s'] * 1000:.0f} ms | {r['attached added']:+.1%} | {r['attached cost']:.1%} "
            f"| {r['callbacks=[cb] added']:+.1%} |"
        )


if __name__ == "__main__":
    main()
