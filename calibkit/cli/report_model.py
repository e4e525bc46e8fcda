"""``calibkit compare --model DIR --dataset DATA``: the calibrators compared for a classifier.

The logits are collected on a dataset split; every calibrator is fitted on one half and judged on
the other, with re-splits and bootstrap intervals (token data: whole sentences).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.cli.common import check_options


def _load_dataset_split(location: str, split: str | None):
    import datasets

    from calibkit.io.prediction_files import one_line

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


def _encode(data: Any, tokenizer: Any, config: Any, args: argparse.Namespace) -> tuple[Any, list, Any]:
    """Tokenize the split, map its labels to the model's ids (first sub-tokens for token data), pick the collator."""
    num_labels = config.num_labels
    label2id = {str(k): int(v) for k, v in (config.label2id or {}).items()}
    texts = list(data[args.text_column])  # datasets 5 returns a lazy Column
    if args.task == "token":
        encoded = tokenizer(texts, is_split_into_words=True, truncation=True, max_length=args.max_length)
        from calibkit.demos.data import first_subtoken_labels

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
    return encoded, rows, collator


def run(args: argparse.Namespace) -> int:
    """Run the calibrators' comparison for a model on a dataset split (halves: calibration / evaluation).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``calibkit compare``.

    Returns
    -------
    int
        The exit status, 0 (bad input raises a one-line ``ValueError``, which :func:`calibkit.cli.main`
        prints as exit status 2).
    """
    settings = check_options(args)
    logits, labels, names = _collect(args)
    order = np.random.default_rng(args.seed).permutation(len(labels))
    half = len(order) // 2
    if half == 0:
        unit = "sentences" if args.task == "token" else "labelled predictions"
        raise ValueError(f"--dataset: need at least 2 {unit} (one to calibrate, one to evaluate)")
    from calibkit.verdicts.comparison import compare_calibrators
    from calibkit.verdicts.reporting import markdown_table, to_json, write_report

    halves = (logits[order[:half]], labels[order[:half]], logits[order[half:]], labels[order[half:]])
    comparison = compare_calibrators(*halves, class_names=names, bootstrap=args.bootstrap, seed=args.seed, **settings)
    resplit = None
    if args.resplits:
        from calibkit.verdicts.resplits import resplit_comparison

        resplit = resplit_comparison(*halves, resplits=args.resplits, class_names=names, seed=args.seed, **settings)
    title = f"calibkit report: {args.model} on {args.dataset} (calibrated on one half, evaluated on the other)"
    if args.fce_variant != "paper":
        title += f"; fce as the fuzzy-binning authors' code computes it (--fce-variant {args.fce_variant})"
    paths = write_report(comparison, args.output, title, resplits=resplit) if args.output else {}
    if args.json:
        out = {"model": args.model, "dataset": args.dataset, "fce_variant": args.fce_variant, **to_json(comparison)}
        if resplit is not None:
            from calibkit.verdicts.resplits import to_json as resplit_json
            from calibkit.verdicts.resplits import verdicts

            out["resplits"] = resplit_json(resplit, verdicts(resplit))
        print(json.dumps(out, indent=2))
    else:
        print(title)
        if resplit is not None:
            from calibkit.verdicts.resplits import summary_text

            print(f"\n{summary_text(resplit)}\n\none split:")
        print(markdown_table(comparison))
        print("\n".join(f"{name}: {path}" for name, path in paths.items()))
    return 0


def _collect(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Load ``--model`` and ``--dataset``, check that they fit, and collect the logits, labels and class names.

    Token data comes back as sentences (:func:`calibkit.verdicts.sequences.sequences_of_lengths`):
    they, not tokens, are split and resampled, since a sentence's tokens are not independent.
    """
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
    encoded, rows, collator = _encode(data, tokenizer, model.config, args)
    table = datasets.Dataset.from_dict({**{k: encoded[k] for k in encoded.keys()}, "labels": rows})
    logits, labels = collect_logits(model, table, batch_size=args.batch_size, data_collator=collator)
    if args.task == "token":  # sentences, not tokens, are split and resampled: their tokens are not independent
        from calibkit.verdicts.sequences import sequences_of_lengths

        lengths = [int((np.asarray(r) != -100).sum()) for r in rows]
        logits, labels = sequences_of_lengths(logits, labels, lengths)
    names = [str(model.config.id2label.get(k, k)) for k in range(model.config.num_labels)]
    return logits, labels, names
