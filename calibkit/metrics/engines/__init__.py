"""The engines' entry: one call picks the engine once and returns the statistics, with the exact-ACE pieces.

Two engines fill the same :class:`~calibkit.metrics.statistics.CalibrationStatistics`:

- ``numba_engine``, the compiled kernels on host memory, row
  ranges in threads (``threads``);
- ``torch_engine``, torch on the tensor's own device (CUDA), or
  on the CPU while the kernels compile.

:func:`fill_statistics` is the only place that chooses between them: the user's switch
(:mod:`calibkit.metrics.backends`), and under ``"auto"`` whether the kernels of this input kind
are ready (``auto``). Every door (the one-shot report, the
accumulator, the bootstrap) calls it; the exact-ACE passes over shards
(``calibkit.metrics.exact_ace``) call the numba engine's gather directly, since they must
rebuild the very probabilities the kernels binned.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from calibkit.metrics.backends import get_backend, on_device
from calibkit.metrics.engines import auto
from calibkit.metrics.engines.numba_engine import exact_statistics_numba, statistics_numba
from calibkit.metrics.engines.torch_engine import exact_ace_partials_torch, statistics_torch
from calibkit.metrics.ranking import selective_sums
from calibkit.metrics.statistics import CalibrationStatistics, SumsPlan, ace_points, on_same_rows, sum_statistics
from calibkit.metrics.validation import PreparedInput

MANY_RANGES = 64
"""Above this many row ranges (the bootstrap's blocks) host input goes to the kernels even under
``"auto"`` before they are compiled: a Python loop of torch calls would cost more than the compile,
and the kernels take all the ranges in one pass."""


@dataclass
class Filled:
    """What :func:`fill_statistics` returns.

    Parameters
    ----------
    statistics : CalibrationStatistics
        The sums over every row (tensors on the input's device with ``keep_on_device``).
    parts : list of CalibrationStatistics
        The sums of each row range, with ``keep_parts``; else empty.
    ace_partials : tuple of ndarray or None
        The exact sums where an ACE range boundary cuts a bucket (with ``exact_ace_ranges``, when
        a sample remains), for :func:`calibkit.metrics.registry.report_from_statistics`.
    selective_rows : tuple of ndarray or None
        Every kept row's top-label confidence and error (with ``exact_selective``), which make
        AURC and the selective accuracy exact.
    engine : str
        ``"numba"`` or ``"torch"``: the engine that ran.
    """

    statistics: CalibrationStatistics
    parts: list[CalibrationStatistics]
    ace_partials: tuple[np.ndarray, np.ndarray] | None
    engine: str
    selective_rows: tuple[np.ndarray, np.ndarray] | None = None


def choose_engine(
    prep: PreparedInput,
    sums: SumsPlan,
    *,
    ignore_index: int,
    exact_ace_ranges: int | None = None,
    ranges: list[tuple[int, int]] | None = None,
) -> str:
    """Pick the engine of one call: the user's switch, else the ``"auto"`` rule.

    Parameters
    ----------
    prep : PreparedInput
        The input.
    sums : SumsPlan
        The sums the call fills.
    ignore_index : int
        Label of the rows to skip (the warm-up's synthetic input carries one).
    exact_ace_ranges : int, optional
        ACE's ranges when the call also makes ACE exact.
    ranges : list of tuple of int, optional
        The call's row ranges.

    Returns
    -------
    str
        ``"numba"`` or ``"torch"``.
    """
    if ranges is not None and len(ranges) > MANY_RANGES and not on_device(prep.values) and get_backend() == "auto":
        return "numba"
    key = _kind(prep, sums, exact_ace_ranges)

    def warm() -> Filled:  # the same job on the kernels, on small input of the same kind
        like = auto.synthetic_like(prep, ignore_index)
        return fill_statistics(like, sums, ignore_index=ignore_index, exact_ace_ranges=exact_ace_ranges, engine="numba")

    return auto.engine(prep, key, warm)


def _kind(prep: PreparedInput, sums: SumsPlan, exact_ace_ranges: int | None) -> tuple:
    job = "statistics" if exact_ace_ranges is None else "exact"
    return auto.kind_key(job, prep, (sums.groups, len(sums.top_bins)))


def fill_statistics(
    prep: PreparedInput,
    sums: SumsPlan,
    *,
    ignore_index: int,
    exact_ace_ranges: int | None = None,
    exact_selective: bool = False,
    num_threads: int | None = None,
    ranges: list[tuple[int, int]] | None = None,
    keep_parts: bool = False,
    keep_on_device: bool = False,
    engine: str | None = None,
) -> Filled:
    """Fill the sums of ``sums`` over ``prep`` on the engine chosen for it, ACE exact if asked.

    Parameters
    ----------
    prep : PreparedInput
        Validated rows and labels (``calibkit.metrics.validation.prepare()``).
    sums : SumsPlan
        The sums to fill (:func:`calibkit.metrics.registry.plan`).
    ignore_index : int
        Label of the rows to skip.
    exact_ace_ranges : int, optional
        Make ACE with this many equal-mass ranges exact: a second pass over the samples of the
        fine buckets a range boundary cuts (``ace`` must be among the groups).
    exact_selective : bool, default False
        Also return every row's top-label confidence and error (``selective`` must be among the
        groups), for exact AURC and selective accuracy.
    num_threads : int, optional
        Threads of the kernels' passes (default: the CPUs available).
    ranges : list of tuple of int, optional
        Row ranges covering the input (the bootstrap's blocks); default: one per thread.
    keep_parts : bool, default False
        Also return the sums of each range.
    keep_on_device : bool, default False
        Torch engine: leave the sums as tensors on the input's device (a streaming accumulator
        adds them there).
    engine : {"numba", "torch"}, optional
        Skip the choice (callers that need one engine); default: :func:`choose_engine`.

    Returns
    -------
    Filled

    Raises
    ------
    ValueError
        On the first bad value, naming the argument, the position and the offending row.
    """
    selective = "selective" in sums.groups
    if selective:  # filled here for every engine, from the top label of each row (calibkit.metrics.ranking)
        sums = dataclasses.replace(sums, groups=sums.groups - {"selective"})
    if engine is None:
        engine = choose_engine(prep, sums, ignore_index=ignore_index, exact_ace_ranges=exact_ace_ranges, ranges=ranges)
    partials = None
    if engine == "torch":
        with auto.torch_call(_kind(prep, sums, exact_ace_ranges), math.prod(prep.values.shape)):  # numpy or torch
            spans = ranges if ranges is not None else [(0, prep.values.shape[0])]
            parts = on_same_rows(
                [
                    statistics_torch(
                        prep, sums, ignore_index=ignore_index, start=a, stop=b, keep_on_device=keep_on_device
                    )
                    for a, b in spans
                ]
            )
            total = sum_statistics(parts)
            if exact_ace_ranges is not None and total.n > 0:
                points = ace_points(total.ace, exact_ace_ranges)
                partials = exact_ace_partials_torch(prep, total.ace, points, ignore_index=ignore_index)
    elif exact_ace_ranges is not None:
        parts, total, partials = exact_statistics_numba(
            prep, sums, ignore_index=ignore_index, ace_ranges=exact_ace_ranges, num_threads=num_threads
        )
    else:
        parts = statistics_numba(prep, sums, ignore_index=ignore_index, num_threads=num_threads, ranges=ranges)
        total = sum_statistics(parts)
    rows = None
    if selective:
        rows = _add_selective(prep, ignore_index, total, parts if keep_parts else [], ranges, exact_selective)
    return Filled(total, parts if keep_parts else [], partials, engine, rows)


def _add_selective(
    prep: PreparedInput,
    ignore_index: int,
    total: CalibrationStatistics,
    parts: list[CalibrationStatistics],
    ranges: list[tuple[int, int]] | None,
    keep_rows: bool,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Fill the ``selective`` sums of ``total`` and of each part (one per range of ``ranges``)."""
    spans = ranges if (parts and ranges is not None) else [(0, prep.values.shape[0])]
    sums, rows = selective_sums(prep, ignore_index, spans, keep_rows=keep_rows)
    on_host = isinstance(total.scalars, np.ndarray)
    sums = [s.cpu().numpy() if on_host and not isinstance(s, np.ndarray) else s for s in sums]
    for stats, table in zip(parts if len(parts) == len(sums) else [], sums):
        stats.selective, stats.has = table, stats.has | {"selective"}
    total.selective, total.has = sum(sums[1:], sums[0]), total.has | {"selective"}
    return rows


__all__ = ["Filled", "choose_engine", "fill_statistics"]
