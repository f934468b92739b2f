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
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace import schema, tablefile
from tbdtrace.arrow_ints import int_values
from tbdtrace.errors import TraceError
from tbdtrace.tablefile import combine
from tbdtrace.tablefile import null_array as null_array  # re-exported

META_FILE = "meta.json"
TABLE_SUFFIX = tablefile.PARQUET_SUFFIX  # what write() writes (version 3)
ARROW_SUFFIX = tablefile.ARROW_SUFFIX  # versions 1 and 2, still read
SUFFIXES = (TABLE_SUFFIX, ARROW_SUFFIX)


class ColumnStore:
    """Tables read column by column: each column is decoded on first use (by
    :meth:`_load`, which a store defines) and kept, one copy per column, so readers that
    share a column share its memory. :class:`Trace` reads a trace directory; the analysis
    engine's window selection reads the rows of a trace that a window keeps."""

    def __init__(self) -> None:
        self._columns: dict[tuple[str, str], pa.Array] = {}

    def has(self, name: str) -> bool:
        """True when the store has table ``name`` (it may still have zero rows)."""
        raise NotImplementedError

    def num_rows(self, name: str) -> int:
        raise NotImplementedError

    def constant(self, name: str, column: str) -> tuple[Any] | None:
        """``(value,)`` when every row of ``column`` of table ``name`` is known to hold
        ``value`` without decoding it (``(None,)``: every row null); None when unknown."""
        return None

    def _load(self, decl: schema.Table, cols: list[str]) -> dict[tuple[str, str], pa.Array]:
        """Read ``cols`` of ``decl`` (one pass over the table)."""
        raise NotImplementedError

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
        """Read the columns of table ``name`` not read yet, in one pass over the file,
        and keep them."""
        self.prefetch_tables([(name, columns)])

    def prefetch_tables(self, wanted: Iterable[tuple[str, Iterable[str]]]) -> None:
        """:meth:`prefetch` for several tables at once: each file is decoded on a thread
        of its own (Parquet decoding releases the GIL), so on a machine with more than
        one core the tables are read side by side."""
        loads = []
        for name, columns in wanted:
            decl = schema.table(name)
            missing = [c for c in columns if (name, decl.column(c).name) not in self._columns]
            if missing:
                loads.append((decl, missing))
        for got in _concurrently([lambda d=d, m=m: self._load(d, m) for d, m in loads]):
            self._columns.update(got)

    def read_columns(self, name: str, columns: Iterable[str]) -> list[pa.Array]:
        """Columns of table ``name`` for one use, not kept (``table(..., cache=False)``),
        each read on a thread of its own: several columns are decoded side by side."""
        decl = schema.table(name)
        cols = [decl.column(c).name for c in columns]

        def one(c: str) -> pa.Array:
            if (name, c) in self._columns:
                return self._columns[(name, c)]
            return self._load(decl, [c])[(name, c)]

        return _concurrently([lambda c=c: one(c) for c in cols])

    def column(self, name: str, column: str) -> pa.Array:
        """One column of table ``name`` as a single Arrow array (decoded, cached)."""
        if (name, column) not in self._columns:
            decl = schema.table(name)
            self._columns.update(self._load(decl, [decl.column(column).name]))
        return self._columns[(name, column)]


class Trace(ColumnStore):
    """A trace directory opened for reading.

    Columns are read on first use (older versions decoded: ``tablefile``) and kept, one copy
    per column, so passes that share a column share its memory. ``pass_cache`` holds the
    values the passes derive from the tables (device keys, merged intervals, ...): it is
    opaque here, owned by the analysis engine (its analysis context), the one code that
    reads it. Storage knows no analysis: the report, the notebook summary
    and every analysis of a trace are on ``tbdtrace.analyze(trace)`` (DECISIONS engine.2).
    """

    def __init__(self, path: Path, meta: dict[str, Any], files: Path | None = None):
        super().__init__()
        self.path = path  # what the trace is, as messages and reports name it
        self.files = files or path  # the folder its table files are read from
        self.meta = meta
        self._rows: dict[str, int] = {}
        self._footers: dict[str, Any] = {}  # table -> Parquet footer (None: no statistics)
        self.pass_cache: object = None  # the analysis engine's cache, made on first use

    def __repr__(self) -> str:
        return f"Trace({str(self.path)!r}, source={self.meta.get('source')!r})"

    def has(self, name: str) -> bool:
        """True when the table file exists (it may still have zero rows)."""
        return self._file(name) is not None

    def _file(self, name: str) -> Path | None:
        """The table's file: ``<name>.parquet`` (version 3) or ``<name>.arrow`` (1, 2)."""
        for suffix in SUFFIXES:
            f = self.files / f"{name}{suffix}"
            if f.exists():
                return f
        return None

    def constant(self, name: str, column: str) -> tuple[Any] | None:
        """``(value,)`` when every row of ``column`` of table ``name`` holds ``value``
        (``(None,)``: every row null), as the table file's statistics prove without
        decoding it; None when they do not tell (then read the column)."""
        if name not in self._footers:
            f = self._file(name)
            self._footers[name] = None if f is None else tablefile.footer(f)
        meta = self._footers[name]
        return None if meta is None else tablefile.constant(meta, column)

    def df(self, name: str, columns: Iterable[str] | None = None) -> Any:
        """Table ``name`` as a pandas DataFrame (dictionary columns become categoricals)."""
        from tbdtrace import _pandas_gate

        _pandas_gate.require()
        return self.table(name, columns).to_pandas()

    def num_rows(self, name: str) -> int:
        if name not in self._rows:
            f = self._file(name)
            self._rows[name] = 0 if f is None else tablefile.num_rows(f)
        return self._rows[name]

    def _load(self, decl: schema.Table, cols: list[str]) -> dict[tuple[str, str], pa.Array]:
        """Read ``cols`` of ``decl`` (one pass over the file)."""
        f = self._file(decl.name)
        if f is None:
            return {(decl.name, c): pa.nulls(0, decl.column(c).type) for c in cols}
        got = tablefile.read(f, decl, cols)
        if got:
            self._rows[decl.name] = len(next(iter(got.values())))
        # A version-2 file may add start_ns (read to decode end_ns); keep it too.
        return {(decl.name, c): a for c, a in got.items()}


def _concurrently(calls: list[Any]) -> list[Any]:
    """The results of ``calls``, run side by side on up to as many threads as this
    process may use cores (one call, or one core: in turn, on the calling thread). An
    exception of any call is raised here, after every call has ended."""
    workers = min(len(calls), _cores())
    if workers < 2:
        return [c() for c in calls]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda call: call(), calls))


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


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


def open(  # noqa: A001 - the documented API name
    path: str | os.PathLike[str], shown_as: str | os.PathLike[str] | None = None
) -> Trace:
    """Open and validate the trace directory at ``path``; ``shown_as``: the path the
    trace is named by instead (the profiler file a temporary trace was imported from)."""
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
    for f in (f for suffix in SUFFIXES for f in p.glob(f"*{suffix}")):
        if f.stem not in schema.TABLES_BY_NAME:
            raise TraceError(f"{f}: unknown table {f.stem!r}; remove it or upgrade tbdtrace")
    return Trace(Path(shown_as) if shown_as is not None else p, meta, p)


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


class Streamed:
    """A table given to :func:`write` as record batches, in storage order (what a
    streaming import merges): ``batches()`` yields them, each of ``schema``; written row
    group by row group, never whole in memory."""

    def __init__(self, schema_: pa.Schema, batches: Any):
        self.schema = schema_
        self.batches = batches


def write(
    path: str | os.PathLike[str],
    tables: Mapping[str, pa.Table | Mapping[str, Any] | Streamed],
    meta: Mapping[str, Any],
    files: Mapping[str, bytes] | None = None,
    compression: Any = tablefile.COMPRESSION,
) -> Path:
    """Write a trace directory and return its path.

    ``tables`` maps table names to Arrow tables (conforming to the schema), to column
    mappings for :func:`to_table`, or to :class:`Streamed` batches. ``meta`` gets
    ``schema_version`` filled in. ``files`` adds other files to the trace (name ->
    content, e.g. ``capture.log``). ``compression``: the table files' page codec (None
    for a temporary trace that is read once).

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
            names = _write_files(tmp, tables, meta, files or {}, compression)
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
    tables: Mapping[str, pa.Table | Mapping[str, Any] | Streamed],
    meta: Mapping[str, Any],
    files: Mapping[str, bytes],
    compression: Any = tablefile.COMPRESSION,
) -> list[str]:
    """The trace's files in ``tmp``; returns their names (the marker included)."""
    from tbdtrace import outdir

    names = []
    for name, data in tables.items():
        decl = schema.table(name)
        file = tmp / f"{name}{TABLE_SUFFIX}"
        if isinstance(data, Streamed):
            if data.schema != decl.arrow_schema():
                raise ValueError(f"{name}: streamed batches do not have the table's schema")
            tablefile.write_batches(file, decl, data.batches(), compression)
            names.append(f"{name}{TABLE_SUFFIX}")
            continue
        tbl = data if isinstance(data, pa.Table) else to_table(name, data)
        want = decl.arrow_schema()
        if tbl.schema != want:
            tbl = _conform(tbl, want, tmp / name)
        tablefile.write(file, decl, stored(decl, tbl), compression)
        names.append(f"{name}{TABLE_SUFFIX}")
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
    """``tbl`` as it is kept on disk: in time order (see the schema's storage notes)."""
    tc = decl.time_column
    if tc is not None and tbl.num_rows > 1:
        t = int_values(tbl.column(tc), 0)
        if tc == "start_ns":
            # Ranges: by start, then the longer first, so enclosing ranges precede the
            # ranges they contain (what interval searches over nested ranges want).
            e = int_values(tbl.column("end_ns"), 0)
            if not _ordered(t, e):
                keys = [("start_ns", "ascending"), ("end_ns", "descending")]
                tbl = tbl.take(pc.sort_indices(tbl, keys))  # stable
        elif not (t[1:] >= t[:-1]).all():
            tbl = tbl.take(pc.sort_indices(tbl, [(tc, "ascending")]))  # stable
    return tbl.combine_chunks()


def _full_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """``meta`` with every standard key present and ``schema_version`` set."""
    full: dict[str, Any] = {k: None for k in ("source", "backend", "host", "framework", "workload")}
    full.update({"clock": "CLOCK_REALTIME", "clock_offset_ns": 0})
    full.update(meta)
    full["schema_version"] = schema.SCHEMA_VERSION
    return full


class MemoryTrace(Trace):
    """A trace held in memory, e.g. an import analyzed without writing it: the same
    reads, caches and pass cache as a trace directory. ``path`` names where it came from."""

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
                out[(decl.name, c)] = combine(tbl.column(col.name))
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
