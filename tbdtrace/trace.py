"""Reading and writing trace directories (see docs/TRACE_FORMAT.md).

``open(path)`` validates a trace and returns a :class:`Trace` whose tables are read
lazily, memory-mapped, and only for the columns asked for. ``write(path, tables, meta)``
writes one atomically: everything goes to a sibling temporary directory that replaces
the target only once complete, so a failed write never destroys an earlier trace.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace import schema
from tbdtrace.errors import TraceError

META_FILE = "meta.json"
ARROW_SUFFIX = ".arrow"
# zstd: the best size/decode-speed trade-off for these tables (see bench/README.md).
COMPRESSION = "zstd"
BATCH_ROWS = 1 << 20


class Trace:
    """A trace directory opened for reading."""

    def __init__(self, path: Path, meta: dict[str, Any]):
        self.path = path
        self.meta = meta
        self._cache: dict[tuple[str, tuple[str, ...] | None], pa.Table] = {}

    def __repr__(self) -> str:
        return f"Trace({str(self.path)!r}, source={self.meta.get('source')!r})"

    def has(self, name: str) -> bool:
        """True when the table file exists (it may still have zero rows)."""
        return (self.path / f"{name}{ARROW_SUFFIX}").exists()

    def table(self, name: str, columns: Iterable[str] | None = None) -> pa.Table:
        """Table ``name`` as pyarrow, with only ``columns`` when given.

        A table the trace lacks reads as empty with the declared schema.
        """
        decl = schema.table(name)
        cols = tuple(columns) if columns is not None else None
        if cols is not None:
            for c in cols:
                decl.column(c)  # raises KeyError for an unknown column
        key = (name, cols)
        if key not in self._cache:
            self._cache[key] = self._read(decl, cols)
        return self._cache[key]

    def df(self, name: str, columns: Iterable[str] | None = None) -> Any:
        """Table ``name`` as a pandas DataFrame (dictionary columns become categoricals)."""
        return self.table(name, columns).to_pandas()

    def num_rows(self, name: str) -> int:
        f = self.path / f"{name}{ARROW_SUFFIX}"
        if not f.exists():
            return 0
        with pa.memory_map(str(f)) as src:
            reader = pa.ipc.open_file(src)
            batches = range(reader.num_record_batches)
            return sum(reader.get_record_batch(i).num_rows for i in batches)

    def _read(self, decl: schema.Table, cols: tuple[str, ...] | None) -> pa.Table:
        f = self.path / f"{decl.name}{ARROW_SUFFIX}"
        want = decl.arrow_schema()
        if cols is not None:
            want = pa.schema([want.field(c) for c in cols])
        if not f.exists():
            return want.empty_table()
        try:
            with pa.memory_map(str(f)) as src:
                file_schema = pa.ipc.open_file(src).schema
                idx = [file_schema.get_field_index(c) for c in want.names]
                present = [i for i in idx if i >= 0]
                opts = pa.ipc.IpcReadOptions(included_fields=present)
                tbl = pa.ipc.open_file(src, options=opts).read_all()
        except (pa.ArrowInvalid, OSError) as e:
            raise TraceError(
                f"{f}: not a readable Arrow IPC file ({e}); re-create the trace"
            ) from e
        return _conform(tbl, want, f)


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
    if version != schema.SCHEMA_VERSION:
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
) -> Path:
    """Write a trace directory atomically and return its path.

    ``tables`` maps table names to Arrow tables (conforming to the schema) or to column
    mappings for :func:`to_table`. ``meta`` gets ``schema_version`` filled in.
    An existing trace at ``path`` is replaced; any other existing non-empty directory or
    file is left alone and raises TraceError.
    """
    out = Path(path)
    if out.exists() and not (out / META_FILE).exists() and (out.is_file() or any(out.iterdir())):
        raise TraceError(
            f"{out}: exists and is not a tbdtrace trace; choose another output directory"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for name, data in tables.items():
            tbl = data if isinstance(data, pa.Table) else to_table(name, data)
            want = schema.table(name).arrow_schema()
            if tbl.schema != want:
                tbl = _conform(tbl, want, tmp / name)
            write_table(tmp / f"{name}{ARROW_SUFFIX}", tbl)
        full_meta = {k: None for k in ("source", "backend", "host", "framework", "workload")}
        full_meta.update({"clock": "CLOCK_REALTIME", "clock_offset_ns": 0})
        full_meta.update(meta)
        full_meta["schema_version"] = schema.SCHEMA_VERSION
        (tmp / META_FILE).write_text(json.dumps(full_meta, indent=2, sort_keys=True) + "\n")
        _replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def write_table(file: Path, tbl: pa.Table) -> None:
    opts = pa.ipc.IpcWriteOptions(compression=COMPRESSION)
    with pa.OSFile(str(file), "wb") as sink, pa.ipc.new_file(sink, tbl.schema, options=opts) as w:
        w.write_table(tbl, max_chunksize=BATCH_ROWS)


def _replace_dir(new: Path, target: Path) -> None:
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old.{os.getpid()}")
        target.rename(old)
    new.rename(target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
