"""The sums of the temperature fits, over rows held and over batches read anew and never held.

:func:`nll_sums` adds them over rows in one threaded pass; :func:`streamed_derivatives` over
batches (:meth:`TemperatureScaling.fit_batches`): each Newton step of
:func:`calibkit.calibrators.temperature.fit_inverse_temperature` reads every batch once and adds
its sums (the compiled kernel's on host rows, :func:`nll_derivatives_torch`'s on a device's
tensors), so a fit on 10M tokens x 32,000 classes holds one batch at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from calibkit.calibrators import _kernels as kernels
from calibkit.calibrators.base import FitInput
from calibkit.metrics.engines.threads import parallel_map, row_ranges
from calibkit.metrics.validation import check_bool


def nll_sums(
    data: FitInput,
    class_weight: np.ndarray,
    *,
    beta: float = 1.0,
    slope: float = 0.0,
    h: np.ndarray | None = None,
    num_threads: int | None = None,
) -> np.ndarray:
    """Add the weighted NLL, its first two derivatives and its slope at ``beta = 0`` over rows, in one threaded pass.

    The sums add across batches (:func:`streamed_derivatives`);
    :func:`calibkit.calibrators.temperature.nll_pass` divides them by the total weight.

    Parameters
    ----------
    data : FitInput
        The fitting rows.
    class_weight : ndarray of shape (K,)
        Weight of a row by its label (ones for TS, ``1 - n_k/N`` for WTS).
    beta : float, default 1.0
        The inverse temperature the logits are multiplied by (with ``h`` None).
    slope : float, default 0.0
        The RD-TS slope ``m`` (with ``h``): row i uses ``beta_i = 1 / (m h_i + 1)``.
    h : ndarray of shape (rows,), optional
        Each row's maximum softmax probability; selects the RD-TS parameter.
    num_threads : int, optional
        Threads of the pass (default: all cores).

    Returns
    -------
    ndarray of shape (N_OUT,)
        Indexed by ``calibkit.calibrators._kernels``' ``O_*`` columns (``O_NONFINITE``: rows
        skipped for a NaN or inf).
    """
    region = h is not None
    h_arr = h if region else np.empty(0)

    def run(start: int, stop: int) -> np.ndarray:
        out = np.zeros(kernels.N_OUT)
        kernels.nll_derivatives(
            data.logits,
            data.labels,
            start,
            stop,
            data.ignore_index,
            class_weight,
            float(beta),
            float(slope),
            h_arr,
            region,
            out,
        )
        return out

    return np.sum(parallel_map(run, row_ranges(data.logits.shape[0], num_threads)), axis=0)


def streamed_derivatives(
    batches: Callable[[], Any],
    weight_of_counts: Callable[[Any, int | None], np.ndarray | None],
    *,
    ignore_index: int,
    next_token: bool,
    class_counts: Any,
    read_counts: bool,
    num_threads: int | None,
) -> tuple[Callable[[float], tuple[float, ...]], dict[str, Any]]:
    """Return the derivatives of the NLL in ``beta = 1/T`` over batches read anew at every call (one pass).

    Parameters
    ----------
    batches : callable
        ``batches()`` returns an iterable of ``(logits, labels)``, the same on every call.
    weight_of_counts : callable
        ``weight_of_counts(counts, num_classes)``: the class weights (TS: ones; WTS: ``1 - n_k/N``).
    ignore_index : int
        The label of rows to skip.
    next_token : bool
        Causal-LM batches ``(N, T, V)``: position ``t`` against the label at ``t + 1``.
    class_counts : array-like or None
        The labels' counts, when known.
    read_counts : bool
        Read the counts in a first pass (WTS without ``class_counts``).
    num_threads : int or None
        Threads of a host pass.

    Returns
    -------
    derivatives : callable
        ``derivatives(beta) -> (f, f', f'', f'(0))``, one pass over the batches, for
        :func:`calibkit.calibrators.temperature.fit_inverse_temperature`.
    seen : dict
        ``"classes"``: the class count of the batches; ``"passes"``: how often they were read.
    """
    next_token = check_bool(next_token, "next_token")
    seen: dict[str, Any] = {"passes": 0}

    def read() -> Iterator[tuple[int, Any, Any]]:
        seen["passes"] += 1
        for index, (logits, labels) in enumerate(batches()):
            z, y = _fit_rows(logits, labels, ignore_index, next_token, index)
            if seen.setdefault("classes", z.shape[1]) != z.shape[1]:
                raise ValueError(
                    f"`logits` of batch {index} (counting from 0) has {z.shape[1]} classes but earlier "
                    f"batches had {seen['classes']}"
                )
            yield index, z, y

    if read_counts:
        for _, _, y in read():  # WTS: the counts first (a pass that reads the labels only)
            y = y.cpu().numpy() if hasattr(y, "cpu") else y
            kept = np.bincount(y[y != ignore_index], minlength=seen["classes"])
            class_counts = kept if class_counts is None else class_counts + kept
    weight = weight_of_counts(class_counts, seen.get("classes"))
    device_weight = None

    def derivatives(beta: float) -> tuple[float, ...]:
        nonlocal weight, device_weight
        total = np.zeros(kernels.N_OUT)
        for index, z, y in read():
            if weight is None:
                weight = weight_of_counts(None, z.shape[1])
            if weight.shape[0] != z.shape[1]:
                raise ValueError(f"`class_counts` has {weight.shape[0]} classes but the logits have {z.shape[1]}")
            if hasattr(z, "detach"):  # a tensor on its device (prepare() left it there)
                if device_weight is None:
                    import torch

                    device_weight = torch.as_tensor(weight)
                part = nll_derivatives_torch(z, y, device_weight, beta, ignore_index)
            else:
                part = nll_sums(FitInput(z, y, ignore_index, z.shape[1], 0), weight, beta=beta, num_threads=num_threads)
            if part[kernels.O_NONFINITE] > 0:
                raise ValueError(f"`logits` of batch {index} (counting from 0) contains NaN or inf in a labelled row")
            total += part
        if total[kernels.O_WEIGHT] == 0:
            raise ValueError("`labels` holds no sample to fit on (no batch, or every label is ignore_index)")
        columns = [kernels.O_LOSS, kernels.O_GRAD, kernels.O_HESS, kernels.O_SLOPE0]
        return tuple(total[columns] / total[kernels.O_WEIGHT])

    return derivatives, seen


def nll_derivatives_torch(
    logits: Any, labels: Any, class_weight: Any, beta: float, ignore_index: int, chunk_entries: int = 2**25
) -> np.ndarray:
    """Compute :func:`nll_sums` of one batch of tensors where they are (a GPU), in float64.

    The same sums as the compiled kernel (``calibkit.calibrators._kernels``): per kept row with
    ``p = softmax(beta z)``, the weighted loss ``logsumexp(beta z) - beta z_y``, gradient
    ``E_p[z] - z_y``, Hessian ``Var_p[z]`` (on centred values) and slope at ``beta = 0``
    (``mean_k z - z_y``). Rows are read a chunk at a time (``chunk_entries`` float64 entries),
    so no float64 copy of the whole batch is made.

    Parameters
    ----------
    logits : torch.Tensor of shape (R, K)
        Rows of logits, any float dtype (bfloat16 included).
    labels : torch.Tensor of int, shape (R,)
        Their labels; ``ignore_index`` rows add nothing.
    class_weight : torch.Tensor of shape (K,)
        Weight of a row by its label.
    beta : float
        The inverse temperature.
    ignore_index : int
        The label of rows to skip.
    chunk_entries : int, default 2**25
        Entries per chunk (256 MiB of float64).

    Returns
    -------
    ndarray of shape (N_OUT,)
        Indexed by ``calibkit.calibrators._kernels``' ``O_*`` columns.
    """
    import torch

    out = torch.zeros(kernels.N_OUT, dtype=torch.float64, device=logits.device)
    weight = class_weight.to(device=logits.device, dtype=torch.float64)
    rows = max(1, chunk_entries // max(1, logits.shape[1]))
    for start in range(0, logits.shape[0], rows):
        y = labels[start : start + rows]
        keep = y != ignore_index
        if not bool(keep.any()):
            continue
        z = logits[start : start + rows][keep].double()
        y = y[keep].long()
        finite = torch.isfinite(z).all(dim=1)
        out[kernels.O_NONFINITE] += (~finite).sum()
        z, y = z[finite], y[finite]
        w = weight[y]
        z_y = z.gather(1, y[:, None]).squeeze(1)
        z_max = z.max(dim=1).values
        d = z - z_max[:, None]  # centred on the row's largest logit: exp never overflows
        e = torch.exp(beta * d)
        s0 = e.sum(dim=1)
        mean = (e * d).sum(dim=1) / s0
        var = (e * (d - mean[:, None]) ** 2).sum(dim=1) / s0
        out[kernels.O_WEIGHT] += w.sum()
        out[kernels.O_LOSS] += (w * (torch.log(s0) + beta * (z_max - z_y))).sum()
        out[kernels.O_GRAD] += (w * (mean + z_max - z_y)).sum()
        out[kernels.O_HESS] += (w * var).sum()
        out[kernels.O_SLOPE0] += (w * (z.mean(dim=1) - z_y)).sum()
    return out.cpu().numpy()


def _fit_rows(logits: Any, labels: Any, ignore_index: int, next_token: bool, index: int) -> tuple[Any, Any]:
    """One batch of :meth:`TemperatureScaling.fit_batches` as rows: numpy (read by the kernel) or a device tensor."""
    from calibkit.metrics.validation import InputError, prepare

    try:
        prep = prepare(logits, labels, from_logits=True, ignore_index=ignore_index, next_token=next_token)
    except InputError as exc:
        raise InputError(exc.head, exc.index, exc.position, exc.tail, batch=index) from None
    z, y = prep.values, prep.labels
    if len(prep.original_shape) == 1:  # 1-D binary input: a temperature scales class logits
        raise ValueError("`logits` must be (N, K) class logits (or (N, T, V) with next_token), not 1-D")
    bad = (y != ignore_index) & ((y < 0) | (y >= z.shape[1]))
    if bool(bad.any()):
        i = int(bad.nonzero()[0][0])  # numpy's first index array, or torch's first (row,)
        raise ValueError(
            f"`labels` of batch {index} (counting from 0) must lie in [0, {z.shape[1]}) or equal "
            f"ignore_index={ignore_index}; got {int(y[i])} at flat row {i + int(next_token)}"
        )
    return z, y
