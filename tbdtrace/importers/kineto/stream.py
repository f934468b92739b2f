"""The Kineto import in bounded memory: batches of rows, sorted runs, a k-way merge.

A file of any size is imported holding a bounded window of rows (docs/DECISIONS.md
perf.2):

1. The parser hands its rows over every :data:`BATCH_ROWS` staging rows and at the end of
   each file (:class:`tbdtrace.importers.kineto.feed.ParseJob` in batch mode; strings stay
   interned in the parser, each batch's string columns come with their own dictionary).
2. Each batch becomes schema tables (:func:`tbdtrace.importers.kineto.tables.assemble`,
   the same code as the in-memory import), each table sorted into storage order and
   appended to a spool (one Arrow IPC file per table, in blocks of :data:`BLOCK_ROWS`
   rows) as a *run*. What depends on a file's top-level keys, which Kineto may write
   after its events (``baseTimeNanoseconds`` comes last), is left for the merge: times
   are stored without the file's base, ranks and device types as placeholders.
3. :class:`SpooledImport.tables` merges each table's runs block by block into storage
   order (ties in file order: the order one stable sort of the whole table gives), adds
   each file's base, rank and device type, maps each run's dictionaries onto one
   dictionary per column (first appearance in file order, as the in-memory import
   numbers it), fills the collectives' host spans, and yields record batches that
   :func:`tbdtrace.trace.write` writes row group by row group.

Memory: one batch being converted, one parsed ahead, a block per run during the merge,
one row group being written; never the file or the table.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace import _native, schema
from tbdtrace import trace as trace_io
from tbdtrace.errors import TraceError
from tbdtrace.importers import collectives
from tbdtrace.importers.columns import int_array
from tbdtrace.importers.kineto import header as kineto_header
from tbdtrace.importers.kineto import repair
from tbdtrace.importers.kineto.feed import BATCH_ROWS, FileFix, ParseFailure, ParseJob, start
from tbdtrace.importers.kineto.tables import (
    _I64_MAX,
    _I64_MIN,
    ORDER,
    BaseOverflow,
    Staging,
    assemble,
)

BLOCK_ROWS = 1 << 16  # rows per spool record batch: what the merge reads of a run at once
# Columns holding times (added the file's base at the merge); durations are not times.
TIME_COLUMNS = ("start_ns", "end_ns", "ts_ns", "host_start_ns", "host_end_ns")
# Tables whose device_type comes from the file (its devices: CUDA or ROCm); memory rows
# carry their own device type.
FILE_DEVICE_TYPE = ("kernels", "memcpy", "memset")
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
# A batch's placeholder for the file's top-level keys, resolved at the merge.
_PLACEHOLDER = kineto_header.FileInfo(Path(), {}, {}, None, 0, False, [])


@dataclass
class Run:
    """One batch's rows of one table, sorted, in the spool."""

    file: int  # input file index
    first: int  # first block (record batch) in the table's spool file
    blocks: int
    rows: int
    dicts: dict[str, pa.Array]  # dictionary column -> this run's dictionary
    lo: int  # smallest time (before the file's base); _I64_MAX without rows
    hi: int  # largest time


@dataclass
class TableSpool:
    """The runs of one table: an Arrow IPC file, dictionary columns stored as indices."""

    decl: schema.Table
    path: Path
    writer: Any = None
    runs: list[Run] = field(default_factory=list)
    blocks: int = 0

    def __post_init__(self) -> None:
        fields = [
            pa.field(f.name, pa.int32()) if pa.types.is_dictionary(f.type) else f
            for f in self.decl.arrow_schema()
        ]
        self.schema = pa.schema(fields)

    def add(self, tbl: pa.Table, file: int) -> None:
        """Append ``tbl`` (schema-conformed, in storage order) as a run."""
        if self.writer is None:
            self.writer = pa.ipc.new_file(str(self.path), self.schema)
        dicts: dict[str, pa.Array] = {}
        cols = []
        lo, hi = _I64_MAX, _I64_MIN
        for f in self.decl.arrow_schema():
            col = trace_io.combine(tbl.column(f.name))
            if pa.types.is_dictionary(f.type):
                dicts[f.name] = col.dictionary
                col = col.indices
            elif f.name in TIME_COLUMNS and len(col) > col.null_count:
                mm = pa.compute.min_max(col)
                lo, hi = min(lo, mm["min"].as_py()), max(hi, mm["max"].as_py())
            cols.append(col)
        rb = pa.RecordBatch.from_arrays(cols, schema=self.schema)
        first = self.blocks
        for at in range(0, rb.num_rows, BLOCK_ROWS):
            self.writer.write_batch(rb.slice(at, BLOCK_ROWS))
            self.blocks += 1
        self.runs.append(Run(file, first, self.blocks - first, rb.num_rows, dicts, lo, hi))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    @property
    def rows(self) -> int:
        return sum(r.rows for r in self.runs)


@dataclass
class CommOps:
    """The host ops that issue collectives (record_param_comms, nccl:*, ...), kept from
    every batch for the collectives' host spans: few rows (one per collective)."""

    file: list[np.ndarray] = field(default_factory=list)
    ext: list[np.ndarray] = field(default_factory=list)
    start: list[np.ndarray] = field(default_factory=list)
    end: list[np.ndarray] = field(default_factory=list)

    def add(self, ops: dict[str, pa.Array], file: int) -> None:
        if "external_id" not in ops:
            return
        rows = collectives.host_op_rows(ops)
        if not len(rows):
            return
        take = int_array(rows, pa.int64())
        self.file.append(np.full(len(rows), file, np.int64))
        self.ext.append(ops["external_id"].take(take).to_numpy(zero_copy_only=False))
        self.start.append(ops["start_ns"].take(take).to_numpy(zero_copy_only=False))
        self.end.append(ops["end_ns"].take(take).to_numpy(zero_copy_only=False))


class SpooledImport:
    """Kineto files parsed into a spool (stage 1); :meth:`tables` merges it (stage 2)."""

    def __init__(self, files: list[Path], folder: Path):
        self.files = files
        self.folder = folder
        self.spools: dict[str, TableSpool] = {}
        self.comm = CommOps()
        self.infos: list[kineto_header.FileInfo] = []
        self.base_added: list[int] = []
        self.meta: dict[str, Any] = {}
        self.devices: dict[str, pa.Array] | None = None

    # ---- stage 1 ----

    def consume(self, job: ParseJob) -> None:
        """Every batch of ``job`` into the spool; then the files' top-level keys."""
        layout = [t for t, _ in _native.kineto_layout()]
        while (item := job.next_batch()) is not None:
            file, batch = item
            rows = [len(next(iter(batch["tables"][t].values()))[0]) for t in layout]
            staging = Staging(batch, [(_PLACEHOLDER, rows)])
            built = assemble(staging, host_spans=False)
            if "ops" in built:
                self.comm.add(built["ops"], file)
            for name, cols in built.items():
                self._spool(name).add(_sorted(name, cols), file)
        for sp in self.spools.values():
            sp.close()
        imp, self.infos = _headers(self.files, job)
        self.base_added = [fp.base_added for fp in job.parsed]
        self._check_times()
        devices = imp.t["devices"]
        self.devices = devices.arrow_columns() if len(devices) else None
        self.meta = kineto_header.file_meta(imp, self.files, None, self.start_time_ns())

    def _spool(self, name: str) -> TableSpool:
        if name not in self.spools:
            self.spools[name] = TableSpool(schema.table(name), self.folder / f"{name}.arrows")
        return self.spools[name]

    def base(self, file: int) -> int:
        """What is left to add to the times of file ``file``."""
        return self.infos[file].base - self.base_added[file]

    def _check_times(self) -> None:
        """BaseOverflow when a time plus its file's base leaves int64 (the files are then
        parsed again with the bases given to the parser, which skips those events)."""
        for sp in self.spools.values():
            for r in sp.runs:
                b = self.base(r.file)
                if b and r.lo <= r.hi and (r.lo + b < _I64_MIN or r.hi + b > _I64_MAX):
                    raise BaseOverflow(f"a time plus baseTimeNanoseconds {b} overflows")

    def start_time_ns(self) -> int | None:
        """The earliest start of the tables that have one (as the in-memory import's meta)."""
        starts = [
            r.lo + self.base(r.file)
            for name, sp in self.spools.items()
            if "start_ns" in sp.decl.column_names
            for r in sp.runs
            if r.rows
        ]
        return min(starts) if starts else None

    def rows(self) -> dict[str, int]:
        out = {name: sp.rows for name, sp in self.spools.items() if sp.rows}
        if self.devices is not None:
            out["devices"] = len(next(iter(self.devices.values())))
        return {t: out[t] for t in (*ORDER, "devices") if t in out}

    # ---- stage 2 ----

    def tables(self) -> dict[str, Any]:
        """The trace's tables for :func:`tbdtrace.trace.write`: each a
        :class:`tbdtrace.trace.Streamed` of record batches in storage order (the devices
        table, a few rows, as columns)."""
        out: dict[str, Any] = {}
        for name in ORDER:
            sp = self.spools.get(name)
            if sp is not None and sp.rows:
                out[name] = trace_io.Streamed(
                    sp.decl.arrow_schema(), lambda sp=sp: _Merge(self, sp).batches()
                )
        if self.devices is not None:
            out["devices"] = self.devices
        return out


def _sorted(name: str, cols: dict[str, pa.Array]) -> pa.Table:
    decl = schema.table(name)
    return trace_io.stored(decl, trace_io.to_table(name, cols))


def _headers(
    files: list[Path], job: ParseJob
) -> tuple[kineto_header.FileHeaders, list[kineto_header.FileInfo]]:
    from tbdtrace.importers.kineto.tables import _headers as headers

    return headers(files, job)


class _Merge:
    """The k-way merge of one table's runs (see the module docstring)."""

    def __init__(self, imp: SpooledImport, sp: TableSpool):
        self.imp, self.sp = imp, sp
        self.decl = sp.decl
        self.names = self.decl.column_names
        self.types = {f.name: f.type for f in self.decl.arrow_schema()}
        self.ranged = self.decl.time_column == "start_ns"
        self.key = self.decl.time_column or self.names[0]
        # One dictionary per column: the runs' dictionaries in file order, first appearance.
        self.dicts: dict[str, pa.Array] = {}
        self.luts: list[dict[str, np.ndarray]] = [{} for _ in sp.runs]
        for c, t in self.types.items():
            if not pa.types.is_dictionary(t) or self._per_file(c):
                continue
            parts = [r.dicts[c] for r in sp.runs]
            enc = pa.concat_arrays(parts).dictionary_encode() if parts else None
            self.dicts[c] = enc.dictionary if enc is not None else pa.array([], pa.string())
            codes = enc.indices.to_numpy(zero_copy_only=False) if enc is not None else []
            at = 0
            for i, p in enumerate(parts):
                self.luts[i][c] = np.asarray(codes[at : at + len(p)], np.int32)
                at += len(p)
        if "device_type" in self.types and self._per_file("device_type"):
            kinds = ["rocm" if imp.infos[r.file].rocm else "cuda" for r in sp.runs]
            self.dicts["device_type"] = pa.array(list(dict.fromkeys(kinds)), pa.string())
        self.spans = _host_spans(imp) if sp.decl.name == "collectives" else None

    def _per_file(self, column: str) -> bool:
        return column == "device_type" and self.decl.name in FILE_DEVICE_TYPE

    def batches(self) -> Iterator[pa.RecordBatch]:
        reader = pa.ipc.open_file(pa.OSFile(str(self.sp.path)))
        runs = self.sp.runs
        nxt = [r.first for r in runs]
        bufs: list[pa.RecordBatch | None] = [None] * len(runs)
        for j in range(len(runs)):
            bufs[j] = self._load(reader, j, nxt, None)
        while any(b is not None and b.num_rows for b in bufs):
            open_runs = [j for j, r in enumerate(runs) if nxt[j] < r.first + r.blocks]
            cut = None
            if open_runs:
                cut = min(self._last_key(bufs[j], j) for j in open_runs)
            parts = []
            for j, b in enumerate(bufs):
                if b is None or not b.num_rows:
                    continue
                n = b.num_rows if cut is None else self._count_le(b, j, cut)
                if n:
                    parts.append(self._final(b.slice(0, n), j))
                    bufs[j] = b.slice(n)
            if cut is not None:
                cj = cut[2]
                bufs[cj] = self._load(reader, cj, nxt, bufs[cj])
            if parts:
                yield self._ordered(parts)

    def _load(
        self, reader: Any, j: int, nxt: list[int], buf: pa.RecordBatch | None
    ) -> pa.RecordBatch | None:
        r = self.sp.runs[j]
        if nxt[j] >= r.first + r.blocks:
            return buf
        block = reader.get_batch(nxt[j])
        nxt[j] += 1
        if buf is None or not buf.num_rows:
            return block
        return pa.Table.from_batches([buf, block]).combine_chunks().to_batches()[0]

    def _times(self, b: pa.RecordBatch, j: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Run ``j``'s buffered times with its file's base (runs of different files are
        ordered by their final times)."""
        base = self.imp.base(self.sp.runs[j].file)
        s = b.column(self.key).to_numpy(zero_copy_only=False) + base
        e = b.column("end_ns").to_numpy(zero_copy_only=False) + base if self.ranged else None
        return s, e

    def _last_key(self, b: pa.RecordBatch | None, j: int) -> tuple[int, int, int]:
        assert b is not None and b.num_rows
        s, e = self._times(b.slice(b.num_rows - 1), j)
        return (int(s[0]), -int(e[0]) if e is not None else 0, j)

    def _count_le(self, b: pa.RecordBatch, j: int, cut: tuple[int, int, int]) -> int:
        """Leading rows of run ``j``'s buffer at or before ``cut`` in (time, -end, run,
        position) order; the cut is the last buffered row of run cut[2]."""
        s, e = self._times(b, j)
        cs, cne, cj = cut
        lo = int(np.searchsorted(s, cs, "left"))
        hi = int(np.searchsorted(s, cs, "right"))
        if e is None:
            return hi if j <= cj else lo
        ne = -e[lo:hi]
        before = int(np.searchsorted(ne, cne, "left"))
        equal = int(np.searchsorted(ne, cne, "right")) - before
        return lo + before + (equal if j <= cj else 0)

    def _final(self, b: pa.RecordBatch, j: int) -> list[pa.Array]:
        """Run ``j``'s rows ``b`` as final columns: its file's base, rank and device type,
        dictionary indices onto the merged dictionaries."""
        run = self.sp.runs[j]
        info = self.imp.infos[run.file]
        base = self.imp.base(run.file)
        n = b.num_rows
        out = []
        for c in self.names:
            col = b.column(c)
            t = self.types[c]
            if c == "rank":
                r = info.rank
                r = r if r is not None and _I32_MIN <= r <= _I32_MAX else None
                col = int_array(np.full(n, r or 0, np.int32), pa.int32(), np.full(n, r is None))
            elif self._per_file(c):
                code = self.dicts[c].to_pylist().index("rocm" if info.rocm else "cuda")
                col = int_array(np.full(n, code, np.int32), pa.int32())
            elif pa.types.is_dictionary(t):
                lut = self.luts[j][c]
                if len(lut) and col.null_count < n:
                    idx = np.asarray(col.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
                    col = int_array(lut[idx], pa.int32(), _nulls(col) if col.null_count else None)
            elif c in TIME_COLUMNS and base:
                col = pa.compute.add(col, pa.scalar(base, pa.int64()))
            out.append(col)
        return out

    def _ordered(self, parts: list[list[pa.Array]]) -> pa.RecordBatch:
        cols = [pa.concat_arrays([p[i] for p in parts]) for i in range(len(self.names))]
        idx = {c: i for i, c in enumerate(self.names)}
        s = cols[idx[self.key]].to_numpy(zero_copy_only=False)
        seq = np.arange(len(s))
        if self.ranged:
            e = cols[idx["end_ns"]].to_numpy(zero_copy_only=False)
            order = np.lexsort((seq, -e, s))
        else:
            order = np.lexsort((seq, s))
        sorted_already = bool((order[1:] > order[:-1]).all()) if len(order) > 1 else True
        take = None if sorted_already else int_array(order, pa.int64())
        final = []
        for c, col in zip(self.names, cols, strict=True):
            if take is not None:
                col = col.take(take)
            t = self.types[c]
            if pa.types.is_dictionary(t):
                col = pa.DictionaryArray.from_arrays(col, self.dicts[c])
            final.append(col)
        if self.spans is not None:
            final = self._with_host_spans(final, idx)
        return pa.RecordBatch.from_arrays(final, schema=self.decl.arrow_schema())

    def _with_host_spans(self, cols: list[pa.Array], idx: dict[str, int]) -> list[pa.Array]:
        assert self.spans is not None
        keys, hs, he = self.spans
        ext = cols[idx["external_id"]]
        rank = cols[idx["rank"]]
        n = len(ext)
        found = np.zeros(n, bool)
        s_out, e_out = np.zeros(n, np.int64), np.zeros(n, np.int64)
        ok = ~_nulls(ext)
        if len(keys) and ok.any():
            r = np.asarray(rank.fill_null(-1).to_numpy(zero_copy_only=False), np.int64)
            x = np.asarray(ext.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
            want = _pairs(r, x)
            pos = np.searchsorted(keys, want)
            pos = np.minimum(pos, len(keys) - 1)
            hit = ok & (keys[pos] == want)
            found = hit
            s_out[hit], e_out[hit] = hs[pos[hit]], he[pos[hit]]
        cols[idx["host_start_ns"]] = int_array(s_out, pa.int64(), ~found)
        cols[idx["host_end_ns"]] = int_array(e_out, pa.int64(), ~found)
        return cols


def _nulls(col: pa.Array) -> np.ndarray:
    return np.asarray(col.is_null().to_numpy(zero_copy_only=False), bool)


def _pairs(r: np.ndarray, x: np.ndarray) -> np.ndarray:
    """(rank, external id) pairs as one sortable, searchable array."""
    out = np.empty(len(r), dtype=[("r", np.int64), ("x", np.int64)])
    out["r"], out["x"] = r, x
    return out


def _host_spans(imp: SpooledImport) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sorted (rank, external id) keys, earliest start, latest end) of the host ops that
    issue collectives (the outermost span when several match, as the in-memory import)."""
    c = imp.comm
    if not c.file:
        empty = np.zeros(0, np.int64)
        return _pairs(empty, empty), empty, empty
    file = np.concatenate(c.file)
    rank_of = np.array([i.rank if i.rank is not None else -1 for i in imp.infos] or [-1], np.int64)
    base_of = np.array([imp.base(f) for f in range(len(imp.infos))] or [0], np.int64)
    r = rank_of[file]
    x = np.concatenate(c.ext).astype(np.int64)
    s = np.concatenate(c.start).astype(np.int64) + base_of[file]
    e = np.concatenate(c.end).astype(np.int64) + base_of[file]
    keys = _pairs(r, x)
    order = np.argsort(keys, kind="stable")
    keys, s, e = keys[order], s[order], e[order]
    first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return keys[first], np.minimum.reduceat(s, first), np.maximum.reduceat(e, first)


def spool_files(files: list[Path], folder: Path, job: ParseJob | None = None) -> SpooledImport:
    """Parse ``files`` into a spool in ``folder`` (stage 1), repairing damaged files as
    the in-memory import does (:func:`tbdtrace.importers.kineto.repair.resolve`);
    ``job``: a batch-mode parse of ``files`` already started."""
    fixes: dict[int, FileFix] = {}
    for _ in range(repair.MAX_PARSES):
        part = Path(tempfile.mkdtemp(prefix="run-", dir=folder))
        imp = SpooledImport(files, part)
        try:
            imp.consume(job or start(files, fixes=fixes, batch_rows=BATCH_ROWS))
            return imp
        except ParseFailure as failure:
            fixes = repair.resolve(failure, fixes)
        except BaseOverflow:  # parse again, the parser adding each file's base itself
            bases = [info.base for info in imp.infos]
            fixes = {i: replace(fixes.get(i, FileFix()), base=b) for i, b in enumerate(bases)}
        finally:
            if job is not None:
                job.cancel()
        job = None
        shutil.rmtree(part, ignore_errors=True)
    raise TraceError(  # pragma: no cover - scores of duplicated traceEvents keys
        f"{', '.join(map(str, files))}: the file still cannot be read after "
        f"{repair.MAX_PARSES} repairs; report the file"
    )
