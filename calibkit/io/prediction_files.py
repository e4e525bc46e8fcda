"""Read saved predictions for ``calibkit report --predictions`` (.npz, .parquet, .csv, .json, .jsonl).

What this module guarantees (README, "Bad input"):

- The file's float dtype is kept: float32 stays float32, float64 stays float64 (the files are read
  with numpy and pyarrow directly; ``datasets`` would turn float64 into float32).
- Nothing is renumbered, padded or dropped in silence. Wide CSV/Parquet columns must be exactly
  ``probs_0 .. probs_{K-1}`` (or ``logits_*``); a row of a list column whose length differs from
  the others, a token row whose logits and labels differ in length, and a null value are refused
  with the row number.
- A file that cannot be read (corrupt, truncated, bad CRC, random bytes, an ``.npz`` header that
  claims more than the file holds) is a ``ValueError`` in one line that starts with the Python
  argument it is about (``"`path`: "``, ``"`location`: "`` in :mod:`calibkit.io.shards`); the command line
  names its flag there (``calibkit.cli.common.name_flags``), a library caller another argument with
  ``for_option``.
- Memory: a file is read whole. Before reading, the arrays' size is compared with the memory
  available, and a file that does not fit is refused with the amount it needs; an ``.npz`` needs
  its arrays' size, a Parquet file about twice its uncompressed size, a CSV or JSON file about
  three times its size on disk while it is parsed.

Token-level rows (a list of per-token vectors and a list of labels per row) are returned
flattened to ``(tokens, K)`` and ``(tokens,)``: every metric treats tokens independently, so this
equals the ``(N, L, K)`` array padded with ``-100`` labels, without the padding's memory.
"""

from __future__ import annotations

import json
import re
import zipfile
import zlib
from pathlib import Path

import numpy as np

from calibkit.metrics.settings import DEFAULTS

__all__ = ["SUFFIXES", "load_predictions"]

SUFFIXES = (".npz", ".parquet", ".csv", ".json", ".jsonl")
_WIDE = re.compile(r"^(probs|logits)_(0|[1-9][0-9]*)$")


def one_line(exc: BaseException, limit: int = 200) -> str:
    """Return an exception's first line, printable (a parser may quote the random bytes it choked on).

    Parameters
    ----------
    exc : BaseException
        The exception.
    limit : int, default 200
        Characters kept; longer lines end in `` ...``.

    Returns
    -------
    str
        ASCII: other characters are backslash-escaped.
    """
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = text.encode("ascii", "backslashreplace").decode("ascii")
    return text if len(text) <= limit else text[:limit] + " ..."


ARGUMENTS = ("path", "location")
"""The Python arguments that the readers' messages open with: ``load_predictions(path)``,
``stream_report(location)`` (:mod:`calibkit.io.shards`)."""


def for_option(message: str, option: str) -> str:
    """Put ``option`` where a reader's message names its Python argument (``"`path`: ..."``).

    The readers are library functions, so their errors name their arguments; a command line
    that passed its option's value as that argument calls this to name the option instead.

    Parameters
    ----------
    message : str
        A reader's error message.
    option : str
        What to name instead (``"--predictions"``).

    Returns
    -------
    str
        ``message`` with its leading ``"`path`: "`` or ``"`location`: "`` replaced by
        ``"<option>: "``; unchanged when it opens with neither.

    Examples
    --------
    >>> for_option("`path`: no such file: a.npz", "--predictions")
    '--predictions: no such file: a.npz'
    """
    for argument in ARGUMENTS:
        if message.startswith(f"`{argument}`: "):
            return f"{option}: {message[len(argument) + 4 :]}"
    return message


def available_memory() -> int | None:
    """Return the bytes of memory available to a new allocation (``MemAvailable``), or None if unknown.

    Returns
    -------
    int or None
    """
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # noqa: BLE001 - psutil missing or unsupported: no check rather than a crash
        return None


def check_fits_in_memory(needed: int, what: str) -> None:
    """Refuse, before reading, what cannot fit: a MemoryError halfway through helps nobody.

    Parameters
    ----------
    needed : int
        Bytes the load needs.
    what : str
        Start of the error message (``"`path`: <file>"``).

    Raises
    ------
    ValueError
        When ``needed`` exceeds the memory available.
    """
    available = available_memory()
    if available is not None and needed > available:
        raise ValueError(
            f"{what} needs about {needed / 2**30:.2f} GiB of memory to load, and {available / 2**30:.2f} GiB "
            "are available"
        )


def load_predictions(path: str | Path, multilabel: bool = DEFAULTS.multilabel) -> tuple[np.ndarray, np.ndarray, bool]:
    """Predictions, labels and whether the predictions are logits, from a saved file.

    Parameters
    ----------
    path : str or Path
        ``.npz`` with arrays ``probs`` or ``logits`` and ``labels``; or ``.parquet``, ``.csv``,
        ``.json`` (JSON Lines, a list of records, or a dict of columns) or ``.jsonl`` with a
        ``labels`` column and either a ``probs``/``logits`` column (a vector per row, or a list
        of per-token vectors per row with a list of labels) or the wide columns
        ``probs_0 .. probs_{K-1}`` (``logits_*``).
    multilabel : bool, default False
        Multi-label rows: a value per label and a multi-hot ``labels`` list per row (``.npz``:
        ``(N, K)`` arrays of both).

    Returns
    -------
    values : ndarray
        ``(N, K)``, ``(N,)`` or ``(N, L, K)`` (``.npz``), token rows flattened to ``(T, K)``.
    labels : ndarray
    from_logits : bool
        True when the values are logits (``probs`` wins where both are present).

    Raises
    ------
    ValueError
        One line starting ``"`path`: "`` (see ``for_option``), naming the file and the column,
        when the file cannot be used as is.
    """
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"`path`: no such file: {path}")
    suffix = file.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"`path`: expected .npz, .parquet, .csv, .json or .jsonl, got {path}")
    if suffix == ".npz":
        return read_npz(file)
    return from_arrow_table(read_table(file), str(path), multilabel)


# ----------------------------------------------------------------------------------------------
# .npz


def npz_header(archive: zipfile.ZipFile, member: str) -> tuple[tuple[int, ...], np.dtype]:
    """Read the shape and dtype of an ``.npz`` member from its header, without reading its data.

    Parameters
    ----------
    archive : zipfile.ZipFile
        The open ``.npz``.
    member : str
        The member's name (``"labels.npy"``).

    Returns
    -------
    shape : tuple of int
    dtype : numpy.dtype
    """
    with archive.open(member) as fp:
        version = np.lib.format.read_magic(fp)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(fp)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(fp)
    return tuple(int(s) for s in shape), np.dtype(dtype)


def read_npz(file: Path) -> tuple[np.ndarray, np.ndarray, bool]:
    """Read ``probs`` or ``logits`` and ``labels`` from an ``.npz`` file, after checking its headers.

    Headers are checked first: a claimed size larger than the member, Python objects (never
    unpickled) and more memory than available are refused before any data is read.

    Parameters
    ----------
    file : Path
        The ``.npz`` file.

    Returns
    -------
    values : ndarray
        ``probs`` (preferred) or ``logits``, dtype and shape as saved.
    labels : ndarray
    from_logits : bool
        True when the values are logits.

    Raises
    ------
    ValueError
        One line starting ``"`path`: "`` and naming the file, when it cannot be used as is.
    """
    what = f"`path`: {file}"
    try:
        archive = zipfile.ZipFile(file)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
        raise ValueError(f"{what} is not a readable .npz file ({one_line(exc)})") from None
    with archive:
        members = {name.removesuffix(".npy"): name for name in archive.namelist()}
        if "labels" not in members or not members.keys() & {"probs", "logits"}:
            raise ValueError(f"{what} needs arrays `labels` and `probs` or `logits`; it has {sorted(members)}")
        kind = "probs" if "probs" in members else "logits"
        try:
            headers = {key: npz_header(archive, members[key]) for key in (kind, "labels")}
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error) as exc:
            raise ValueError(f"{what} is damaged: its array headers cannot be read ({one_line(exc)})") from None
        needed = 0
        for key, (shape, dtype) in headers.items():
            if dtype.hasobject:  # would need pickle: never unpickle a user's file
                raise ValueError(f"{what}: `{key}` holds Python objects (dtype {dtype}); save numeric arrays")
            nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if nbytes > archive.getinfo(members[key]).file_size:
                raise ValueError(
                    f"{what} is corrupt: the header of `{key}` claims shape {shape} ({nbytes} bytes) but the "
                    f"file holds {archive.getinfo(members[key]).file_size} bytes for it"
                )
            needed += nbytes
        check_fits_in_memory(needed, what)
        arrays = {}
        for key in (kind, "labels"):
            try:
                with archive.open(members[key]) as fp:
                    arrays[key] = np.lib.format.read_array(fp, allow_pickle=False)
            except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error) as exc:
                raise ValueError(f"{what} is damaged: `{key}` cannot be read ({one_line(exc)})") from None
    return arrays[kind], arrays["labels"], kind == "logits"


# ----------------------------------------------------------------------------------------------
# Tables: Parquet, CSV, JSON


def parquet_columns(file: Path) -> set[str] | None:
    """Return the column names of a Parquet file from its schema alone, None when it is no Parquet.

    For the readers that tell a file's kind from its columns (multiple-choice logs, generations):
    a file that is not Parquet after all is for the other readers to explain.

    Parameters
    ----------
    file : Path

    Returns
    -------
    set of str or None
    """
    import pyarrow.parquet as pq

    try:
        return set(pq.read_schema(file).names)
    except Exception:  # noqa: BLE001 - any failure to read a schema means: not a Parquet file we can read
        return None


def read_table(file: Path, option: str = "`path`"):
    """Read a ``.parquet``, ``.csv``, ``.json`` or ``.jsonl`` file whole as a ``pyarrow.Table``.

    Parameters
    ----------
    file : Path
        The file; its suffix says the format.
    option : str, default "`path`"
        The argument (or command-line option) the messages name.

    Returns
    -------
    pyarrow.Table

    Raises
    ------
    ValueError
        One line naming ``option`` and the file, when it cannot be read or would not fit in
        memory.
    """
    import pyarrow as pa

    suffix = file.suffix.lower()
    what = f"{option}: {file}"
    try:
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            parquet = pq.ParquetFile(file)
            size = sum(parquet.metadata.row_group(i).total_byte_size for i in range(parquet.metadata.num_row_groups))
            check_fits_in_memory(2 * size, what)
            return parquet.read()
        check_fits_in_memory(3 * file.stat().st_size, what)
        if suffix == ".csv":
            import pyarrow.csv

            return pyarrow.csv.read_csv(file)
        import pyarrow.json

        try:
            return pyarrow.json.read_json(file)  # JSON Lines
        except pa.ArrowInvalid:
            if suffix == ".jsonl":
                raise
        data = json.loads(file.read_text(encoding="utf-8"))  # one JSON document: records or columns
        if isinstance(data, list) and all(isinstance(row, dict) for row in data):
            return pa.Table.from_pylist(data)
        if isinstance(data, dict) and all(isinstance(col, list) for col in data.values()):
            return pa.Table.from_pydict(data)
        raise ValueError("expected JSON Lines, a list of records or a dict of columns")
    except (pa.ArrowException, OSError, ValueError, UnicodeDecodeError) as exc:
        if str(exc).startswith(what):
            raise
        kind = {".parquet": "Parquet", ".csv": "CSV"}.get(suffix, "JSON")
        raise ValueError(f"{what} cannot be read as {kind}: {one_line(exc)}") from None


def row_of_value(
    index: int, labels: np.ndarray, table=None, multilabel: bool = DEFAULTS.multilabel
) -> tuple[int, int | None]:
    """Return the row (and the token within it) of the ``index``-th value row of a batch read from a file.

    Parameters
    ----------
    index : int
        A flat row of the prepared input (tokens flattened), as
        ``InputError`` carries it.
    labels : ndarray
        The batch's labels: ``(N, L)`` for token rows as an ``.npz`` or Dask array holds them.
    table : pyarrow.Table, optional
        The table given to :func:`from_arrow_table`, whose token rows (a list of labels per row)
        it flattened.
    multilabel : bool, default False
        The batch holds multi-label rows: ``index`` is the row (each label is read on its own).

    Returns
    -------
    row : int
    token : int or None
        The token within the row, for token rows; None otherwise.
    """
    if multilabel:
        return index, None
    if table is None:
        return divmod(index, labels.shape[1]) if labels.ndim == 2 else (index, None)
    import pyarrow.compute as pc

    column = table.column("labels")
    if not _is_list(column.type):
        return index, None
    lengths = pc.list_value_length(column.combine_chunks()).fill_null(0).to_numpy(zero_copy_only=False)
    ends = np.cumsum(lengths)
    row = int(np.searchsorted(ends, index, side="right"))
    return row, index - int(ends[row] - lengths[row])


def as_next_token_input(values: np.ndarray, labels: np.ndarray, table, ignore_index: int, where: str):
    """Return a batch as ``next_token=True`` reads it: ``(N, T, V)`` values with ``(N, T)`` labels.

    An ``.npz`` shard or a Dask array block keeps its sequences, ``(N, T, V)``, and is returned
    as it is. A table's token rows (a list of per-token vectors per row) were flattened: they are
    read as one sequence ``(1, tokens, V)`` whose labels at the first token of each row are set
    to ``ignore_index``, so that shifting by one never scores a row's last token against the
    next row's first label; the first token's label is one that nothing predicts anyway. The
    flat token index, by which errors find their row, is unchanged.

    Parameters
    ----------
    values : ndarray
        The batch's values: ``(N, T, V)``, or ``(tokens, V)`` flattened from ``table``.
    labels : ndarray
        The matching labels, ``(N, T)`` or ``(tokens,)``.
    table : pyarrow.Table or None
        The table the token rows were flattened from (None for arrays).
    ignore_index : int
        The label of positions to skip.
    where : str
        The file or partition, for the error message.

    Returns
    -------
    values, labels : ndarray

    Raises
    ------
    ValueError
        When the batch holds one vector per row (sequence classification) instead of tokens.
    """
    if values.ndim == 3:
        return values, labels
    column = None if table is None else table.column("labels")
    if column is None or not _is_list(column.type):
        raise ValueError(
            f"{where}: next_token=True reads token rows (a list of per-token vectors and a list of labels per row, "
            f"or (N, T, V) arrays); this holds one vector per row, shape {values.shape}"
        )
    import pyarrow.compute as pc

    lengths = pc.list_value_length(column.combine_chunks()).fill_null(0).to_numpy(zero_copy_only=False)
    starts = (np.cumsum(lengths) - lengths)[lengths > 0]
    joined = np.array(labels, dtype=np.int64, copy=True)
    joined[starts] = ignore_index
    return values[None], joined[None]


def _is_list(arrow_type) -> bool:
    import pyarrow as pa

    return pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type)


def _numbers(array, column: str, path: str) -> np.ndarray:
    """Return a flat pyarrow array of numbers as numpy, dtype kept; nulls and non-numbers refused."""
    import pyarrow as pa

    if array.null_count:
        first = int(np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False))[0])
        raise ValueError(f"`path`: {path}: `{column}` has a null value (at its value {first})")
    if not (pa.types.is_floating(array.type) or pa.types.is_integer(array.type) or pa.types.is_boolean(array.type)):
        where = ""
        if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            # the file is refused anyway: find the first value that is no number, to name its row
            row = next((i for i, v in enumerate(array.to_pylist()) if not _is_number(v)), None)
            where = f" ({array[row].as_py()!r} in row {row})" if row is not None else ""
        raise ValueError(f"`path`: {path}: `{column}` must hold numbers, it holds {array.type}{where}")
    return array.to_numpy(zero_copy_only=False)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


def _lengths(column, name: str, path: str) -> np.ndarray:
    import pyarrow.compute as pc

    if column.null_count:
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise ValueError(f"`path`: {path}: `{name}` is null in row {row}")
    return pc.list_value_length(column).to_numpy(zero_copy_only=False).astype(np.int64)


def from_arrow_table(table, path: str, multilabel: bool = DEFAULTS.multilabel) -> tuple[np.ndarray, np.ndarray, bool]:
    """Turn a table of predictions (Parquet, CSV, JSON or a shard's batch) into arrays.

    Parameters
    ----------
    table : pyarrow.Table
        A ``labels`` column and a ``probs`` or ``logits`` list column (one vector per row, or a
        list of per-token vectors per row with a list of labels), or the wide columns
        ``probs_0 .. probs_{K-1}`` (``logits_*``).
    path : str
        Where the table comes from, for error messages.
    multilabel : bool, default False
        Multi-label rows: ``probs``/``logits`` one value per label and ``labels`` a multi-hot
        list per row, both of ``K`` values (never guessed from the table: a list of labels per
        row without it is read as token labels).

    Returns
    -------
    values : ndarray
        ``(N, K)``, token rows flattened to ``(T, K)``; the column's float dtype kept.
    labels : ndarray
    from_logits : bool
        True when the values are logits (``probs`` wins where both are present).

    Raises
    ------
    ValueError
        One line starting ``"`path`: "`` and naming the column or row, when the table cannot be used as
        is.
    """
    names = table.column_names
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"`path`: {path}: the header repeats the column(s) {repeated}; every column once")
    columns = table.column_names
    if "labels" not in columns:
        raise ValueError(f"`path`: {path} needs a `labels` column; it has {columns}")
    table = table.combine_chunks()
    labels_column = table.column("labels").combine_chunks()
    for kind in ("probs", "logits"):
        if kind in columns:
            column = table.column(kind).combine_chunks()
            if not _is_list(column.type):
                raise ValueError(
                    f"`path`: {path}: `{kind}` must hold a list of numbers per row (or per token); it holds "
                    f"{column.type} (wide files name their columns {kind}_0 .. {kind}_{{K-1}})"
                )
            if multilabel:
                values, labels = _multilabel_rows(column, labels_column, kind, path)
            elif _is_list(column.type.value_type):
                values, labels = _token_rows(column, labels_column, kind, path)
            else:
                values, labels = _sequence_rows(column, labels_column, kind, path)
            return values, labels, kind == "logits"
    if multilabel:
        raise ValueError(f"`path`: {path}: multi-label rows need a `probs` or `logits` list column")
    values, kind = _wide_columns(table, path)
    if _is_list(labels_column.type):
        raise ValueError(f"`path`: {path}: `labels` holds a list per row but `{kind}_*` one value per column")
    return values, _numbers(labels_column, "labels", path), kind == "logits"


def _sequence_rows(column, labels_column, kind: str, path: str) -> tuple[np.ndarray, np.ndarray]:
    if _is_list(labels_column.type):
        raise ValueError(
            f"`path`: {path}: `labels` holds a list per row (token labels) but `{kind}` one vector per row"
            "; for multi-hot labels of a multi-label head, pass multilabel=True"
        )
    return _vector_rows(column, kind, path), _numbers(labels_column, "labels", path)


def _vector_rows(column, kind: str, path: str) -> np.ndarray:
    """One vector per row, all of one length: ``(N, K)``."""
    import pyarrow.compute as pc

    lengths = _lengths(column, kind, path)
    if lengths.size and (lengths != lengths[0]).any():
        row = int(np.flatnonzero(lengths != lengths[0])[0])
        raise ValueError(
            f"`path`: {path}: `{kind}` has {lengths[row]} values in row {row} but {lengths[0]} in row 0; "
            "every row needs one value per class"
        )
    flat = _numbers(pc.list_flatten(column), kind, path)
    k = int(lengths[0]) if lengths.size else 0
    return flat.reshape(lengths.size, k)


def _multilabel_rows(column, labels_column, kind: str, path: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows of a multi-label head: one value and one 0/1 label per label, ``(N, K)`` each."""
    import pyarrow.compute as pc

    if _is_list(column.type.value_type) or not _is_list(labels_column.type):
        raise ValueError(
            f"`path`: {path}: multi-label rows need `{kind}` with one value per label and `labels` a "
            f"multi-hot list per row; they hold {column.type} and {labels_column.type}"
        )
    values = _vector_rows(column, kind, path)
    counts = _lengths(labels_column, "labels", path)
    bad = np.flatnonzero(counts != values.shape[1])
    if bad.size:
        row = int(bad[0])
        raise ValueError(
            f"`path`: {path}: row {row} has {counts[row]} labels but {values.shape[1]} `{kind}` values; "
            "a multi-label row needs one 0/1 label per value"
        )
    labels = _numbers(pc.list_flatten(labels_column), "labels", path).reshape(values.shape)
    return values, labels


def _token_rows(column, labels_column, kind: str, path: str) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow.compute as pc

    if not _is_list(labels_column.type):
        raise ValueError(
            f"`path`: {path}: `{kind}` holds a list of per-token vectors per row, so `labels` must hold a "
            f"list of token labels per row; it holds {labels_column.type}"
        )
    tokens = _lengths(column, kind, path)
    label_counts = _lengths(labels_column, "labels", path)
    if (tokens != label_counts).any():
        row = int(np.flatnonzero(tokens != label_counts)[0])
        raise ValueError(
            f"`path`: {path}: row {row} has {tokens[row]} `{kind}` vectors but {label_counts[row]} labels; "
            "every token needs one vector and one label (pad with label -100)"
        )
    per_token = pc.list_flatten(column)
    classes = _lengths(per_token, kind, path)
    if classes.size and (classes != classes[0]).any():
        token = int(np.flatnonzero(classes != classes[0])[0])
        row = int(np.searchsorted(np.cumsum(tokens), token, side="right"))
        first_row = int(np.searchsorted(np.cumsum(tokens), 0, side="right"))
        raise ValueError(
            f"`path`: {path}: row {row} has a token with {classes[token]} classes but row {first_row} has "
            f"{classes[0]}; every token vector needs one value per class"
        )
    flat = _numbers(pc.list_flatten(per_token), kind, path)
    k = int(classes[0]) if classes.size else 0
    return flat.reshape(classes.size, k), _numbers(pc.list_flatten(labels_column), "labels", path)


def _wide_columns(table, path: str) -> tuple[np.ndarray, str]:
    """``probs_0 .. probs_{K-1}`` (or ``logits_*``): exactly those, in any order, nothing missing."""
    found: dict[str, dict[int, str]] = {"probs": {}, "logits": {}}
    for name in table.column_names:
        match = _WIDE.match(name)
        if match:
            found[match.group(1)][int(match.group(2))] = name
        elif name.startswith(("probs_", "logits_")):
            raise ValueError(
                f"`path`: {path}: column {name!r} is not of the form probs_<k> or logits_<k> (k = 0, 1, ...)"
            )
    kinds = [kind for kind in ("probs", "logits") if found[kind]]
    if not kinds:
        raise ValueError(
            f"`path`: {path} needs a `probs` or `logits` column, or probs_0 .. probs_{{K-1}} (logits_*); "
            f"it has {table.column_names}"
        )
    if len(kinds) == 2:
        raise ValueError(f"`path`: {path} has both probs_* and logits_* columns; keep one kind")
    kind = kinds[0]
    indices = sorted(found[kind])
    if indices != list(range(len(indices))):
        missing = sorted(set(range(max(indices) + 1)) - set(indices))
        raise ValueError(
            f"`path`: {path}: the {kind}_* columns must be {kind}_0 .. {kind}_{{K-1}}; "
            f"{', '.join(f'{kind}_{k}' for k in missing[:5])} missing (columns are never renumbered)"
        )
    arrays = [_numbers(table.column(found[kind][k]).combine_chunks(), found[kind][k], path) for k in indices]
    dtype = np.result_type(*arrays) if arrays else np.float64
    dtype = dtype if dtype.kind == "f" else np.float64
    return np.stack([a.astype(dtype, copy=False) for a in arrays], axis=1), kind
