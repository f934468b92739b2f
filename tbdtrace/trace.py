"""Reading and writing trace directories (see docs/TRACE_FORMAT.md).

``open(path)`` validates a trace and returns a :class:`Trace` whose tables are read
lazily, memory-mapped, and only for the columns asked for. ``write(path, tables, meta)``
writes one: everything goes to a staging directory first and is moved into place only
once complete, so a failed write never destroys an earlier trace (see :func:`write`).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

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
        # Columns being decoded ahead (read_ahead), each with the event set once its
        # table's pass is done: a read of one waits for it instead of decoding it again.
        self._ahead: dict[tuple[str, str], threading.Event] = {}

    def has(self, name: str) -> bool:
        """True when the store has table ``name`` (it may still have zero rows)."""
        raise NotImplementedError

    def num_rows(self, name: str) -> int:
        raise NotImplementedError

    def constant(self, name: str, column: str) -> tuple[Any] | None:
        """``(value,)`` when every row of ``column`` of table ``name`` is known to hold
        ``value`` without decoding it (``(None,)``: every row null); None when unknown."""
        return None

    def min_max(self, name: str, column: str) -> tuple[int, int] | None:
        """(minimum, maximum) of an integer ``column`` of table ``name`` over every row,
        when known without decoding it (no row null); None when unknown."""
        return None

    def null_free(self, name: str, column: str) -> bool | None:
        """Whether no row of ``column`` of table ``name`` is null, when known without
        decoding it; None when unknown (then read the column)."""
        return None

    def _load(self, decl: schema.Table, cols: list[str]) -> dict[tuple[str, str], pa.Array]:
        """Read ``cols`` of ``decl`` (one pass over the table)."""
        raise NotImplementedError

    def narrow_ints(self, name: str, column: str) -> npt.NDArray[np.int32] | None:
        """An int64 column not read yet whose values fit int32 (as the file's statistics
        prove, none null), read as int32 and not kept (:func:`tablefile.read_narrow_ints`);
        None when the store cannot tell or cannot (then read the column)."""
        return None

    def label_codes(
        self, name: str, column: str
    ) -> tuple[npt.NDArray[np.integer[Any]], list[str | None]] | None:
        """A dictionary column not read yet, decoded straight into int8 codes (int16 past
        126 labels) and its labels, a null as the code after the last label, without
        keeping the column or holding its indices whole (:func:`tablefile.read_label_codes`).
        None when the store cannot (the column is read, or is not stored that way): read
        the column instead."""
        return None

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
        self._wait_ahead(name, cols)
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
            self._wait_ahead(name, [decl.column(c).name for c in columns])
            missing = [c for c in columns if (name, decl.column(c).name) not in self._columns]
            if missing:
                loads.append((decl, missing))
        for got in _concurrently([lambda d=d, m=m: self._load(d, m) for d, m in loads]):
            self._columns.update(got)

    def read_ahead(self, wanted: Iterable[tuple[str, Iterable[str]]]) -> Any:
        """Columns a caller is about to read, decoded by the call this returns (for a
        thread of its own: the caller goes on meanwhile), table by table in the order of
        ``wanted`` and kept; a read of one of them before its table is done waits for it
        instead of decoding it again. Tables the store lacks are passed over; a table
        that fails to read is left for the caller's own read to meet its error."""
        loads = []
        for name, columns in wanted:
            if not self.has(name):
                continue
            decl = schema.table(name)
            names = [decl.column(c).name for c in columns]
            known = self._columns.keys() | self._ahead.keys()
            missing = [c for c in names if (name, c) not in known]
            if missing:
                done = threading.Event()
                self._ahead.update({(name, c): done for c in missing})
                loads.append((decl, missing, done))

        def run() -> None:
            for decl, cols, done in loads:
                try:
                    self._columns.update(self._load(decl, cols))
                except Exception:  # noqa: S110 - raised again by the read that needs it
                    pass
                finally:
                    for c in cols:
                        self._ahead.pop((decl.name, c), None)
                    done.set()

        return run

    def _wait_ahead(self, name: str, columns: Iterable[str]) -> None:
        """Wait for the columns of table ``name`` being read ahead, if any."""
        if self._ahead:
            for c in columns:
                done = self._ahead.get((name, c))
                if done is not None:
                    done.wait()

    def read_columns(self, name: str, columns: Iterable[str]) -> list[pa.Array]:
        """Columns of table ``name`` for one use, not kept (``table(..., cache=False)``),
        each read on a thread of its own: several columns are decoded side by side."""
        decl = schema.table(name)
        cols = [decl.column(c).name for c in columns]

        def one(c: str) -> pa.Array:
            self._wait_ahead(name, [c])
            if (name, c) in self._columns:
                return self._columns[(name, c)]
            return self._load(decl, [c])[(name, c)]

        return _concurrently([lambda c=c: one(c) for c in cols])

    def forget(self, name: str, column: str) -> None:
        """Let go of ``column`` of table ``name`` (read again when asked for)."""
        self._columns.pop((name, column), None)

    def held_columns(self, name: str) -> list[str]:
        """The columns of table ``name`` read and kept."""
        return [c for t, c in self._columns if t == name]

    def holds(self, name: str, column: str) -> bool:
        """Is ``column`` of table ``name`` read and kept (:meth:`column` costs nothing)?"""
        return (name, column) in self._columns

    def column(self, name: str, column: str) -> pa.Array:
        """One column of table ``name`` as a single Arrow array (decoded, cached)."""
        self._wait_ahead(name, [column])
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
    and every analysis of a trace are on ``tbdtrace.analyze(trace)`` (DECISIONS 178).
    """

    def __init__(
        self,
        path: Path,
        meta: dict[str, Any],
        files: dict[str, Path] | None = None,
        footers: dict[str, Any] | None = None,
        problems: list[str] | None = None,
    ):
        super().__init__()
        self.path = path  # what the trace is, as messages and reports name it
        self.meta = meta
        # table -> its checked file (tbdtrace.trace_check); None: looked up by name
        self._files = files
        # What the check of the table files found (one line each): tables left out, and
        # extra files ignored. The CLI prints them; a library caller may read them.
        self.problems: list[str] = list(problems or [])
        self._rows: dict[str, int] = {}
        # table -> Parquet footer (None: no statistics)
        self._footers: dict[str, Any] = dict(footers or {})
        self.pass_cache: object = None  # the analysis engine's cache, made on first use

    def __repr__(self) -> str:
        return f"Trace({str(self.path)!r}, source={self.meta.get('source')!r})"

    def has(self, name: str) -> bool:
        """True when the table file exists (it may still have zero rows)."""
        return self._file(name) is not None

    def _file(self, name: str) -> Path | None:
        """The table's file: ``<name>.parquet`` (version 3) or ``<name>.arrow`` (1, 2);
        for a trace opened by :func:`open`, only a file its check accepted."""
        if self._files is not None:
            return self._files.get(name)
        for suffix in SUFFIXES:
            f = self.path / f"{name}{suffix}"
            if f.exists():
                return f
        return None

    def constant(self, name: str, column: str) -> tuple[Any] | None:
        """``(value,)`` when every row of ``column`` of table ``name`` holds ``value``
        (``(None,)``: every row null), as the table file's statistics prove without
        decoding it; None when they do not tell (then read the column)."""
        meta = self._footer(name)
        return None if meta is None else tablefile.constant(meta, column)

    def min_max(self, name: str, column: str) -> tuple[int, int] | None:
        """(minimum, maximum) of an integer ``column`` over every row, as the table file's
        statistics prove (no row null) without decoding it; None when they do not tell."""
        meta = self._footer(name)
        return None if meta is None else tablefile.min_max(meta, column)

    def null_free(self, name: str, column: str) -> bool | None:
        """Whether no row of ``column`` is null, as the table file's statistics count;
        None when they do not tell."""
        meta = self._footer(name)
        return None if meta is None else tablefile.null_free(meta, column)

    def _footer(self, name: str) -> Any | None:
        if name not in self._footers:
            f = self._file(name)
            self._footers[name] = None if f is None else tablefile.footer(f)
        return self._footers[name]

    def df(self, name: str, columns: Iterable[str] | None = None) -> Any:
        """Table ``name`` as a pandas DataFrame (dictionary columns become categoricals)."""
        from tbdtrace import _pandas_gate

        _pandas_gate.require()
        return self.table(name, columns).to_pandas()

    def num_rows(self, name: str) -> int:
        if name not in self._rows:
            f = self._file(name)
            footer = self._footers.get(name)
            if footer is not None:
                self._rows[name] = int(footer.num_rows)
            else:
                self._rows[name] = 0 if f is None else tablefile.num_rows(f)
        return self._rows[name]

    def _load(self, decl: schema.Table, cols: list[str]) -> dict[tuple[str, str], pa.Array]:
        """Read ``cols`` of ``decl`` (one pass over the file)."""
        f = self._file(decl.name)
        if f is None:
            return {(decl.name, c): pa.nulls(0, decl.column(c).type) for c in cols}
        got = tablefile.read(f, decl, cols, self._footers.get(decl.name))
        if got:
            self._rows[decl.name] = len(next(iter(got.values())))
        # A version-2 file may add start_ns (read to decode end_ns); keep it too.
        return {(decl.name, c): a for c, a in got.items()}

    def narrow_ints(self, name: str, column: str) -> npt.NDArray[np.int32] | None:
        f = self._file(name)
        if f is None or self.holds(name, column) or (name, column) in self._ahead:
            return None
        return tablefile.read_narrow_ints(f, schema.table(name), column, self._footers.get(name))

    def label_codes(
        self, name: str, column: str
    ) -> tuple[npt.NDArray[np.integer[Any]], list[str | None]] | None:
        f = self._file(name)
        if f is None or self.holds(name, column) or (name, column) in self._ahead:
            return None
        return tablefile.read_label_codes(f, schema.table(name), column, self._footers.get(name))


def _concurrently(calls: list[Any]) -> list[Any]:
    """The results of ``calls``, run side by side on up to as many threads as this
    process may use cores (one call, or one core: in turn, on the calling thread). An
    exception of any call is raised here, after every call has ended."""
    workers = min(len(calls), _cores())
    if workers < 2:
        return [c() for c in calls]
    # A trace written at exit (a profiled child's is) may start no thread: importing the
    # pool or submitting to it raises RuntimeError then, and the calls run in turn here.
    futures: list[Any] = []
    try:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as pool:
            for call in calls:
                futures.append(pool.submit(call))
    except RuntimeError:  # no new thread (a call's own error is raised by result())
        pass
    rest = [c() for c in calls[len(futures) :]]
    return [f.result() for f in futures] + rest


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
    path: str | os.PathLike[str],
    strict: bool = False,
    shown_as: str | os.PathLike[str] | None = None,
) -> Trace:
    """Open and check the trace directory at ``path``: meta.json through its typed loader
    (:mod:`tbdtrace.meta`), every table file against the trace's marker
    (:mod:`tbdtrace.trace_check`). A table file that fails is left out (it reads as
    absent) and named in ``Trace.problems``; with ``strict`` it is a TraceError.
    ``shown_as``: the path the trace is named by instead (the profiler file a temporary
    trace was imported from)."""
    from tbdtrace import meta as meta_io
    from tbdtrace import outdir, trace_check
    from tbdtrace.safe_text import printable

    p = Path(path)
    meta_file = p / META_FILE
    if not p.is_dir():
        raise TraceError(
            f"{printable(str(p))}: not a trace directory; pass a directory written by tbdtrace"
        )
    if outdir.interrupted(p) is not None:
        trace_check.refuse_interrupted(p)
    if not meta_file.exists():
        raise TraceError(
            f"{printable(str(p))}: no {META_FILE}; this is not a tbdtrace trace directory"
        )
    if not meta_file.is_file():
        raise TraceError(f"{printable(str(meta_file))}: not a regular file; re-create the trace")
    checked = trace_check.check(p, strict)  # an interrupted write is refused first
    meta = meta_io.load(meta_file)
    version = meta.get("schema_version")
    if version not in schema.READABLE_VERSIONS:
        raise TraceError(
            f"{printable(str(meta_file))}: schema version {version!r}, this tbdtrace reads "
            f"{schema.SCHEMA_VERSION}; re-import or re-capture the trace"
        )
    shown = Path(shown_as) if shown_as is not None else p
    return Trace(
        shown, meta, checked.files, checked.footers, [*checked.problems, *checked.warnings]
    )


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
        import pyarrow.compute as pc  # writing only: reading a trace needs none of it

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


class Counted:
    """A table held in memory for :func:`write` (an Arrow table or a column mapping), and
    a call made with its rows once its file is written (a progress display counts them;
    it may come from another thread)."""

    def __init__(self, data: Any, written: Any):
        self.data = data
        self.written = written


def write(
    path: str | os.PathLike[str],
    tables: Mapping[str, pa.Table | Mapping[str, Any] | Streamed | Counted],
    meta: Mapping[str, Any],
    files: Mapping[str, bytes] | None = None,
    compression: Any = tablefile.COMPRESSION,
) -> Path:
    """Write a trace directory and return its path.

    ``tables`` maps table names to Arrow tables (conforming to the schema), to column
    mappings for :func:`to_table`, or to :class:`Streamed` batches (either of the first
    two may come in a :class:`Counted`). ``meta`` gets
    ``schema_version`` filled in. ``files`` adds other files to the trace (name ->
    content, e.g. ``capture.log``). ``compression``: the table files' page codec (None
    for a temporary trace that is read once).

    Everything is written to a staging directory first, so a failed write (a full disk)
    leaves an earlier trace at ``path`` as it was. An absent ``path`` then appears whole
    (one rename); into an existing empty directory or trace the files are moved through
    a journal in the marker, so that a process killed at any instant leaves the old
    trace, the new one, or an interrupted one that readers refuse and
    :func:`tbdtrace.trace_write.finish` completes (tbdtrace/trace_write.py). Only files
    the earlier trace's marker lists are replaced or removed: files of the user's own in
    a trace directory stay. Any other existing non-empty directory or file is left alone
    and raises TraceError. Directories follow the umask.
    """
    from tbdtrace import trace_write

    return trace_write.write(
        path, tables, meta, files, codec=sys.modules[__name__], compression=compression
    )


def _ordered(s: np.ndarray, e: np.ndarray) -> bool:
    """True when rows are by start ascending, then end descending."""
    ds = s[1:] - s[:-1]
    return bool((ds >= 0).all() and ((ds > 0) | (e[1:] <= e[:-1])).all())


def stored(decl: schema.Table, tbl: pa.Table) -> pa.Table:
    """``tbl`` as it is kept on disk: in time order (see the schema's storage notes)."""
    import pyarrow.compute as pc  # ~30 ms to import: not for a command that only reads

    tc = decl.time_column
    if tc is not None and tbl.num_rows > 1:
        t = int_values(tbl.column(tc), 0)
        if tc == "start_ns":
            # Ranges: by start, then the longer first, so enclosing ranges precede the
            # ranges they contain (what interval searches over nested ranges want).
            e = int_values(tbl.column("end_ns"), 0)
            if not _ordered(t, e):
                keys = [("start_ns", "ascending"), ("end_ns", "descending")]
                tbl = _permuted(tbl, pc.sort_indices(tbl, keys))  # stable
        elif not (t[1:] >= t[:-1]).all():
            tbl = _permuted(tbl, pc.sort_indices(tbl, [(tc, "ascending")]))  # stable
    return tbl.combine_chunks()


def _permuted(tbl: pa.Table, order: pa.Array) -> pa.Table:
    """The rows of ``tbl`` in ``order``, a permutation of its rows (a sort's indices):
    every index is in range, so the take checks none (a third of its time;
    docs/DECISIONS.md 244)."""
    import pyarrow.compute as pc

    return pc.take(tbl, order, boundscheck=False)


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
        # Per (table, column): (rows, nulls, (min, max) of an integer column or None).
        self._facts: dict[tuple[str, str], tuple[int, int, tuple[int, int] | None] | None] = {}

    def has(self, name: str) -> bool:
        return name in self._tables

    def constant(self, name: str, column: str) -> tuple[Any] | None:
        """``(value,)`` when every row of an integer ``column`` holds ``value``
        (``(None,)``: every row null, any type), from the column in memory (one pass for
        its minimum and maximum, kept), as a trace directory's statistics tell it: the
        passes then take the same one-value paths for an import and its trace directory."""
        f = self._fact(name, column)
        if f is None or f[0] == 0:
            return None
        n, nulls, mm = f
        if nulls == n:
            return (None,)
        return (mm[0],) if mm is not None and not nulls and mm[0] == mm[1] else None

    def min_max(self, name: str, column: str) -> tuple[int, int] | None:
        """(minimum, maximum) of an integer ``column`` without nulls, from memory."""
        f = self._fact(name, column)
        return None if f is None or f[0] == 0 or f[1] else f[2]

    def null_free(self, name: str, column: str) -> bool | None:
        """Whether no row of ``column`` is null (Arrow counts them)."""
        f = self._fact(name, column)
        return None if f is None else f[1] == 0

    def _fact(self, name: str, column: str) -> tuple[int, int, tuple[int, int] | None] | None:
        key = (name, column)
        if key not in self._facts:
            tbl = self._tables.get(name)
            decl = schema.table(name)
            if tbl is None or column not in decl.column_names:
                self._facts[key] = None
                return None
            col = tbl.column(decl.column(column).name)
            n, nulls = len(col), col.null_count
            mm: tuple[int, int] | None = None
            if pa.types.is_integer(col.type) and nulls < n:
                import pyarrow.compute as pc

                r = pc.min_max(col)
                mm = (int(r["min"].as_py()), int(r["max"].as_py()))
            self._facts[key] = (n, nulls, mm)
        return self._facts[key]

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
