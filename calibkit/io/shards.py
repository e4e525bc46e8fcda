"""Predictions that do not fit in memory: stream shards through the accumulator.

``calibkit report --predictions DIR_OR_GLOB`` and :func:`stream_report` read a folder (searched
recursively) or a glob of ``.parquet``, ``.npz`` and ``.jsonl`` shards, in sorted order, a record
batch at a time, through a :class:`~calibkit.CalibrationAccumulator`: memory
holds one batch and the per-bin sums, whatever the total size. Every metric but ACE needs one
pass; ACE's equal-mass ranges need the order of each class column over all the data, so it reads
the shards again (``ExactACE``: one more pass on ordinary
data, two on a peaked column) and is then exact. The result equals
:func:`calibkit.calibration_report` on the concatenated shards (to rounding, ~1e-14).

Each shard has the schema of a single ``--predictions`` file (:mod:`calibkit.io.prediction_files`):
a ``labels`` column and a ``probs`` or ``logits`` list column (one vector per row, or a list of
per-token vectors per row with a list of labels, ``-100`` for padding), or the wide columns
``probs_0 .. probs_{K-1}``. Parquet shards are read a record batch at a time (about
``batch_bytes`` of uncompressed data); ``.jsonl`` shards a block at a time; an ``.npz`` shard is
read whole (its arrays cannot be read in parts from the zip), one shard at a time.
"""

from __future__ import annotations

import glob
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from calibkit.io.prediction_files import (
    as_next_token_input,
    for_option,
    from_arrow_table,
    npz_header,
    one_line,
    read_npz,
    read_table,
    row_of_value,
)
from calibkit.metrics.settings import DEFAULTS, UNSET, CalibrationSettings, resolve_settings, settings_keywords
from calibkit.metrics.validation import InputError

__all__ = ["Batch", "SHARD_SUFFIXES", "find_shards", "iter_batches", "stream_report"]

SHARD_SUFFIXES = (".parquet", ".npz", ".jsonl")
BATCH_BYTES = 8 * 2**20  # per-batch working memory is about 30x this (Arrow buffers, conversions, kernel blocks)


def is_shard_location(location: str | os.PathLike) -> bool:
    """Tell whether ``location`` is a folder or a glob pattern (not a single file): the streaming path.

    Parameters
    ----------
    location : str or path-like
        The ``--predictions`` argument.

    Returns
    -------
    bool
    """
    location = os.fspath(location)
    return Path(location).is_dir() or glob.has_magic(location)


WHOLE_FILE_SUFFIXES = (".json", ".csv")
"""Prediction files read whole (as ``--predictions FILE`` reads them), one at a time, when found among
shards; a file of these suffixes that holds no predictions (a ``report.json``) is skipped and counted."""


def _holds_predictions(file: Path) -> bool:
    """Tell from its first 64 kB whether a ``.json``/``.csv`` file has ``labels`` and ``probs``/``logits`` columns."""
    with open(file, encoding="utf-8", errors="replace") as handle:
        head = handle.read(65536)
    if file.suffix.lower() == ".csv":
        columns = [c.strip().strip('"') for c in head.split("\n", 1)[0].split(",")]
        return "labels" in columns and any(c.startswith(("probs", "logits")) for c in columns)
    return '"labels"' in head and ('"probs' in head or '"logits' in head)


def _glob(pattern: str) -> list[Path]:
    """Return the paths matching ``pattern``; ``**`` spans folders, each real folder entered once.

    :func:`glob.glob` follows every link again under ``**``, so a link loop multiplies the paths
    (and two loops never end); here links are followed but a folder already entered is not.
    """
    if "**" not in pattern:
        return [Path(p) for p in sorted(glob.glob(pattern))]
    parts = Path(pattern).parts
    fixed = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    base = Path(*parts[:fixed]) if fixed else Path(".")
    regex = re.compile(_translate(parts[fixed:]))
    found, entered = [], set()
    for folder, dirs, names in os.walk(base, followlinks=True):
        real = Path(folder).resolve()
        if real in entered:
            dirs[:] = []
            continue
        entered.add(real)
        dirs.sort()  # the same path for a file reached two ways, on every run
        for name in sorted(dirs + names):
            path = Path(folder) / name
            if regex.fullmatch(path.relative_to(base).as_posix()):
                found.append(path)
    return sorted(found)


def _translate(parts: tuple[str, ...]) -> str:
    """Return a regular expression for relative paths matching glob ``parts`` (``**`` spans folders)."""
    pieces = []
    for part in parts:
        if part == "**":
            pieces.append("(?:[^/]+/)*")
            continue
        out = ""
        for ch in part:
            out += "[^/]*" if ch == "*" else "[^/]" if ch == "?" else re.escape(ch)
        pieces.append(out + "/")
    return "".join(pieces)[:-1] if not parts[-1] == "**" else "".join(pieces) + "[^/]+"


def find_shards(location: str | os.PathLike) -> tuple[list[Path], dict[str, list[Path]]]:
    """Find the shards of a folder (recursively) or a glob, each file once, and what was skipped.

    Links are followed, but every file is read once, by its resolved path (a ``latest -> run1``
    link does not double the data), and a folder already entered is not entered again (a link
    loop ends). A folder matched by a glob (Spark's ``b.parquet/`` of part files) is searched
    like a folder. ``.json`` and ``.csv`` prediction files are shards read whole; files that are
    no prediction file (Spark's ``_SUCCESS``, ``.crc``, a ``report.json``) are skipped and
    counted; a glob match that is no prediction file, or a broken link to one, is an error
    naming it.

    Parameters
    ----------
    location : str or path-like
        A folder, a glob pattern, or one file.

    Returns
    -------
    files : list of Path
        The shards, sorted.
    skipped : dict of str to list of Path
        Per reason (``"not a prediction file"``, ``"a link to a file already read"``,
        ``"a broken link"``), the paths left out.

    Raises
    ------
    ValueError
        When there is no shard, a glob matches a file that is no prediction file, or a
        prediction file's link is broken.
    """
    location = os.fspath(location)  # a pathlib.Path reads as its string
    path = Path(location)
    if glob.has_magic(location):
        roots = _glob(location)
    elif path.is_dir():
        roots = [path]
    elif path.is_file():
        return [path], {}
    elif path.is_symlink():
        raise ValueError(f"`location`: {location} is a link to {os.readlink(path)}, which does not exist")
    else:
        raise ValueError(f"`location`: no such file, folder or glob match: {location}")
    files: dict[Path, Path] = {}  # resolved -> as found
    skipped: dict[str, list[Path]] = {}
    entered: set[Path] = set()

    def consider(p: Path, matched: bool) -> None:
        if p.is_symlink() and not p.exists():
            if p.suffix.lower() in SHARD_SUFFIXES + WHOLE_FILE_SUFFIXES:
                raise ValueError(f"`location`: {p} is a link to {os.readlink(p)}, which does not exist")
            skipped.setdefault("a broken link", []).append(p)
        elif p.is_dir():
            real = p.resolve()
            if real not in entered:  # a folder reached twice (a link to it, a link loop) is read once
                entered.add(real)
                for child in sorted(p.iterdir()):
                    consider(child, False)
        elif p.suffix.lower() in SHARD_SUFFIXES or (p.suffix.lower() in WHOLE_FILE_SUFFIXES and _holds_predictions(p)):
            real = p.resolve()
            if real not in files:
                files[real] = p
            elif files[real] != p:  # the same path matched twice (a folder and its files) is no news
                skipped.setdefault("a link to a file already read", []).append(p)
        elif matched:
            raise ValueError(
                f"`location`: {p} matches {location!r} but is not a prediction file (.parquet, .npz, .jsonl, "
                "or .json/.csv with labels and probs/logits)"
            )
        else:
            skipped.setdefault("not a prediction file", []).append(p)

    for root in roots:
        consider(root, True)
    if not files:
        raise ValueError(f"`location`: no .parquet, .npz or .jsonl shard in {location}")
    return sorted(files.values()), skipped


def shard_files(location: str) -> list[Path]:
    """List the shards of a folder (recursively) or a glob, sorted, each file once (:func:`find_shards`).

    Parameters
    ----------
    location : str or path-like
        A folder, a glob pattern, or one file.

    Returns
    -------
    list of Path

    Raises
    ------
    ValueError
        As :func:`find_shards`.
    """
    return find_shards(location)[0]


def skipped_note(skipped: dict[str, list[Any]]) -> str:
    """Say in one phrase how many files were left out and why (empty when none).

    Parameters
    ----------
    skipped : dict of str to list of Path or str
        From :func:`find_shards` (or :func:`stream_report`'s ``"skipped"``).

    Returns
    -------
    str
    """
    if not skipped:
        return ""
    notes = [f"{len(paths)} skipped ({reason}, e.g. {Path(paths[0]).name})" for reason, paths in skipped.items()]
    return "; ".join(notes)


def _parquet_batches(file: Path, batch_bytes: int) -> Iterator[tuple[Any, int]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(file)
        meta = parquet.metadata
        size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        rows = max(1, int(batch_bytes * max(meta.num_rows, 1) // max(size, 1)))
        offset = 0
        for batch in parquet.iter_batches(batch_size=rows):
            yield pa.Table.from_batches([batch]), offset
            offset += batch.num_rows
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"`location`: {file} cannot be read as Parquet: {one_line(exc)}") from None


def _jsonl_batches(file: Path, batch_bytes: int) -> Iterator[tuple[Any, int]]:
    import pyarrow as pa
    import pyarrow.json as pj

    try:
        if file.stat().st_size == 0:  # no row, as an empty Parquet or npz shard (distributed writers leave them)
            return
        options = pj.ReadOptions(block_size=min(batch_bytes, 2**30))
        reader = pj.open_json(file, read_options=options)
        schema = _floats_for_ints(reader.schema)
        if schema != reader.schema:
            # Types are inferred from the first block: `[1, 0, 0]` there and `0.25` later would fail
            # to convert; the whole-file reader infers from all rows, so numbers are read as floats.
            reader = pj.open_json(file, read_options=options, parse_options=pj.ParseOptions(explicit_schema=schema))
        offset = 0
        for batch in reader:
            yield pa.Table.from_batches([batch]), offset
            offset += batch.num_rows
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ValueError(f"`location`: {file} cannot be read as JSON Lines: {one_line(exc)}") from None


def _floats_for_ints(schema):
    """Return ``schema`` with integer values (also inside lists) of every column but ``labels`` as float64."""
    import pyarrow as pa

    def widen(arrow_type):
        if pa.types.is_integer(arrow_type):
            return pa.float64()
        if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
            return pa.list_(widen(arrow_type.value_type))
        return arrow_type

    return pa.schema([f if f.name == "labels" else f.with_type(widen(f.type)) for f in schema])


def _table_rows(file: Path) -> int | None:
    """Count the rows of a shard from its metadata, without reading it (None if unknown: JSON Lines)."""
    suffix = file.suffix.lower()
    try:
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            return pq.ParquetFile(file).metadata.num_rows
        if suffix == ".npz":
            import zipfile

            with zipfile.ZipFile(file) as archive:
                members = {name.removesuffix(".npy"): name for name in archive.namelist()}
                return npz_header(archive, members["labels"])[0][0]
    except Exception:  # noqa: BLE001 - an unreadable shard is reported, with its name, when it is read
        return None
    return None


class Batch(NamedTuple):
    """One batch of a shard, and where it lies: what :func:`iter_batches` yields.

    Parameters
    ----------
    values : ndarray
        Probabilities or logits: ``(rows, K)`` with token rows flattened; an ``.npz`` shard's
        array as saved (``(N,)``, ``(N, K)`` or ``(N, L, K)``).
    labels : ndarray
        The matching labels.
    from_logits : bool
        The values are logits.
    file : Path
        The shard.
    offset : int
        The shard's row where the batch starts.
    first_row : int
        The row of all shards (in order) where the batch starts.
    table : pyarrow.Table or None
        The batch as read (None for ``.npz``), to find the row of a flattened token.
    multilabel : bool, default False
        Multi-label rows (``values`` and ``labels`` ``(rows, K)``).
    """

    values: np.ndarray
    labels: np.ndarray
    from_logits: bool
    file: Path
    offset: int
    first_row: int
    table: Any
    multilabel: bool = DEFAULTS.multilabel

    def place(self, error: InputError) -> str:
        """Say where ``error``'s bad value is: the row of the shard and of all shards (and its token).

        Parameters
        ----------
        error : InputError
            Raised on this batch's values or labels.

        Returns
        -------
        str
            E.g. ``row 7 of s1.parquet (row 37 of all shards)``.
        """
        row, token = row_of_value(error.index, self.labels, self.table, self.multilabel)
        token_of = "" if token is None else f"token {token} of "
        if self.multilabel and isinstance(error.position, tuple):  # (row, label) of a label's column
            token_of = f"label {error.position[1]} of "
        return f"{token_of}row {self.offset + row} of {self.file} (row {self.first_row + row} of all shards)"

    def update(self, target: Any) -> None:
        """Call ``target.update(values, labels)``; an error says which shard and row it is about.

        Parameters
        ----------
        target : CalibrationAccumulator or ExactACE
            What reads the batch.

        Raises
        ------
        ValueError
            The target's error, placed in the shard.
        """
        values, labels = self.values, self.labels
        try:
            if target.next_token:  # token rows flattened from a table: one sequence, each row's start unscored
                values, labels = as_next_token_input(values, labels, self.table, target.ignore_index, str(self.file))
            target.update(values, labels)
        except InputError as exc:
            raise exc.at(self.place(exc)) from None
        except ValueError as exc:  # "earlier batches": here the shards read before this one
            message = str(exc).replace("earlier batches had", "the shards before it had")
            raise ValueError(f"`location`: {self.file} (rows from {self.offset}): {message}") from None


def iter_batches(
    files: list[Path], *, batch_bytes: int = BATCH_BYTES, progress: Any = None, multilabel: bool = DEFAULTS.multilabel
) -> Iterator[Batch]:
    """Read the shards batch by batch (token rows flattened).

    Every shard must hold the same kind (``probs`` or ``logits``).

    Parameters
    ----------
    files : list of Path
        The shards, from ``shard_files()``.
    batch_bytes : int, default BATCH_BYTES
        Uncompressed bytes a Parquet batch (or JSON block) holds; an ``.npz``, ``.json`` or
        ``.csv`` shard is one batch.
    progress : tqdm progress bar, optional
        Updated with the rows of each batch and the shards done.
    multilabel : bool, default False
        Read multi-label rows (``calibkit.io.prediction_files.from_arrow_table()``).

    Yields
    ------
    Batch

    Raises
    ------
    ValueError
        Naming the shard (and, for Parquet and JSON Lines, the first row of the batch) when it
        cannot be read or holds another kind than the first shard.
    """
    try:
        yield from _batches(files, batch_bytes, progress, multilabel)
    except ValueError as exc:  # a reader names its own argument (`path`): here the files are `location`'s
        message = for_option(str(exc), "`location`")
        if message == str(exc):
            raise
        raise ValueError(message) from None


def _batches(files: list[Path], batch_bytes: int, progress: Any, multilabel: bool) -> Iterator[Batch]:
    """Yield the batches of :func:`iter_batches`, with the readers' messages."""
    kind, first_row = None, 0
    for index, file in enumerate(files):
        suffix = file.suffix.lower()
        if suffix == ".npz":  # read whole, one file at a time
            batches = [(read_npz(file), 0)]
        elif suffix in WHOLE_FILE_SUFFIXES:
            batches = [(read_table(file), 0)]
        else:
            reader = _parquet_batches if suffix == ".parquet" else _jsonl_batches
            batches = reader(file, batch_bytes)
        for item, offset in batches:
            if isinstance(item, tuple):
                (values, labels, logits), table = item, None
                rows = labels.shape[0] if labels.ndim else 0
            else:
                table, rows = item, item.num_rows
                if rows == 0:  # an empty shard or row group: nothing to check or count
                    continue
                values, labels, logits = from_arrow_table(table, f"{file} (batch from row {offset})", multilabel)
            if kind is None:
                kind = logits
            elif logits != kind:
                names = ("probs", "logits")
                raise ValueError(
                    f"`location`: {file} holds {names[logits]} but {files[0]} holds {names[kind]}; "
                    "every shard must hold the same kind"
                )
            yield Batch(values, labels, logits, file, offset, first_row, table, multilabel)
            first_row += rows
            if progress is not None:
                progress.update(rows)
        if progress is not None:
            progress.set_postfix_str(f"shard {index + 1}/{len(files)}")


def stream_report(
    location: str,
    *,
    metrics: Any = None,
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
    num_threads: int | None = None,
    batch_bytes: int = BATCH_BYTES,
    max_samples: int = 4_000_000,
    exact_ace: bool = True,
    progress: bool = True,
    settings: CalibrationSettings | None = None,
    return_statistics: bool = False,
) -> dict[str, Any]:
    """Every metric of :func:`calibkit.calibration_report` over shards, in bounded memory.

    Parameters
    ----------
    location : str
        A folder (searched recursively), a glob (``'preds/*.parquet'``) or one shard.
    metrics, ignore_index, n_bins, ace_ranges, sce_bins, rbece_bins, theta, fce_bins, esce_bins, eps
        As in :class:`~calibkit.CalibrationAccumulator`.
    fce_variant, coverage, multilabel, next_token, num_threads
        As in :class:`~calibkit.CalibrationAccumulator`. Probabilities or
        logits are told apart by the column name (``probs``/``logits``). With ``next_token``
        each shard holds causal-LM sequences: ``(N, T, V)`` arrays in an ``.npz``, or one row per
        sequence with a list of per-token vectors and a list of labels (unshifted) in a table.
    batch_bytes : int, default 8 MiB
        Uncompressed bytes a Parquet batch (or JSON block) holds.
    max_samples : int, default 4,000,000
        ``ExactACE``'s gather budget.
    exact_ace : bool, default True
        Read the shards again until ACE is exact (``ace_error_bound`` 0). False: one pass, and
        ACE within its reported ``ace_error_bound`` (the accumulator's proportional split).
    progress : bool, default True
        A tqdm bar on stderr per pass: rows and shards done.
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords (not both). Its ``from_logits``
        is not used: each shard says it by its column name.
    return_statistics : bool, default False
        Also return the accumulated sums (``"statistics"``): what a reliability diagram of the
        shards is drawn from (``ReliabilityDiagram.from_statistics``), with no second read.

    Returns
    -------
    dict
        The report (as :func:`calibkit.calibration_report`; ``ace_error_bound`` 0 when exact) and
        ``"passes"``: how many times the shards were read; ``"shards"``: how many;
        ``"skipped"``: per reason, the files left out (:func:`find_shards`); with
        ``return_statistics``, ``"statistics"``: the accumulator's ``CalibrationStatistics`` (a
        list of one per label when multi-label).
    """
    from tqdm.auto import tqdm

    from calibkit.metrics.accumulator import CalibrationAccumulator
    from calibkit.metrics.exact_ace import ExactACE
    from calibkit.metrics.validation import check_bool, check_positive_int

    batch_bytes = check_positive_int(batch_bytes, "batch_bytes")
    check_positive_int(max_samples, "max_samples")  # every setting before any shard is read
    exact_ace = check_bool(exact_ace, "exact_ace")
    return_statistics = check_bool(return_statistics, "return_statistics")
    settings = resolve_settings(settings, **settings_keywords(locals()))
    # settings checked before any shard is read
    wanted = CalibrationAccumulator(metrics, settings=settings, num_threads=num_threads).metrics
    multilabel = settings.multilabel
    files, skipped = find_shards(location)
    counts = [_table_rows(f) for f in files]
    total = None if any(c is None for c in counts) else sum(counts)

    def bar(name: str):
        return tqdm(total=total, unit=" rows", unit_scale=True, desc=name, disable=not progress, file=sys.stderr)

    accumulators: dict[bool, CalibrationAccumulator] = {}
    with bar("pass 1 (all metrics)") as seen:
        for batch in iter_batches(files, batch_bytes=batch_bytes, progress=seen, multilabel=multilabel):
            if batch.from_logits not in accumulators:  # the kind is fixed by the first shard
                accumulators[batch.from_logits] = CalibrationAccumulator(
                    wanted, settings=settings.replace(from_logits=batch.from_logits), num_threads=num_threads
                )
            batch.update(accumulators[batch.from_logits])
    acc = next(iter(accumulators.values()), None)
    stats = None if acc is None else acc.statistics  # None: no shard held a row
    if isinstance(stats, list):  # multi-label: one statistics per label
        stats = None if sum(s.n for s in stats) == 0 else stats[0]
    if stats is None or (not multilabel and stats.n == 0):
        raise ValueError(
            f"`location`: {location}: no labelled prediction (empty shards, or every label equals "
            f"ignore_index={settings.ignore_index})"
        )
    passes, partials = 1, None
    if "ace" in wanted and exact_ace and not multilabel:  # multi-label: ACE per label within its bound
        exact = ExactACE(acc, max_samples=max_samples)
        while not exact.done:
            passes += 1
            with bar(f"pass {passes} (exact ACE)") as seen:
                for batch in iter_batches(files, batch_bytes=batch_bytes, progress=seen):
                    batch.update(exact)
            exact.end_pass()
        partials = exact.partials()
    out = {**acc.compute(ace_partials=partials), "passes": passes, "shards": len(files)}
    if return_statistics:
        out["statistics"] = acc.statistics
    return {**out, "skipped": {reason: [str(p) for p in paths] for reason, paths in skipped.items()}}
