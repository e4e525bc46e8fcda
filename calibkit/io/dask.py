"""Every metric of :func:`calibkit.calibration_report` on a Dask cluster, predictions never moved.

``pip install 'calibkit[dask]'``. Each partition becomes per-bin statistics on the worker that
holds it (a :class:`~calibkit.CalibrationAccumulator`, O(bins x classes),
a few hundred kB); the statistics are tree-reduced; then exact ACE's further passes
(``ExactACE``) run on the workers too, each sending back only a
histogram of a few cells or the few values next to a range boundary. The result equals
:func:`calibkit.calibration_report` on all the data, whatever the partitioning (to rounding,
~1e-14).

The data is read once per pass (usually 2, see ``calibkit.metrics.exact_ace``): a collection
read from Parquet is read again; one that fits the cluster's memory can be ``persist()``-ed
first. It runs on the current Dask scheduler (a ``distributed.Client`` if one is active).

Examples
--------
>>> import dask.array as da
>>> import numpy as np
>>> from calibkit.io.dask import calibration_report
>>> rng = np.random.default_rng(0)
>>> probs = da.from_array(rng.dirichlet([1, 1, 1], 1000), chunks=(300, 3))
>>> labels = da.from_array(rng.integers(0, 3, 1000), chunks=300)
>>> report = calibration_report(probs, labels, scheduler="sync")
>>> report["n"], round(report["ace_error_bound"], 12)
(1000, 0.0)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np

from calibkit.metrics.accumulator import CalibrationAccumulator
from calibkit.metrics.exact_ace import ExactACE, PassContribution
from calibkit.metrics.settings import DEFAULTS, UNSET, CalibrationSettings, resolve_settings, settings_keywords
from calibkit.metrics.validation import InputError

__all__ = ["PartitionError", "calibration_report", "partitions"]

SPLIT_EVERY = 8


class Part(NamedTuple):
    """One partition's predictions, and where they lie (for error messages).

    Parameters
    ----------
    values, labels : ndarray
        As the partition holds them (a DataFrame's token rows flattened).
    from_logits : bool
    index : int
        The partition's number.
    offset : int or None
        The row of all the data where the partition starts (None for a DataFrame: found only
        when an error needs it).
    table : pyarrow.Table or None
        A DataFrame partition as Arrow, to find the row of a flattened token.
    multilabel : bool, default False
        Multi-label rows (``values`` and ``labels`` ``(rows, K)``).
    """

    values: np.ndarray
    labels: np.ndarray
    from_logits: bool
    index: int
    offset: int | None
    table: Any
    multilabel: bool = DEFAULTS.multilabel

    def arrays_for(self, reader: Any) -> tuple[np.ndarray, np.ndarray]:
        """Return the values and labels as ``reader`` takes them: with ``next_token``, as sequences.

        Parameters
        ----------
        reader : CalibrationAccumulator or ExactACE
            What reads the partition (its ``next_token`` and ``ignore_index``).

        Returns
        -------
        values, labels : ndarray
            As held; a DataFrame's flattened token rows as one sequence, each row's start unscored
            (:func:`calibkit.io.prediction_files.as_next_token_input`).
        """
        if not reader.next_token:
            return self.values, self.labels
        from calibkit.io.prediction_files import as_next_token_input

        where = f"partition {self.index}"
        return as_next_token_input(self.values, self.labels, self.table, reader.ignore_index, where)

    def update(self, target: Any) -> None:
        """Call ``target.update(values, labels)``; an error names the partition and the row.

        Parameters
        ----------
        target : CalibrationAccumulator
            What reads the partition.

        Raises
        ------
        PartitionError
            For a bad value: the partition, its row and (where known) the row of all the data.
        ValueError
            Another error of the target, naming the partition.
        """
        try:
            target.update(*self.arrays_for(target))
        except InputError as exc:
            from calibkit.io.prediction_files import row_of_value

            row, token = row_of_value(exc.index, self.labels, self.table, self.multilabel)
            raise PartitionError(exc.head, exc.tail, self.index, row, token, self.offset) from None
        except ValueError as exc:
            raise ValueError(f"partition {self.index}: {exc}") from None


class PartitionError(ValueError):
    """A bad value in a partition: the message says the partition, the row within it and of all the data.

    Parameters
    ----------
    head, tail : str
        The message before and after the place (``InputError``).
    partition, row : int
        The partition and the row within it.
    token : int or None
        The token within the row, for token input.
    offset : int or None
        The row of all the data where the partition starts, when known.
    """

    def __init__(self, head: str, tail: str, partition: int, row: int, token: int | None, offset: int | None) -> None:
        self.head, self.tail, self.partition, self.row, self.token, self.offset = (
            head,
            tail,
            partition,
            row,
            token,
            offset,
        )
        token_of = "" if token is None else f"token {token} of "
        total = "" if offset is None else f" (row {offset + row} of all the data)"
        super().__init__(f"{head}{token_of}row {row} of partition {partition}{total}{tail}")

    def __reduce__(self) -> tuple:
        """Pickle with the place: Dask raises it on a worker and again here."""
        return type(self), (self.head, self.tail, self.partition, self.row, self.token, self.offset)


def _accumulate(batch: Part | None, metrics: tuple[str, ...], settings: CalibrationSettings, index: int):
    if batch is None:
        return None
    acc = CalibrationAccumulator(metrics, settings=settings.replace(from_logits=batch.from_logits))
    batch.update(acc)
    return index, acc  # the partition travels with its sums, so that a disagreement can name it


def _classes(acc: CalibrationAccumulator) -> str | None:
    stats = acc.statistics
    if stats is None:
        return None
    if isinstance(stats, list):
        return f"{len(stats)} labels"
    return "binary input (N,)" if stats.binary else f"{stats.num_classes} classes"


def _merge_accumulators(*parts: tuple[int, CalibrationAccumulator] | None) -> tuple[int, CalibrationAccumulator] | None:
    present = [p for p in parts if p is not None]
    if not present:
        return None
    index, first = present[0]
    for other_index, other in present[1:]:
        if other.from_logits != first.from_logits:
            raise ValueError(
                f"`data`: partition {other_index} holds {'logits' if other.from_logits else 'probabilities'} and "
                f"partition {index} {'logits' if first.from_logits else 'probabilities'}: every partition must hold "
                "one kind"
            )
        mine, theirs = _classes(first), _classes(other)
        if mine is not None and theirs is not None and mine != theirs:  # each side agrees with its first partition
            raise ValueError(
                f"`data`: partition {other_index} has {theirs} but partition {index} has {mine}: every partition "
                "must hold the same classes"
            )
        first.merge(other)  # a task's inputs are its own (deserialised, or made by the task before)
    return index, first


def _contribution(batch: Part | None, exact: ExactACE) -> PassContribution:
    if batch is None:
        return exact.empty_contribution()
    return exact.contribution(*batch.arrays_for(exact))  # checked in pass 1; a change is refused by ExactACE


def _rows(batch: Part | None) -> int:
    return 0 if batch is None else (batch.table.num_rows if batch.table is not None else batch.labels.shape[0])


def _add_contributions(*parts: PassContribution) -> PassContribution:
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def _tree(items: list, combine: Callable, split_every: int):
    """Build a reduction tree of delayed ``combine`` calls, ``split_every`` inputs each."""
    import dask

    items = list(items)
    while len(items) > 1:
        items = [
            dask.delayed(combine, pure=True)(*items[i : i + split_every]) for i in range(0, len(items), split_every)
        ]
    return items[0]


# ----------------------------------------------------------------------------------------------
# Partitions: (values, labels, from_logits), or None for an empty one


def _array_batch(
    values: np.ndarray,
    labels: np.ndarray,
    from_logits: bool,
    index: int,
    offset: int,
    multilabel: bool = DEFAULTS.multilabel,
) -> Part | None:
    values, labels = np.asarray(values), np.asarray(labels)
    if labels.shape[0] == 0:
        return None
    return Part(values, labels, from_logits, index, offset, None, multilabel)


def _frame_batch(frame, index: int, multilabel: bool = DEFAULTS.multilabel) -> Part | None:
    import pyarrow as pa

    from calibkit.io.prediction_files import for_option, from_arrow_table

    where = f"partition {index}"
    if len(frame) == 0:
        return None
    table = pa.Table.from_pandas(frame, preserve_index=False)
    for name in ("probs", "logits"):
        if name in table.column_names and (
            pa.types.is_string(table.column(name).type) or pa.types.is_large_string(table.column(name).type)
        ):
            raise ValueError(
                f"{where}: `{name}` holds strings: Dask turns object columns into strings (dataframe.convert-string); "
                "give it an Arrow list type, e.g. pd.ArrowDtype(pa.list_(pa.float32())), or read Parquet with "
                "dtype_backend='pyarrow'"
            )
    try:
        values, labels, from_logits = from_arrow_table(table, where, multilabel)
    except ValueError as exc:  # the reader names its argument: here the partition is the place
        raise ValueError(for_option(str(exc), "`data`")) from None
    return Part(values, labels, from_logits, index, None, table, multilabel)


def _array_partitions(probs, labels, from_logits: bool, multilabel: bool = DEFAULTS.multilabel) -> list:
    import dask
    import dask.array as da

    if not isinstance(labels, da.Array):
        raise ValueError(f"`labels` must be a Dask array with `probs`, got {type(labels).__name__}")
    if multilabel and (probs.ndim != 2 or labels.ndim != 2):
        raise ValueError(
            f"multi-label `probs` and `labels` must both be (N, K) Dask arrays, got {probs.shape} and {labels.shape}"
        )
    if not multilabel and (probs.ndim not in (1, 2, 3) or labels.ndim != max(1, probs.ndim - 1)):
        raise ValueError(
            f"`probs` of shape {probs.shape} needs `labels` of shape {probs.shape[: max(1, probs.ndim - 1)]}, "
            f"got {labels.shape}"
        )
    # A boolean mask (x[mask]) leaves the chunk sizes unknown: compute them (one pass over the
    # mask) so that the rows of probs and labels can be matched, and every row counted.
    if any(np.isnan(c) for c in probs.chunks[0]):
        probs = probs.compute_chunk_sizes()
    if any(np.isnan(c) for c in labels.chunks[0]):
        labels = labels.compute_chunk_sizes()
    if probs.shape[: labels.ndim] != labels.shape:  # (multi-label: the same (N, K))
        raise ValueError(f"`probs` has shape {probs.shape} but `labels` {labels.shape}")
    # Whole rows in every block (classes and tokens are never split), labels chunked like probs.
    probs = probs.rechunk({axis: -1 for axis in range(1, probs.ndim)})
    labels = labels.rechunk((probs.chunks[0], *[-1] * (labels.ndim - 1)))
    blocks = probs.to_delayed().reshape(-1)
    label_blocks = labels.to_delayed().reshape(-1)
    offsets = np.concatenate([[0], np.cumsum(probs.chunks[0])[:-1]]).astype(int).tolist()
    return [
        dask.delayed(_array_batch, pure=True)(p, y, from_logits, i, offset, multilabel)
        for i, (p, y, offset) in enumerate(zip(blocks, label_blocks, offsets))
    ]


def _frame_partitions(frame, multilabel: bool = DEFAULTS.multilabel) -> list:
    import dask

    parts = frame.to_delayed()
    return [dask.delayed(_frame_batch, pure=True)(part, i, multilabel) for i, part in enumerate(parts)]


def _parquet_files(location: str) -> list[str]:
    """Find the Parquet shards of a path or glob as ``calibkit report`` does, and check they hold one kind."""
    import pyarrow.parquet as pq

    from calibkit.io.prediction_files import for_option, one_line
    from calibkit.io.shards import find_shards

    try:
        files, _ = find_shards(location)
    except ValueError as exc:
        raise ValueError(for_option(str(exc), "`data`")) from None
    kinds = {}
    for file in files:
        if file.suffix.lower() != ".parquet":
            raise ValueError(
                f"`data`: {file} is not Parquet; calibkit.io.dask reads Parquet shards "
                "(calibkit.io.shards.stream_report reads the other formats)"
            )
        try:
            names = pq.read_schema(file).names
        except Exception as exc:  # noqa: BLE001 - any unreadable file is named, in one line
            raise ValueError(f"`data`: {file} cannot be read as Parquet: {one_line(exc)}") from None
        kind = next((k for k in ("probs", "logits") if k in names), None)
        if kind is None and any(n.startswith(("probs_", "logits_")) for n in names):
            kind = "probs" if any(n.startswith("probs_") for n in names) else "logits"
        if "labels" not in names or kind is None:
            raise ValueError(f"`data`: {file} needs a `labels` column and `probs` or `logits`; it has {names}")
        kinds.setdefault(kind, file)
        if len(kinds) > 1:
            raise ValueError(
                f"`data`: {kinds['logits']} holds logits but {kinds['probs']} holds probs; every shard must hold "
                "the same kind"
            )
    return [str(f) for f in files]


def partitions(
    data: Any, labels: Any = None, *, from_logits: bool = DEFAULTS.from_logits, multilabel: bool = DEFAULTS.multilabel
) -> list:
    """Return delayed ``(values, labels, from_logits)`` per partition (``None`` for an empty one).

    Token rows are flattened per partition.

    Parameters
    ----------
    data : dask.array.Array, dask.dataframe.DataFrame, str or path
        A Dask array of probabilities or logits (with ``labels``), a Dask DataFrame with a
        ``labels`` column and a ``probs``/``logits`` list column (or the wide
        ``probs_0 .. probs_{K-1}`` columns), or a path or glob of Parquet shards (read with
        ``dask.dataframe.read_parquet``, Arrow types kept).
    labels : dask.array.Array, optional
        With a Dask array only: the labels, ``(N,)`` or ``(N, L)``.
    from_logits : bool, default False
        With a Dask array only: the values are logits.
    multilabel : bool, default False
        Multi-label rows: ``(N, K)`` values with ``(N, K)`` multi-hot labels (a DataFrame: a
        ``labels`` list per row).

    Returns
    -------
    list of dask.delayed.Delayed

    Raises
    ------
    ValueError
        On another type of ``data``, ``labels`` with a DataFrame, or mismatched shapes.
    """
    import dask.array as da
    import dask.dataframe as dd

    if isinstance(data, da.Array):
        return _array_partitions(data, labels, from_logits, multilabel)
    if not isinstance(data, (str, bytes, dd.DataFrame)) and not hasattr(data, "__fspath__"):
        raise ValueError(
            f"`data` must be a Dask array, a Dask DataFrame or a Parquet path/glob, got {type(data).__name__} "
            "(for arrays in memory use calibkit.calibration_report)"
        )
    if labels is not None:
        raise ValueError("`labels` goes with a Dask array; a DataFrame or Parquet path holds its own `labels` column")
    if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__"):
        data = dd.read_parquet(_parquet_files(str(data)), dtype_backend="pyarrow")
    if isinstance(data, dd.DataFrame):
        return _frame_partitions(data, multilabel)
    raise ValueError(f"`data` must be a Dask array, a Dask DataFrame or a Parquet path/glob, got {type(data).__name__}")


def calibration_report(
    data: Any,
    labels: Any = None,
    *,
    metrics: Iterable[str] | str | None = None,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    n_bins: int = UNSET.n_bins,
    ace_ranges: int = UNSET.ace_ranges,
    sce_bins: int = UNSET.sce_bins,
    rbece_bins: int = UNSET.rbece_bins,
    theta: float = UNSET.theta,
    fce_bins: int = UNSET.fce_bins,
    esce_bins: int = UNSET.esce_bins,
    eps: float = UNSET.eps,
    fce_variant: str = UNSET.fce_variant,
    coverage: float = UNSET.coverage,
    multilabel: bool = UNSET.multilabel,
    next_token: bool = UNSET.next_token,
    max_samples: int = 4_000_000,
    split_every: int = SPLIT_EVERY,
    scheduler: str | None = None,
    settings: CalibrationSettings | None = None,
) -> dict[str, Any]:
    """:func:`calibkit.calibration_report` over a Dask collection, computed where the data is.

    Parameters
    ----------
    data : dask.array.Array, dask.dataframe.DataFrame or str
        Probabilities or logits ``(N, K)``, ``(N,)`` (binary) or ``(N, L, K)`` (tokens) as a
        Dask array, with ``labels``; or a Dask DataFrame, or a path/glob of Parquet shards, with
        the schema of ``calibkit report --predictions`` (see :func:`partitions`).
    labels : dask.array.Array, optional
        ``(N,)`` or ``(N, L)`` integer labels, ``ignore_index`` for positions to skip.
    metrics, ignore_index, n_bins, ace_ranges, sce_bins, rbece_bins, theta, fce_bins, esce_bins, eps
        As in :class:`~calibkit.CalibrationAccumulator`.
    from_logits : bool, default False
        For a Dask array: the values are logits. A DataFrame says it by its column name.
    fce_variant : {"paper", "authors"}, default "paper"
        As in :func:`calibkit.fce`.
    coverage : float, default 0.8
        Of the selective accuracy (asked for by name; from the buckets, within its
        ``selective_accuracy_error_bound``).
    multilabel : bool, default False
        Multi-label input (see :func:`partitions`): the result is
        :func:`calibkit.multilabel_report`'s, ACE per label within its bound (one pass).
    next_token : bool, default False
        Causal-LM sequences: ``(N, T, V)`` logits with ``(N, T)`` labels (unshifted) as a Dask
        array, or a DataFrame of one sequence per row (token lists), scored at ``t`` against the
        label at ``t + 1`` (see :func:`calibkit.calibration_report`).
    max_samples : int, default 4,000,000
        Exact ACE's gather budget (``ExactACE``).
    split_every : int, default 8
        Inputs per node of the reduction trees.
    scheduler : str, optional
        Passed to ``dask.compute`` (default: the active one).
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords (not both). Its ``from_logits``
        is used for a Dask array; a DataFrame says it by its column name.

    Returns
    -------
    dict
        As :func:`calibkit.calibration_report` (``ace_error_bound`` 0: ACE is exact), plus
        ``"passes"`` (how often the data was read) and ``"partitions"``.
    """
    import dask

    from calibkit.metrics.validation import check_positive_int

    split_every = check_positive_int(split_every, "split_every")
    check_positive_int(max_samples, "max_samples")  # before any partition is read, whatever the metrics
    if split_every < 2:
        raise ValueError(f"`split_every` must be at least 2, got {split_every}")
    settings = resolve_settings(settings, **settings_keywords(locals()))
    # every setting checked here, before the cluster works
    wanted = CalibrationAccumulator(metrics, settings=settings).metrics
    parts = partitions(data, labels, from_logits=settings.from_logits, multilabel=settings.multilabel)
    if not parts:
        raise ValueError("`data` has no partition")
    accumulate = [dask.delayed(_accumulate, pure=True)(p, wanted, settings, i) for i, p in enumerate(parts)]
    try:
        (merged,) = dask.compute(_tree(accumulate, _merge_accumulators, split_every), scheduler=scheduler)
    except PartitionError as exc:
        offset = exc.offset
        if offset is None:  # a DataFrame's partition sizes are known only once read: count those before it
            offset = sum(dask.compute(*[dask.delayed(_rows)(p) for p in parts[: exc.partition]], scheduler=scheduler))
        raise ValueError(str(PartitionError(exc.head, exc.tail, exc.partition, exc.row, exc.token, offset))) from None
    acc = None if merged is None else merged[1]
    stats = None if acc is None else acc.statistics
    counted = 0 if stats is None else (sum(s.n for s in stats) if isinstance(stats, list) else stats.n)
    if counted == 0:
        raise ValueError(
            "`labels`: no labelled prediction in any partition (every label equals "
            f"ignore_index={settings.ignore_index}, or the partitions are empty)"
        )
    passes, partials = 1, None
    if "ace" in wanted and not settings.multilabel:  # multi-label: ACE per label within its bound
        exact = ExactACE(acc, max_samples=max_samples)
        while not exact.done:
            shared = dask.delayed(exact, pure=True)  # one copy in the graph, not one per task
            tasks = [dask.delayed(_contribution, pure=True)(p, shared) for p in parts]
            (total,) = dask.compute(_tree(tasks, _add_contributions, split_every), scheduler=scheduler)
            exact.add(total)
            exact.end_pass()
            passes += 1
        partials = exact.partials()
    return {**acc.compute(ace_partials=partials), "passes": passes, "partitions": len(parts)}
