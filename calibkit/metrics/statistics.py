"""Sufficient statistics of calibration, and every metric as a function of them.

One pass over the predictions (:func:`bin_statistics`, a compiled kernel run on row ranges in
threads) fills a :class:`CalibrationStatistics`: per-bin sums that add across batches,
threads and processes. Every metric of SPEC.md is then a small numpy function of those sums,
so asking for all metrics costs one pass, and a 100M-token evaluation never holds its
predictions (:class:`~calibkit.metrics.accumulator.CalibrationAccumulator`). Which metric
needs which sums, and its formula's entry point, is :mod:`calibkit.metrics.registry`.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from calibkit.metrics import _kernels as kernels
from calibkit.metrics.validation import PreparedInput, to_numpy

FUZZY_COLUMNS = 6  # see CalibrationStatistics.fuzzy
_SUMS = ("top", "fuzzy", "classwise", "ace", "scalars")  # the additive fields
_MIN_ROWS_PER_THREAD = 65_536


class MissingClassWarning(UserWarning):
    """Some classes have no sample: their ECE_k is NaN and class-wise summaries skip them."""


class EmptyRegionWarning(UserWarning):
    """No bin holds more than ``theta`` samples, so RBECE is undefined (NaN)."""


def _default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@dataclass
class CalibrationStatistics:
    """Additive per-bin sums; ``a + b`` is the statistics of both data sets.

    Build one with :meth:`zeros` and fill it with :func:`bin_statistics` (or take it from a
    :class:`~calibkit.metrics.accumulator.CalibrationAccumulator`); the fields are the sums.

    Parameters
    ----------
    num_classes : int
        ``K``, the number of classes (2 for 1-D binary input).
    binary : bool
        The input was 1-D binary (the class-1 probability).
    top_bins : tuple of int
        The bin counts of ``top`` (one entry per distinct bin count asked for).
    top : ndarray (S, K, M, 4)
        Top-label equal-width bins, split by true label: count, sum of confidence, sum of
        correct, sum of per-sample ECD. Binary 1-D input bins the class-1 probability with
        outcome ``y == 1`` instead (SPEC.md).
    fuzzy : ndarray (M_f, 6)
        FCE fuzzy bins: total membership, membership-weighted correct and confidence; then the
        authors' variant's sums: total membership rounded to 3 decimals, rounded-membership-weighted
        correct, and rounded-membership-weighted confidence of the correct predictions only.
    classwise : ndarray (K, M_c, 3)
        Per class column, equal-width bins of ``p_k``: count, sum ``p_k``, sum ``1[y = k]``.
    ace : ndarray (K, B, 3)
        The same sums on fine buckets (16 an octave of the float64 pattern) for ACE.
    scalars : ndarray (7,)
        n, correct, Brier, NLL and ECD sums, confidence sum and count of wrong predictions.
    has : frozenset of str, default frozenset()
        Which optional groups of sums were filled (``rows``, ``classwise``, ``ace``, ``fuzzy``).
    """

    num_classes: int
    binary: bool
    top_bins: tuple[int, ...]
    top: np.ndarray
    fuzzy: np.ndarray
    classwise: np.ndarray
    ace: np.ndarray
    scalars: np.ndarray
    has: frozenset = field(default_factory=frozenset)  # which optional groups were filled

    @classmethod
    def zeros(
        cls,
        num_classes: int,
        binary: bool,
        top_bins: Iterable[int],
        fuzzy_bins: int,
        classwise_bins: int,
        has: Iterable[str],
    ) -> CalibrationStatistics:
        """Create empty statistics of the given shape, ready to be filled by a pass.

        Parameters
        ----------
        num_classes : int
            ``K``.
        binary : bool
            The input is 1-D binary.
        top_bins : iterable of int
            Bin counts of the top-label tables (duplicates dropped; none gives one table of 1 bin).
        fuzzy_bins : int
            Fuzzy bins of FCE (used when ``"fuzzy"`` is in ``has``).
        classwise_bins : int
            Bins per class column of SCE (used when ``"classwise"`` is in ``has``).
        has : iterable of str
            The optional groups to allocate: ``rows``, ``classwise``, ``ace``, ``fuzzy``.

        Returns
        -------
        CalibrationStatistics
            All sums zero.
        """
        top_bins = tuple(sorted(set(int(b) for b in top_bins))) or (1,)
        has = frozenset(has)
        k = num_classes
        return cls(
            num_classes=k,
            binary=binary,
            top_bins=top_bins,
            top=np.zeros((len(top_bins), k, max(top_bins), 4)),
            fuzzy=np.zeros((fuzzy_bins if "fuzzy" in has else 1, FUZZY_COLUMNS)),
            classwise=np.zeros((k if "classwise" in has else 0, classwise_bins, 3)),
            ace=np.zeros((k if "ace" in has else 0, kernels.ACE_BUCKETS if "ace" in has else 0, 3)),
            scalars=np.zeros(kernels.N_SCALARS),
            has=has,
        )

    def _check_compatible(self, other: CalibrationStatistics) -> None:
        mine = (self.num_classes, self.binary, self.top_bins, self.fuzzy.shape, self.classwise.shape, self.has)
        theirs = (other.num_classes, other.binary, other.top_bins, other.fuzzy.shape, other.classwise.shape, other.has)
        if mine != theirs:
            raise ValueError(
                f"`other` statistics are not compatible (classes, binary, bins, groups): {theirs} vs {mine}"
            )

    def __add__(self, other: CalibrationStatistics) -> CalibrationStatistics:
        """Add the sums of two compatible statistics (same classes, bins and groups).

        Parameters
        ----------
        other : CalibrationStatistics
            Statistics filled with the same metrics and settings.

        Returns
        -------
        CalibrationStatistics
            A new object; neither operand changes.

        Raises
        ------
        ValueError
            When ``other`` differs in classes, binary input, bins or groups.
        """
        self._check_compatible(other)
        out = CalibrationStatistics(**{f.name: getattr(self, f.name) for f in fields(self)})
        if isinstance(self.scalars, np.ndarray) != isinstance(other.scalars, np.ndarray):
            other = other.to_numpy() if isinstance(self.scalars, np.ndarray) else other.to_torch(self.scalars.device)
        for name in _SUMS:
            setattr(out, name, getattr(self, name) + getattr(other, name))
        return out

    def to_numpy(self) -> CalibrationStatistics:
        """Return these statistics with numpy sums (a copy from the device for tensor sums).

        The torch engine keeps a streaming accumulator's sums on the input's device until
        ``compute()``; the metrics are then numpy functions of the host copy.

        Returns
        -------
        CalibrationStatistics
            ``self`` when the sums are numpy arrays already.
        """
        if isinstance(self.scalars, np.ndarray):
            return self
        out = CalibrationStatistics(**{f.name: getattr(self, f.name) for f in fields(self)})
        for name in _SUMS:
            setattr(out, name, getattr(self, name).detach().cpu().numpy())
        return out

    def to_torch(self, device: Any = None) -> CalibrationStatistics:
        """Return these statistics with float64 torch tensors on ``device`` (``torch.distributed`` reduces them).

        Parameters
        ----------
        device : torch.device or str, optional
            Where the sums go (default: where they are, the CPU for numpy sums).

        Returns
        -------
        CalibrationStatistics
        """
        import torch

        out = CalibrationStatistics(**{f.name: getattr(self, f.name) for f in fields(self)})
        for name in _SUMS:
            value = getattr(self, name)
            value = value if isinstance(value, torch.Tensor) else torch.from_numpy(np.asarray(value))
            setattr(out, name, value.to(device=device if device is not None else value.device, dtype=torch.float64))
        return out

    def top_table(self, n_bins: int) -> np.ndarray:
        """Return the top-label sums for a bin count that was accumulated.

        Parameters
        ----------
        n_bins : int
            One of :attr:`top_bins`.

        Returns
        -------
        ndarray of shape (K, n_bins, 4)
            Per true class and bin: count, sum of confidence, sum of correct, sum of ECD.
        """
        return self.top[self.top_bins.index(n_bins), :, :n_bins]

    @property
    def n(self) -> int:
        """Samples counted (after masking)."""
        return int(self.scalars[kernels.S_N])


# --------------------------------------------------------------------------------------------
# The pass over the data


def row_ranges(n_rows: int, num_threads: int | None) -> list[tuple[int, int]]:
    """Split ``n_rows`` rows into contiguous ``(start, stop)`` ranges, one a thread.

    Parameters
    ----------
    n_rows : int
        Rows to split.
    num_threads : int or None
        Threads to use; None means the CPUs this process may run on. Ranges are never shorter
        than 65,536 rows (a thread's start-up costs more than it saves below that).

    Returns
    -------
    list of tuple of int
        ``(start, stop)`` pairs covering ``range(n_rows)`` in order.
    """
    threads = num_threads or _default_threads()
    parts = max(1, min(threads, n_rows // _MIN_ROWS_PER_THREAD))
    edges = np.linspace(0, n_rows, parts + 1).astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


_LANED = ("top", "fuzzy", "classwise", "ace")


def _lanes(name: str, num_classes: int) -> int:
    """Return the number of histogram copies for ``name`` (see ``kernels.LANES``).

    A row of many classes already spreads its class-wise and ACE updates over K places, and one
    copy of the (K, 1026, 3) ACE table stays in cache where four did not.
    """
    if name in ("classwise", "ace") and num_classes >= kernels.LONG_ROW:
        return 1
    return kernels.LANES


_POOL: dict[tuple[int, int], ThreadPoolExecutor] = {}
_POOL_LOCK = threading.Lock()


def _pool(workers: int) -> ThreadPoolExecutor:
    """Return calibkit's thread pool of ``workers`` threads for this process.

    One pool per process and size, kept: starting threads on every call would cost most of a
    small report. Keyed by process id too: a forked child inherits the pool object but not its
    threads, and would wait on it forever.
    """
    key = (os.getpid(), workers)
    with _POOL_LOCK:
        pool = _POOL.get(key)
        if pool is None:
            for (pid, _), old in _POOL.items():
                if pid == key[0]:  # another size (the affinity changed): let its threads end
                    old.shutdown(wait=False)  # (never a parent's pool: its locks may be held)
            _POOL.clear()
            pool = _POOL[key] = ThreadPoolExecutor(workers, thread_name_prefix="calibkit")
        return pool


def parallel_map(fn: Callable[..., Any], jobs: list[tuple]) -> list[Any]:
    """Run ``[fn(*job) for job in jobs]`` on calibkit's kept thread pool.

    The compiled kernels release the GIL, so the jobs run in parallel; a single job runs in the
    calling thread.

    Parameters
    ----------
    fn : callable
        Called once per job with the job's items as positional arguments.
    jobs : list of tuple
        The arguments of each call.

    Returns
    -------
    list
        The results, in the order of ``jobs``.
    """
    if len(jobs) == 1:
        return [fn(*jobs[0])]
    return list(_pool(_default_threads()).map(lambda job: fn(*job), jobs))


def _raise_input_error(prep: PreparedInput, errors: np.ndarray, ignore_index: int) -> None:
    kind = int(np.flatnonzero(errors >= 0)[0])
    i = int(errors[kind])
    where = np.unravel_index(i, prep.original_shape[:-1]) if len(prep.original_shape) > 1 else (i,)
    where = tuple(int(w) for w in where)
    position = where[0] if len(where) == 1 else where
    if kind == kernels.ERR_LABEL:
        raise ValueError(
            f"`labels` must lie in [0, {prep.num_classes}) or equal ignore_index={ignore_index}; "
            f"got {int(prep.labels[i])} at position {position}"
        )
    row = to_numpy(prep.values[i], "probs")  # one row, also of a CUDA tensor
    shown = np.array2string(row, precision=4, threshold=8)
    logits = prep.mode in (kernels.MODE_LOGITS, kernels.MODE_BINARY_LOGITS)
    name = "probs (logits, from_logits=True)" if logits else "probs"
    if kind == kernels.ERR_NONFINITE:
        raise ValueError(f"`{name}` contains NaN or inf at position {position}: {shown}")
    hint = "; if these are logits, pass from_logits=True"
    if kind == kernels.ERR_RANGE:
        raise ValueError(f"`probs` has a value outside [0, 1] at position {position}: {shown}{hint}")
    total = float(np.sum(row, dtype=np.float64))
    raise ValueError(
        f"`probs` rows must sum to 1 (tolerance {kernels.ROW_SUM_TOLERANCE}); the row at position {position} "
        f"sums to {total:.6g}: {shown}{hint}"
    )


def bin_statistics(
    prep: PreparedInput,
    *,
    ignore_index: int,
    top_bins: Iterable[int],
    fuzzy_bins: int,
    classwise_bins: int,
    groups: Iterable[str],
    eps: float,
    num_threads: int | None = None,
    keep_parts: bool = False,
    ranges: list[tuple[int, int]] | None = None,
    row_softmax: np.ndarray | None = None,
    classwise_from_ace: bool = False,
    backend: str | None = None,
    keep_on_device: bool = False,
) -> tuple[CalibrationStatistics, list[CalibrationStatistics]]:
    """Run the kernel over ``prep`` in threads and return the summed statistics (and the parts).

    Parameters
    ----------
    prep : PreparedInput
        Validated rows and labels (:func:`calibkit.metrics.validation.prepare`).
    ignore_index : int
        Label of the rows to skip.
    top_bins : iterable of int
        Bin counts of the top-label tables to fill.
    fuzzy_bins : int
        Fuzzy bins of FCE.
    classwise_bins : int
        Bins per class column of SCE.
    groups : iterable of str
        The optional, costlier sums: ``rows`` (Brier, NLL, ECD: a log per entry), ``classwise``
        (SCE), ``ace`` and ``fuzzy`` (FCE).
    eps : float
        Logs clip probabilities at ``eps``.
    num_threads : int, optional
        Threads of the pass (default: the CPUs available).
    keep_parts : bool, default False
        Also return the statistics of each row range (the bootstrap's blocks, the exact-ACE pass).
    ranges : list of tuple of int, optional
        Row ranges covering the input, replacing the per-thread split.
    row_softmax : ndarray of shape (N, 2), optional
        Receives each long logit row's maximum and inverse softmax sum, for
        :func:`exact_ace_partials` (see :func:`calibkit.metrics._kernels.accumulate._accumulate`).
    classwise_from_ace : bool, default False
        Leave the ``classwise`` table at zero (the pass skips its sums), for
        :func:`exact_ace_partials` to build it from the ACE buckets (one-shot calls with both).
    backend : {"numba", "torch"}, optional
        The engine (:mod:`calibkit.metrics.backends`); default: chosen for this input. The
        torch engine runs the ranges one after another, and ignores ``row_softmax`` and
        ``classwise_from_ace`` (they serve the kernels' exact-ACE pass).
    keep_on_device : bool, default False
        Torch engine: leave the sums as tensors on the input's device (a streaming accumulator).

    Returns
    -------
    total : CalibrationStatistics
        The sums over every row.
    parts : list of CalibrationStatistics
        The sums of each range with ``keep_parts``, else empty.

    Raises
    ------
    ValueError
        On the first bad value, naming the argument, the position and the offending row.
    """
    groups = frozenset(groups)
    top_bins = tuple(top_bins)
    binary = prep.mode >= kernels.MODE_BINARY_PROBS
    if backend is None:
        from calibkit.metrics import backends

        if ranges is not None and len(ranges) > 64 and not backends.on_device(prep.values):
            # many small ranges (the bootstrap's blocks): a Python loop of torch calls would
            # cost more than the compile; the kernels take them in one pass each
            backend = "numba" if backends.get_backend() == "auto" else None
    if backend is None:
        from calibkit.metrics import backends

        key = backends.kind_key("bin_statistics", prep, (groups, len(set(top_bins))))
        settings = {"top_bins": top_bins, "fuzzy_bins": fuzzy_bins, "classwise_bins": classwise_bins, "eps": eps}
        backend = backends.engine(
            prep,
            key,
            lambda: bin_statistics(
                backends.synthetic_like(prep, ignore_index), ignore_index=ignore_index, groups=groups, **settings
            ),
        )
    if backend == "torch":
        from calibkit.metrics.backends import torch_call
        from calibkit.metrics.torch_backend import bin_statistics_torch

        parts = []
        with torch_call():
            for start, stop in ranges if ranges is not None else [(0, prep.values.shape[0])]:
                part, errors = bin_statistics_torch(
                    prep,
                    ignore_index=ignore_index,
                    top_bins=tuple(top_bins),
                    fuzzy_bins=fuzzy_bins,
                    classwise_bins=classwise_bins,
                    groups=groups,
                    eps=eps,
                    start=start,
                    stop=stop,
                    keep_on_device=keep_on_device,
                )
                if (errors >= 0).any():
                    _raise_input_error(prep, errors, ignore_index)
                parts.append(part)
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        return total, (parts if keep_parts else [])
    ranges = ranges if ranges is not None else row_ranges(prep.values.shape[0], num_threads)
    # Top-label metrics alone need no per-entry probability: a leaner kernel, 1.5-2x faster.
    kernel = kernels.ACCUMULATE_TOP.get((prep.mode, prep.num_classes >= kernels.LONG_ROW)) if not groups else None
    if kernel is not None and prep.mode == kernels.MODE_PROBS and prep.num_classes <= kernels.SMALL_ROW:

        def kernel(args, classes=(0,) * prep.num_classes):  # its own compiled loop per class count
            kernels.accumulate_top_small_probs(args, classes)

    kernel = kernel or kernels.ACCUMULATE[prep.mode]

    def run(start: int, stop: int) -> tuple[CalibrationStatistics, np.ndarray]:
        part = CalibrationStatistics.zeros(prep.num_classes, binary, top_bins, fuzzy_bins, classwise_bins, groups)
        lanes = {name: np.zeros((_lanes(name, prep.num_classes), *getattr(part, name).shape)) for name in _LANED}
        errors = np.full(kernels.N_ERRORS, -1, dtype=np.int64)
        kernel(
            kernels.AccumulateArgs(
                x=prep.values,
                labels=prep.labels,
                start=start,
                stop=stop,
                ignore_index=ignore_index,
                num_classes=prep.num_classes,
                eps=eps,
                top_bins=np.asarray(part.top_bins, dtype=np.int64),
                top=lanes["top"],
                fuzzy=lanes["fuzzy"],
                classwise=lanes["classwise"],
                ace=lanes["ace"],
                scalars=part.scalars,
                errors=errors,
                do_rows="rows" in groups,
                do_classwise="classwise" in groups and not classwise_from_ace,
                do_ace="ace" in groups,
                do_fuzzy="fuzzy" in groups,
                row_softmax=row_softmax if row_softmax is not None else np.empty((0, 2)),
            )
        )
        for name, array in lanes.items():
            setattr(part, name, array.sum(axis=0))
        return part, errors

    results = parallel_map(run, ranges)
    for _, errors in results:
        if (errors >= 0).any():
            _raise_input_error(prep, errors, ignore_index)
    parts = [part for part, _ in results]
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total, (parts if keep_parts else [])


# --------------------------------------------------------------------------------------------
# Metrics as functions of the statistics


def binned_gaps(table: np.ndarray) -> dict[str, np.ndarray]:
    """Compute per-bin count, mean confidence, accuracy and signed gap ``acc - conf`` (NaN if empty).

    Parameters
    ----------
    table : ndarray of shape (..., M, >= 3)
        Per bin: count, sum of confidence, sum of correct.

    Returns
    -------
    dict of str to ndarray
        ``count``, ``confidence``, ``accuracy`` and ``gap``, each of shape ``(..., M)``.
    """
    count, conf_sum, out_sum = table[..., 0], table[..., 1], table[..., 2]
    with np.errstate(invalid="ignore", divide="ignore"):
        confidence = conf_sum / count
        accuracy = out_sum / count
    return {"count": count, "confidence": confidence, "accuracy": accuracy, "gap": accuracy - confidence}


def ece_from_table(table: np.ndarray) -> float:
    """Compute ECE ``sum_b n_b/N |acc_b - conf_b|`` = ``sum_b |S_correct - S_conf| / N`` from one table.

    Parameters
    ----------
    table : ndarray of shape (M, 4)
        One top-label table: per bin, count, sum of confidence, sum of correct (and of ECD).

    Returns
    -------
    float
        ECE; NaN for an empty table.
    """
    n = table[:, 0].sum()
    return float(np.abs(table[:, 2] - table[:, 1]).sum() / n) if n > 0 else float("nan")


def mce_from_table(table: np.ndarray) -> float:
    """Compute MCE ``max_b |acc_b - conf_b|`` over the non-empty bins of one table.

    Parameters
    ----------
    table : ndarray of shape (M, 4)
        One top-label table: per bin, count, sum of confidence, sum of correct (and of ECD).

    Returns
    -------
    float
        MCE; NaN when every bin is empty.
    """
    nonempty = table[:, 0] > 0
    if not nonempty.any():
        return float("nan")
    return float(np.max(np.abs(table[nonempty, 2] - table[nonempty, 1]) / table[nonempty, 0]))


def esce_from_table(table: np.ndarray) -> float:
    """Compute ESCE ``sum_b n_b/N (acc_b - conf_b)`` from one table (negative: over-confident).

    Parameters
    ----------
    table : ndarray of shape (M, 4)
        One top-label table: per bin, count, sum of confidence, sum of correct (and of ECD).

    Returns
    -------
    float
        ESCE; NaN for an empty table.
    """
    n = table[:, 0].sum()
    return float((table[:, 2] - table[:, 1]).sum() / n) if n > 0 else float("nan")


def rbece_from_table(table: np.ndarray, theta: float) -> float:
    """Compute RBECE, the unweighted mean ``|acc_b - conf_b|`` over bins holding more than ``theta`` samples.

    Parameters
    ----------
    table : ndarray of shape (M, 4)
        One top-label table: per bin, count, sum of confidence, sum of correct (and of ECD).
    theta : float
        A bin counts only with more than ``theta`` samples.

    Returns
    -------
    float
        RBECE; NaN, with an :class:`EmptyRegionWarning`, when no bin counts.
    """
    dense = table[:, 0] > theta
    if not dense.any():
        warnings.warn(
            f"RBECE: no bin holds more than theta={theta:g} samples (largest bin: {int(table[:, 0].max())}); "
            "returning NaN. Lower `theta` or use fewer bins.",
            EmptyRegionWarning,
            stacklevel=3,
        )
        return float("nan")
    return float(np.mean(np.abs(table[dense, 2] - table[dense, 1]) / table[dense, 0]))


def per_class_ece(table: np.ndarray) -> np.ndarray:
    """Compute ``ECE_k``, the top-label ECE on the subset ``y = k``, for every class.

    Parameters
    ----------
    table : ndarray of shape (K, M, 4)
        The top-label table split by true class (:meth:`CalibrationStatistics.top_table`).

    Returns
    -------
    ndarray of shape (K,)
        ``ECE_k``; NaN for a class without samples.
    """
    n_k = table[:, :, 0].sum(axis=1)
    gap = np.abs(table[:, :, 2] - table[:, :, 1]).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_k > 0, gap / np.where(n_k > 0, n_k, 1), np.nan)


def class_wise_summary(class_ece: Any, class_counts: Any, overall_ece: float) -> dict[str, float]:
    """Compute CECE, MSECE, WSECE and ECE variance from per-class ECEs (class-wise paper, eq 3.4-3.7).

    Classes whose ``ECE_k`` is NaN (absent from the data) are left out, ``K`` = classes present.

    Parameters
    ----------
    class_ece : array-like of shape (K,)
        ``ECE_k`` per class (NaN for absent classes).
    class_counts : array-like of shape (K,)
        Samples of each class (the weights of WSECE).
    overall_ece : float
        The ECE over all samples (the centre of the ECE variance).

    Returns
    -------
    dict of str to float
        ``cece``, ``msece``, ``wsece`` and ``ece_variance``; all NaN when no class is present.

    Examples
    --------
    >>> s = class_wise_summary([0.05, 0.1, 0.6], [1, 1, 1], overall_ece=0.08)
    >>> round(s["cece"], 4), round(s["msece"], 4), round(s["ece_variance"], 4)
    (0.4967, 0.25, 0.0906)
    """
    e = np.asarray(class_ece, dtype=np.float64)
    n = np.asarray(class_counts, dtype=np.float64)
    present = ~np.isnan(e)
    e, n = e[present], n[present]
    if e.size == 0:
        nan = float("nan")
        return {"cece": nan, "msece": nan, "wsece": nan, "ece_variance": nan}
    total = e.sum()
    return {
        "cece": float((e**2).sum() / total) if total > 0 else 0.0,
        "msece": float(e.mean()),
        "wsece": float((n * e).sum() / n.sum()) if n.sum() > 0 else float(e.mean()),
        "ece_variance": float(((e - overall_ece) ** 2).mean()),
    }


def fce_from_table(fuzzy: np.ndarray, variant: str = "paper") -> float:
    """Compute FCE from the fuzzy sums: ``sum_m G_m |acc_m - conf_m| / sum_m G_m`` = ``sum_m |A_m - C_m| / sum_m G_m``.

    ``variant="paper"`` (eq 4-6): ``G_m = sum_i mu_m(c_i)``, ``A_m = sum_i mu_m(c_i) a_i``,
    ``C_m = sum_i mu_m(c_i) c_i``. ``variant="authors"`` (their ``calibration_metrics.py``):
    their memberships rounded as their ``round(mu, 3)``, and ``C_m = sum_i mu_m(c_i) a_i c_i``, the
    confidence of the correct predictions only; ``A_m - C_m = sum_i mu_m(c_i) a_i (1 - c_i) >= 0``
    then, so no over- and under-confidence cancel within a bin.

    Parameters
    ----------
    fuzzy : ndarray of shape (M, 6)
        :attr:`CalibrationStatistics.fuzzy`.
    variant : {"paper", "authors"}, default "paper"
        Which three columns to read.

    Returns
    -------
    float
        FCE; NaN for empty sums.
    """
    g, a, c = (fuzzy[:, 0], fuzzy[:, 1], fuzzy[:, 2]) if variant == "paper" else (fuzzy[:, 3], fuzzy[:, 4], fuzzy[:, 5])
    total = g.sum()
    return float(np.abs(a - c).sum() / total) if total > 0 else float("nan")


def sce_from_table(classwise: np.ndarray, n: float) -> float:
    """Compute SCE ``1/K sum_k sum_b n_bk/N |acc_bk - conf_bk|`` from the class-wise table.

    Parameters
    ----------
    classwise : ndarray of shape (K, M, 3)
        :attr:`CalibrationStatistics.classwise`.
    n : float
        ``N``, the samples counted.

    Returns
    -------
    float
        SCE.
    """
    return float(np.abs(classwise[:, :, 2] - classwise[:, :, 1]).sum() / (classwise.shape[0] * n))


def ece_l2_from_table(table: np.ndarray) -> float:
    """Compute the L2 calibration error ``sqrt(sum_b n_b/N (acc_b - conf_b)^2)`` from one table.

    torchmetrics' ``norm="l2"`` (Kumar et al. 2019's plug-in estimate).

    Parameters
    ----------
    table : ndarray of shape (M, 4)
        One top-label table: per bin, count, sum of confidence, sum of correct (and of ECD).

    Returns
    -------
    float
        The L2 calibration error; NaN for an empty table.
    """
    count = table[:, 0]
    n = count.sum()
    if n <= 0:
        return float("nan")
    nonempty = count > 0
    gap = (table[nonempty, 2] - table[nonempty, 1]) / count[nonempty]
    return float(np.sqrt(np.sum(count[nonempty] * gap**2) / n))


def ece_l2_debiased_from_table(table: np.ndarray) -> float:
    """Compute the debiased L2 calibration error (Kumar et al. 2019, their ``unbiased_l2_ce``) from one table.

    Per bin with ``n_b >= 2``: ``(acc_b - conf_b)^2 - acc_b (1 - acc_b) / (n_b - 1)``, the
    squared gap less the variance of ``acc_b`` (bins of one sample count 0); these are weighted
    by ``n_b / N``, and the result is the square root of the positive part of the sum.

    Parameters
    ----------
    table : ndarray of shape (M, 4)
        One top-label table: per bin, count, sum of confidence, sum of correct (and of ECD).

    Returns
    -------
    float
        The debiased L2 calibration error; NaN for an empty table.
    """
    count = table[:, 0]
    n = count.sum()
    if n <= 0:
        return float("nan")
    used = count >= 2
    m = count[used]
    accuracy = table[used, 2] / m
    gap = accuracy - table[used, 1] / m
    square = np.sum(m * (gap**2 - accuracy * (1.0 - accuracy) / (m - 1.0))) / n
    return float(np.sqrt(max(square, 0.0)))


def _ace_bucket_bounds(num_buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper probability of every ACE bucket (the inverse of ``_ace_bucket``)."""
    keys = np.arange(num_buckets, dtype=np.int64)
    patterns = (keys + kernels.ACE_OFFSET) << 48
    lower = patterns.view(np.float64).copy()
    upper = ((keys + 1 + kernels.ACE_OFFSET) << 48).view(np.float64).copy()
    lower[0] = 0.0
    return lower, np.minimum(upper, 1.0)


def ace_points(ace: np.ndarray, n_ranges: int) -> dict[str, np.ndarray]:
    """Locate the ``R + 1`` equal-mass range boundaries of each class column in the ACE buckets.

    Ranges follow ``np.array_split``: ``N % R`` ranges of ``N // R + 1`` samples, then ``N // R``.

    Parameters
    ----------
    ace : ndarray of shape (K, B, 3)
        :attr:`CalibrationStatistics.ace`.
    n_ranges : int
        ``R``, the equal-mass ranges per class.

    Returns
    -------
    dict of str to ndarray
        Per class and boundary: ``ranks`` (the rank), ``bucket`` (the bucket that holds it),
        ``inside`` (how many of that bucket's samples lie before it) and ``before`` (the sums of
        all whole buckets before it).
    """
    counts = ace[:, :, 0]
    n = int(round(counts[0].sum())) if counts.size else 0
    r = np.arange(n_ranges + 1)
    ranks = r * (n // n_ranges) + np.minimum(r, n % n_ranges)
    cum = np.concatenate([np.zeros((ace.shape[0], 1, 3)), np.cumsum(ace, axis=1)], axis=1)
    # bucket j holds ranks [cum[j], cum[j+1]); a boundary on a bucket edge needs no split.
    bucket = np.empty((ace.shape[0], ranks.size), dtype=np.int64)
    for k in range(ace.shape[0]):  # one searchsorted per class, not per sample
        bucket[k] = np.searchsorted(cum[k, :, 0], ranks, side="right") - 1
    bucket = np.minimum(bucket, ace.shape[1] - 1)
    before = np.take_along_axis(cum, bucket[:, :, None], axis=1)
    inside = ranks[None, :] - before[:, :, 0]
    return {"ranks": ranks, "bucket": bucket, "inside": inside, "before": before}


def ace_from_points(
    ace: np.ndarray, points: dict[str, np.ndarray], partial: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[float, float]:
    """Compute ACE (and a bound on its error) from boundary points.

    ``partial`` gives, per point, the exact sums of p and outcome over the ``inside`` samples
    of its bucket where a boundary cuts the bucket, NaN elsewhere (the exact path, data held).
    Without it the bucket is split in proportion (streaming path) and the returned bound is
    ``1/(K R) sum_k sum_r (e_r + e_{r+1}) / n_r`` with ``e = min(u, n_j - u) (w_j + o_j)``: ``u``
    samples taken from bucket ``j`` of ``n_j``, width ``w_j``, ``o_j`` = 1 if its outcomes are
    mixed, else 0. It holds for any data.

    Parameters
    ----------
    ace : ndarray of shape (K, B, 3)
        :attr:`CalibrationStatistics.ace`.
    points : dict of str to ndarray
        From :func:`ace_points`.
    partial : tuple of ndarray, optional
        The exact within-bucket sums of p and of the outcome per point (NaN where no boundary
        cuts a bucket), from :func:`exact_ace_partials` or ``ExactACE.partials``.

    Returns
    -------
    ace : float
        ACE; NaN when every range is empty.
    bound : float
        A bound on ``|ACE - ACE_exact|``: 0 where ``partial`` resolves every cut.
    """
    k_idx = np.arange(ace.shape[0])[:, None]
    bucket, inside, before = points["bucket"], points["inside"], points["before"]
    stats = ace[k_idx, bucket]  # (K, R+1, 3)
    count = stats[:, :, 0]
    share = np.divide(inside, count, out=np.zeros_like(inside, dtype=np.float64), where=count > 0)
    part_p = share * stats[:, :, 1]
    part_o = share * stats[:, :, 2]
    lower, upper = _ace_bucket_bounds(ace.shape[1])
    width = upper[bucket] - lower[bucket]
    mixed = (stats[:, :, 2] > 0) & (stats[:, :, 2] < count)
    point_error = np.minimum(inside, count - inside) * (width + mixed)
    if partial is not None:  # exact sums where a boundary cuts a bucket (NaN elsewhere)
        exact = ~np.isnan(partial[0])
        part_p = np.where(exact, partial[0], part_p)
        part_o = np.where(exact, partial[1], part_o)
        point_error = np.where(exact, 0.0, point_error)
    sum_p = before[:, :, 1] + part_p
    sum_o = before[:, :, 2] + part_o
    size = np.diff(points["ranks"]).astype(np.float64)
    nonempty = size > 0
    if not nonempty.any():
        return float("nan"), float("nan")
    gaps = np.abs(np.diff(sum_o, axis=1) - np.diff(sum_p, axis=1))[:, nonempty] / size[nonempty]
    bound = (point_error[:, 1:] + point_error[:, :-1])[:, nonempty] / size[nonempty]
    return float(gaps.mean()), float(bound.mean())


CLASSWISE_FROM_ACE_MAX_BINS = 32
"""Class-wise bins are built from the ACE buckets (:func:`exact_ace_partials`) only up to this
many bins. The widest bucket spans 1/32 (the octave [1/2, 1) in 16), so with wider bins each
edge cuts at most one bucket a class; with narrower ones every wider bucket is cut and the
gather copies most values above about 16/M (35% of the entries at M = 1000, 93% at 1e5, where
the class-wise histogram needs only a (K, M, 3) table)."""


def classwise_bins_of_buckets(num_buckets: int, n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Map each ACE bucket to its equal-width class-wise bin, and tell whether a bin edge cuts it.

    Binned by the kernels' own ``_equal_width_bins``, so a whole bucket's sums belong to its bin
    exactly.

    Parameters
    ----------
    num_buckets : int
        ``B``, the ACE buckets per class.
    n_bins : int
        ``M``, the class-wise bins.

    Returns
    -------
    first : ndarray of int64, shape (B,)
        The bin of each bucket's smallest value.
    cut : ndarray of bool, shape (B,)
        Whether a bin edge cuts the bucket (its largest value falls in another bin).
    """
    lower, upper = _ace_bucket_bounds(num_buckets)
    largest = np.where(upper > lower, np.nextafter(upper, 0.0), lower)  # upper is the next bucket's
    first = np.empty(num_buckets, dtype=np.int64)
    last = np.empty(num_buckets, dtype=np.int64)
    kernels._equal_width_bins(lower, first, num_buckets, n_bins)
    kernels._equal_width_bins(largest, last, num_buckets, n_bins)
    return first, first != last


def gather_bucket_samples(
    prep: PreparedInput,
    parts: list[CalibrationStatistics],
    keys: np.ndarray,
    *,
    ignore_index: int,
    num_threads: int | None = None,
    row_softmax: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Gather the samples of ACE buckets ``keys`` (rows ``(class, bucket)``, unique) from ``prep``.

    Parameters
    ----------
    prep : PreparedInput
        The same rows as the pass that filled ``parts``.
    parts : list of CalibrationStatistics
        The per-thread statistics of a pass over ``prep`` with the ``ace`` group
        (``bin_statistics(..., keep_parts=True)``, same ``num_threads``): their bucket counts say
        where each thread writes.
    keys : ndarray of int, shape (S, 2)
        The ``(class, bucket)`` slots to gather, unique.
    ignore_index : int
        Label of the rows to skip.
    num_threads : int, optional
        As for the pass that filled ``parts``.
    row_softmax : ndarray of shape (N, 2), optional
        As filled by :func:`bin_statistics` for long logit rows (the gather then skips their softmax).

    Returns
    -------
    samples : ndarray of int64
        The samples packed as :func:`calibkit.metrics._kernels.ace._packed_sample` (value and outcome
        in one int64); slot ``s`` (``keys[s]``) at ``[slot_start[s], slot_start[s] + slot_count[s])``.
    slot_start, slot_count : ndarray of int64, shape (S,)
        Where each slot's samples start, and how many there are.
    slot_of : ndarray of int32, shape (K, B)
        ``(class, bucket)`` -> slot, or -1.

    Raises
    ------
    RuntimeError
        When a value does not land in the bucket it was counted in (a bug to report).
    """
    n_classes, n_buckets = parts[0].ace.shape[:2]
    slot_of = np.full((n_classes, n_buckets), -1, dtype=np.int32)  # int32: half the cache
    slot_of[keys[:, 0], keys[:, 1]] = np.arange(len(keys))
    per_part = np.stack([p.ace[keys[:, 0], keys[:, 1], 0] for p in parts]).astype(np.int64)  # (T, S)
    slot_count = per_part.sum(axis=0)
    slot_start = np.concatenate([[0], np.cumsum(slot_count)[:-1]]).astype(np.int64)
    write_at = slot_start[None, :] + np.concatenate([np.zeros((1, len(keys)), np.int64), np.cumsum(per_part, 0)[:-1]])
    samples = np.empty(int(slot_count.sum()), dtype=np.int64)  # value and outcome packed (_packed_sample)
    ranges = row_ranges(prep.values.shape[0], num_threads)
    assert len(ranges) == len(parts), "gather must split rows as the accumulation did"
    ends = write_at + per_part

    def run(t: int) -> bool:
        start, stop = ranges[t]
        cursor = write_at[t].copy()
        kernels.GATHER_ACE[prep.mode](
            kernels.GatherArgs(
                x=prep.values,
                labels=prep.labels,
                start=start,
                stop=stop,
                ignore_index=ignore_index,
                num_classes=prep.num_classes,
                slot_of=slot_of,
                write_at=cursor,
                out=samples,
                row_softmax=row_softmax if row_softmax is not None else np.empty((0, 2)),
            )
        )
        return bool(np.array_equal(cursor, ends[t]))

    # every value must land in the bucket it was counted in (the same arithmetic, bit for bit)
    if not all(parallel_map(run, [(t,) for t in range(len(ranges))])):
        raise RuntimeError("calibkit: the exact-ACE pass rebuilt different probabilities; please report this")
    return samples, slot_start, slot_count, slot_of


def exact_ace_partials(
    prep: PreparedInput,
    parts: list[CalibrationStatistics],
    points: dict[str, np.ndarray],
    *,
    ignore_index: int,
    num_threads: int | None = None,
    row_softmax: np.ndarray | None = None,
    classwise_bins: int | None = None,
) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray | None]:
    """Compute the exact within-bucket sums at every range boundary, from a second pass.

    The pass gathers only the samples of the (at most ``R - 1`` per class) buckets that a
    boundary cuts, and resolves each boundary inside its bucket
    (:func:`calibkit.metrics._kernels.ace.resolve_points`).

    With ``classwise_bins`` it also builds the (K, M, 3) class-wise table from the ACE buckets
    (for a pass run with ``classwise_from_ace``): whole buckets add into the bin that holds them,
    and the samples of the buckets a bin edge cuts (gathered too) one by one. At K >= 16 this
    replaces a second scatter of every entry in the first pass, a large share of its time, by
    the gather of the few entries near the M - 1 edges.

    Parameters
    ----------
    prep : PreparedInput
        The rows of the first pass.
    parts : list of CalibrationStatistics
        The first pass's per-thread statistics (``keep_parts=True``).
    points : dict of str to ndarray
        From :func:`ace_points`.
    ignore_index : int
        Label of the rows to skip.
    num_threads : int, optional
        As for the first pass.
    row_softmax : ndarray of shape (N, 2), optional
        As filled by :func:`bin_statistics` for long logit rows (the pass then skips their softmax).
    classwise_bins : int, optional
        Also build the class-wise table of this many bins.

    Returns
    -------
    partials : tuple of ndarray
        Per class and boundary, the exact sums of p and of the outcome below the boundary in its
        bucket (NaN where no boundary cuts a bucket): the ``partial`` of :func:`ace_from_points`.
    classwise : ndarray of shape (K, classwise_bins, 3) or None
        The class-wise table with ``classwise_bins``, else None.
    """
    inside = points["inside"]
    ace = np.sum([p.ace for p in parts], axis=0)
    counts = ace[:, :, 0]
    total = np.take_along_axis(counts, points["bucket"], axis=1)
    cut = (inside > 0) & (inside < total)
    keys = np.stack([np.nonzero(cut)[0], points["bucket"][cut]], axis=1)
    table = None
    if classwise_bins is not None:
        bin_of, edge_cut = classwise_bins_of_buckets(ace.shape[1], classwise_bins)
        table = np.zeros((ace.shape[0], classwise_bins, 3))
        whole = ~edge_cut
        np.add.at(table, (slice(None), bin_of[whole]), ace[:, whole])
        keys = np.concatenate([keys, np.argwhere(edge_cut[None, :] & (counts > 0))])
    keys = np.unique(keys, axis=0)
    part_p = np.full(inside.shape, np.nan)
    part_o = np.full(inside.shape, np.nan)
    if keys.size == 0:
        return (part_p, part_o), table
    samples, slot_start, slot_count, slot_of = gather_bucket_samples(
        prep, parts, keys, ignore_index=ignore_index, num_threads=num_threads, row_softmax=row_softmax
    )
    ranges = row_ranges(prep.values.shape[0], num_threads)
    if table is not None:
        edge_slots = np.nonzero(edge_cut[keys[:, 1]])[0]
        kernels.classwise_of_samples(samples, slot_start, slot_count, keys[:, 0], edge_slots, classwise_bins, table)
    rows, cols = np.nonzero(cut)
    slot = slot_of[rows, points["bucket"][rows, cols]]
    rank = inside[rows, cols].astype(np.int64)
    found_p = np.empty(rows.size)
    found_o = np.empty(rows.size)
    # Points of different slots are independent: split them, sorted by slot, over the threads
    # (a slot whose points straddle two groups is only histogrammed twice).
    groups = np.array_split(np.argsort(slot, kind="stable"), len(ranges))

    def resolve(group: np.ndarray) -> None:
        out_p = np.empty(group.size)
        out_o = np.empty(group.size)
        kernels.resolve_points(samples, slot_start, slot_count, slot[group], rank[group], out_p, out_o)
        found_p[group] = out_p
        found_o[group] = out_o

    parallel_map(resolve, [(g,) for g in groups if g.size])
    part_p[rows, cols] = found_p
    part_o[rows, cols] = found_o
    return (part_p, part_o), table
