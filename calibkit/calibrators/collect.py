"""Collecting a classifier's logits: a tokenised ``datasets.Dataset`` batched, run through the model.

:func:`collect_logits` checks the dataset and builds the data loader; :func:`logits_of_batches`
runs any loader of padded batches through the model and keeps the labelled predictions.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable

import numpy as np

from calibkit.metrics.settings import DEFAULTS
from calibkit.metrics.validation import check_bool, check_positive_int

__all__ = ["collect_logits", "logits_of_batches"]

LABEL_COLUMNS = ("labels", "label", "ner_tags")
"""The label columns tried, in order, when the one named is absent."""


def collect_logits(
    model,
    dataset,
    *,
    batch_size: int = 32,
    data_collator=None,
    label_column: str = "labels",
    progress: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Run ``model`` over a tokenised ``datasets.Dataset`` and return the logits and labels of the kept predictions.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A sequence- or token-classification model (put in eval mode while it runs).
    dataset : datasets.Dataset
        Tokenised, with a label column.
    batch_size : int, default 32
        Rows per forward pass.
    data_collator : callable, optional
        Pads a batch (e.g. ``DataCollatorWithPadding(tokenizer)``); without one, the rows must
        already have equal lengths.
    label_column : str, default "labels"
        The label column; if absent, the first of ``labels``, ``label``, ``ner_tags`` present.
    progress : bool, default True
        Show a progress bar.

    Returns
    -------
    logits : ndarray
        Sequence classification: ``(N, K)``; token classification: the tokens whose label is
        not -100, ``(T, K)`` (padding never stored).
    labels : ndarray
        ``(N,)`` or ``(T,)``.

    Raises
    ------
    ValueError
        When ``dataset`` is not a tokenised Dataset, has no label column or no rows, or its rows
        cannot be collated.
    """
    from torch.utils.data import DataLoader
    from transformers import default_data_collator

    if not all(hasattr(dataset, name) for name in ("column_names", "select_columns", "rename_column")):
        raise ValueError(f"`dataset` must be a tokenised datasets.Dataset, got {type(dataset).__name__}")
    batch_size = check_positive_int(batch_size, "batch_size")
    check_bool(progress, "progress")
    label_column = _label_column(dataset, label_column)
    forward_names = set(inspect.signature(model.forward).parameters) | {"input_ids", "attention_mask", "token_type_ids"}
    keep = [c for c in dataset.column_names if c in forward_names or c == label_column]
    data = dataset.select_columns(keep)
    if label_column != "labels":
        data = data.rename_column(label_column, "labels")
    collate = _checked_collator(data_collator or default_data_collator, label_column)
    loader = DataLoader(data, batch_size=batch_size, collate_fn=collate)
    return logits_of_batches(model, loader, progress=progress)


def _label_column(dataset, label_column: str) -> str:
    """Return the label column to read: ``label_column``, or the first of :data:`LABEL_COLUMNS` present."""
    if not isinstance(label_column, str):
        raise ValueError(f"`label_column` must be a column name, got {label_column!r}")
    if label_column in dataset.column_names:
        return label_column
    candidates = [c for c in LABEL_COLUMNS if c in dataset.column_names]
    if not candidates:
        raise ValueError(f"`dataset` has no label column {label_column!r}; columns: {dataset.column_names}")
    return candidates[0]


def _checked_collator(collator, label_column: str):
    """Wrap ``collator`` so that a batch it cannot build says what to pass instead."""
    import torch

    def collate(rows):
        # Rows of unequal length without a padding collator end in a torch error deep in the
        # collator: say what to pass instead.
        try:
            batch = collator(rows)
        except (ValueError, RuntimeError, TypeError) as exc:
            raise ValueError(
                f"`dataset` rows could not be collated into a batch ({exc}); pass a padding `data_collator`, "
                "e.g. DataCollatorWithPadding(tokenizer)"
            ) from exc
        if "labels" not in batch or not isinstance(batch["labels"], torch.Tensor):
            raise ValueError(f"`dataset` column {label_column!r} did not collate into a tensor of integer labels")
        return batch

    return collate


def logits_of_batches(
    model, batches: Iterable, *, progress: bool = True, ignore_index: int = DEFAULTS.ignore_index
) -> tuple[np.ndarray, np.ndarray]:
    """Run ``model`` (in eval mode, without gradients) over batches and return the logits and labels it kept.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A sequence- or token-classification model.
    batches : iterable of dict
        Collated batches (e.g. a ``DataLoader``), each with a ``labels`` tensor.
    progress : bool, default True
        Show a progress bar.
    ignore_index : int, default -100
        Token classification: the label of the positions not kept.

    Returns
    -------
    logits : ndarray of shape (N, K) or (T, K)
    labels : ndarray of shape (N,) or (T,)

    Raises
    ------
    ValueError
        When there is no batch.
    """
    import torch
    from tqdm.auto import tqdm

    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    chunks, label_chunks = [], []
    try:
        with torch.no_grad():
            for batch in tqdm(batches, desc="collecting logits", disable=not progress):
                labels = batch.pop("labels")
                logits = model(**{k: v.to(device) for k, v in batch.items()}).logits.float().cpu()
                if logits.ndim == 3:  # tokens: keep the labelled ones only
                    mask = labels != ignore_index
                    logits, labels = logits[mask], labels[mask]
                chunks.append(logits.numpy())
                label_chunks.append(labels.numpy())
    finally:
        model.train(was_training)
    if not chunks:
        raise ValueError("`dataset` has no rows: there is nothing to calibrate on")
    return np.concatenate(chunks), np.concatenate(label_chunks)
