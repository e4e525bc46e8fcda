"""Input checks shared by every face of calibkit (metrics, calibrators, callback, CLI).

Turn user input (numpy, torch, lists) into arrays the kernels read, without copying data, and
check settings so that a bad value is a ``ValueError`` naming its argument.

Shape rules (SPEC.md): ``(N,)`` is the probability (or logit) of class 1, ``(N, K)`` is one
row per sample, ``(N, L, K)`` is token classification with labels ``(N, L)``. Rows whose
label is ``ignore_index`` are skipped by the kernels, never copied out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from calibkit.metrics import _kernels as kernels
from calibkit.metrics.backends import get_backend, on_device


class InputError(ValueError):
    """A bad value at a known place of the input; a door that read files or partitions re-says where.

    ``str(error)`` says ``position P`` (the place in the caller's array); :meth:`at` gives the same
    message with another place (``row 7 of s1.parquet``).

    Parameters
    ----------
    head, tail : str
        The message before and after the place.
    index : int
        The flat row of the prepared input (tokens flattened), where the bad value is.
    position : int or tuple of int
        The place in the caller's array (``(row, token)`` for token input).
    batch : int, optional
        The batch of a streaming accumulator that held it (its updates counted from 0).
    """

    def __init__(self, head: str, index: int, position: Any, tail: str = "", batch: int | None = None) -> None:
        self.head, self.index, self.position, self.tail, self.batch = head, index, position, tail, batch
        of_batch = "" if batch is None else f" of batch {batch} (counting from 0)"
        super().__init__(f"{head}position {position}{of_batch}{tail}")

    def __reduce__(self) -> tuple:
        """Pickle with the place: Dask raises it on a worker and again here."""
        return type(self), (self.head, self.index, self.position, self.tail, self.batch)

    def at(self, where: str) -> ValueError:
        """Return the message as a ``ValueError`` whose place is ``where``.

        Parameters
        ----------
        where : str
            The place, e.g. ``row 7 of s1.parquet (row 37 of all shards)``.

        Returns
        -------
        ValueError
        """
        return ValueError(f"{self.head}{where}{self.tail}")


@dataclass(frozen=True)
class PreparedInput:
    """Arrays ready for the kernels: ``values`` is (rows, K), or (rows, 1) for 1-D binary input.

    Parameters
    ----------
    values : ndarray of shape (rows, K) or (rows, 1)
        Probabilities or logits, C-contiguous, float32 or float64 as given.
    labels : ndarray of int32 or int64, shape (rows,)
        Labels, ``ignore_index`` included (the kernels skip those rows).
    mode : int
        One of the kernels' ``MODE_*``: probabilities or logits, rows or 1-D binary.
    num_classes : int
        ``K`` (2 for 1-D binary input).
    original_shape : tuple of int
        The shape of the input ``probs``, for error messages.
    next_token : bool, default False
        ``labels`` were shifted (``next_token=True``): the label of flat row ``(b, t)`` is the
        caller's ``labels[b, t + 1]``, and the last position of each sequence is ``ignore_index``.
    """

    values: np.ndarray
    labels: np.ndarray
    mode: int
    num_classes: int
    original_shape: tuple[int, ...]
    next_token: bool = False


def to_numpy(array: Any, name: str) -> np.ndarray:
    """Return a zero-copy view of a numpy array, torch tensor or sequence.

    torch float16 and bfloat16 tensors become float32 (numpy has no bfloat16).

    Parameters
    ----------
    array : array-like or torch.Tensor
        The input.
    name : str
        Its argument name, for the error message.

    Returns
    -------
    ndarray

    Raises
    ------
    ValueError
        When ``array`` cannot be read as an array (ragged lists).
    """
    if hasattr(array, "detach") and hasattr(array, "cpu"):  # torch.Tensor, without importing torch
        check_dense_tensor(array, name)
        tensor = array.detach().cpu()
        if str(tensor.dtype) in ("torch.bfloat16", "torch.float16"):
            tensor = tensor.float()
        return tensor.numpy()
    if isinstance(array, np.ma.MaskedArray):
        if np.ma.getmaskarray(array).any():  # a mask silently dropped would change the result
            raise ValueError(
                f"`{name}` is a masked array with masked entries, and calibkit does not read masks: drop those "
                "rows, or give them the label `ignore_index` (e.g. `labels.filled(-100)`)"
            )
        return np.asarray(array.data)
    try:
        return np.asarray(array)
    except (ValueError, TypeError) as exc:  # ragged lists
        raise ValueError(f"`{name}` could not be read as an array: {exc}") from exc


def check_dense_tensor(tensor: Any, name: str) -> None:
    """Refuse a torch tensor that holds no readable values: sparse layouts and the meta device.

    Parameters
    ----------
    tensor : torch.Tensor
        The input.
    name : str
        Its argument name, for the error message.

    Raises
    ------
    ValueError
        Naming ``name``.
    """
    layout = str(getattr(tensor, "layout", "torch.strided"))
    if layout != "torch.strided":
        raise ValueError(f"`{name}` is a {layout} tensor: pass a dense one (`{name}.to_dense()`)")
    if getattr(tensor, "is_meta", False):
        raise ValueError(f"`{name}` is on the meta device and holds no values: pass a tensor with data")


MAX_BINS = 1_000_000
"""Upper bound of every bin or range count: beyond it the per-bin tables (bins x classes) outgrow
any evaluation set, and a typo such as ``n_bins=10**12`` would end in a MemoryError."""


def check_positive_int(value: Any, name: str, maximum: int | None = None) -> int:
    """Check that ``value`` is an integer >= 1 (and at most ``maximum``).

    Parameters
    ----------
    value : object
        The user's value; bools are refused.
    name : str
        The argument's name, for the error message.
    maximum : int, optional
        Upper bound.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        Naming the argument, when ``value`` is out of range or not an integer.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"`{name}` must be an integer >= 1, got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"`{name}` must be an integer in [1, {maximum}], got {value!r}")
    return int(value)


def check_bins(value: Any, name: str) -> int:
    """Check a bin or range count: an integer in ``[1, MAX_BINS]``.

    Parameters
    ----------
    value : object
        The user's value.
    name : str
        The argument's name, for the error message.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        Naming the argument.
    """
    return check_positive_int(value, name, MAX_BINS)


def check_coverage(coverage: Any) -> float:
    """Check that ``coverage`` (the share answered, for the selective accuracy) is a number in (0, 1].

    Parameters
    ----------
    coverage : object

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Naming ``coverage``.
    """
    if isinstance(coverage, bool) or not isinstance(coverage, (int, float, np.integer, np.floating)):
        raise ValueError(f"`coverage` must be a number in (0, 1], got {coverage!r}")
    if not 0 < coverage <= 1:
        raise ValueError(f"`coverage` must lie in (0, 1], got {coverage!r}")
    return float(coverage)


def check_open_unit(value: Any, name: str) -> float:
    """Check that ``value`` (a level: ``abstention_alpha``, ...; not a bool) is a number in (0, 1), naming ``name``.

    Parameters
    ----------
    value, name : object, str

    Returns
    -------
    float
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"`{name}` must be a number in (0, 1), got {value!r}")
    if not 0 < value < 1:
        raise ValueError(f"`{name}` must lie in (0, 1), got {value!r}")
    return float(value)


def check_non_negative(value: Any, name: str) -> float:
    """Check that ``value`` is a finite number >= 0.

    Parameters
    ----------
    value : object
        The user's value; bools are refused.
    name : str
        The argument's name, for the error message.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Naming the argument.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"`{name}` must be a number >= 0, got {value!r}")
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"`{name}` must be a number >= 0, got {value!r}")
    return float(value)


def check_eps(value: Any) -> float:
    """Check ``eps``, the clip of the logs: a number in (0, 1).

    Parameters
    ----------
    value : object
        The user's value.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Naming ``eps``.
    """
    numeric = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not numeric or not 0 < value < 1:  # NaN fails the comparison too
        raise ValueError(f"`eps` must be a number in (0, 1), got {value!r}")
    return float(value)


_INT64 = np.iinfo(np.int64)


def check_ignore_index(value: Any) -> int:
    """Check ``ignore_index``: an integer that a label array of int64 can hold.

    Parameters
    ----------
    value : object
        The user's value; bools are refused.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        Naming ``ignore_index``.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"`ignore_index` must be an integer, got {value!r}")
    if not _INT64.min <= int(value) <= _INT64.max:
        raise ValueError(f"`ignore_index` must fit in int64, got {value!r}")
    return int(value)


def check_bool(value: Any, name: str) -> bool:
    """Check that ``value`` is True or False (numpy bools included).

    Parameters
    ----------
    value : object
        The user's value.
    name : str
        The argument's name, for the error message.

    Returns
    -------
    bool

    Raises
    ------
    ValueError
        Naming the argument.
    """
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"`{name}` must be True or False, got {value!r}")
    return bool(value)


def check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    """Check that ``value`` is one of ``choices`` (strings), e.g. ``variant`` of :func:`calibkit.fce`.

    Parameters
    ----------
    value : object
        The user's value.
    name : str
        The argument's name, for the error message.
    choices : tuple of str
        The accepted values.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        Naming the argument and the choices.
    """
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"`{name}` must be one of {list(choices)}, got {value!r}")
    return str(value)  # a plain str (a door's default may be a marked subclass)


def check_num_threads(value: Any) -> int | None:
    """Check ``num_threads``: None (one thread per core) or an integer >= 1.

    Parameters
    ----------
    value : object
        The user's value.

    Returns
    -------
    int or None

    Raises
    ------
    ValueError
        Naming ``num_threads``.
    """
    return None if value is None else check_positive_int(value, "num_threads")


def _first_bad(y: np.ndarray, bad: np.ndarray) -> tuple[Any, int]:
    """Return the first offending label as the user passed it, and its flat position."""
    i = int(np.flatnonzero(bad.ravel())[0])
    return y.ravel()[i].item(), i


def prepare_labels(labels: Any) -> np.ndarray:
    """Return labels as a flat int32/int64 array, refusing a value that does not fit in int64.

    The value itself is refused, never cast: a cast would wrap 2**64 - 100 to -100 (silently
    ignored), or turn 1e20 into -2**63. Float labels must hold integers.

    Parameters
    ----------
    labels : array-like or torch.Tensor
        Integer (or integral float, or bool) labels of any shape.

    Returns
    -------
    ndarray of int32 or int64, shape (N,)
        Flattened, C-contiguous.

    Raises
    ------
    ValueError
        Naming ``labels``, the value and its position.
    """
    y = to_numpy(labels, "labels")
    if y.dtype == np.bool_:
        y = y.astype(np.int64)
    elif y.dtype.kind == "f":
        if y.size and not np.all(np.isfinite(y)):
            value, i = _first_bad(y, ~np.isfinite(y))
            raise InputError(f"`labels` must be integers, got {value!r} at ", i, i)
        if y.size and not np.array_equal(y, np.round(y)):
            value, i = _first_bad(y, y != np.round(y))
            raise InputError(f"`labels` must be integers, got the value {value!r} at ", i, i)
        # float64 holds no integer in [2**63 - 512, 2**63): compare against 2**63 itself
        too_big = (y >= 2.0**63) | (y < -(2.0**63))
        if y.size and too_big.any():
            value, i = _first_bad(y, too_big)
            raise InputError(f"`labels` has the value {value!r} at ", i, i, ", which does not fit in int64")
        y = y.astype(np.int64)
    elif y.dtype.kind == "u" and y.dtype.itemsize == 8:
        too_big = y > np.uint64(_INT64.max)
        if y.size and too_big.any():
            value, i = _first_bad(y, too_big)
            raise InputError(f"`labels` has the value {value!r} at ", i, i, ", which does not fit in int64")
    elif y.dtype.kind not in "iu":
        raise ValueError(f"`labels` must be integers, got dtype {y.dtype}")
    if y.dtype not in (np.int32, np.int64):
        y = y.astype(np.int64)
    return np.ascontiguousarray(y).reshape(-1)


def prepare(probs: Any, labels: Any, *, from_logits: bool, ignore_index: int, next_token: bool) -> PreparedInput:
    """Check shapes and dtypes and return the rows the kernels read.

    Value checks (NaN, range, row sums, labels) run in the kernel, during the pass. With
    ``next_token`` the labels are shifted, never the logits: row ``(b, t)`` gets the label
    ``labels[b, t + 1]`` and the last position of each sequence ``ignore_index``, so the
    ``(N, T, V)`` logits are read in place (slicing ``[:, :-1]`` would copy them).

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities or logits.
    labels : array-like of int, shape (N,) or (N, L)
        True classes, ``ignore_index`` for the positions to skip.
    from_logits : bool
        ``probs`` holds logits.
    ignore_index : int
        Label of the positions to skip.
    next_token : bool
        Causal-LM input: ``probs`` of shape ``(N, T, V)`` at position ``t`` is scored against
        ``labels[:, t + 1]`` (the shift of the model's own loss). No default, as the other input
        conventions: this module sits below the settings, which hold the defaults
        (:func:`prepare_for` reads all three from a settings object).

    Returns
    -------
    PreparedInput

    Raises
    ------
    ValueError
        Naming the argument, when a shape, a dtype or a setting is wrong.
    """
    check_bool(from_logits, "from_logits")
    check_bool(next_token, "next_token")
    check_ignore_index(ignore_index)
    for value, name in ((probs, "probs"), (labels, "labels")):
        if hasattr(value, "detach") and hasattr(value, "layout"):  # a torch.Tensor
            check_dense_tensor(value, name)
    device = _device_tensor(probs)
    if device is not None:  # stays where it is: the torch engine bins it there
        p = probs.detach()
        if not p.is_floating_point():
            p = p.double() if p.element_size() > 4 else p.float()
        y_raw = labels.detach() if hasattr(labels, "detach") else np.asarray(labels)
    else:
        p = to_numpy(probs, "probs")
        if p.dtype.kind not in "fiub":
            raise ValueError(f"`probs` must be a float array, got dtype {p.dtype}")
        if p.dtype not in (np.float32, np.float64):
            p = p.astype(np.float64 if p.dtype.itemsize > 4 else np.float32)
        y_raw = to_numpy(labels, "labels")
    shape = tuple(p.shape)
    if next_token and p.ndim != 3:
        hint = " (one sequence: pass probs[None] and labels[None])" if p.ndim == 2 else ""
        raise ValueError(
            f"`next_token=True` scores causal-LM logits of shape (N, T, V) against labels of shape (N, T); "
            f"`probs` has shape {shape}{hint}"
        )
    if p.ndim == 1:
        mode = kernels.MODE_BINARY_LOGITS if from_logits else kernels.MODE_BINARY_PROBS
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
        mode = kernels.MODE_LOGITS if from_logits else kernels.MODE_PROBS
        expected = shape[:-1]
        p = p.reshape(-1, num_classes)
    else:
        raise ValueError(f"`probs` must have shape (N,), (N, K) or (N, L, K), got {shape}")
    if tuple(y_raw.shape) != expected:
        hint = ""
        if len(shape) == 2 and tuple(y_raw.shape) == shape:  # multi-hot labels: never guessed from the data
            hint = (
                "; for multi-label data (one sigmoid per label, multi-hot labels) pass multilabel=True "
                "(or call calibkit.multilabel_report)"
            )
        if next_token:  # the model's loss shifts labels of the logits' own length; so does calibkit
            hint = (
                "; with next_token=True give `labels` unshifted, one per position of the logits (calibkit shifts them)"
            )
        raise ValueError(
            f"`labels` has shape {tuple(y_raw.shape)} but `probs` of shape {shape} needs labels of shape {expected}"
            + hint
        )
    if device is not None:
        y = _device_labels(y_raw, device)
        if next_token:
            y = _shift_labels_torch(y.reshape(shape[:2]), ignore_index)
        return PreparedInput(p.contiguous(), y, mode, num_classes, shape, next_token)
    y = prepare_labels(y_raw)
    if next_token:
        y = shift_labels(y.reshape(shape[:2]), ignore_index)
    return PreparedInput(np.ascontiguousarray(p), y, mode, num_classes, shape, next_token)


def prepare_for(probs: Any, labels: Any, settings: Any) -> PreparedInput:
    """Call :func:`prepare` with the input conventions of a settings object.

    Parameters
    ----------
    probs, labels
        As :func:`prepare`.
    settings : CalibrationSettings
        Its ``from_logits``, ``ignore_index`` and ``next_token``.

    Returns
    -------
    PreparedInput
    """
    return prepare(
        probs,
        labels,
        from_logits=settings.from_logits,
        ignore_index=settings.ignore_index,
        next_token=settings.next_token,
    )


def shift_labels(labels: np.ndarray, ignore_index: int) -> np.ndarray:
    """Return the labels of next-token prediction, flat: row ``(b, t)`` gets ``labels[b, t + 1]``.

    The last position of each sequence has no next token and gets ``ignore_index``, as the
    shifted cross-entropy of ``transformers``' causal LMs leaves it out.

    Parameters
    ----------
    labels : ndarray of int, shape (N, T)
        The labels as a causal LM's ``Trainer`` gives them (unshifted).
    ignore_index : int
        The label of positions to skip.

    Returns
    -------
    ndarray of int64, shape (N * T,)
    """
    shifted = np.empty(labels.shape, dtype=np.int64)
    if labels.shape[1]:  # sequences of no position have nothing to shift
        shifted[:, :-1] = labels[:, 1:]
        shifted[:, -1] = ignore_index
    return shifted.reshape(-1)


def _shift_labels_torch(labels: Any, ignore_index: int) -> Any:
    """:func:`shift_labels` of a tensor, on its device."""
    import torch

    if labels.shape[1] == 0:
        return labels.reshape(-1).long()
    last = torch.full((labels.shape[0], 1), ignore_index, dtype=torch.int64, device=labels.device)
    return torch.cat([labels[:, 1:].long(), last], dim=1).reshape(-1)


def _device_tensor(array: Any) -> Any:
    """Return the device of a torch tensor outside host memory that the torch engine should bin in place, else None."""
    if not on_device(array):
        return None
    return None if get_backend() == "numba" else array.device


def _device_labels(labels: Any, device: Any) -> Any:
    """Labels as an int64 tensor on ``device``, checked as :func:`prepare_labels` checks them (no host copy)."""
    import torch

    y = labels if isinstance(labels, torch.Tensor) else torch.from_numpy(prepare_labels(labels))
    y = y.to(device).reshape(-1)
    if y.dtype == torch.bool:
        return y.long()
    if y.is_floating_point():
        bad = ~torch.isfinite(y) | (y != torch.round(y)) | (y >= 2.0**63) | (y < -(2.0**63))
        if bool(bad.any()):
            i = int(torch.nonzero(bad)[0, 0])
            raise InputError(f"`labels` must be integers that fit in int64, got {y[i].item()!r} at ", i, i)
        return y.long()
    if y.dtype.is_complex:
        raise ValueError(f"`labels` must be integers, got dtype {y.dtype}")
    return y if y.dtype in (torch.int32, torch.int64) else y.long()


def raise_input_error(prep: PreparedInput, errors: np.ndarray, ignore_index: int) -> None:
    """Raise the ``ValueError`` for the first bad row an engine found, naming the argument and the position.

    Parameters
    ----------
    prep : PreparedInput
        The input the engine read (its original shape gives the position, e.g. ``(row, token)``).
    errors : ndarray of int64, shape (N_ERRORS,)
        Per kind of error (the kernels' ``ERR_*``), the first offending row, -1 if none.
    ignore_index : int
        The masked label, named in a label error.

    Raises
    ------
    ValueError
        Always.
    """
    kind = int(np.flatnonzero(errors >= 0)[0])
    i = int(errors[kind])
    where = np.unravel_index(i, prep.original_shape[:-1]) if len(prep.original_shape) > 1 else (i,)
    where = tuple(int(w) for w in where)
    position = where[0] if len(where) == 1 else where
    if kind == kernels.ERR_LABEL:
        head = f"`labels` must lie in [0, {prep.num_classes}) or equal ignore_index={ignore_index}; "
        if prep.next_token:  # the caller's label sits one position further than the logits it is scored against
            label_at = (where[0], where[1] + 1)  # flat index i + 1 too: files and partitions place it by that
            tail = " (next_token=True: the label of the logits one position earlier)"
            raise InputError(f"{head}got {int(prep.labels[i])} at ", i + 1, label_at, tail)
        raise InputError(f"{head}got {int(prep.labels[i])} at ", i, position)
    row = to_numpy(prep.values[i], "probs")  # one row, also of a CUDA tensor
    shown = np.array2string(row, precision=4, threshold=8)
    logits = prep.mode in (kernels.MODE_LOGITS, kernels.MODE_BINARY_LOGITS)
    name = "probs (logits, from_logits=True)" if logits else "probs"
    if kind == kernels.ERR_NONFINITE:
        raise InputError(f"`{name}` contains NaN or inf at ", i, position, f": {shown}")
    hint = "; if these are logits, pass from_logits=True"
    if kind == kernels.ERR_RANGE:
        raise InputError("`probs` has a value outside [0, 1] at ", i, position, f": {shown}{hint}")
    total = float(np.sum(row, dtype=np.float64))
    if abs(total - 1.0) < 0.05:  # probabilities, rounded: a softmax read as logits would be wrong
        hint = (
            "; these look like probabilities rounded to a low precision (a bfloat16 or float16 softmax "
            "misses 1 by up to about 0.4%): compute the softmax in float32, or pass the logits with "
            "from_logits=True"
        )
    raise InputError(
        f"`probs` rows must sum to 1 (tolerance {kernels.ROW_SUM_TOLERANCE}); the row at ",
        i,
        position,
        f" sums to {total:.6g}: {shown}{hint}",
    )
