"""The Kineto import in bounded memory: batches of rows, sorted runs, a k-way merge.

A file of any size is imported holding a bounded window of rows (docs/DECISIONS.md
137):

1. The parser hands its rows over every ``BATCH_ROWS`` staging rows and at the end of
   each file (:class:`tbdtrace.importers.kineto.feed.ParseJob` in batch mode; strings stay
   interned in the parser, each batch's string columns come with their own dictionary).
2. Each batch becomes schema tables (:func:`tbdtrace.importers.kineto.tables.assemble`,
   the same code as the in-memory import), spooled as sorted runs
   (:mod:`tbdtrace.importers.spool`). What depends on a file's top-level keys, which
   Kineto may write after its events (``baseTimeNanoseconds`` comes last), is left for
   the merge: times are stored without the file's base, ranks and device types as
   placeholders; the host ops that issue collectives are kept aside (a few rows).
3. :meth:`SpooledImport.tables` merges each table's runs (:class:`KinetoPlan` adds each
   file's base, rank and device type and the collectives' host spans) while
   :func:`tbdtrace.trace.write` writes them row group by row group.

The tables written are those of the in-memory import (:mod:`.tables`), row for row.
"""

from __future__ import annotations

import shutil
import tempfile
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
    _headers,
    assemble,
)
from tbdtrace.importers.spool import Merge, Plan, Run, Spool

# Tables whose device_type is the file's (its devices: CUDA or ROCm); memory rows carry
# their own.
FILE_DEVICE_TYPE = ("kernels", "memcpy", "memset")
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
# A batch's stand-in for the file's top-level keys, resolved at the merge.
_PLACEHOLDER = kineto_header.FileInfo(Path(), {}, {}, None, 0, False, [])


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
        self.spool = Spool(folder)
        self.comm = CommOps()
        self.infos: list[kineto_header.FileInfo] = []
        self.base_added: list[int] = []
        self.meta: dict[str, Any] = {}
        self.devices: dict[str, pa.Array] | None = None

    def consume(self, job: ParseJob, taken: list[Any] | None = None) -> None:
        """Every batch of ``job`` into the spool (``taken``: those already taken from it
        first); then the files' top-level keys."""
        layout = [t for t, _ in _native.kineto_layout()]
        ahead = list(taken or [])
        while (item := ahead.pop(0) if ahead else job.next_batch()) is not None:
            file, batch = item
            rows = [len(next(iter(batch["tables"][t].values()))[0]) for t in layout]
            built = assemble(Staging(batch, [(_PLACEHOLDER, rows)]), host_spans=False)
            if "ops" in built:
                self.comm.add(built["ops"], file)
            for name, cols in built.items():
                self.spool.add(name, cols, file)
        self.spool.close()
        imp, self.infos = _headers(self.files, job)
        self.base_added = [fp.base_added for fp in job.parsed]
        self._check_times()
        devices = imp.t["devices"]
        self.devices = devices.arrow_columns() if len(devices) else None
        self.meta = kineto_header.file_meta(imp, self.files, None, self.start_time_ns())

    def base(self, file: int) -> int:
        """What is left to add to the times of file ``file``."""
        return self.infos[file].base - self.base_added[file]

    def _check_times(self) -> None:
        """BaseOverflow when a time plus its file's base leaves int64 (the files are then
        parsed again with the bases given to the parser, which skips those events)."""
        for sp in self.spool.tables.values():
            for r in sp.runs:
                b = self.base(r.file)
                if b and r.lo <= r.hi and (r.lo + b < _I64_MIN or r.hi + b > _I64_MAX):
                    raise BaseOverflow(f"a time plus baseTimeNanoseconds {b} overflows")

    def start_time_ns(self) -> int | None:
        """The earliest start of the tables that have one (the in-memory import's meta)."""
        return self.spool.first_start(lambda r: self.base(r.file))

    def rows(self) -> dict[str, int]:
        out = self.spool.rows()
        if self.devices is not None:
            out["devices"] = len(next(iter(self.devices.values())))
        return {t: out[t] for t in (*ORDER, "devices") if t in out}

    def tables(self) -> dict[str, Any]:
        """The trace's tables for :func:`tbdtrace.trace.write`: each a
        :class:`tbdtrace.trace.Streamed` merge of its runs (the devices table, a few rows,
        as columns)."""
        plan = KinetoPlan(self)
        out: dict[str, Any] = {}
        for name in ORDER:
            sp = self.spool.tables.get(name)
            if sp is not None and sp.rows:
                out[name] = trace_io.Streamed(
                    sp.decl.arrow_schema(), lambda sp=sp: Merge(sp, plan).batches()
                )
        if self.devices is not None:
            out["devices"] = self.devices
        return out


class KinetoPlan(Plan):
    """What a Kineto run's rows get at the merge: its file's base, rank and device type;
    the collectives their host spans."""

    def __init__(self, imp: SpooledImport):
        self.imp = imp
        self._spans: tuple[np.ndarray, ...] | None = None

    def base(self, run: Run) -> int:
        return self.imp.base(run.file)

    def per_run(self, table: str) -> dict[str, list[Any]]:
        runs = self.imp.spool.tables[table].runs
        infos = [self.imp.infos[r.file] for r in runs]
        out: dict[str, list[Any]] = {}
        if "rank" in schema.table(table).column_names:
            out["rank"] = [
                i.rank if i.rank is not None and _I32_MIN <= i.rank <= _I32_MAX else None
                for i in infos
            ]
        if table in FILE_DEVICE_TYPE:
            out["device_type"] = ["rocm" if i.rocm else "cuda" for i in infos]
        return out

    def finish(self, table: str, cols: dict[str, pa.Array]) -> dict[str, pa.Array]:
        if table != "collectives":
            return cols
        if self._spans is None:
            self._spans = _host_spans(self.imp)
        kr, kx, hs, he = self._spans
        ext, rank = cols["external_id"], cols["rank"]
        n = len(ext)
        found = np.zeros(n, bool)
        s_out, e_out = np.zeros(n, np.int64), np.zeros(n, np.int64)
        ok = np.asarray(ext.is_valid().to_numpy(zero_copy_only=False), bool)
        if len(kr) and ok.any():
            r = np.asarray(rank.fill_null(-1).to_numpy(zero_copy_only=False), np.int64)
            x = np.asarray(ext.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
            for rv in np.unique(r[ok]).tolist():  # a few ranks; ids searched within each
                lo = int(np.searchsorted(kr, rv, "left"))
                hi = int(np.searchsorted(kr, rv, "right"))
                rows = np.flatnonzero(ok & (r == rv))
                if hi == lo or not len(rows):
                    continue
                pos = lo + np.minimum(np.searchsorted(kx[lo:hi], x[rows]), hi - lo - 1)
                hit = kx[pos] == x[rows]
                rows, pos = rows[hit], pos[hit]
                found[rows] = True
                s_out[rows], e_out[rows] = hs[pos], he[pos]
        cols["host_start_ns"] = int_array(s_out, pa.int64(), ~found)
        cols["host_end_ns"] = int_array(e_out, pa.int64(), ~found)
        return cols


def _host_spans(imp: SpooledImport) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ranks, external ids) of the host ops that issue collectives, sorted by (rank, id)
    and distinct, with each pair's earliest start and latest end (the outermost span when
    several match, as the in-memory import)."""
    c = imp.comm
    if not c.file:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, empty
    file = np.concatenate(c.file)
    rank_of = np.array([i.rank if i.rank is not None else -1 for i in imp.infos], np.int64)
    base_of = np.array([imp.base(f) for f in range(len(imp.infos))], np.int64)
    r = rank_of[file]
    x = np.concatenate(c.ext).astype(np.int64)
    s = np.concatenate(c.start).astype(np.int64) + base_of[file]
    e = np.concatenate(c.end).astype(np.int64) + base_of[file]
    order = np.lexsort((x, r))
    r, x, s, e = r[order], x[order], s[order], e[order]
    first = np.flatnonzero(np.r_[True, (r[1:] != r[:-1]) | (x[1:] != x[:-1])])
    return r[first], x[first], np.minimum.reduceat(s, first), np.maximum.reduceat(e, first)


def spool_files(
    files: list[Path], folder: Path, job: ParseJob | None = None, taken: list[Any] | None = None
) -> SpooledImport:
    """Parse ``files`` into a spool in ``folder`` (stage 1), repairing damaged files as
    the in-memory import does (:func:`tbdtrace.importers.kineto.repair.resolve`);
    ``job``: a batch-mode parse of ``files`` already started (``taken``: its batches
    already taken)."""
    fixes: dict[int, FileFix] = {}
    for _ in range(repair.MAX_PARSES):
        part = Path(tempfile.mkdtemp(prefix="run-", dir=folder))
        imp = SpooledImport(files, part)
        try:
            imp.consume(job or start(files, fixes=fixes, batch_rows=BATCH_ROWS), taken)
            return imp
        except ParseFailure as failure:
            fixes = repair.resolve(failure, fixes)
        except BaseOverflow:  # parse again, the parser adding each file's base itself
            bases = [info.base for info in imp.infos]
            fixes = {i: replace(fixes.get(i, FileFix()), base=b) for i, b in enumerate(bases)}
        finally:
            if job is not None:
                job.cancel()
        job, taken = None, None
        imp.spool.close()
        shutil.rmtree(part, ignore_errors=True)
    raise TraceError(  # pragma: no cover - scores of duplicated traceEvents keys
        f"{', '.join(map(str, files))}: the file still cannot be read after "
        f"{repair.MAX_PARSES} repairs; report the file"
    )
