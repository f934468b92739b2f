"""Nsight Systems SQLite import: a file with the real export layout, imported exactly.

The database is built here with sqlite3 from the column lists of export schema 3.13.2
(verified with PRAGMA table_info on a real nsys 2024.5 export; see
tests/data/nsys/README.md). Expected values are the inserted rows decoded by hand.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import tbdtrace
from tbdtrace import importers, trace
from tbdtrace.errors import TraceError

KERNEL_COLS = (
    "start, end, deviceId, contextId, greenContextId, streamId, correlationId, globalPid, "
    "demangledName, shortName, mangledName, launchType, cacheConfig, registersPerThread, "
    "gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory, "
    "localMemoryPerThread, localMemoryTotal, gridId, sharedMemoryExecuted, graphNodeId, "
    "sharedMemoryLimitConfig"
)
MEMCPY_COLS = (
    "start, end, deviceId, contextId, greenContextId, streamId, correlationId, globalPid, "
    "bytes, copyKind, deprecatedSrcId, srcKind, dstKind, srcDeviceId, srcContextId, "
    "dstDeviceId, dstContextId, migrationCause, graphNodeId, virtualAddress"
)
MEMSET_COLS = (
    "start, end, deviceId, contextId, streamId, correlationId, globalPid, value, "
    "bytes, graphNodeId, memKind"
)
RUNTIME_COLS = "start, end, eventClass, globalTid, correlationId, nameId, returnValue, callchainId"
NVTX_COLS = (
    "start, end, eventType, rangeId, category, color, text, globalTid, endGlobalTid, "
    "textId, domainId, uint64Value, int64Value, doubleValue, uint32Value, int32Value, "
    "floatValue, jsonTextId, jsonText"
)
GPU_COLS = (
    "name, busLocation, l2CacheSize, totalMemory, memoryBandwidth, clockRate, smCount, "
    "chipName, computeMajor, computeMinor, maxWarpsPerSm, id"
)

PID, TID = 4242, 4250
GPID = PID << 24
GTID = (PID << 24) | TID
STRINGS = {
    1: "void saxpy<float>(int, float, float*, float*)",
    2: "saxpy",
    3: "_Z5saxpyIfEviT_PS0_S1_",
    4: "cudaLaunchKernel",
    5: "cudaMemcpy",
    6: "step 0",
    7: "cudaMemset",
}


def _create(db: sqlite3.Connection, table: str, cols: str) -> None:
    db.execute(f"CREATE TABLE {table} ({', '.join(c + ' INTEGER' for c in cols.split(', '))})")


def _insert(db: sqlite3.Connection, table: str, cols: str, row: dict[str, object]) -> None:
    names = cols.split(", ")
    db.execute(
        f"INSERT INTO {table} VALUES ({','.join('?' * len(names))})", [row.get(n) for n in names]
    )


def make_db(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    db.executemany("INSERT INTO StringIds VALUES (?, ?)", STRINGS.items())
    for t, c in (
        ("CUPTI_ACTIVITY_KIND_KERNEL", KERNEL_COLS),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", MEMCPY_COLS),
        ("CUPTI_ACTIVITY_KIND_MEMSET", MEMSET_COLS),
        ("CUPTI_ACTIVITY_KIND_RUNTIME", RUNTIME_COLS),
    ):
        _create(db, t, c)
    db.execute(f"CREATE TABLE NVTX_EVENTS ({NVTX_COLS.replace('text,', 'text TEXT,')})")
    db.execute(f"CREATE TABLE TARGET_INFO_GPU ({GPU_COLS.replace('name,', 'name TEXT,')})")
    for i in range(3):
        _insert(
            db,
            "CUPTI_ACTIVITY_KIND_KERNEL",
            KERNEL_COLS,
            dict(
                start=1_000_000 + i * 10_000,
                end=1_004_000 + i * 10_000,
                deviceId=0,
                contextId=1,
                streamId=7,
                correlationId=100 + i,
                globalPid=GPID,
                demangledName=1,
                shortName=2,
                mangledName=3,
                registersPerThread=16,
                gridX=4096,
                gridY=1,
                gridZ=1,
                blockX=256,
                blockY=1,
                blockZ=1,
                staticSharedMemory=0,
                dynamicSharedMemory=128,
                graphNodeId=0,
            ),
        )
        _insert(
            db,
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            RUNTIME_COLS,
            dict(
                start=990_000 + i * 10_000,
                end=995_000 + i * 10_000,
                eventClass=0,
                globalTid=GTID,
                correlationId=100 + i,
                nameId=4,
                returnValue=0,
            ),
        )
    _insert(
        db,
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        MEMCPY_COLS,
        dict(
            start=900_000,
            end=950_000,
            deviceId=0,
            contextId=1,
            streamId=7,
            correlationId=99,
            globalPid=GPID,
            bytes=4 << 20,
            copyKind=1,
            srcKind=1,
            dstKind=3,
        ),
    )
    _insert(
        db,
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        MEMCPY_COLS,
        dict(
            start=1_100_000,
            end=1_140_000,
            deviceId=0,
            contextId=1,
            streamId=7,
            correlationId=104,
            globalPid=GPID,
            bytes=4 << 20,
            copyKind=2,
            srcKind=3,
            dstKind=2,
        ),
    )
    _insert(
        db,
        "CUPTI_ACTIVITY_KIND_MEMSET",
        MEMSET_COLS,
        dict(
            start=960_000,
            end=961_000,
            deviceId=0,
            contextId=1,
            streamId=7,
            correlationId=98,
            globalPid=GPID,
            value=0,
            bytes=1024,
            memKind=3,
        ),
    )
    _insert(
        db,
        "NVTX_EVENTS",
        NVTX_COLS,
        dict(
            start=880_000,
            end=1_200_000,
            eventType=59,
            rangeId=0,
            text=None,
            globalTid=GTID,
            textId=6,
            domainId=0,
        ),
    )
    _insert(
        db,
        "NVTX_EVENTS",
        NVTX_COLS,
        dict(
            start=1_150_000, end=None, eventType=34, text="checkpoint", globalTid=GTID, domainId=0
        ),
    )
    _insert(
        db,
        "NVTX_EVENTS",
        NVTX_COLS,
        dict(start=800_000, eventType=75, text="my domain", globalTid=GTID, domainId=1),
    )
    db.execute(
        f"INSERT INTO TARGET_INFO_GPU ({GPU_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            "NVIDIA A100-SXM4-40GB",
            "0000:03:00.0",
            41943040,
            42505273344,
            1555200000000,
            1410000000,
            108,
            "GA100",
            8,
            0,
            64,
            0,
        ),
    )
    db.commit()
    db.close()


@pytest.fixture()
def nsys_db(tmp_path: Path) -> Path:
    p = tmp_path / "saxpy.sqlite"
    make_db(p)
    return p


def test_detect_and_exact_import(nsys_db: Path, tmp_path: Path) -> None:
    assert importers.detect(nsys_db) == "nsys"
    tables, meta = importers.import_files([nsys_db])
    out = trace.write(tmp_path / "t", tables, meta)
    tr = tbdtrace.open(out)
    k = tr.table("kernels").to_pylist()
    assert [(r["start_ns"], r["end_ns"], r["correlation_id"]) for r in k] == [
        (1_000_000 + i * 10_000, 1_004_000 + i * 10_000, 100 + i) for i in range(3)
    ]
    r0 = k[0]
    assert r0["name"] == STRINGS[1] and r0["mangled_name"] == STRINGS[3]
    assert (r0["pid"], r0["device_id"], r0["stream_id"], r0["context_id"]) == (PID, 0, 7, 1)
    assert (r0["grid_x"], r0["block_x"], r0["registers_per_thread"]) == (4096, 256, 16)
    assert r0["dynamic_shared_bytes"] == 128 and r0["device_type"] == "cuda"
    m = tr.table("memcpy").to_pylist()
    assert [(x["copy_kind"], x["src_kind"], x["dst_kind"], x["bytes"]) for x in m] == [
        ("HtoD", "pageable", "device", 4 << 20),
        ("DtoH", "device", "pinned", 4 << 20),
    ]
    s = tr.table("memset").to_pylist()
    assert [(x["bytes"], x["memory_kind"], x["value"]) for x in s] == [(1024, "device", 0)]
    rt = tr.table("runtime").to_pylist()
    assert [(x["name"], x["pid"], x["tid"], x["correlation_id"]) for x in rt] == [
        ("cudaLaunchKernel", PID, TID, 100 + i) for i in range(3)
    ]
    mk = tr.table("markers").to_pylist()
    assert [(x["name"], x["kind"], x["start_ns"], x["end_ns"]) for x in mk] == [
        ("step 0", "range", 880_000, 1_200_000),
        ("checkpoint", "mark", 1_150_000, 1_150_000),
    ]
    d = tr.table("devices").to_pylist()
    assert d[0]["name"] == "NVIDIA A100-SXM4-40GB" and d[0]["sm_count"] == 108
    assert d[0]["core_clock_khz"] == 1_410_000
    assert d[0]["memory_bandwidth_bytes_per_s"] == 1_555_200_000_000
    assert meta["source"] == "nsys" and meta["start_time_ns"] == 880_000


def test_sqlite_without_nsys_tables_is_one_line_error(tmp_path: Path) -> None:
    p = tmp_path / "other.sqlite"
    db = sqlite3.connect(p)
    db.execute("CREATE TABLE t (x INTEGER)")
    db.commit()
    db.close()
    with pytest.raises(TraceError, match="without Nsight Systems tables"):
        importers.import_files([p])
    cp = subprocess.run(
        [sys.executable, "-m", "tbdtrace", "import", str(p), "-o", str(tmp_path / "o")],
        capture_output=True,
        text=True,
    )
    assert cp.returncode == 1 and "Traceback" not in cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1
