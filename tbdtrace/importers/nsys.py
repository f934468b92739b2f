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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tbdtrace.errors import TraceError
from tbdtrace.importers import sniff as _sniff
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


def pid_of(global_id: int | None) -> int | None:
    """Process id packed in an nsys globalPid/globalTid."""
    return None if global_id is None else (global_id >> 24) & 0xFFFFFF


def tid_of(global_tid: int | None) -> int | None:
    """Thread id packed in an nsys globalTid."""
    return None if global_tid is None else global_tid & 0xFFFFFF


def _tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _rows(db: sqlite3.Connection, table: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    cur = db.execute(f'SELECT * FROM "{table}" ORDER BY start')  # noqa: S608 (fixed names)
    return [d[0] for d in cur.description], cur.fetchall()


class _Reader:
    def __init__(self, db: sqlite3.Connection, rank: int | None):
        self.db = db
        self.rank = rank
        self.present = _tables(db)
        self.strings: dict[int, str] = {}
        if "StringIds" in self.present:
            self.strings = dict(db.execute("SELECT id, value FROM StringIds"))

    def s(self, sid: Any) -> str | None:
        return None if sid is None else self.strings.get(int(sid), f"<string {sid}>")

    def each(self, table: str) -> list[dict[str, Any]]:
        if table not in self.present:
            return []
        cols, rows = _rows(self.db, table)
        return [dict(zip(cols, r, strict=True)) for r in rows]

    def common(self, r: dict[str, Any]) -> dict[str, Any]:
        return dict(
            start_ns=r["start"],
            end_ns=r["end"],
            device_id=r.get("deviceId"),
            device_type="cuda",
            stream_id=r.get("streamId"),
            context_id=r.get("contextId"),
            correlation_id=r.get("correlationId"),
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
                grid_x=r.get("gridX"),
                grid_y=r.get("gridY"),
                grid_z=r.get("gridZ"),
                block_x=r.get("blockX"),
                block_y=r.get("blockY"),
                block_z=r.get("blockZ"),
                registers_per_thread=r.get("registersPerThread"),
                static_shared_bytes=r.get("staticSharedMemory"),
                dynamic_shared_bytes=r.get("dynamicSharedMemory"),
                graph_node_id=r.get("graphNodeId") or None,
            )

    def memcpy(self, b: TableBuilder) -> None:
        for r in self.each("CUPTI_ACTIVITY_KIND_MEMCPY"):
            b.append(
                **self.common(r),
                bytes=r["bytes"],
                copy_kind=MEMCPY_KINDS.get(r.get("copyKind") or 0),
                src_kind=MEMORY_KINDS.get(r.get("srcKind") or 0, "unknown"),
                dst_kind=MEMORY_KINDS.get(r.get("dstKind") or 0, "unknown"),
                src_device_id=r.get("srcDeviceId"),
                dst_device_id=r.get("dstDeviceId"),
            )

    def memset(self, b: TableBuilder) -> None:
        for r in self.each("CUPTI_ACTIVITY_KIND_MEMSET"):
            b.append(
                **self.common(r),
                bytes=r["bytes"],
                value=r.get("value"),
                memory_kind=MEMORY_KINDS.get(r.get("memKind") or 0, "unknown"),
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
                correlation_id=r.get("correlationId"),
                name=self.s(r.get("nameId")),
                api="runtime",
            )

    def nvtx(self, markers: TableBuilder) -> None:
        for r in self.each("NVTX_EVENTS"):
            et = r.get("eventType")
            if et not in (NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND):
                continue
            text = r.get("text")
            if text is None and r.get("textId") is not None:
                text = self.s(r["textId"])
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
                marker_id=r.get("rangeId"),
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
                device_id=r.get("id", i),
                device_type="cuda",
                rank=self.rank,
                name=str(r.get("name", "unknown")),
                sm_count=r.get("smCount"),
                compute_capability_major=r.get("computeMajor"),
                compute_capability_minor=r.get("computeMinor"),
                core_clock_khz=int(clock) // 1000 if clock is not None else None,
                memory_bytes=r.get("totalMemory"),
                memory_bandwidth_bytes_per_s=int(bw) if bw is not None else None,
            )
            out.append(r)
        return out


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


def import_files(paths: Sequence[str | Path]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read nsys SQLite exports; several files become one trace, rank = file position.

    Returns (tables, meta) for :func:`tbdtrace.trace.write`. Times are copied unchanged
    (ns on the nsys session clock).
    """
    files = [Path(p) for p in paths]
    t = {
        n: TableBuilder(n) for n in ("kernels", "memcpy", "memset", "runtime", "markers", "devices")
    }
    devices: list[dict[str, Any]] = []
    for i, p in enumerate(files):
        db = _open(p)
        try:
            rd = _Reader(db, i if len(files) > 1 else None)
            rd.kernels(t["kernels"])
            rd.memcpy(t["memcpy"])
            rd.memset(t["memset"])
            rd.runtime(t["runtime"])
            rd.nvtx(t["markers"])
            devices += rd.devices(t["devices"])
        except (sqlite3.DatabaseError, KeyError) as e:
            raise TraceError(
                f"{p}: unexpected Nsight Systems table layout ({e}); "
                "report the nsys version that wrote it"
            ) from e
        finally:
            db.close()
    tables = {n: b.columns() for n, b in t.items() if len(b)}
    starts = [
        min(b.column_values("start_ns")) for b in t.values() if len(b) and "start_ns" in b.names
    ]
    meta = {
        "source": "nsys",
        "source_files": [str(p) for p in files],
        "ranks": list(range(len(files))) if len(files) > 1 else [],
        "start_time_ns": min(starts) if starts else None,
        "clock": "nsys session clock",
        "clock_offset_ns": 0,
        "devices": devices,
    }
    return tables, meta


sniff = _sniff.nsys  # the format test (tbdtrace.importers.sniff)
