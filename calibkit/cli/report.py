"""``calibkit report``: every metric of one predictions file, of shards, or of the embedded example.

Shards (a folder or glob) are streamed by :mod:`~calibkit.cli.report_shards`; this module reports
a single predictions file, or the embedded example when no input is given. The other kinds of
input have their own commands (``choices``, ``generations``, ``multilabel``, ``compare``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from calibkit.cli import report_shards
from calibkit.cli.common import check_options, format_table, interval_lines, with_absent_metrics
from calibkit.cli.options import COMPARISON_SETTINGS, defaults, flag
from calibkit.io.jsonable import json_ready
from calibkit.io.prediction_files import load_predictions
from calibkit.metrics.sampling import SAMPLING_DEFAULTS

EXAMPLE_CLASSES = ("neutral", "criticism", "hostility", "discussion")


def synthetic_example(n: int = 20_000, seed: int = SAMPLING_DEFAULTS.seed) -> tuple[np.ndarray, np.ndarray]:
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


def run(args: argparse.Namespace) -> int:
    """Run ``calibkit report``: every metric of a predictions file, of shards, or of the embedded example.

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
    settings = check_options(args)
    from calibkit.io.shards import is_shard_location

    if args.predictions and is_shard_location(args.predictions):
        return report_shards.run(args, settings)
    if args.approximate_ace:  # a file is read once anyway: ACE is exact
        raise ValueError(f"--approximate-ace (shards): not used with {args.predictions or 'the embedded example'}")
    if args.output:
        _check_comparison_settings(settings)
    values, labels, from_logits, source, names = _read(args)
    if args.fce_variant != "paper":  # the label says which FCE the number is
        source += f"; fce as the fuzzy-binning authors' code computes it (--fce-variant {args.fce_variant})"
    from calibkit.metrics import calibration_report
    from calibkit.metrics.bootstrap import bootstrap_intervals

    report = calibration_report(values, labels, from_logits=from_logits, **settings)
    ci = None
    if args.bootstrap:
        ci = bootstrap_intervals(values, labels, bootstrap=args.bootstrap, seed=args.seed, from_logits=from_logits,
                                 **settings)  # fmt: skip
    paths = _write(args, settings, values, labels, from_logits, names, source) if args.output else {}
    if args.json:
        out = {"source": source, "fce_variant": args.fce_variant, **json_ready(report)}
        if ci is not None:
            out["intervals"] = {k: list(v) for k, v in ci["intervals"].items()}
            if "subset_ece" in ci:
                out["subset_ece_intervals"] = [json_ready(side) for side in ci["subset_ece"]]
        print(json.dumps(out, indent=2))
        return 0
    print(f"calibkit report: {source}")
    kept = _scored_labels(labels, settings)  # which classes a vocabulary's table shows
    kept = kept[kept != args.ignore_index].astype(np.int64)
    support = np.bincount(kept[(kept >= 0) & (kept < report["num_classes"])], minlength=report["num_classes"])
    shown, note = with_absent_metrics(report)
    print(format_table(shown, names, support) + (f"\n\n{note}" if note else ""))
    if ci is not None:
        print()
        print(interval_lines(ci, names, support))
    if paths:
        print("\n".join(f"{name}: {path}" for name, path in paths.items()))
    return 0


def _read(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, bool, str, list[str] | None]:
    """Read ``--predictions``, or simulate the embedded example: values, labels, from_logits, source, class names."""
    if not args.predictions:
        values, labels = synthetic_example()
        source = "embedded SYNTHETIC example (an over-confident 4-class model on 70/15/10/5 % data)"
        return values, labels, True, source, list(EXAMPLE_CLASSES)
    values, labels, from_logits = load_predictions(args.predictions)
    if values.ndim == 2 and labels.shape == values.shape:  # multi-hot labels: never guessed, named on this face
        raise ValueError(
            f"--predictions: {args.predictions}: `labels` has the predictions' shape {values.shape}; for "
            "multi-hot labels of a multi-label head use `calibkit multilabel`"
        )
    return values, labels, from_logits, args.predictions, None


def _scored_labels(labels: np.ndarray, settings: dict[str, Any]) -> np.ndarray:
    """Return the label each prediction is scored against: a causal LM's position ``t``, the token at ``t + 1``."""
    if settings.get("next_token") and labels.ndim == 2:
        from calibkit.metrics.validation import shift_labels

        return shift_labels(labels, settings["ignore_index"])
    return labels.reshape(-1) if settings.get("next_token") else labels


def _check_comparison_settings(settings: dict[str, Any]) -> None:
    """Refuse a setting that the written report (``--output``) would not use, rather than write other numbers.

    The files of ``--output`` come from the calibrators' comparison, which takes the settings in
    ``COMPARISON_SETTINGS`` only; its table would show the other settings' defaults beside a printed
    table computed with the given ones.
    """
    unused = [name for name, value in settings.items() if name not in COMPARISON_SETTINGS and value != defaults()[name]]
    unused = [name for name in unused if name != "next_token"]  # the logits are shifted for it: see _write
    if unused:
        flags = ", ".join(flag(name) for name in unused)
        raise ValueError(f"{flags}: --output writes its report with the default; not available with --output yet")


def _write(
    args: argparse.Namespace, settings: dict[str, Any], values: np.ndarray, labels: np.ndarray, from_logits: bool,
    names: list[str] | None, source: str,
) -> dict[str, Any]:  # fmt: skip
    """Write ``--output``'s report (the table, the figures, report.html) and return its files."""
    from calibkit.verdicts.comparison import compare_calibrators
    from calibkit.verdicts.reporting import write_report

    logits = values if from_logits else np.log(np.clip(values, 1e-300, None))
    if logits.ndim == 1:  # binary class-1 input: two columns for the figures
        logits = np.stack([np.zeros_like(logits), logits if from_logits else logits - np.log1p(-np.exp(logits))], 1)
    if settings.get("next_token"):  # position t scored against the token at t + 1, as the model's loss
        labels = _scored_labels(labels, settings)
        logits = logits.reshape(-1, logits.shape[-1])
    comparison = compare_calibrators(
        logits, labels, logits, labels, methods=("uncalibrated",), class_names=names, bootstrap=args.bootstrap,
        seed=args.seed, sets=False, **{name: settings[name] for name in COMPARISON_SETTINGS},
    )  # fmt: skip
    return write_report(comparison, args.output, f"calibkit report: {source}")
