"""Turn user input (numpy, torch, lists) into arrays the kernels read, without copying data.

Shape rules (SPEC.md): ``(N,)`` is the probability (or logit) of class 1, ``(N, K)`` is one
row per sample, ``(N, L, K)`` is token classification with labels ``(N, L)``. Rows whose
label is ``ignore_index`` are skipped by the kernels, never copied out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from calibkit.metrics import _kernels as K


@dataclass(frozen=True)
class PreparedInput:
    """Arrays ready for the kernels: ``values`` is (rows, K), or (rows, 1) for 1-D binary input."""

    values: np.ndarray
    labels: np.ndarray
    mode: int
    num_classes: int
    original_shape: tuple[int, ...]


def to_numpy(array: Any, name: str) -> np.ndarray:
    """Zero-copy view of a numpy array, torch tensor or sequence."""
    if hasattr(array, "detach") and hasattr(array, "cpu"):  # torch.Tensor, without importing torch
        tensor = array.detach().cpu()
        if str(tensor.dtype) in ("torch.bfloat16", "torch.float16"):
            tensor = tensor.float()
        return tensor.numpy()
    try:
        return np.asarray(array)
    except (ValueError, TypeError) as exc:  # ragged lists
        raise ValueError(f"`{name}` could not be read as an array: {exc}") from exc


def check_positive_int(value: Any, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"`{name}` must be an integer >= 1, got {value!r}")
    return int(value)


def check_non_negative(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"`{name}` must be a number >= 0, got {value!r}")
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"`{name}` must be a number >= 0, got {value!r}")
    return float(value)


def check_eps(value: Any) -> float:
    eps = check_non_negative(value, "eps")
    if not 0 < eps < 1:
        raise ValueError(f"`eps` must lie in (0, 1), got {value!r}")
    return eps


def _prepare_labels(labels: Any) -> np.ndarray:
    y = to_numpy(labels, "labels")
    if y.dtype == np.bool_:
        y = y.astype(np.int64)
    elif y.dtype.kind == "f":
        if y.size and not np.all(np.isfinite(y)):
            raise ValueError("`labels` contains NaN or inf; labels must be integers")
        if y.size and not np.array_equal(y, np.round(y)):
            bad = y.ravel()[np.flatnonzero(y.ravel() != np.round(y.ravel()))[0]]
            raise ValueError(f"`labels` must be integers, got the value {float(bad)!r}")
        y = y.astype(np.int64)
    elif y.dtype.kind not in "iu":
        raise ValueError(f"`labels` must be integers, got dtype {y.dtype}")
    if y.dtype not in (np.int32, np.int64):
        y = y.astype(np.int64)
    return np.ascontiguousarray(y).reshape(-1)


def prepare(probs: Any, labels: Any, *, from_logits: bool, ignore_index: int) -> PreparedInput:
    """Check shapes and dtypes; value checks (NaN, range, row sums, labels) run in the kernel."""
    if not isinstance(from_logits, (bool, np.bool_)):
        raise ValueError(f"`from_logits` must be True or False, got {from_logits!r}")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, (int, np.integer)):
        raise ValueError(f"`ignore_index` must be an integer, got {ignore_index!r}")
    p = to_numpy(probs, "probs")
    if p.dtype.kind not in "fiub":
        raise ValueError(f"`probs` must be a float array, got dtype {p.dtype}")
    if p.dtype not in (np.float32, np.float64):
        p = p.astype(np.float64 if p.dtype.itemsize > 4 else np.float32)
    y_raw = to_numpy(labels, "labels")
    shape = tuple(p.shape)
    if p.ndim == 1:
        mode = K.MODE_BINARY_LOGITS if from_logits else K.MODE_BINARY_PROBS
        num_classes = 2
        expected = shape
        p = p.reshape(-1, 1)  # the kernels read every input as rows
    elif p.ndim in (2, 3):
        num_classes = shape[-1]
        if num_classes < 2:
            raise ValueError(
                f"`probs` has shape {shape}: the last axis must hold >= 2 classes; "
                "pass binary input as a 1-D array of class-1 probabilities"
            )
        mode = K.MODE_LOGITS if from_logits else K.MODE_PROBS
        expected = shape[:-1]
        p = p.reshape(-1, num_classes)
    else:
        raise ValueError(f"`probs` must have shape (N,), (N, K) or (N, L, K), got {shape}")
    if tuple(y_raw.shape) != expected:
        raise ValueError(
            f"`labels` has shape {tuple(y_raw.shape)} but `probs` of shape {shape} needs labels of shape {expected}"
        )
    y = _prepare_labels(y_raw)
    return PreparedInput(np.ascontiguousarray(p), y, mode, num_classes, shape)
