"""The per-bin statistics computed with torch: where the data lives, and without a compile.

The compiled kernels (``calibkit.metrics._kernels``) read host memory. A CUDA tensor would
first be copied to the host, which costs 10-100x the metric itself and host memory of the full
logits, when calibkit only ever needs the O(bins x classes) sums. Here the same sums are made
with torch on the tensor's own device, a block of rows at a time (a bounded working set), in
float64, and only the sums come back. The same code runs on CPU tensors and numpy arrays
(zero-copy views): it is calibkit's path while the numba kernels are not yet compiled
(``calibkit.metrics.engines.auto``), and CI checks it against the kernels on every input kind.

Same conventions as the kernels, bit for bit where the arithmetic allows: right-closed
equal-width bins, the first index of the maximum as the top label, the softmax sum taken in
fixed point (order independent), the ACE buckets from the float64 pattern, ties at an ACE range
boundary sharing their group's mean outcome. Sums are added in another order than the kernels
add them, so results agree to about 1e-15 relative, not to the last bit.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from calibkit.metrics import _kernels as kernels
from calibkit.metrics._kernels.bins import ace_buckets_of_patterns
from calibkit.metrics.statistics import CalibrationStatistics, SumsPlan, compact_columns
from calibkit.metrics.validation import PreparedInput, raise_input_error

BLOCK_ENTRIES = {"cpu": 1 << 18, "cuda": 1 << 24}
"""Entries (rows x classes) converted at a time: float64 working buffers of 2 MB on the CPU
(cache resident), 128 MB on a GPU (enough work per kernel launch, bounded device memory)."""

_EXP_MIN = -708.0  # as the kernels: a softmax term below exp(-708) is flushed to 0


def _torch() -> Any:
    import torch  # noqa: PLC0415 - 1 s to import: only when this path runs

    return torch


def as_tensor(array: Any) -> Any:
    """Return ``array`` as a torch tensor without copying (numpy arrays are viewed, tensors kept).

    Parameters
    ----------
    array : ndarray or torch.Tensor
        Values or labels of a ``PreparedInput``.

    Returns
    -------
    torch.Tensor
        On the array's own device.
    """
    torch = _torch()
    if isinstance(array, torch.Tensor):
        return array
    with warnings.catch_warnings():  # a read-only array (Arrow's, a memory map): the engine never writes to it
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(np.ascontiguousarray(array))


def _bin_index(torch: Any, p: Any, n_bins: int) -> Any:
    """Right-closed equal-width bins ``((m-1)/M, m/M]``, 0 in the first, edges decided as ``_kernels._bin_index``."""
    b = torch.ceil((p * n_bins) * kernels.EDGE_SHRINK) - 1.0
    return b.clamp_(0, n_bins - 1).nan_to_num_(0.0).long()


def _ace_bucket(torch: Any, p: Any) -> Any:
    """Return the ACE bucket of float64 probabilities (the layout of :mod:`calibkit.metrics._kernels.bins`)."""
    return ace_buckets_of_patterns(p.view(torch.int64))


def _fixed_point_scale(num_classes: int) -> float:
    """2**s with (K + 1) * 2**s <= 2**62 (``_kernels._fixed_point_scale``)."""
    s = 62
    while (1 << (62 - s)) < num_classes + 1:
        s -= 1
    return float(1 << s)


def _softmax_sum(torch: Any, e: Any) -> Any:
    """Sum the rows of ``e`` (terms in [0, 1]) in fixed point, as the kernels do.

    Integer adds are exact, so the sum does not depend on the order of its terms.
    """
    num_classes = e.shape[1]
    scale = _fixed_point_scale(num_classes)
    if num_classes <= kernels.FIXED_POINT_ONE_WORD:
        units = torch.floor(e * scale + 0.5).long().sum(dim=1)
        return units.double() / scale
    v = e * scale
    whole = torch.trunc(v)
    fraction = torch.trunc((v - whole) * 4294967296.0).long().sum(dim=1)
    return (whole.long().sum(dim=1).double() + fraction.double() * 2.0**-32) / scale


def _exp(torch: Any, d: Any) -> Any:
    return torch.where(d < _EXP_MIN, torch.zeros((), dtype=d.dtype, device=d.device), torch.exp(d))


def block_probabilities(
    x: Any, labels: Any, mode: int, num_classes: int, ignore_index: int, eps: float, want_logs: bool
) -> dict[str, Any]:
    """Turn a block of input rows into float64 probabilities, the top label and the row errors.

    Parameters
    ----------
    x : torch.Tensor of shape (rows, K) or (rows, 1)
        Probabilities or logits, any float dtype.
    labels : torch.Tensor of shape (rows,)
        Labels, ``ignore_index`` included.
    mode : int
        One of the kernels' ``MODE_*``.
    num_classes : int
        ``K`` (2 for 1-D binary input).
    ignore_index : int
        Label of the rows to skip: they are dropped before any value is read.
    eps : float
        Logs clip probabilities at ``eps``.
    want_logs : bool
        Also return ``log(max(p, eps))`` per entry.

    Returns
    -------
    dict of str to torch.Tensor
        ``rows`` (the block positions kept), ``y``, ``P`` (rows, K), ``pred``, ``conf``, ``L`` (or
        None), and ``error`` (per kept row: a kernels ``ERR_*`` code, -1 when fine).
    """
    torch = _torch()
    keep = labels != ignore_index
    rows = torch.nonzero(keep).squeeze(1)
    z = x[rows].double()
    y = labels[rows].long()
    error = torch.full(y.shape, -1, dtype=torch.int64, device=y.device)
    L = None
    if mode == kernels.MODE_PROBS:
        P = z
        inside = ((P >= 0.0) & (P <= 1.0)).all(dim=1)
        finite = torch.isfinite(P).all(dim=1)
        row_sum = P.sum(dim=1)
        error = torch.where((row_sum - 1.0).abs() > kernels.ROW_SUM_TOLERANCE, kernels.ERR_ROW_SUM, error)
        error = torch.where(~inside, kernels.ERR_RANGE, error)
        error = torch.where(~finite, kernels.ERR_NONFINITE, error)
        conf, pred = P.max(dim=1)  # the first index of the maximum, as the kernels take it
        if want_logs:
            L = torch.log(P.clamp(min=eps))
    elif mode == kernels.MODE_LOGITS:
        finite = torch.isfinite(z).all(dim=1)
        error = torch.where(~finite, kernels.ERR_NONFINITE, error)
        z = torch.where(finite[:, None], z, torch.zeros((), dtype=z.dtype, device=z.device))
        top, pred = z.max(dim=1)
        d = z - top[:, None]
        e = _exp(torch, d)
        total = _softmax_sum(torch, e)
        inverse = 1.0 / total
        P = e * inverse[:, None]
        conf = inverse  # exp(0) * inverse
        if want_logs:
            L = torch.clamp(d - torch.log(total)[:, None], min=math.log(eps))
    else:
        v = z[:, 0]
        if mode == kernels.MODE_BINARY_PROBS:
            inside = (v >= 0.0) & (v <= 1.0)
            error = torch.where(~inside, kernels.ERR_RANGE, error)
            error = torch.where(~torch.isfinite(v), kernels.ERR_NONFINITE, error)
            p1 = v
            p0 = 1.0 - v
        else:
            finite = torch.isfinite(v)
            error = torch.where(~finite, kernels.ERR_NONFINITE, error)
            v = torch.where(finite, v, torch.zeros((), dtype=v.dtype, device=v.device))
            e = torch.exp(-v.abs())  # both tails without cancellation, as the kernels
            big = 1.0 / (1.0 + e)
            small = e / (1.0 + e)
            positive = v >= 0.0
            p1 = torch.where(positive, big, small)
            p0 = torch.where(positive, small, big)
        P = torch.stack([p0, p1], dim=1)
        conf, pred = P.max(dim=1)
        if want_logs:
            L = torch.log(P.clamp(min=eps))
    bad_label = (y < 0) | (y >= num_classes)
    error = torch.where(bad_label, kernels.ERR_LABEL, error)
    y = y.clamp(0, num_classes - 1)  # indexes stay in bounds; a bad label is raised anyway
    return {"rows": rows, "y": y, "P": P, "pred": pred, "conf": conf, "L": L, "error": error}


def _round3(torch: Any, x: Any) -> Any:
    """``round(x, 3)`` as Python rounds a float (``_kernels._round3``, vectorised)."""
    p = x * 1000.0
    r = torch.round(p)  # half to even, as rint
    tie = (p - r).abs() == 0.5
    if bool(tie.any()):
        c = 134217729.0 * x
        hi = c - (c - x)
        err = (hi * 1000.0 - p) + (x - hi) * 1000.0
        r = torch.where(tie & (err > 0.0), p + 0.5, torch.where(tie & (err < 0.0), p - 0.5, r))
    return r / 1000.0


def _authors_membership(torch: Any, x: Any, corners: Any) -> Any:
    """``skfuzzy.trapmf`` branch for branch (``_kernels._authors_membership``), vectorised."""
    a, b, c, d = corners.unbind(dim=-1)
    one = torch.ones_like(x)
    zero = torch.zeros_like(x)
    low = torch.where((a < x) & (x < b), (x - a) / (b - a), torch.where(x == b, one, zero))
    high = torch.where((c < x) & (x < d), (d - x) / (d - c), torch.where(x == c, one, zero))
    return torch.where(x <= b, low, torch.where(x >= c, high, one))


def _authors_corners(n_bins: int) -> np.ndarray:
    """Return the authors' trapezoid corners (``_kernels._authors_corners``, same arithmetic, in Python)."""
    part = 1.0 / n_bins
    corners = np.empty((n_bins, 4))
    for m in range(n_bins):  # one row per fuzzy bin, not per sample
        t0 = m * part
        t1 = 1.0 if m == n_bins - 1 else (m + 1) * part
        mid = (t0 + t1) / 2
        b = (t0 + mid) / 2
        c = (mid + t1) / 2
        corners[m] = (2 * t0 - b, b, c, 2 * t1 - c)
    return corners


def _fuzzy_sums(torch: Any, c_top: Any, a_top: Any, n_fuzzy: int, out: Any) -> None:
    """Add the FCE sums of a block into ``out`` (Mf, 6): the paper's trapezoids, then the authors'."""
    w = 1.0 / n_fuzzy
    lo = torch.floor(c_top * n_fuzzy - 1.25).long()
    m = lo[:, None] + torch.arange(4, device=c_top.device)[None, :]  # the candidate bins
    valid = (m >= 0) & (m < n_fuzzy)
    m = m.clamp(0, n_fuzzy - 1)
    mf = m.double()
    t0 = mf * w
    t1 = (mf + 1.0) * w
    c = c_top[:, None]
    a = a_top[:, None]
    mu = torch.minimum(
        torch.minimum((c - (t0 - 0.25 * w)) / (0.5 * w), torch.ones_like(t0)), ((t1 + 0.25 * w) - c) / (0.5 * w)
    )
    mu = torch.where(valid & (mu > 0.0), mu, torch.zeros_like(mu))
    corners = torch.as_tensor(_authors_corners(n_fuzzy), device=c_top.device)[m]
    mu_r = _round3(torch, _authors_membership(torch, c.expand_as(mf), corners))
    mu_r = torch.where(valid & (mu_r > 0.0), mu_r, torch.zeros_like(mu_r))
    sums = torch.stack([mu, mu * a, mu * c, mu_r, mu_r * a, mu_r * a * c], dim=-1)
    out.index_add_(0, m.reshape(-1), sums.reshape(-1, 6))


def _column_sums(torch: Any, P: Any, y: Any, index: Any, n_cells: int, out: Any) -> None:
    """Count and sum every entry ``P[i, k]`` into cell ``(k, index[i, k])`` of ``out`` (K, cells, 3).

    Each row's outcome goes into ``(y, index[i, y])``.
    """
    num_classes = P.shape[1]
    flat = (torch.arange(num_classes, device=P.device)[None, :] * n_cells + index).reshape(-1)
    view = out.view(-1, 3)
    view[:, 0].index_add_(0, flat, torch.ones_like(P).reshape(-1))
    view[:, 1].index_add_(0, flat, P.reshape(-1))
    at = y * n_cells + index.gather(1, y[:, None]).squeeze(1)
    view[:, 2].index_add_(0, at, torch.ones(y.shape, dtype=torch.float64, device=P.device))


def _lean_probs_block(torch: Any, x: Any, labels: Any, num_classes: int, ignore_index: int) -> dict[str, Any] | None:
    """Top label and confidence of a block of probability rows, read in their own dtype.

    The maximum, minimum and float64 row sum are three reads of the rows; nothing of size
    (rows, K) is written. Returns None when a row is bad, for :func:`block_probabilities` to
    find the first one and its kind.
    """
    keep = labels != ignore_index
    if not bool(keep.all()):
        x, labels = x[keep], labels[keep]
    y = labels.long()
    top, pred = x.max(dim=1)  # the first index of the maximum; exact in any float dtype
    off = (_row_sum(torch, x) - 1.0).abs()
    ok = (x.amin(dim=1) >= 0.0) & (top <= 1.0) & (off <= kernels.ROW_SUM_TOLERANCE)
    ok &= (y >= 0) & (y < num_classes)  # NaN fails every comparison, inf the range
    if not bool(ok.all()):
        return None
    return {"P": None, "y": y, "pred": pred, "conf": top.double()}


def _row_sum(torch: Any, x: Any) -> Any:
    """Row sums for the tolerance check, as the kernels decide it (in float64).

    ``sum(dtype=float64)`` would first write a float64 copy of the rows; a float32 sum is off by
    at most about K * 6e-8, so only rows that close to the tolerance are summed again in float64.
    """
    if x.dtype == torch.float64:
        return x.sum(dim=1)
    total = x.sum(dim=1, dtype=torch.float32).double()
    near = ((total - 1.0).abs() - kernels.ROW_SUM_TOLERANCE).abs() <= 1e-5 + x.shape[1] * 1e-6
    if bool(near.any()):
        total[near] = x[near].double().sum(dim=1)
    return total


def _add_cells(torch: Any, view: Any, flat: Any, columns: tuple[Any, ...]) -> None:
    """Add a count and the sums of ``columns`` per cell ``flat`` into ``view`` (cells, 1 + len(columns)).

    ``bincount`` builds a histogram of few cells in on-chip memory on a GPU, where
    ``index_add_`` would make every row an atomic add on the same few global addresses.
    """
    n_cells = view.shape[0]
    view[:, 0] += torch.bincount(flat, minlength=n_cells).double()
    for j, column in enumerate(columns, start=1):
        if column is not None:
            view[:, j] += torch.bincount(flat, weights=column, minlength=n_cells)


def _row_blocks(n_rows: int, num_classes: int, device_type: str) -> range:
    per_block = max(1, BLOCK_ENTRIES.get(device_type, BLOCK_ENTRIES["cuda"]) // max(num_classes, 1))
    return range(0, n_rows, per_block)


def _label_classes(torch: Any, labels: Any, ignore_index: int, num_classes: int) -> Any:
    """Return the labels that occur, sorted (a vocabulary's table rows, SPEC.md), or None below ``COMPACT_CLASSES``."""
    if num_classes < kernels.COMPACT_CLASSES:
        return None
    return torch.unique(labels[labels != ignore_index]).to(torch.int64)


def statistics_torch(
    prep: PreparedInput,
    sums: SumsPlan,
    *,
    ignore_index: int,
    start: int = 0,
    stop: int | None = None,
    keep_on_device: bool = False,
) -> CalibrationStatistics:
    """Fill the statistics of rows ``[start, stop)`` with torch, on the input's device.

    The counterpart of one range of ``calibkit.metrics.engines.numba_engine.statistics_numba()``:
    same tables, same bins, the sums in float64, a block of rows at a time; only the sums leave
    the device.

    Parameters
    ----------
    prep : PreparedInput
        Validated rows and labels: numpy arrays (viewed, not copied) or torch tensors.
    sums : SumsPlan
        The sums to fill.
    ignore_index : int
        Label of the rows to skip.
    start, stop : int
        The row range (default: every row).
    keep_on_device : bool, default False
        Leave the sums as float64 tensors on the input's device (a streaming accumulator adds
        them there), instead of numpy arrays.

    Returns
    -------
    CalibrationStatistics
        The sums, as numpy arrays (tensors with ``keep_on_device``).

    Raises
    ------
    ValueError
        On the first bad row of the range, as the kernels report it.
    """
    groups, top_bins, eps = sums.groups, sums.top_bins, sums.eps
    torch = _torch()
    x = as_tensor(prep.values)
    labels = as_tensor(prep.labels).to(x.device)
    device = x.device
    stop = x.shape[0] if stop is None else stop
    num_classes = prep.num_classes
    binary = prep.mode >= kernels.MODE_BINARY_PROBS
    classes = None if binary else _label_classes(torch, labels[start:stop], ignore_index, num_classes)
    rows = None if classes is None else classes.cpu().numpy()
    shape = CalibrationStatistics.zeros(
        num_classes, binary, top_bins, sums.fuzzy_bins, sums.classwise_bins, groups, rows
    )
    f64 = {"dtype": torch.float64, "device": device}
    tables = {
        "top": torch.zeros(shape.top.shape, **f64),
        "fuzzy": torch.zeros(shape.fuzzy.shape, **f64),
        "classwise": torch.zeros((num_classes if "classwise" in groups else 0, sums.classwise_bins, 3), **f64),
        "ace": torch.zeros(shape.ace.shape, **f64),
        "scalars": torch.zeros(kernels.N_SCALARS, **f64),
    }
    first_bad = None
    want_logs = "rows" in groups
    # Top-label sums from probabilities need no float64 copy of the rows (as the kernels' lean
    # pass): the working set is a few values per row, so a block holds as many rows as a float64
    # block holds entries (fewer launches and syncs on a GPU)
    lean = prep.mode == kernels.MODE_PROBS and not (groups & {"rows", "classwise", "ace"})
    blocks = _row_blocks(stop - start, 1 if lean else num_classes, device.type)
    for b0 in blocks:
        a = start + b0
        b = min(stop, a + blocks.step)
        block = _lean_probs_block(torch, x[a:b], labels[a:b], num_classes, ignore_index) if lean else None
        if block is None:
            block = block_probabilities(x[a:b], labels[a:b], prep.mode, num_classes, ignore_index, eps, want_logs)
            bad = torch.nonzero(block["error"] >= 0)
            if bad.numel():  # the first offending row stops the pass, as in the kernels
                r = int(bad[0, 0])
                first_bad = (a + int(block["rows"][r]), int(block["error"][r]))
                break
        _add_block(torch, block, tables, sums, shape.top_bins, binary=binary, classes=classes)
    if first_bad is not None:
        errors = np.full(kernels.N_ERRORS, -1, dtype=np.int64)
        errors[first_bad[1]] = first_bad[0]
        raise_input_error(prep, errors, ignore_index)
    return _finished(shape, tables, classes is not None, keep_on_device)


def _add_block(
    torch: Any,
    block: dict[str, Any],
    tables: dict[str, Any],
    sums: SumsPlan,
    specs: tuple[int, ...],
    *,
    binary: bool,
    classes: Any,
) -> None:
    """Add one block's sums into the device ``tables`` (top, fuzzy, classwise, ace, scalars), in place.

    ``specs`` are the top-label tables' bin counts, ``classes`` the labels a vocabulary's table
    rows hold (None: a row per class).
    """
    groups = sums.groups
    top, scalars = tables["top"], tables["scalars"]
    table_rows, m_max = top.shape[1], top.shape[2]
    want_logs = "rows" in groups
    P, y, pred, conf = block["P"], block["y"], block["pred"], block["conf"]
    correct = (pred == y).double()
    if binary:
        c_top, a_top = P[:, 1], (y == 1).double()
    else:
        c_top, a_top = conf, correct
    if want_logs:
        L = block["L"]
        py = P.gather(1, y[:, None]).squeeze(1)
        ly = L.gather(1, y[:, None]).squeeze(1)
        brier = (P * P).sum(dim=1) + (1.0 - 2.0 * py)
        if binary:
            brier = brier * 0.5  # SPEC: binary 1-D Brier is mean (p - y)^2
        ecd = (P * L).sum(dim=1) - ly
        scalars[kernels.S_BRIER] += brier.sum()
        scalars[kernels.S_NLL] -= ly.sum()
        scalars[kernels.S_ECD] += ecd.sum()
    scalars[kernels.S_N] += float(y.shape[0])
    scalars[kernels.S_CORRECT] += correct.sum()
    scalars[kernels.S_WRONG_CONF] += ((1.0 - correct) * conf).sum()
    scalars[kernels.S_WRONG] += (1.0 - correct).sum()
    row = y if classes is None else torch.searchsorted(classes, y.to(torch.int64))
    for s, n_bins in enumerate(specs):
        flat = (s * table_rows + row) * m_max + _bin_index(torch, c_top, n_bins)
        _add_cells(torch, top.view(-1, 4), flat, (c_top, a_top, ecd if want_logs else None))
        if binary:  # and the top label's tables, after those of the class-1 probability
            flat = ((len(specs) + s) * table_rows + row) * m_max + _bin_index(torch, conf, n_bins)
            _add_cells(torch, top.view(-1, 4), flat, (conf, correct, ecd if want_logs else None))
    if "fuzzy" in groups:
        _fuzzy_sums(torch, c_top, a_top, tables["fuzzy"].shape[0], tables["fuzzy"])
    if "classwise" in groups:
        classwise_bins = sums.classwise_bins
        _column_sums(torch, P, y, _bin_index(torch, P, classwise_bins), classwise_bins, tables["classwise"])
    if "ace" in groups:
        _column_sums(torch, P, y, _ace_bucket(torch, P), kernels.ACE_BUCKETS, tables["ace"])


def _finished(
    shape: CalibrationStatistics, tables: dict[str, Any], vocabulary: bool, keep: bool
) -> CalibrationStatistics:
    """Put a pass's device sums into ``shape``: as tensors (``keep``) or numpy, a vocabulary's layout made."""
    torch = _torch()
    f64 = {"dtype": torch.float64, "device": tables["top"].device}
    tables["selective"] = torch.zeros(shape.selective.shape, **f64)  # filled by fill_statistics, for every engine
    tables["column_first"] = torch.zeros(shape.column_first.shape, **f64)
    if vocabulary and tables["classwise"].shape[0]:  # the class-wise table was dense on the device until here
        tables["classwise"], shape.classwise_classes, tables["column_first"] = compact_columns(tables["classwise"])
    for name, tensor in tables.items():
        setattr(shape, name, tensor if keep else tensor.cpu().numpy())
    return shape


def exact_ace_partials_torch(
    prep: PreparedInput, ace: np.ndarray, points: dict[str, np.ndarray], *, ignore_index: int
) -> tuple[np.ndarray, np.ndarray]:
    """Compute the exact within-bucket sums at every ACE range boundary, with torch.

    A second pass over the blocks keeps only the entries of the buckets a boundary cuts (at
    most ``R - 1`` per class), sorts them by bucket and value, and reads each boundary's sums
    from running sums; where a boundary splits a tie, the tied samples share their mean
    outcome (``_kernels._prefix_of_sorted``), so ACE stays permutation invariant.

    Parameters
    ----------
    prep : PreparedInput
        The rows of the first pass.
    ace : ndarray of shape (K, B, 3)
        The ACE buckets of the first pass (:func:`statistics_torch`).
    points : dict of str to ndarray
        From :func:`calibkit.metrics.statistics.ace_points`.
    ignore_index : int
        Label of the rows to skip.

    Returns
    -------
    tuple of ndarray
        Per class and boundary, the exact sums of p and of the outcome below the boundary in its
        bucket, NaN where no boundary cuts a bucket (the ``partial`` of
        ``calibkit.metrics.formulas.ace_from_points()``).
    """
    torch = _torch()
    inside = points["inside"]
    total = np.take_along_axis(ace[:, :, 0], points["bucket"], axis=1)
    cut = (inside > 0) & (inside < total)
    part_p = np.full(inside.shape, np.nan)
    part_o = np.full(inside.shape, np.nan)
    if not cut.any():
        return part_p, part_o
    rows, cols = np.nonzero(cut)
    keys = np.unique(np.stack([rows, points["bucket"][rows, cols]], axis=1), axis=0)
    x = as_tensor(prep.values)
    labels = as_tensor(prep.labels).to(x.device)
    device = x.device
    num_classes = prep.num_classes
    slot_of = torch.full((num_classes, kernels.ACE_BUCKETS), -1, dtype=torch.int64, device=device)
    slot_of[torch.as_tensor(keys[:, 0], device=device), torch.as_tensor(keys[:, 1], device=device)] = torch.arange(
        len(keys), device=device
    )
    slots, values, outcomes = [], [], []
    blocks = _row_blocks(x.shape[0], num_classes, device.type)
    for a in blocks:
        b = min(x.shape[0], a + blocks.step)
        block = block_probabilities(x[a:b], labels[a:b], prep.mode, num_classes, ignore_index, 1e-12, False)
        P, y = block["P"], block["y"]
        slot = slot_of.gather(1, _ace_bucket(torch, P).t()).t()  # (rows, K): the slot of each entry
        hit = torch.nonzero(slot >= 0)
        slots.append(slot[hit[:, 0], hit[:, 1]])
        values.append(P[hit[:, 0], hit[:, 1]])
        outcomes.append((y[hit[:, 0]] == hit[:, 1]).double())
    slot = torch.cat(slots)
    value = torch.cat(values)
    outcome = torch.cat(outcomes)
    order = torch.argsort(value, stable=True)
    order = order[torch.argsort(slot[order], stable=True)]  # by slot, then by value
    slot, value, outcome = slot[order], value[order], outcome[order]
    zero = torch.zeros(1, dtype=torch.float64, device=device)
    cum_p = torch.cat([zero, torch.cumsum(value, 0)])  # cum[j]: the sum of the first j
    cum_o = torch.cat([zero, torch.cumsum(outcome, 0)])
    n = value.shape[0]
    new_group = torch.ones(n, dtype=torch.bool, device=device)
    new_group[1:] = (slot[1:] != slot[:-1]) | (value[1:] != value[:-1])
    group = torch.cumsum(new_group.long(), 0) - 1
    group_start = torch.nonzero(new_group).squeeze(1)
    group_end = torch.cat([group_start[1:], torch.tensor([n], device=device)])
    slot_count = torch.bincount(slot, minlength=len(keys))
    expected = torch.as_tensor(ace[keys[:, 0], keys[:, 1], 0], device=device)
    if not torch.equal(slot_count.double(), expected):  # the same arithmetic as the first pass, bit for bit
        raise RuntimeError("calibkit: the exact-ACE pass rebuilt different probabilities; please report this")
    slot_start = torch.cumsum(slot_count, 0) - slot_count
    # the points: (class, boundary) -> slot and rank inside the bucket
    point_slot = slot_of[
        torch.as_tensor(rows, device=device), torch.as_tensor(points["bucket"][rows, cols], device=device)
    ]
    base = slot_start[point_slot]
    at = base + torch.as_tensor(inside[rows, cols].astype(np.int64), device=device)  # first sample not taken
    g = group_start[group[at]]
    h = group_end[group[at]]
    sum_p = cum_p[at] - cum_p[base]
    sum_o = (cum_o[g] - cum_o[base]) + (at - g).double() * (cum_o[h] - cum_o[g]) / (h - g).double()
    part_p[rows, cols] = sum_p.cpu().numpy()
    part_o[rows, cols] = sum_o.cpu().numpy()
    return part_p, part_o
