"""Importing in bounded memory: tables spooled as sorted runs, merged into storage order.

An importer that reads its input in batches (:mod:`tbdtrace.importers.kineto.stream`,
:mod:`tbdtrace.importers.nsys`) converts each batch into schema tables, sorts each into
storage order (:func:`tbdtrace.trace.stored`) and appends it to a :class:`TableSpool`
(one Arrow IPC file per table, blocks of :data:`BLOCK_ROWS` rows, dictionary columns as
indices with the run's dictionary kept beside) as a :class:`Run`. :class:`Merge` then
yields the table in storage order: it reads a block per run at a time, emits every row
up to the smallest last-buffered key of the runs not yet exhausted, and orders them as
one stable sort of the whole table would (by time, then the longer range first, then the
order rows were read, runs being in read order); each run's dictionaries are mapped onto
one dictionary per column in first-appearance order, as an in-memory import numbers
them, so the table written is the one an in-memory import writes, byte for byte.

What a run's rows still lack at spool time (a Kineto file's time base, written after
its events; its rank and device type) a :class:`Plan` supplies at the merge.

Memory: a block per run and the rows emitted between two cuts; never the table.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace import schema
from tbdtrace import trace as trace_io
from tbdtrace.importers.columns import int_array

BLOCK_ROWS = 1 << 16  # rows per spool record batch: what the merge reads of a run at once
# Columns holding times (a Plan's base is added to them); durations are not times.
TIME_COLUMNS = ("start_ns", "end_ns", "ts_ns", "host_start_ns", "host_end_ns")
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


class Plan:
    """What the merge adds to a run's rows (the default: nothing)."""

    def base(self, run: Run) -> int:
        """Added to the run's times (0: none)."""
        return 0

    def per_run(self, table: str) -> dict[str, list[Any]]:
        """Columns whose value is one per run (e.g. the file's rank): column -> the value of
        each run, in run order (a string column's dictionary is made from them)."""
        return {}

    def finish(self, table: str, cols: dict[str, pa.Array]) -> dict[str, pa.Array]:
        """The merged rows' final columns (e.g. joined with rows kept elsewhere)."""
        return cols


@dataclass
class Run:
    """One batch's rows of one table, sorted, in the spool."""

    file: int  # input file index
    first: int  # first block (record batch) in the table's spool file
    blocks: int
    rows: int
    dicts: dict[str, pa.Array]  # dictionary column -> this run's dictionary
    lo: int  # smallest time (before the plan's base); _I64_MAX without rows
    hi: int  # largest time
    first_start: int | None = None  # smallest start_ns (before the base), if any


class Spool:
    """The tables of one import, spooled in ``folder`` (one file per table)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.tables: dict[str, TableSpool] = {}

    def add(self, name: str, cols: dict[str, pa.Array] | pa.Table, file: int) -> None:
        """Append table ``name``'s rows (its columns, any order) as a run of file ``file``."""
        if name not in self.tables:
            self.tables[name] = TableSpool(schema.table(name), self.folder / f"{name}.arrows")
        tbl = cols if isinstance(cols, pa.Table) else trace_io.to_table(name, cols)
        self.tables[name].add(trace_io.stored(schema.table(name), tbl), file)

    def close(self) -> None:
        for sp in self.tables.values():
            sp.close()

    def rows(self) -> dict[str, int]:
        return {n: sp.rows for n, sp in self.tables.items() if sp.rows}

    def first_start(self, base: Any = None) -> int | None:
        """The earliest start_ns of every table, each run's plus ``base(run)``."""
        starts = [
            r.first_start + (base(r) if base is not None else 0)
            for sp in self.tables.values()
            for r in sp.runs
            if r.first_start is not None
        ]
        return min(starts) if starts else None


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
                mm = pc.min_max(col)
                lo, hi = min(lo, mm["min"].as_py()), max(hi, mm["max"].as_py())
            cols.append(col)
        rb = pa.RecordBatch.from_arrays(cols, schema=self.schema)
        starts = rb.column("start_ns") if "start_ns" in self.schema.names else None
        first_start = pc.min(starts).as_py() if starts is not None and len(starts) else None
        first = self.blocks
        for at in range(0, rb.num_rows, BLOCK_ROWS):
            self.writer.write_batch(rb.slice(at, BLOCK_ROWS))
            self.blocks += 1
        self.runs.append(
            Run(file, first, self.blocks - first, rb.num_rows, dicts, lo, hi, first_start)
        )

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    @property
    def rows(self) -> int:
        return sum(r.rows for r in self.runs)


class Merge:
    """The k-way merge of one table's runs (see the module docstring)."""

    def __init__(self, sp: TableSpool, plan: Plan | None = None):
        self.sp = sp
        self.plan = plan or Plan()
        self.decl = sp.decl
        self.names = self.decl.column_names
        self.types = {f.name: f.type for f in self.decl.arrow_schema()}
        self.ranged = self.decl.time_column == "start_ns"
        self.key = self.decl.time_column or self.names[0]
        self.bases = [self.plan.base(r) for r in sp.runs]
        self.per_run = self.plan.per_run(self.decl.name)
        # One dictionary per column: the runs' dictionaries in run order, first appearance.
        self.dicts: dict[str, pa.Array] = {}
        self.luts: list[dict[str, np.ndarray]] = [{} for _ in sp.runs]
        for c, t in self.types.items():
            if not pa.types.is_dictionary(t):
                continue
            if c in self.per_run:
                values = [v for v in dict.fromkeys(self.per_run[c]) if v is not None]
                self.dicts[c] = pa.array(values, pa.string())
                continue
            parts = [r.dicts[c] for r in sp.runs]
            if not parts:
                self.dicts[c] = pa.array([], pa.string())
                continue
            enc = pa.concat_arrays(parts).dictionary_encode()
            self.dicts[c] = enc.dictionary
            codes = enc.indices.to_numpy(zero_copy_only=False)
            at = 0
            for i, part in enumerate(parts):
                self.luts[i][c] = np.asarray(codes[at : at + len(part)], np.int32)
                at += len(part)

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The table's rows in storage order, a record batch per cut."""
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
        """Run ``j``'s next block appended to its buffer."""
        r = self.sp.runs[j]
        if nxt[j] >= r.first + r.blocks:
            return buf
        block = reader.get_batch(nxt[j])
        nxt[j] += 1
        if buf is None or not buf.num_rows:
            return block
        return pa.Table.from_batches([buf, block]).combine_chunks().to_batches()[0]

    def _times(self, b: pa.RecordBatch, j: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Run ``j``'s buffered times with its base (runs of different files are ordered
        by their final times)."""
        base = self.bases[j]
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
        """Run ``j``'s rows ``b`` as final columns: the plan's base and per-run values,
        dictionary indices onto the merged dictionaries."""
        base = self.bases[j]
        n = b.num_rows
        out = []
        for c in self.names:
            col = b.column(c)
            t = self.types[c]
            if c in self.per_run:
                col = _constant(self.per_run[c][j], n, t, self.dicts.get(c))
            elif pa.types.is_dictionary(t):
                lut = self.luts[j][c]
                if len(lut) and col.null_count < n:
                    idx = np.asarray(col.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
                    col = int_array(lut[idx], pa.int32(), _nulls(col) if col.null_count else None)
            elif c in TIME_COLUMNS and base:
                col = pc.add(col, pa.scalar(base, pa.int64()))
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
        in_order = len(order) < 2 or bool((order[1:] > order[:-1]).all())
        take = None if in_order else int_array(order, pa.int64())
        final: dict[str, pa.Array] = {}
        for c, col in zip(self.names, cols, strict=True):
            if take is not None:
                col = col.take(take)
            if pa.types.is_dictionary(self.types[c]):
                col = pa.DictionaryArray.from_arrays(col, self.dicts[c])
            final[c] = col
        final = self.plan.finish(self.decl.name, final)
        return pa.RecordBatch.from_arrays(
            [final[c] for c in self.names], schema=self.decl.arrow_schema()
        )


def _constant(value: Any, n: int, typ: pa.DataType, dictionary: pa.Array | None) -> pa.Array:
    """``n`` rows of ``value`` (None: null) as a column of ``typ``; a string column as
    indices into ``dictionary``."""
    null = np.full(n, value is None)
    if pa.types.is_dictionary(typ):
        assert dictionary is not None
        code = dictionary.to_pylist().index(value) if value is not None else 0
        return int_array(np.full(n, code, np.int32), pa.int32(), null)
    return int_array(np.full(n, value if value is not None else 0), typ, null)


def _nulls(col: pa.Array) -> np.ndarray:
    return np.asarray(col.is_null().to_numpy(zero_copy_only=False), bool)
