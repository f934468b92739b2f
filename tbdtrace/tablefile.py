"""One table file of a trace directory: written as Parquet, read in every stored version.

Version 3 (what :func:`write` writes) keeps each table as ``<table>.parquet`` holding the
true values of every column, so DuckDB, Polars, pandas, Spark or ``pyarrow.parquet`` read
it as it is. Its size comes from what Parquet offers (docs/DECISIONS.md 62): rows in
time order (the caller sorts), the time and id columns ``DELTA_BINARY_PACKED`` (sorted
timestamps become small differences), every other column dictionary-encoded
(``RLE_DICTIONARY``, strings and small integer sets alike), zstd over the pages, and
the Arrow schema kept in the file so strings read back as ``dictionary<int32, string>``.

Versions 1 and 2 kept ``<table>.arrow`` (Arrow IPC). Version 2 stored some int64 columns
encoded under ``<column>.<encoding>`` fields (``delta``: difference from the previous
row; ``minus_start_ns``: ``end_ns - start_ns``); :func:`read_arrow` decodes them, so old
traces open unchanged and ``tbdtrace upgrade`` rewrites them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace import schema
from tbdtrace.arrow_ints import int_values
from tbdtrace.errors import TraceError

PARQUET_SUFFIX = ".parquet"  # version 3
ARROW_SUFFIX = ".arrow"  # versions 1 and 2
# zstd at level 3: level 9 saves 3-6% for 2x the write time (bench/README.md).
COMPRESSION: str | None = "zstd"
ZSTD_LEVEL = 3
# Rows per row group: one group for all but huge tables, so a column reads as one
# contiguous array (no copy to combine chunks).
ROW_GROUP_ROWS = 1 << 24
BOOL = pa.bool_()
ROWS_KEY = b"tbdtrace.rows"  # version 2: schema metadata of each IPC file, its row count


# Values the Parquet writer encodes at a time (its default: 1,024). Each batch pays a
# fixed cost (statistics, the page-size check); 8,192 writes the same bytes (a page ends
# after the batch that fills it: at most 8,192 values past its 1 MiB) for ~9% less CPU
# (docs/DECISIONS.md 243).
WRITE_BATCH_ROWS = 8192
WRITE_ID_KEY = b"tbdtrace.write_id"  # key-value metadata: the write the file belongs to
WRITE_BUFFER_BYTES = 1 << 20
# Rows per row group of a table written in batches (write_batches): what is held while
# a group is gathered. Reading combines a column's groups into one array.
STREAM_GROUP_ROWS = 1 << 20


def load_parquet() -> Any:
    """pyarrow's Parquet reader and writer (``pyarrow._parquet``, the extension module
    behind ``pyarrow.parquet``), imported on first use. ``pyarrow.parquet`` itself also
    loads pyarrow's file systems (S3, GCS, Azure, HDFS: ssl, sockets) to resolve paths
    and URIs, ~20 ms of every command that reads or writes a table file; a trace's files
    are local paths, which the reader and writer below open themselves
    (docs/DECISIONS.md 242)."""
    import pyarrow._parquet as pq_ext

    return pq_ext


# What pyarrow.parquet.ParquetWriter passes to the extension's writer besides the
# caller's options (its defaults): the same file, byte for byte, as pq.write_table.
_WRITER_DEFAULTS: dict[str, Any] = {
    "version": "2.6",
    "write_statistics": True,
    "use_deprecated_int96_timestamps": False,
    "writer_engine_version": "V2",
    "data_page_version": "1.0",
    "use_compliant_nested_type": True,
    "store_schema": True,
}


def _writer(sink: Any, want: pa.Schema, options: dict[str, Any]) -> Any:
    """A Parquet writer on ``sink`` (an Arrow output stream) for tables of ``want``."""
    return load_parquet().ParquetWriter(sink, want, **_WRITER_DEFAULTS, **options)


def _reader(file: Path, metadata: Any = None) -> Any:
    """An open Parquet reader of ``file`` (memory-mapped), as ``pyarrow.parquet.ParquetFile``
    opens a local path: ``.metadata``, ``.schema_arrow``, ``.read_all(indices)``;
    ``metadata``: the file's footer when already read (not parsed again)."""
    reader = load_parquet().ParquetReader()
    reader.open(
        str(file),
        use_memory_map=True,
        pre_buffer=True,
        arrow_extensions_enabled=True,
        metadata=metadata,
    )
    return reader


def replaced(file: Path | str) -> TraceError:
    """The one line for a trace file (or folder) another process rewrote mid-read."""
    return TraceError(
        f"{file}: replaced while this command read the trace (another tbdtrace "
        "process wrote it); run the command again"
    )


def _options(decl: schema.Table, compression: str | None) -> dict[str, Any]:
    """The Parquet writer's options for ``decl`` (encodings, dictionaries, compression)."""
    delta = [c.name for c in decl.columns if c.parquet_encoding == "DELTA_BINARY_PACKED"]
    kw: dict[str, Any] = {
        "compression": compression or "none",
        "use_dictionary": [
            c.name for c in decl.columns if c.name not in delta and c.type != pa.bool_()
        ],
        "column_encoding": dict.fromkeys(delta, "DELTA_BINARY_PACKED"),
    }
    if compression == "zstd":
        kw["compression_level"] = ZSTD_LEVEL
    kw["write_batch_size"] = WRITE_BATCH_ROWS
    return kw


def _with_id(want: pa.Schema, write_id: str | None) -> pa.Schema:
    if write_id is None:
        return want
    return want.with_metadata({WRITE_ID_KEY: write_id.encode()})


def write(
    file: Path,
    decl: schema.Table,
    tbl: pa.Table,
    write_id: str | None = None,
    compression: Any = COMPRESSION,
) -> None:
    """Write ``tbl`` (conforming to ``decl``, rows already in storage order) to ``file``;
    ``write_id`` (the trace write it belongs to, which the trace's marker also records)
    goes into the file's key-value metadata; ``compression``: the pages' codec (zstd;
    None for a temporary trace read once)."""
    if write_id is not None:
        tbl = tbl.replace_schema_metadata({WRITE_ID_KEY: write_id.encode()})
    # Through a 1 MiB buffer: Parquet's writer makes a write per page header and page
    # (hundreds of system calls for a small trace), the buffer one per MiB.
    with pa.output_stream(str(file), buffer_size=WRITE_BUFFER_BYTES) as sink:
        w = _writer(sink, tbl.schema, _options(decl, compression))
        try:
            w.write_table(tbl, row_group_size=ROW_GROUP_ROWS)
        finally:
            w.close()


def write_batches(
    file: Path,
    decl: schema.Table,
    batches: Any,
    write_id: str | None = None,
    compression: Any = COMPRESSION,
) -> int:
    """Write record batches (conforming to ``decl``, in storage order) to ``file`` as row
    groups of :data:`STREAM_GROUP_ROWS` rows, holding one group at a time; returns the
    rows written. ``write_id`` and ``compression`` as for :func:`write`."""
    want = decl.arrow_schema()
    rows = 0
    pending: list[pa.RecordBatch] = []
    held = 0
    with pa.output_stream(str(file), buffer_size=WRITE_BUFFER_BYTES) as sink:
        w = _writer(sink, _with_id(want, write_id), _options(decl, compression))
        try:
            for b in batches:
                pending.append(b)
                held += b.num_rows
                if held >= STREAM_GROUP_ROWS:
                    w.write_table(pa.Table.from_batches(pending, want), row_group_size=held)
                    rows, pending, held = rows + held, [], 0
            if pending or rows == 0:
                w.write_table(pa.Table.from_batches(pending, want), row_group_size=max(held, 1))
                rows += held
        finally:
            w.close()
    return rows


def num_rows(file: Path) -> int:
    """Rows of a table file of any version."""
    try:
        if file.suffix == PARQUET_SUFFIX:
            return int(_reader(file).metadata.num_rows)
        with pa.memory_map(str(file)) as src:
            reader = pa.ipc.open_file(src)
            meta = reader.schema.metadata or {}
            if ROWS_KEY in meta:
                return int(meta[ROWS_KEY])
            opts = pa.ipc.IpcReadOptions(included_fields=[0])
            reader = pa.ipc.open_file(src, options=opts)
            return sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
    except (pa.ArrowInvalid, OSError, ValueError) as e:
        raise _unreadable(file, e) from e


def read(
    file: Path, decl: schema.Table, cols: list[str], expect: Any = None
) -> dict[str, pa.Array]:
    """Columns ``cols`` of ``decl`` from ``file`` (any version), as single arrays of the
    declared types; a column the file lacks reads as nulls. A version-2 file may also
    return ``start_ns`` when an asked column is stored relative to it. ``expect``: the
    Parquet footer the file had when its trace was opened and checked; a file whose
    footer differs now was replaced meanwhile (TraceError), and is not read."""
    if file.suffix != PARQUET_SUFFIX:
        return read_arrow(file, decl, cols)
    try:
        pf = _reader(file)
        if expect is not None and not _same_file(pf.metadata, expect):
            raise replaced(file)
        names = pf.schema_arrow.names
        n = pf.metadata.num_rows
        # A column every row of which is null (by the file's statistics) is not decoded:
        # it reads as untouched zero pages, like an absent one (10M kernels without
        # FLOP counts: ~180 MB of decoding buffers).
        null = _all_null_columns(pf.metadata, [c for c in cols if c in names])
        present = [c for c in cols if c in names and c not in null]
        # One thread: decoding on Arrow's pool threads allocates from glibc's per-thread
        # arenas, whose freed memory is returned and faulted in again; on the main
        # arena the CLI's heap settings keep it (a 10M-kernel report: half the page
        # faults, ~1 s less system time; docs/DECISIONS.md 15).
        # Several row groups (a table written in batches): one column at a time, each
        # combined into one array before the next is decoded, so the chunks and their
        # combination coexist for one column only, not for every column asked.
        groups = pf.metadata.num_row_groups
        batches = [present] if groups < 2 else [[c] for c in present]
        read = {}
        for names_ in batches:
            if len(names_) == 1 and groups > 1:
                one = _read_by_groups(file, pf, names_[0], n)
                if one is not None:
                    read[names_[0]] = one
                    continue
            idx = [pf.column_name_idx(c) for c in names_]
            tbl = pf.read_all(column_indices=idx, use_threads=False)
            read.update({c: combine(tbl.column(c)) for c in names_})
            del tbl
    except (pa.ArrowInvalid, OSError, ValueError) as e:
        raise _unreadable(file, e) from e
    out = {}
    for c in cols:
        col = decl.column(c)
        arr = read[c] if c in read else null_array(n, col.type)
        _check_type(file, col, arr)
        out[c] = arr
    return out


def _read_by_groups(file: Path, pf: Any, column: str, rows: int) -> pa.Array | None:
    """A fixed-width column without nulls (times, ids) of a file of several row groups
    (``pf``, opened), decoded a row group at a time into one array: the column is held
    once, not as its chunks and their combination side by side (29M ops: 0.23 GB less
    per column being read). Each row group is read through a mapping of its own, let go
    of once read: the file's pages are not all mapped at once (they count as resident
    memory while mapped; an uncompressed 29M-op column: 0.23 GB). None for another
    type, or when a row group has nulls (read as before)."""
    typ = pf.schema_arrow.field(column).type
    if not (pa.types.is_integer(typ) or pa.types.is_floating(typ)):
        return None
    out = np.empty(rows, dtype=np.dtype(typ.to_pandas_dtype()))
    if not _groups_into(file, pf, column, out):
        return None
    return pa.Array.from_buffers(typ, rows, [None, pa.py_buffer(out)])


def _groups_into(file: Path, pf: Any, column: str, out: np.ndarray) -> bool:
    """Decode a fixed-width column of ``pf`` (``file``, opened) a row group at a time
    into ``out`` (its values cast to ``out``'s type: the caller knows they fit), each
    group through a mapping of its own; False when a group has nulls or the rows do not
    add up (read the column whole then). TraceError when the file was replaced."""
    rows = out.size
    at = 0
    before = _identity(file)
    for chunk in _chunks_by_groups(file, pf, column):
        if chunk.null_count or at + len(chunk) > rows:
            return False
        dt = np.dtype(chunk.type.to_pandas_dtype())
        vals = np.frombuffer(
            chunk.buffers()[1], dtype=dt, count=len(chunk), offset=chunk.offset * dt.itemsize
        )
        out[at : at + len(chunk)] = vals
        at += len(chunk)
    if at != rows:
        return False
    if _identity(file) != before:
        raise replaced(file)
    return True


def read_narrow_ints(
    file: Path, decl: schema.Table, column: str, expect: Any = None
) -> np.ndarray | None:
    """An int64 column whose values the file's statistics prove to be int32 (every row
    group's minimum and maximum, no null), decoded a row group at a time into one int32
    array: half the bytes of the column (29M ops' thread ids: 112 MB, not 223), for a
    caller that reads it once to derive something else. None when the file is not
    Parquet, the column is not int64 as declared, or the statistics do not prove it."""
    if file.suffix != PARQUET_SUFFIX or decl.column(column).type != pa.int64():
        return None
    try:
        pf = _reader(file)
        if expect is not None and not _same_file(pf.metadata, expect):
            raise replaced(file)
        if column not in pf.schema_arrow.names or pf.schema_arrow.field(column).type != pa.int64():
            return None
        bounds = min_max(pf.metadata, column)
        info = np.iinfo(np.int32)
        # below the largest int32: a caller's id + 1 does not wrap
        if bounds is None or bounds[0] < info.min or bounds[1] >= info.max:
            return None
        out = np.empty(pf.metadata.num_rows, dtype=np.int32)
        return out if _groups_into(file, pf, column, out) else None
    except (pa.ArrowInvalid, OSError, ValueError) as e:
        raise _unreadable(file, e) from e


def read_label_codes(
    file: Path, decl: schema.Table, column: str, expect: Any = None
) -> tuple[np.ndarray, list[str | None]] | None:
    """A dictionary column of few labels as int8 codes (int16 past 126 labels) and its
    labels, decoded a row group at a time: each group's indices are mapped to the
    labels met so far and written into the one small array, so the column's int32
    indices are never held whole, nor twice while combined (29M ops: 0.25 GB of
    transients, against 29 MB kept). A null's code is the code after the last label.
    None when the file is not Parquet, lacks the column or holds it as another type
    than ``decl`` declares, when the statistics say every row is null, or past 2^15 - 2
    labels: read the column then (:func:`read`)."""
    if file.suffix != PARQUET_SUFFIX:
        return None
    try:
        pf = _reader(file)
        if expect is not None and not _same_file(pf.metadata, expect):
            raise replaced(file)
        names = pf.schema_arrow.names
        typ = decl.column(column).type
        if column not in names or not pa.types.is_dictionary(typ):
            return None
        if pf.schema_arrow.field(column).type != typ:
            return None
        if _all_null_columns(pf.metadata, [column]):
            return None
        rows = pf.metadata.num_rows
        before = _identity(file)
        labels: list[str | None] = []
        code_of: dict[str | None, int] = {}
        out = np.empty(rows, dtype=np.int8)
        nulls = 0
        at = 0
        for chunk in _chunks_by_groups(file, pf, column):
            if at + len(chunk) > rows:
                return None
            lut = []
            for label in chunk.dictionary.to_pylist():
                if label not in code_of:
                    code_of[label] = len(labels)
                    labels.append(label)
                lut.append(code_of[label])
            if len(labels) >= 2**15 - 1:
                return None
            if len(labels) >= 2**7 - 1 and out.dtype == np.int8:
                out = out.astype(np.int16)
            # -1 marks a null until the number of labels is known
            table = np.array([*lut, -1], dtype=out.dtype)
            nulls += chunk.null_count
            out[at : at + len(chunk)] = table[int_values(chunk.indices, len(lut))]
            at += len(chunk)
        if at != rows:
            return None
        if _identity(file) != before:
            raise replaced(file)
    except (pa.ArrowInvalid, OSError, ValueError, IndexError) as e:
        raise _unreadable(file, e) from e
    if nulls:
        out[out == -1] = len(labels)
    return out, labels


def _chunks_by_groups(file: Path, pf: Any, column: str) -> Iterator[Any]:
    """The chunks of ``column`` of ``pf`` (``file``, opened), one row group at a time,
    each group through a reader of its own (its memory let go before the next)."""
    idx = pf.column_name_idx(column)
    for g in range(pf.metadata.num_row_groups):
        part = _reader(file, pf.metadata)
        try:
            col = part.read_row_group(g, column_indices=[idx], use_threads=False).column(0)
        finally:
            part.close()
        yield from col.chunks


def _identity(file: Path) -> tuple[int, int, int]:
    """(inode, size, modification time) of ``file``: changes when it is replaced."""
    st = os.stat(file)
    return st.st_ino, st.st_size, st.st_mtime_ns


def _same_file(now: Any, then: Any) -> bool:
    """Do two Parquet footers describe the same file (rows, layout, write id)?"""
    return bool(
        now.num_rows == then.num_rows
        and now.num_row_groups == then.num_row_groups
        and now.serialized_size == then.serialized_size
        and (now.metadata or {}).get(WRITE_ID_KEY) == (then.metadata or {}).get(WRITE_ID_KEY)
    )


def footer(file: Path) -> Any | None:
    """The Parquet footer (file metadata, statistics included) of a version-3 table file;
    None for versions 1 and 2 (Arrow IPC files carry no statistics)."""
    if file.suffix != PARQUET_SUFFIX:
        return None
    try:
        return _reader(file).metadata
    except (pa.ArrowInvalid, OSError, ValueError) as e:
        raise _unreadable(file, e) from e


def constant(meta: Any, column: str) -> tuple[Any] | None:
    """``(value,)`` when the footer ``meta``'s statistics prove that every row of
    ``column`` holds ``value`` (``(None,)``: every row is null); None when they do not
    tell (a column without statistics, values that differ, an empty file)."""
    if meta.num_rows == 0:
        return None
    leaf = [j for j in range(meta.num_columns) if meta.schema.column(j).path == column]
    if not leaf:
        return None
    nulls, values = 0, set()
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        st = rg.column(leaf[0]).statistics
        if st is None or not st.has_null_count:
            return None
        nulls += st.null_count
        if st.null_count < rg.num_rows:
            if not st.has_min_max or st.min != st.max:
                return None
            values.add(st.min)
    if nulls == meta.num_rows:
        return (None,)
    if nulls or len(values) != 1:
        return None
    return (values.pop(),)


def null_free(meta: Any, column: str) -> bool | None:
    """True when the footer ``meta``'s statistics count no null in ``column``, False when
    they count one; None when they do not tell (a row group without a null count)."""
    leaf = [j for j in range(meta.num_columns) if meta.schema.column(j).path == column]
    if not leaf:
        return None
    nulls = 0
    for g in range(meta.num_row_groups):
        st = meta.row_group(g).column(leaf[0]).statistics
        if st is None or not st.has_null_count:
            return None
        nulls += st.null_count
    return nulls == 0


def min_max(meta: Any, column: str) -> tuple[int, int] | None:
    """(minimum, maximum) of an integer ``column`` over every row, as the footer ``meta``'s
    statistics prove; None when they do not tell (a row group without statistics or with
    a null, a column that is not integer, an empty file)."""
    if meta.num_rows == 0:
        return None
    leaf = [j for j in range(meta.num_columns) if meta.schema.column(j).path == column]
    if not leaf:
        return None
    lo: int | None = None
    hi: int | None = None
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        if rg.num_rows == 0:
            continue
        st = rg.column(leaf[0]).statistics
        if st is None or not st.has_null_count or st.null_count or not st.has_min_max:
            return None
        a, b = st.min, st.max
        if type(a) is not int or type(b) is not int:
            return None
        lo = a if lo is None else min(lo, a)
        hi = b if hi is None else max(hi, b)
    return None if lo is None or hi is None else (lo, hi)


def _all_null_columns(meta: Any, cols: list[str]) -> set[str]:
    """Columns of ``cols`` whose statistics count every row of every row group as null
    (a file without statistics, or with none for a column, reads it as usual)."""
    return {c for c in cols if constant(meta, c) == (None,)}


def _unreadable(file: Path, e: BaseException) -> TraceError:
    kind = "Parquet" if file.suffix == PARQUET_SUFFIX else "Arrow IPC"
    return TraceError(f"{file}: not a readable {kind} file ({e}); re-create the trace")


def _check_type(file: Path, col: schema.Column, arr: pa.Array) -> None:
    if arr.type != col.type:
        raise TraceError(
            f"{file}: column {col.name!r} is {arr.type}, the schema says "
            f"{col.type}; re-create the trace with this version of tbdtrace"
        )


def combine(col: pa.ChunkedArray) -> pa.Array:
    """One array from a chunked column (no copy when it has one chunk)."""
    if col.num_chunks == 1:
        return col.chunk(0)
    if col.num_chunks == 0:  # a table of no rows
        return pa.nulls(0, col.type)
    if pa.types.is_dictionary(col.type):
        first = col.chunk(0).dictionary
        if all(c.dictionary.equals(first) for c in col.chunks[1:]):
            # Row groups written with one dictionary (a streamed import): the indices
            # concatenated, no hashing of every chunk's dictionary.
            idx = pa.concat_arrays([c.indices for c in col.chunks])
            return pa.DictionaryArray.from_arrays(idx, first)
        col = col.unify_dictionaries()
    return col.combine_chunks()


def null_array(n: int, typ: pa.DataType) -> pa.Array:
    """An all-null array of ``n`` rows whose buffers are untouched zero pages (calloc), so
    an absent column of a big table costs no resident memory until it is read."""
    width = {pa.int32(): 4, pa.int64(): 8, pa.uint64(): 8, pa.float64(): 8}
    idx = pa.int32() if pa.types.is_dictionary(typ) else typ
    if n == 0 or idx not in width:
        return pa.nulls(n, typ)
    validity = pa.py_buffer(np.zeros((n + 7) // 8, dtype=np.uint8))
    values = pa.py_buffer(np.zeros(n * width[idx], dtype=np.uint8))
    arr = pa.Array.from_buffers(idx, n, [validity, values], null_count=n)
    if pa.types.is_dictionary(typ):
        return pa.DictionaryArray.from_arrays(arr, pa.array([], typ.value_type))
    return arr


# ---- versions 1 and 2: Arrow IPC files, version 2 with encoded fields ----


def read_arrow(file: Path, decl: schema.Table, cols: list[str]) -> dict[str, pa.Array]:
    """:func:`read` for a version-1/2 ``<table>.arrow`` file (decodes encoded fields)."""
    try:
        with pa.memory_map(str(file)) as src:
            names = pa.ipc.open_file(src).schema.names
            plan = _read_plan(decl, cols, names)
            if "start_ns" not in cols and any(
                c.encoding == schema.MINUS_START and d != c.name for c, d in plan.values()
            ):
                cols = ["start_ns", *cols]
                plan = _read_plan(decl, cols, names)
            fields = sorted({names.index(d) for _, d in plan.values() if d is not None})
            opts = pa.ipc.IpcReadOptions(included_fields=fields)
            tbl = pa.ipc.open_file(src, options=opts).read_all()
    except (pa.ArrowInvalid, OSError) as e:
        raise _unreadable(file, e) from e
    out: dict[str, pa.Array] = {}
    # start_ns first: minus_start_ns fields add it.
    for c in sorted(cols, key=lambda x: x != "start_ns"):
        col, disk = plan[c]
        if disk is None:
            arr = null_array(tbl.num_rows, col.type)
        else:
            arr = combine(tbl.column(disk))
            if disk != col.name:
                arr = decode(col, arr, out.get("start_ns"))
            _check_type(file, col, arr)
        out[c] = arr
    return out


def _read_plan(
    decl: schema.Table, cols: list[str], names: list[str]
) -> dict[str, tuple[schema.Column, str | None]]:
    """Per column: (declaration, field to read: encoded, plain, or None when absent)."""
    plan: dict[str, tuple[schema.Column, str | None]] = {}
    for c in cols:
        col = decl.column(c)
        if col.encoding and col.disk_name in names:
            plan[c] = (col, col.disk_name)
        elif col.name in names:
            plan[c] = (col, col.name)
        else:
            plan[c] = (col, None)
    return plan


def decode(col: schema.Column, stored: pa.Array, start: pa.Array | None) -> pa.Array:
    """A version-2 encoded field's true values (int64 arithmetic wraps, as it did when
    the field was encoded)."""
    mask = stored.is_null().to_numpy(zero_copy_only=False) if stored.null_count else None
    d = stored if mask is None else pa.array(int_values(stored, 0), type=pa.int64())
    # Decode in place when the values buffer is a private, writable copy (a decompressed
    # read): a 10M-row column then costs no second allocation.
    buf = d.buffers()[1]
    if buf is not None and buf.is_mutable and d.type == pa.int64():
        v = np.frombuffer(buf, dtype=np.int64, count=len(d), offset=d.offset * 8)
        out = v
    else:
        v = np.asarray(d.to_numpy(), dtype=np.int64)
        out = np.empty_like(v)
    if col.encoding == schema.DELTA:
        np.cumsum(v, dtype=np.int64, out=out)
    elif col.encoding == schema.MINUS_START:
        if start is None:
            raise TraceError(
                f"column {col.name!r} is stored relative to start_ns, which "
                "the file lacks; re-create the trace"
            )
        np.add(v, np.asarray(start.to_numpy(), dtype=np.int64), out=out)
    else:
        raise TraceError(
            f"column {col.name!r}: unknown encoding {col.encoding!r}; upgrade tbdtrace"
        )
    if mask is None and out is v:
        return d  # d's buffer now holds the decoded values
    return pa.array(out, type=pa.int64(), mask=mask)
