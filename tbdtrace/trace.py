"""Reading and writing trace directories (see docs/TRACE_FORMAT.md).

``open(path)`` validates a trace and returns a :class:`Trace` whose tables are read
lazily, memory-mapped, and only for the columns asked for. ``write(path, tables, meta)``
writes one: everything goes to a staging directory first and is moved into place only
once complete, so a failed write never destroys an earlier trace (see :func:`write`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace import schema
from tbdtrace.errors import TraceError

META_FILE = "meta.json"
ARROW_SUFFIX = ".arrow"
# zstd at level 3: on the delta-encoded tables it is both smaller and faster to decode
# than Arrow's default level 1 (bench/README.md); lz4 and None (uncompressed) also read.
COMPRESSION: str | None = "zstd"
ZSTD_LEVEL = 3
# Rows per record batch: one batch for all but huge tables, so a column reads as one
# contiguous array (no copy to combine chunks).
BATCH_ROWS = 1 << 24
ROWS_KEY = b"tbdtrace.rows"  # schema metadata of each table file: its row count


class Trace:
    """A trace directory opened for reading.

    Columns are read on first use, decoded (see ``schema`` storage) and kept, one copy
    per column, so passes that share a column share its memory. ``memo`` keeps values
    derived from the tables (device keys, sort orders, merged intervals) for the passes
    that run on the same trace.
    """

    def __init__(self, path: Path, meta: dict[str, Any]):
        self.path = path
        self.meta = meta
        self._columns: dict[tuple[str, str], pa.Array] = {}
        self._rows: dict[str, int] = {}
        self._memo: dict[Any, Any] = {}

    def __repr__(self) -> str:
        return f"Trace({str(self.path)!r}, source={self.meta.get('source')!r})"

    def has(self, name: str) -> bool:
        """True when the table file exists (it may still have zero rows)."""
        return (self.path / f"{name}{ARROW_SUFFIX}").exists()

    def table(
        self, name: str, columns: Iterable[str] | None = None, cache: bool = True
    ) -> pa.Table:
        """Table ``name`` as pyarrow, with only ``columns`` when given.

        A table the trace lacks reads as empty with the declared schema. With
        ``cache=False``, columns not read before are read for this call only (for a
        one-off look at columns no pass needs again).
        """
        decl = schema.table(name)
        cols = tuple(columns) if columns is not None else tuple(decl.column_names)
        fields = [decl.arrow_schema().field(decl.column(c).name) for c in cols]
        want = pa.schema(fields)
        missing = [c for c in cols if (name, c) not in self._columns]
        got = self._load(decl, missing) if missing else {}
        if cache:
            self._columns.update(got)
        arrays = [got[(name, c)] if (name, c) in got else self._columns[(name, c)] for c in cols]
        return pa.Table.from_arrays(arrays, schema=want)

    def prefetch(self, name: str, columns: Iterable[str]) -> None:
        """Read the columns of table ``name`` not read yet, in one pass over the file
        (its buffers decompress in parallel), and keep them."""
        decl = schema.table(name)
        missing = [c for c in columns if (name, decl.column(c).name) not in self._columns]
        if missing:
            self._columns.update(self._load(decl, missing))

    def column(self, name: str, column: str) -> pa.Array:
        """One column of table ``name`` as a single Arrow array (decoded, cached)."""
        if (name, column) not in self._columns:
            decl = schema.table(name)
            self._columns.update(self._load(decl, [decl.column(column).name]))
        return self._columns[(name, column)]

    def df(self, name: str, columns: Iterable[str] | None = None) -> Any:
        """Table ``name`` as a pandas DataFrame (dictionary columns become categoricals)."""
        from tbdtrace import _pandas_gate

        _pandas_gate.open_()
        return self.table(name, columns).to_pandas()

    def num_rows(self, name: str) -> int:
        if name not in self._rows:
            f = self.path / f"{name}{ARROW_SUFFIX}"
            if not f.exists():
                self._rows[name] = 0
            else:
                self._rows[name] = _file_rows(f)
        return self._rows[name]

    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per trace and ``key``; later calls return the same value.

        For values derived from the (immutable) tables that several passes need.
        """
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def _load(self, decl: schema.Table, cols: list[str]) -> dict[tuple[str, str], pa.Array]:
        """Read and decode ``cols`` of ``decl`` (one pass over the file)."""
        f = self.path / f"{decl.name}{ARROW_SUFFIX}"
        out: dict[tuple[str, str], pa.Array] = {}
        if not f.exists():
            for c in cols:
                out[(decl.name, c)] = pa.nulls(0, decl.column(c).type)
            return out
        try:
            with pa.memory_map(str(f)) as src:
                names = pa.ipc.open_file(src).schema.names
                plan = _read_plan(decl, cols, names)
                if (
                    any(c.encoding == schema.MINUS_START for c, _ in plan.values())
                    and (decl.name, "start_ns") not in self._columns
                    and "start_ns" not in cols
                ):
                    cols = [*cols, "start_ns"]
                    plan = _read_plan(decl, cols, names)
                fields = sorted({names.index(d) for _, d in plan.values() if d is not None})
                opts = pa.ipc.IpcReadOptions(included_fields=fields)
                tbl = pa.ipc.open_file(src, options=opts).read_all()
        except (pa.ArrowInvalid, OSError) as e:
            raise TraceError(
                f"{f}: not a readable Arrow IPC file ({e}); re-create the trace"
            ) from e
        self._rows[decl.name] = tbl.num_rows
        # start_ns first: minus_start_ns columns add it.
        for c in sorted(cols, key=lambda x: x != "start_ns"):
            col, disk = plan[c]
            if disk is None:
                arr = null_array(tbl.num_rows, col.type)
            else:
                arr = _combine(tbl.column(disk))
                if disk != col.name:
                    key = (decl.name, "start_ns")
                    start = out[key] if key in out else self._columns.get(key)
                    arr = decode(col, arr, start)
                if arr.type != col.type:
                    raise TraceError(
                        f"{f}: column {col.name!r} is {arr.type}, the schema says "
                        f"{col.type}; re-create the trace with this version of tbdtrace"
                    )
            out[(decl.name, c)] = arr
        return out


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


def _file_rows(f: Path) -> int:
    """Rows of a table file: from the schema metadata the writer puts there, else by
    reading the batches' first field."""
    try:
        with pa.memory_map(str(f)) as src:
            reader = pa.ipc.open_file(src)
            meta = reader.schema.metadata or {}
            if ROWS_KEY in meta:
                return int(meta[ROWS_KEY])
            opts = pa.ipc.IpcReadOptions(included_fields=[0])
            reader = pa.ipc.open_file(src, options=opts)
            return sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
    except (pa.ArrowInvalid, OSError, ValueError) as e:
        raise TraceError(f"{f}: not a readable Arrow IPC file ({e}); re-create the trace") from e


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


def _combine(col: pa.ChunkedArray) -> pa.Array:
    if col.num_chunks == 1:
        return col.chunk(0)
    if pa.types.is_dictionary(col.type):
        col = col.unify_dictionaries()
    return col.combine_chunks() if col.num_chunks else pa.nulls(0, col.type)


def _ints(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """int64 values with nulls as 0 (numpy only: pc.fill_null imports pandas)."""
    if arr.null_count == 0:
        return np.asarray(arr.to_numpy(), dtype=np.int64)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    # The values buffer holds some number at null slots; read it raw, then zero them.
    buf = arr.buffers()[1]
    out = (
        np.frombuffer(buf, dtype=np.int64, count=len(arr), offset=arr.offset * 8).copy()
        if arr.type in (pa.int64(), pa.uint64())
        else np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.float64).astype(np.int64)
    )
    out[~valid] = 0
    return out


def encode(col: schema.Column, arr: pa.Array, start: pa.Array | None) -> pa.Array:
    """The stored form of ``arr`` (column ``col``): see the schema's storage notes."""
    mask = arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else None
    if col.encoding == schema.DELTA:
        x = arr
        if mask is not None:
            x = pc.fill_null(pc.fill_null_forward(arr), 0)
        v = np.asarray(x.to_numpy(), dtype=np.int64)
        out = np.empty_like(v)
        if v.size:
            out[0] = v[0]
            np.subtract(v[1:], v[:-1], out=out[1:])  # wraps on overflow; decode wraps back
    elif col.encoding == schema.MINUS_START:
        assert start is not None
        v = _ints(arr)
        out = v - np.asarray(start.to_numpy(), dtype=np.int64)
        if mask is not None:
            out[mask] = 0
    else:
        raise ValueError(f"unknown encoding {col.encoding!r}")
    return pa.array(out, type=pa.int64(), mask=mask)


def decode(col: schema.Column, stored: pa.Array, start: pa.Array | None) -> pa.Array:
    """Inverse of :func:`encode`."""
    mask = stored.is_null().to_numpy(zero_copy_only=False) if stored.null_count else None
    d = stored if mask is None else pa.array(_ints(stored), type=pa.int64())
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


def _conform(tbl: pa.Table, want: pa.Schema, where: Path) -> pa.Table:
    """Order columns as declared; add absent columns as nulls; check types."""
    arrays = []
    for field in want:
        if field.name in tbl.column_names:
            col = tbl.column(field.name)
            if col.type != field.type:
                raise TraceError(
                    f"{where}: column {field.name!r} is {col.type}, the schema says "
                    f"{field.type}; re-create the trace with this version of tbdtrace"
                )
            arrays.append(col)
        else:
            arrays.append(pa.nulls(tbl.num_rows, field.type))
    return pa.Table.from_arrays(arrays, schema=want)


def open(path: str | os.PathLike[str]) -> Trace:  # noqa: A001 - the documented API name
    """Open and validate the trace directory at ``path``."""
    p = Path(path)
    meta_file = p / META_FILE
    if not p.is_dir():
        raise TraceError(f"{p}: not a trace directory; pass a directory written by tbdtrace")
    if not meta_file.exists():
        raise TraceError(f"{p}: no {META_FILE}; this is not a tbdtrace trace directory")
    try:
        meta = json.loads(meta_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TraceError(f"{meta_file}: invalid JSON ({e}); re-create the trace") from e
    if not isinstance(meta, dict):
        raise TraceError(f"{meta_file}: expected a JSON object; re-create the trace")
    version = meta.get("schema_version")
    if version not in schema.READABLE_VERSIONS:
        raise TraceError(
            f"{meta_file}: schema version {version!r}, this tbdtrace reads "
            f"{schema.SCHEMA_VERSION}; re-import or re-capture the trace"
        )
    for f in p.glob(f"*{ARROW_SUFFIX}"):
        if f.stem not in schema.TABLES_BY_NAME:
            raise TraceError(f"{f}: unknown table {f.stem!r}; remove it or upgrade tbdtrace")
    return Trace(p, meta)


def to_table(name: str, columns: Mapping[str, Any], num_rows: int | None = None) -> pa.Table:
    """Build table ``name`` from column data (lists, numpy arrays or Arrow arrays).

    Columns not given are null; strings are dictionary-encoded; types are cast to the
    schema (a lossy cast raises).
    """
    decl = schema.table(name)
    unknown = set(columns) - set(decl.column_names)
    if unknown:
        raise KeyError(f"table {name!r} has no columns {sorted(unknown)}")
    n = num_rows
    arrays = []
    for c in decl.columns:
        if c.name in columns:
            arr = _as_array(columns[c.name], c)
            if n is None:
                n = len(arr)
            elif len(arr) != n:
                raise ValueError(f"{name}.{c.name}: {len(arr)} rows, expected {n}")
            arrays.append(arr)
        else:
            arrays.append(None)
    n = n or 0
    arrays = [
        a if a is not None else pa.nulls(n, c.type)
        for a, c in zip(arrays, decl.columns, strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=decl.arrow_schema())


def _as_array(data: Any, col: schema.Column) -> pa.Array | pa.ChunkedArray:
    if isinstance(data, pa.ChunkedArray):
        data = data.combine_chunks()
    if col.type == schema.STR:
        arr = data if isinstance(data, pa.Array) else pa.array(data, type=pa.string())
        if pa.types.is_dictionary(arr.type):
            if arr.type != schema.STR:
                arr = arr.cast(pa.string()).dictionary_encode()
            return arr
        if not pa.types.is_string(arr.type):
            arr = arr.cast(pa.string())
        return pc.dictionary_encode(arr).cast(schema.STR)
    if isinstance(data, pa.Array):
        return data if data.type == col.type else data.cast(col.type, safe=True)
    return pa.array(data, type=col.type)


def write(
    path: str | os.PathLike[str],
    tables: Mapping[str, pa.Table | Mapping[str, Any]],
    meta: Mapping[str, Any],
    files: Mapping[str, bytes] | None = None,
) -> Path:
    """Write a trace directory and return its path.

    ``tables`` maps table names to Arrow tables (conforming to the schema) or to column
    mappings for :func:`to_table`. ``meta`` gets ``schema_version`` filled in. ``files``
    adds other files to the trace (name -> content, e.g. ``capture.log``).

    Everything is written to a staging directory first, so a failed write (a full disk)
    leaves an earlier trace at ``path`` as it was. An absent ``path`` then appears whole
    (one rename); into an existing empty directory or trace the files are moved one by
    one, the marker (tbdtrace.outdir.MARKER) last, and only files the earlier trace's
    marker lists are replaced or removed: files of the user's own in a trace directory
    stay. Any other existing non-empty directory or file is left alone and raises
    TraceError. Directories follow the umask.
    """
    from tbdtrace import outdir

    out = Path(os.path.abspath(os.fspath(path)))
    st = outdir.state(out)
    if st in ("file", "other"):
        raise TraceError(
            f"{out}: exists and is not a tbdtrace trace; choose another output directory"
        )
    if st == "absent":
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    else:
        tmp = Path(tempfile.mkdtemp(prefix=outdir.STAGING_PREFIX, dir=out))
    try:
        try:
            names = _write_files(tmp, tables, meta, files or {})
        except OSError as e:
            kept = "; the trace there is unchanged" if st == "trace" else ""
            raise TraceError(
                f"{out}: cannot write the trace ({outdir.describe_os_error(e)}){kept}"
            ) from None
        if st == "absent":
            os.chmod(tmp, outdir.dir_mode())
            tmp.rename(out)
        else:
            _install(tmp, out, names)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _write_files(
    tmp: Path,
    tables: Mapping[str, pa.Table | Mapping[str, Any]],
    meta: Mapping[str, Any],
    files: Mapping[str, bytes],
) -> list[str]:
    """The trace's files in ``tmp``; returns their names (the marker included)."""
    from tbdtrace import outdir

    names = []
    for name, data in tables.items():
        tbl = data if isinstance(data, pa.Table) else to_table(name, data)
        want = schema.table(name).arrow_schema()
        if tbl.schema != want:
            tbl = _conform(tbl, want, tmp / name)
        write_table(tmp / f"{name}{ARROW_SUFFIX}", stored(schema.table(name), tbl))
        names.append(f"{name}{ARROW_SUFFIX}")
    for name, content in files.items():
        if "/" in name or name in (META_FILE, outdir.MARKER) or outdir.is_private(name):
            raise ValueError(f"{name!r} cannot be an extra file of a trace")
        (tmp / name).write_bytes(content)
        names.append(name)
    full_meta = _full_meta(meta)
    (tmp / META_FILE).write_text(json.dumps(full_meta, indent=2, sort_keys=True) + "\n")
    names.append(META_FILE)
    (tmp / outdir.MARKER).write_text(outdir.marker_text(names))
    return [*names, outdir.MARKER]


def _install(tmp: Path, out: Path, names: list[str]) -> None:
    """Move the staged files ``names`` into the existing directory ``out`` (empty or a
    trace), replacing only tbdtrace's own files there."""
    from tbdtrace import outdir

    old = set(outdir.own_files(out) or [])
    for n in names:
        if n not in old and n != outdir.MARKER and os.path.lexists(out / n):
            raise TraceError(
                f"{out / n}: is not a file tbdtrace wrote, and the new trace has a file of "
                "that name; move it away and run again"
            )
    # Not a trace while its files change: a crash here leaves no marker over a mix.
    with contextlib.suppress(FileNotFoundError):
        (out / outdir.MARKER).unlink()
    for n in sorted(old - set(names)):
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            (out / n).unlink()
    for n in names:
        if n != outdir.MARKER:
            os.replace(tmp / n, out / n)
    os.replace(tmp / outdir.MARKER, out / outdir.MARKER)
    tmp.rmdir()


def _ordered(s: np.ndarray, e: np.ndarray) -> bool:
    """True when rows are by start ascending, then end descending."""
    ds = s[1:] - s[:-1]
    return bool((ds >= 0).all() and ((ds > 0) | (e[1:] <= e[:-1])).all())


def stored(decl: schema.Table, tbl: pa.Table) -> pa.Table:
    """``tbl`` as it is kept on disk: in time order, encoded columns under their field
    names (see the schema's storage notes)."""
    tc = decl.time_column
    if tc is not None and tbl.num_rows > 1:
        t = _ints(tbl.column(tc))
        if tc == "start_ns":
            # Ranges: by start, then the longer first, so enclosing ranges precede the
            # ranges they contain (what interval searches over nested ranges want).
            e = _ints(tbl.column("end_ns"))
            if not _ordered(t, e):
                keys = [("start_ns", "ascending"), ("end_ns", "descending")]
                tbl = tbl.take(pc.sort_indices(tbl, keys))  # stable
        elif not (t[1:] >= t[:-1]).all():
            tbl = tbl.take(pc.sort_indices(tbl, [(tc, "ascending")]))  # stable
    tbl = tbl.combine_chunks()
    start = (
        tbl.column("start_ns").chunk(0) if "start_ns" in tbl.column_names and tbl.num_rows else None
    )
    arrays, fields = [], []
    for col, field in zip(decl.columns, tbl.schema, strict=True):
        arr = tbl.column(col.name)
        if col.encoding is not None and tbl.num_rows:
            arrays.append(encode(col, arr.chunk(0), start))
            fields.append(pa.field(col.disk_name, pa.int64(), nullable=field.nullable))
        else:
            arrays.append(arr)
            fields.append(
                pa.field(
                    col.disk_name if col.encoding else col.name, field.type, nullable=field.nullable
                )
            )
    return pa.Table.from_arrays(
        arrays, schema=pa.schema(fields, metadata={ROWS_KEY: str(tbl.num_rows).encode()})
    )


def _full_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """``meta`` with every standard key present and ``schema_version`` set."""
    full: dict[str, Any] = {k: None for k in ("source", "backend", "host", "framework", "workload")}
    full.update({"clock": "CLOCK_REALTIME", "clock_offset_ns": 0})
    full.update(meta)
    full["schema_version"] = schema.SCHEMA_VERSION
    return full


class MemoryTrace(Trace):
    """A trace held in memory, e.g. an import analyzed without writing it: the same
    reads, caches and memo as a trace directory. ``path`` names where it came from."""

    def __init__(self, path: Path, meta: dict[str, Any], tables: dict[str, pa.Table]):
        super().__init__(path, meta)
        self._tables = tables

    def has(self, name: str) -> bool:
        return name in self._tables

    def num_rows(self, name: str) -> int:
        return self._tables[name].num_rows if name in self._tables else 0

    def _load(self, decl: schema.Table, cols: list[str]) -> dict[tuple[str, str], pa.Array]:
        tbl = self._tables.get(decl.name)
        out: dict[tuple[str, str], pa.Array] = {}
        for c in cols:
            col = decl.column(c)
            if tbl is None:
                out[(decl.name, c)] = pa.nulls(0, col.type)
            else:
                out[(decl.name, c)] = _combine(tbl.column(col.name))
        return out


def from_tables(
    tables: Mapping[str, pa.Table | Mapping[str, Any]],
    meta: Mapping[str, Any],
    path: str | os.PathLike[str] = "<memory>",
) -> Trace:
    """A :class:`Trace` over tables in memory (as :func:`write` takes them), unwritten."""
    conformed = {}
    for name, data in tables.items():
        tbl = data if isinstance(data, pa.Table) else to_table(name, data)
        want = schema.table(name).arrow_schema()
        conformed[name] = tbl if tbl.schema == want else _conform(tbl, want, Path(str(path)))
    return MemoryTrace(Path(path), _full_meta(meta), conformed)


def write_table(file: Path, tbl: pa.Table) -> None:
    codec = pa.Codec("zstd", ZSTD_LEVEL) if COMPRESSION == "zstd" else COMPRESSION
    opts = pa.ipc.IpcWriteOptions(compression=codec)
    with pa.OSFile(str(file), "wb") as sink, pa.ipc.new_file(sink, tbl.schema, options=opts) as w:
        w.write_table(tbl, max_chunksize=BATCH_ROWS)
