"""Import Nsight Systems SQLite exports (``nsys export -t sqlite``) into tbdtrace tables.

Read tables (those present; a missing one is skipped): CUPTI_ACTIVITY_KIND_KERNEL,
_MEMCPY, _MEMSET, _RUNTIME, NVTX_EVENTS, StringIds, TARGET_INFO_GPU. Column layout as in
export schemas 2.9.1 (nsys 2022.2) and 3.13.2 (nsys 2024.5): names are ids into
``StringIds(id, value)``; times are integer ns on the session clock; ``globalPid`` and
``globalTid`` pack the pid in bits 24..47 and the tid in bits 0..23.

Enumerations are CUPTI's (cupti_activity.h): CUpti_ActivityMemcpyKind for ``copyKind``,
CUpti_ActivityMemoryKind for ``srcKind``/``dstKind``/``memKind``. NVTX event types are
nsys's: 34 mark, 59 push/pop range, 60 start/end range (others, e.g. domain creation, are
not markers).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tbdtrace.errors import TraceError
from tbdtrace.importers import sniff as _sniff
from tbdtrace.importers import validate
from tbdtrace.importers.columns import TableBuilder

MEMCPY_KINDS = {
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
}
MEMORY_KINDS = {
    0: "unknown",
    1: "pageable",
    2: "pinned",
    3: "device",
    4: "array",
    5: "managed",
    6: "device_static",
    7: "managed",
}
NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND = 34, 59, 60


def _i(v: Any) -> int | None:
    """An INTEGER cell that fits int64; anything else (text, REAL, BLOB, NULL: SQLite
    stores what it is given) is null."""
    return v if isinstance(v, int) and not isinstance(v, bool) and validate.in_range(v) else None


def pid_of(global_id: Any) -> int | None:
    """Process id packed in an nsys globalPid/globalTid."""
    g = _i(global_id)
    return None if g is None else (g >> 24) & 0xFFFFFF


def tid_of(global_tid: Any) -> int | None:
    """Thread id packed in an nsys globalTid."""
    g = _i(global_tid)
    return None if g is None else g & 0xFFFFFF


def _tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


FETCH_ROWS = 10_000  # rows fetched from SQLite at a time
BATCH_ROWS = 1 << 18  # rows of one table converted and spooled at a time (streamed)


def _rows(db: sqlite3.Connection, table: str) -> tuple[list[str], Iterator[tuple[Any, ...]]]:
    """Column names and the rows of ``table`` by start, fetched a few thousand at a time."""
    cur = db.execute(f'SELECT * FROM "{table}" ORDER BY start')  # fixed names

    def rows() -> Iterator[tuple[Any, ...]]:
        while chunk := cur.fetchmany(FETCH_ROWS):
            yield from chunk

    return [d[0] for d in cur.description], rows()


class _Spooling(TableBuilder):
    """A table's rows converted every :data:`BATCH_ROWS` rows, as :func:`trace.write`
    converts a whole table, and spooled as runs (:mod:`tbdtrace.importers.spool`)."""

    def __init__(self, table: str, sink: Any, file: int):
        super().__init__(table)
        self.sink, self.file = sink, file

    def append(self, **values: Any) -> None:
        super().append(**values)
        if self._n >= BATCH_ROWS:
            self.flush()

    def flush(self) -> None:
        if self._n:
            from tbdtrace import trace

            name = self.table.name
            # arrow_columns: a cell beyond its column's type (a device id past int32) is
            # null, as SQLite's other unusable cells are
            self.sink.add(name, trace.to_table(name, self.arrow_columns(), self._n), self.file)
            self._cols = {n: [] for n in self.names}
            self._n = 0


class _Reader:
    def __init__(self, db: sqlite3.Connection, rank: int | None):
        self.db = db
        self.rank = rank
        self.present = _tables(db)
        self.strings: dict[Any, str] = {}
        self.skipped: Counter[str] = Counter()  # reason -> rows left out (validate.py)
        if "StringIds" in self.present:
            self.strings = {k: str(v) for k, v in db.execute("SELECT id, value FROM StringIds")}

    def s(self, sid: Any) -> str | None:
        return None if sid is None else self.strings.get(sid, f"<string {sid}>")

    def each(self, table: str, end_optional: bool = False) -> Iterator[dict[str, Any]]:
        """Rows of ``table`` whose start and end are usable int64 ns (end >= start; with
        ``end_optional``, a NULL end is kept); the others are counted in ``skipped``."""
        if table not in self.present:
            return
        cols, rows = _rows(self.db, table)
        for row in rows:
            r = dict(zip(cols, row, strict=True))
            reason = self._bad_times(r, end_optional)
            if reason is None:
                yield r
            else:
                self.skipped[reason] += 1

    @staticmethod
    def _bad_times(r: dict[str, Any], end_optional: bool) -> str | None:
        start = validate.ns_value(r["start"])
        if isinstance(start, str):
            return start
        if end_optional and r.get("end") is None:
            return None
        end = validate.ns_value(r["end"])
        return end if isinstance(end, str) else validate.span_ns(start, end)

    def common(self, r: dict[str, Any]) -> dict[str, Any]:
        return dict(
            start_ns=r["start"],
            end_ns=r["end"],
            device_id=_i(r.get("deviceId")),
            device_type="cuda",
            stream_id=_i(r.get("streamId")),
            context_id=_i(r.get("contextId")),
            correlation_id=_i(r.get("correlationId")),
            pid=pid_of(r.get("globalPid")),
            rank=self.rank,
        )

    def kernels(self, b: TableBuilder) -> None:
        for r in self.each("CUPTI_ACTIVITY_KIND_KERNEL"):
            name = r.get("demangledName", r.get("shortName"))
            b.append(
                **self.common(r),
                name=self.s(name),
                mangled_name=self.s(r.get("mangledName")),
                grid_x=_i(r.get("gridX")),
                grid_y=_i(r.get("gridY")),
                grid_z=_i(r.get("gridZ")),
                block_x=_i(r.get("blockX")),
                block_y=_i(r.get("blockY")),
                block_z=_i(r.get("blockZ")),
                registers_per_thread=_i(r.get("registersPerThread")),
                static_shared_bytes=_i(r.get("staticSharedMemory")),
                dynamic_shared_bytes=_i(r.get("dynamicSharedMemory")),
                graph_node_id=_i(r.get("graphNodeId")) or None,
            )

    def memcpy(self, b: TableBuilder) -> None:
        for r in self.each("CUPTI_ACTIVITY_KIND_MEMCPY"):
            b.append(
                **self.common(r),
                bytes=_i(r["bytes"]),
                copy_kind=MEMCPY_KINDS.get(_i(r.get("copyKind")) or 0),
                src_kind=MEMORY_KINDS.get(_i(r.get("srcKind")) or 0, "unknown"),
                dst_kind=MEMORY_KINDS.get(_i(r.get("dstKind")) or 0, "unknown"),
                src_device_id=_i(r.get("srcDeviceId")),
                dst_device_id=_i(r.get("dstDeviceId")),
            )

    def memset(self, b: TableBuilder) -> None:
        for r in self.each("CUPTI_ACTIVITY_KIND_MEMSET"):
            b.append(
                **self.common(r),
                bytes=_i(r["bytes"]),
                value=_i(r.get("value")),
                memory_kind=MEMORY_KINDS.get(_i(r.get("memKind")) or 0, "unknown"),
            )

    def runtime(self, b: TableBuilder) -> None:
        for r in self.each("CUPTI_ACTIVITY_KIND_RUNTIME"):
            gt = r.get("globalTid")
            b.append(
                start_ns=r["start"],
                end_ns=r["end"],
                pid=pid_of(gt),
                tid=tid_of(gt),
                rank=self.rank,
                correlation_id=_i(r.get("correlationId")),
                name=self.s(r.get("nameId")),
                api="runtime",
            )

    def nvtx(self, markers: TableBuilder) -> None:
        for r in self.each("NVTX_EVENTS", end_optional=True):
            et = r.get("eventType")
            if et not in (NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND):
                continue
            text = r.get("text")
            if text is None and r.get("textId") is not None:
                text = self.s(r["textId"])
            text = str(text) if text is not None else None
            gt = r.get("globalTid")
            end = r.get("end")
            mark = et == NVTX_MARK or end is None
            markers.append(
                start_ns=r["start"],
                end_ns=r["start"] if mark else end,
                pid=pid_of(gt),
                tid=tid_of(gt),
                rank=self.rank,
                name=text if text is not None else "",
                domain=str(r["domainId"]) if r.get("domainId") is not None else None,
                kind="mark" if mark else "range",
                marker_id=_i(r.get("rangeId")),
            )

    def devices(self, b: TableBuilder) -> list[dict[str, Any]]:
        if "TARGET_INFO_GPU" not in self.present:
            return []
        cur = self.db.execute("SELECT * FROM TARGET_INFO_GPU")
        cols = [d[0] for d in cur.description]
        out = []
        for i, row in enumerate(cur.fetchall()):
            r = dict(zip(cols, row, strict=True))
            clock = r.get("clockRate")
            bw = r.get("memoryBandwidth")
            b.append(
                device_id=_i(r.get("id", i)),
                device_type="cuda",
                rank=self.rank,
                name=str(r.get("name", "unknown")),
                sm_count=_i(r.get("smCount")),
                compute_capability_major=_i(r.get("computeMajor")),
                compute_capability_minor=_i(r.get("computeMinor")),
                core_clock_khz=_num(clock, 1000),
                memory_bytes=_i(r.get("totalMemory")),
                memory_bandwidth_bytes_per_s=_num(bw, 1),
            )
            out.append(r)
        return out


def _num(v: Any, per: int) -> int | None:
    """A numeric cell (INTEGER or finite REAL) divided by ``per``, as int64; else None."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    if isinstance(v, float) and not (abs(v) < 2.0**63):
        return None
    return _i(int(v) // per)


_CUPTI_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
)


def _open(path: Path) -> sqlite3.Connection:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        present = _tables(db)
    except sqlite3.DatabaseError as e:
        raise TraceError(f"{path}: not a readable SQLite database ({e}); re-export it") from e
    if not present & set(_CUPTI_TABLES):
        db.close()
        raise TraceError(
            f"{path}: SQLite file without Nsight Systems tables (none of "
            f"{', '.join(_CUPTI_TABLES)}); export it with `nsys export -t sqlite`"
        )
    return db


EVENT_TABLES = ("kernels", "memcpy", "memset", "runtime", "markers")


def _read(
    files: list[Path], builder: Any
) -> tuple[dict[str, TableBuilder], list[dict[str, Any]], Counter[str]]:
    """Every file's rows into ``builder(table, file index)``'s TableBuilders."""
    t: dict[str, TableBuilder] = {"devices": TableBuilder("devices")}
    devices: list[dict[str, Any]] = []
    skipped: Counter[str] = Counter()
    for i, p in enumerate(files):
        db = _open(p)
        try:
            for n in EVENT_TABLES:
                if n not in t or isinstance(t[n], _Spooling):
                    t[n] = builder(n, i)
            rd = _Reader(db, i if len(files) > 1 else None)
            rd.kernels(t["kernels"])
            rd.memcpy(t["memcpy"])
            rd.memset(t["memset"])
            rd.runtime(t["runtime"])
            rd.nvtx(t["markers"])
            for n in EVENT_TABLES:
                if isinstance(t[n], _Spooling):
                    t[n].flush()  # type: ignore[attr-defined]
            devices += rd.devices(t["devices"])
            skipped += rd.skipped
        except (sqlite3.DatabaseError, KeyError) as e:
            raise TraceError(
                f"{p}: unexpected Nsight Systems table layout ({e}); "
                "report the nsys version that wrote it"
            ) from e
        finally:
            db.close()
    return t, devices, skipped


def _meta(
    files: list[Path], start: int | None, devices: list[Any], skipped: Counter[str]
) -> dict[str, Any]:
    return {
        "source": "nsys",
        "source_files": [str(p) for p in files],
        "ranks": list(range(len(files))) if len(files) > 1 else [],
        "start_time_ns": start,
        "clock": "nsys session clock",
        "clock_offset_ns": 0,
        "devices": devices,
        "skipped_events": validate.merged(skipped),
    }


def import_files(paths: Sequence[str | Path]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read nsys SQLite exports; several files become one trace, rank = file position.

    Returns (tables, meta) for :func:`tbdtrace.trace.write`. Times are copied unchanged
    (ns on the nsys session clock).
    """
    files = [Path(p) for p in paths]
    made: dict[str, TableBuilder] = {}

    def builder(n: str, i: int) -> TableBuilder:
        return made.setdefault(n, TableBuilder(n))

    from tbdtrace import trace

    t, devices, skipped = _read(files, builder)
    tables = {n: trace.to_table(n, b.arrow_columns(), len(b)) for n, b in t.items() if len(b)}
    starts = [
        min(b.column_values("start_ns")) for b in t.values() if len(b) and "start_ns" in b.names
    ]
    return tables, _meta(files, min(starts) if starts else None, devices, skipped)


def spool_files(paths: Sequence[str | Path], folder: Path) -> tuple[Any, dict[str, Any], Any]:
    """The streaming import (:meth:`tbdtrace.importers.PendingImport.streamed`): the rows
    of each table converted :data:`BATCH_ROWS` at a time into a spool in ``folder``.
    Returns ``(spool, meta, devices columns or None)``; merging the spool gives the tables
    :func:`import_files` gives."""
    from tbdtrace.importers.spool import Spool

    files = [Path(p) for p in paths]
    spool = Spool(folder)
    t, devices, skipped = _read(files, lambda n, i: _Spooling(n, spool, i))
    spool.close()
    dev = t["devices"].columns() if len(t["devices"]) else None
    return spool, _meta(files, spool.first_start(), devices, skipped), dev


sniff = _sniff.nsys  # the format test (tbdtrace.importers.sniff)
