"""``calibkit report``: which input it was given, the options that input can use, and one predictions file.

The kinds of input each have a module beside this one: shards (a folder or glob,
:mod:`~calibkit.cli.report_shards`), multiple-choice logs (:mod:`~calibkit.cli.report_choices`),
multi-label predictions (:mod:`~calibkit.cli.report_multilabel`) and a model on a dataset
(:mod:`~calibkit.cli.report_model`). This one reports a single predictions file, or the embedded
example when no input is given.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from calibkit.cli import report_choices, report_generations, report_model, report_multilabel, report_shards
from calibkit.cli.common import check_count, format_table, interval_lines, writable_folder
from calibkit.io.jsonable import json_ready
from calibkit.io.prediction_files import load_predictions

EXAMPLE_CLASSES = ("neutral", "criticism", "hostility", "discussion")


def synthetic_example(n: int = 20_000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Simulate an over-confident 4-class classifier on imbalanced data (70/15/10/5 %), deterministic.

    Labels are drawn from "true" probabilities; the model reports them sharpened
    (temperature 0.5), the usual miscalibration of a fine-tuned transformer.

    Parameters
    ----------
    n : int, default 20_000
        Samples.
    seed : int, default 0
        Seed of the draw.

    Returns
    -------
    logits : ndarray of shape (n, 4)
    labels : ndarray of shape (n,)
    """
    rng = np.random.default_rng(seed)
    prior = np.log([0.70, 0.15, 0.10, 0.05])
    logits = prior + rng.normal(scale=1.5, size=(n, 4))
    true = np.exp(logits - logits.max(1, keepdims=True))
    true /= true.sum(1, keepdims=True)
    labels = (rng.random(n)[:, None] > np.cumsum(true, axis=1)).sum(1).clip(0, 3)
    return logits / 0.5, labels


def _check_report_options(args: argparse.Namespace) -> None:
    """Check every option before any file or model is read.

    A bad ``--bootstrap`` should not wait for a model's logits to be collected.
    """
    from calibkit.metrics import CalibrationAccumulator
    from calibkit.metrics.bootstrap import MAX_REPLICATES
    from calibkit.metrics.validation import check_positive_int

    check_count(args.bootstrap, "--bootstrap", MAX_REPLICATES)
    check_count(args.resplits, "--resplits", 10_000)
    check_count(args.seed, "--seed")  # numpy's generators take seeds >= 0
    for option in ("max_length", "batch_size"):
        check_positive_int(getattr(args, option), "--" + option.replace("_", "-"))
    try:
        CalibrationAccumulator(n_bins=args.n_bins, theta=args.theta, ignore_index=args.ignore_index)
    except ValueError as exc:  # name the option as typed: `n_bins` -> --n-bins
        message = str(exc)
        for name in ("n_bins", "theta", "ignore_index"):
            message = message.replace(f"`{name}`", "--" + name.replace("_", "-"))
        raise ValueError(message) from None
    if args.output:
        writable_folder(args.output)


def _refuse_unused_options(args: argparse.Namespace, choices: bool, shards: bool) -> None:
    """Refuse an option the input cannot use, rather than ignore it.

    ``--calibrate`` on a file of logits gave the plain table, with no notice that nothing was
    calibrated.
    """
    unused = []
    if not choices and args.calibrate:
        unused.append("--calibrate (multiple-choice logs; for a classifier use --model and --dataset)")
    if not choices and args.score != "loglik":
        unused.append("--score (multiple-choice logs)")
    if not shards and args.approximate_ace:
        unused.append("--approximate-ace (shards)")
    if unused:
        source = "--model" if args.model else args.predictions or "the embedded example"
        raise ValueError(f"{', '.join(unused)}: not used with {source}")


def _generations(args: argparse.Namespace) -> int:
    """Refuse the options of the other inputs, then report the confidences of the answers (``--generations``)."""
    if args.predictions or args.dataset or args.multilabel or args.calibrate or args.score != "loglik":
        raise ValueError(
            "--generations takes none of --predictions, --dataset, --multilabel, --calibrate, --score "
            "(its --model is the causal LM of the white-box sources)"
        )
    if not (0 < args.threshold <= 1):
        raise ValueError(f"--threshold must be a number in (0, 1], got {args.threshold!r}")
    return report_generations.run(args)


def run(args: argparse.Namespace) -> int:
    """Run ``calibkit report``: metrics of saved predictions, of shards, or the comparison for a model.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``calibkit report``.

    Returns
    -------
    int
        The exit status, 0 (bad input raises a one-line ``ValueError``, which :func:`calibkit.cli.main`
        prints as exit status 2).
    """
    _check_report_options(args)
    if args.generations:
        return _generations(args)
    if args.model or args.dataset:
        if args.multilabel:
            raise ValueError("--multilabel reads saved predictions (--predictions); with --model it is not available")
        _refuse_unused_options(args, choices=False, shards=False)
        return report_model.run(args)
    from calibkit.io.shards import is_shard_location
    from calibkit.lm.multiple_choice import is_choice_location

    # What the input is, read once: each kind of input has its own module and options
    choices = bool(args.predictions) and is_choice_location(args.predictions)
    shards = not choices and bool(args.predictions) and is_shard_location(args.predictions)
    if args.multilabel:
        if choices:
            raise ValueError(
                f"--multilabel: {args.predictions} holds multiple-choice logs (one answer per question), "
                "not multi-label predictions; drop --multilabel"
            )
        _refuse_unused_options(args, False, shards)
        return report_multilabel.run(args)
    _refuse_unused_options(args, choices, shards)
    if choices:
        return report_choices.run(args)
    if shards:
        return report_shards.run(args)
    from calibkit.metrics import calibration_report
    from calibkit.metrics.bootstrap import bootstrap_intervals

    if args.predictions:
        values, labels, from_logits = load_predictions(args.predictions)
        if values.ndim == 2 and labels.shape == values.shape:  # multi-hot labels: never guessed, named on this face
            raise ValueError(
                f"--predictions: {args.predictions}: `labels` has the predictions' shape {values.shape}; for "
                "multi-hot labels of a multi-label head pass --multilabel"
            )
        source, names = args.predictions, None
    else:
        values, labels = synthetic_example()
        from_logits, names = True, list(EXAMPLE_CLASSES)
        source = "embedded SYNTHETIC example (an over-confident 4-class model on 70/15/10/5 % data)"
    if args.fce_variant != "paper":  # the label says which FCE the number is
        source += f"; fce as the fuzzy-binning authors' code computes it (--fce-variant {args.fce_variant})"
    settings = {
        "from_logits": from_logits,
        "ignore_index": args.ignore_index,
        "n_bins": args.n_bins,
        "theta": args.theta,
        "fce_variant": args.fce_variant,
    }
    report = calibration_report(values, labels, **settings)
    ci = (
        bootstrap_intervals(values, labels, n_boot=args.bootstrap, seed=args.seed, **settings)
        if args.bootstrap
        else None
    )
    if args.output:
        from calibkit.verdicts.comparison import compare_calibrators
        from calibkit.verdicts.reporting import write_report

        logits = values if from_logits else np.log(np.clip(values, 1e-300, None))
        if logits.ndim == 1:  # binary class-1 input: two columns for the figures
            logits = np.stack([np.zeros_like(logits), logits if from_logits else logits - np.log1p(-np.exp(logits))], 1)
        comparison = compare_calibrators(
            logits, labels, logits, labels, methods=("uncalibrated",), class_names=names,
            ignore_index=args.ignore_index, n_bins=args.n_bins, theta=args.theta, fce_variant=args.fce_variant,
            bootstrap=args.bootstrap, seed=args.seed, sets=False,
        )  # fmt: skip
        paths = write_report(comparison, args.output, f"calibkit report: {source}")
    if args.json:
        out = {"source": source, "fce_variant": args.fce_variant, **json_ready(report)}
        if ci is not None:
            out["intervals"] = {k: list(v) for k, v in ci["intervals"].items()}
            if "subset_ece" in ci:
                out["subset_ece_intervals"] = [json_ready(side) for side in ci["subset_ece"]]
        print(json.dumps(out, indent=2))
    else:
        print(f"calibkit report: {source}")
        kept = labels[labels != args.ignore_index].astype(np.int64)  # which classes a vocabulary's table shows
        support = np.bincount(kept[(kept >= 0) & (kept < report["num_classes"])], minlength=report["num_classes"])
        print(format_table(report, names, support))
        if ci is not None:
            print()
            print(interval_lines(ci, names, support))
        if args.output:
            print("\n".join(f"{name}: {path}" for name, path in paths.items()))
    return 0
