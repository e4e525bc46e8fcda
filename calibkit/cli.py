"""The ``calibkit`` command: ``calibkit report`` prints every calibration metric as a table;
``calibkit install-modules`` makes ``evaluate.load("cece")`` and the other modules work offline."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

EXAMPLE_CLASSES = ("neutral", "criticism", "hostility", "discussion")


def synthetic_example(n: int = 20_000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """An over-confident 4-class classifier on imbalanced data (70/15/10/5 %), deterministic.

    Labels are drawn from "true" probabilities; the model reports them sharpened
    (temperature 0.5), the usual miscalibration of a fine-tuned transformer.
    """
    rng = np.random.default_rng(seed)
    prior = np.log([0.70, 0.15, 0.10, 0.05])
    logits = prior + rng.normal(scale=1.5, size=(n, 4))
    true = np.exp(logits - logits.max(1, keepdims=True))
    true /= true.sum(1, keepdims=True)
    labels = (rng.random(n)[:, None] > np.cumsum(true, axis=1)).sum(1).clip(0, 3)
    return logits / 0.5, labels


def load_predictions(path: str) -> tuple[np.ndarray, np.ndarray, bool]:
    """Read ``probs`` or ``logits`` and ``labels`` from an ``.npz`` file."""
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"--predictions: no such file: {path}")
    if file.suffix != ".npz":
        raise ValueError(f"--predictions: expected an .npz file with `probs` or `logits` and `labels`, got {path}")
    with np.load(file) as data:
        keys = set(data.files)
        if "labels" not in keys or not keys & {"probs", "logits"}:
            raise ValueError(f"--predictions: {path} needs `labels` and `probs` or `logits`; it has {sorted(keys)}")
        from_logits = "probs" not in keys
        return data["logits" if from_logits else "probs"], data["labels"], from_logits


def _format(value: Any) -> str:
    return "nan" if isinstance(value, float) and math.isnan(value) else f"{value:.4f}"


def format_table(report: dict[str, Any], class_names: list[str] | None = None) -> str:
    from calibkit.metrics import METRICS

    lines = ["| metric | value |", "|---|---|"]
    for name in (*METRICS, "accuracy"):
        if name == "subset_ece":
            continue
        lines.append(f"| {name} | {_format(report[name])} |")
    names = class_names or [str(k) for k in range(report["num_classes"])]
    for k, value in enumerate(report["subset_ece"]):
        lines.append(f"| ece_class_{names[k] if k < len(names) else k} | {_format(float(value))} |")
    lines.append(f"| n | {report['n']} |")
    return "\n".join(lines)


def _jsonable(report: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in report.items():
        if isinstance(value, np.ndarray):
            value = [None if math.isnan(v) else float(v) for v in value]
        elif isinstance(value, float) and math.isnan(value):
            value = None
        out[key] = value
    return out


def cmd_report(args: argparse.Namespace) -> int:
    from calibkit.metrics import calibration_report

    if args.predictions:
        values, labels, from_logits = load_predictions(args.predictions)
        source, names = args.predictions, None
    else:
        values, labels = synthetic_example()
        from_logits, names = True, list(EXAMPLE_CLASSES)
        source = "embedded SYNTHETIC example (an over-confident 4-class model on 70/15/10/5 % data)"
    report = calibration_report(
        values,
        labels,
        from_logits=from_logits,
        ignore_index=args.ignore_index,
        n_bins=args.n_bins,
        theta=args.theta,
    )
    if args.json:
        print(json.dumps({"source": source, **_jsonable(report)}, indent=2))
    else:
        print(f"calibkit report: {source}")
        print(format_table(report, names))
    return 0


def cmd_install_modules(args: argparse.Namespace) -> int:
    from calibkit.evaluate_modules import install_evaluate_modules

    scripts = install_evaluate_modules(args.names or None, modules_cache=args.modules_cache)
    for script in scripts:
        print(script)
    names = sorted({script.stem for script in scripts})
    print(
        f'installed {len(names)} evaluate modules ({", ".join(names)}): evaluate.load("{names[0]}") or '
        f'evaluate.load("calibkit/{names[0]}"); set HF_EVALUATE_OFFLINE=1 to skip the Hub look-ups'
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="calibkit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    report = sub.add_parser("report", help="print every calibration metric for saved predictions")
    report.add_argument(
        "--predictions",
        help=".npz file with `probs` (or `logits`) and `labels`; without it, an embedded synthetic example",
    )
    report.add_argument("--n-bins", type=int, default=15, help="bins for ECE, MCE and the class-wise ECEs")
    report.add_argument("--theta", type=float, default=40, help="RBECE: minimum samples for a bin to count")
    report.add_argument("--ignore-index", type=int, default=-100, help="label of positions to skip")
    report.add_argument("--json", action="store_true", help="print JSON instead of a table")
    report.set_defaults(func=cmd_report)
    install = sub.add_parser(
        "install-modules",
        help="make evaluate.load(NAME) find calibkit's evaluate modules offline (writes evaluate's module cache)",
    )
    install.add_argument("names", nargs="*", help="modules to install (default: all)")
    install.add_argument(
        "--modules-cache", help="evaluate's module cache (default: $HF_MODULES_CACHE or ~/.cache/huggingface/modules)"
    )
    install.set_defaults(func=cmd_install_modules)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as exc:
        print(f"calibkit: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
