"""Decoders per kind, on records built from the real CUPTI 13.0 structs (no CUPTI call)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace import _native_testing


def rec(kind: str, **fields: Any) -> bytes:
    return _native_testing.test_record(kind, fields)


def values(column: tuple[np.ndarray, np.ndarray | None, int]) -> list[Any]:
    """A column as handed over (values, validity bitmap, null count) -> values, None = null.

    pyarrow reads the bitmap (Arrow's layout), not tbdtrace."""
    vals, valid, nulls = column
    bits = pa.py_buffer(valid) if nulls else None
    typ = pa.from_numpy_dtype(vals.dtype)
    return pa.Array.from_buffers(typ, len(vals), [bits, pa.py_buffer(vals)], nulls).to_pylist()


def decode(*records: bytes) -> tuple[dict[str, dict[str, list[Any]]], list[str]]:
    r = _native_testing.decode_records(list(records))
    tables = {t: {c: values(v) for c, v in cols.items()} for t, cols in r["tables"].items()}
    return tables, r["strings"]


def row(cols: dict[str, np.ndarray], strings: list[str], i: int = 0) -> dict[str, Any]:
    return {k: v[i] for k, v in cols.items()} | {"_s": strings}


def s(strings: list[str], i: int | None) -> str | None:
    return None if i is None else strings[i]


def test_kernel_all_fields() -> None:
    mangled = "_ZN2at6native3fooEv"  # at::native::foo()
    t, strs = decode(
        rec(
            "kernel",
            start=1_000,
            end=3_500,
            deviceId=1,
            contextId=5,
            streamId=7,
            gridX=2,
            gridY=3,
            gridZ=4,
            blockX=128,
            blockY=2,
            blockZ=1,
            registersPerThread=40,
            staticSharedMemory=1024,
            dynamicSharedMemory=4096,
            correlationId=42,
            graphId=9,
            graphNodeId=77,
            name=mangled,
        )
    )
    k = t["kernels"]
    got = {c: v[0] for c, v in k.items()}
    assert got | {"name": 0, "mangled_name": 0} == {
        "start_ns": 1_000,
        "end_ns": 3_500,
        "device_id": 1,
        "context_id": 5,
        "stream_id": 7,
        "correlation_id": 42,
        "name": 0,
        "mangled_name": 0,
        "grid_x": 2,
        "grid_y": 3,
        "grid_z": 4,
        "block_x": 128,
        "block_y": 2,
        "block_z": 1,
        "registers_per_thread": 40,
        "static_shared_bytes": 1024,
        "dynamic_shared_bytes": 4096,
        "graph_id": 9,
        "graph_node_id": 77,
    }
    assert s(strs, got["name"]) == "at::native::foo()"
    assert s(strs, got["mangled_name"]) == mangled


def test_kernel_not_in_graph_has_null_graph_ids_and_names_are_interned() -> None:
    t, strs = decode(*(rec("kernel", start=i, end=i + 1, name="plain_c_kernel") for i in range(3)))
    k = t["kernels"]
    assert list(k["graph_id"]) == [None] * 3 and list(k["graph_node_id"]) == [None] * 3
    # Not a C++ mangled name: demangled == mangled, one string.
    assert strs == ["plain_c_kernel"] and set(k["name"]) == {0}


def test_memcpy_kinds_and_bytes() -> None:
    # CUpti_ActivityMemcpyKind: HTOD=1, DTOH=2, DTOD=8; memory kinds PAGEABLE=1 PINNED=2 DEVICE=3
    t, strs = decode(
        rec(
            "memcpy",
            copyKind=1,
            srcKind=2,
            dstKind=3,
            bytes=1 << 20,
            start=10,
            end=20,
            deviceId=0,
            contextId=1,
            streamId=3,
            correlationId=5,
        ),
        rec("memcpy", copyKind=2, srcKind=3, dstKind=1, bytes=7, start=30, end=31),
        rec("memcpy", copyKind=8, srcKind=3, dstKind=3, bytes=64, start=40, end=45),
    )
    m = t["memcpy"]
    assert [strs[i] for i in m["copy_kind"]] == ["HtoD", "DtoH", "DtoD"]
    assert [strs[i] for i in m["src_kind"]] == ["pinned", "device", "device"]
    assert [strs[i] for i in m["dst_kind"]] == ["device", "pageable", "device"]
    assert list(m["bytes"]) == [1 << 20, 7, 64]
    assert list(m["correlation_id"]) == [5, 0, 0] and list(m["stream_id"]) == [3, 0, 0]
    assert list(m["src_device_id"]) == [None] * 3


def test_memcpy2_peer_devices() -> None:
    t, strs = decode(
        rec(
            "memcpy2",
            copyKind=10,
            srcKind=3,
            dstKind=3,
            bytes=4096,
            start=1,
            end=9,
            deviceId=0,
            srcDeviceId=0,
            dstDeviceId=1,
            correlationId=3,
        )
    )
    m = t["memcpy"]
    assert strs[m["copy_kind"][0]] == "PtoP"
    assert (m["src_device_id"][0], m["dst_device_id"][0], m["bytes"][0]) == (0, 1, 4096)


def test_memset() -> None:
    t, strs = decode(
        rec(
            "memset",
            value=255,
            bytes=512,
            start=5,
            end=8,
            deviceId=2,
            contextId=1,
            streamId=4,
            correlationId=11,
            memoryKind=3,
        )
    )
    m = t["memset"]
    assert (m["value"][0], m["bytes"][0], m["device_id"][0], m["correlation_id"][0]) == (
        255,
        512,
        2,
        11,
    )
    assert strs[m["memory_kind"][0]] == "device"


def test_memory_alloc_and_free() -> None:
    addr = 0x7F00_0000_1000
    t, strs = decode(
        rec(
            "memory",
            memoryOperationType=1,
            memoryKind=3,
            address=addr,
            bytes=2 << 20,
            timestamp=100,
            processId=321,
            deviceId=0,
            streamId=7,
            correlationId=9,
        ),
        rec(
            "memory",
            memoryOperationType=2,
            memoryKind=3,
            address=addr,
            bytes=2 << 20,
            timestamp=200,
            processId=321,
        ),
    )
    m = t["memory"]
    assert [strs[i] for i in m["action"]] == ["alloc", "free"]
    assert list(m["address"]) == [addr, addr]
    assert list(m["ts_ns"]) == [100, 200] and list(m["pid"]) == [321, 321]
    assert list(m["bytes"]) == [2 << 20] * 2


def test_runtime_and_driver_api_names() -> None:
    # cupti_runtime_cbid.h: cudaLaunchKernel_v7000 = 211; cupti_driver_cbid.h: cuLaunchKernel = 307
    t, strs = decode(
        rec("runtime", cbid=211, start=1, end=4, processId=10, threadId=20, correlationId=42),
        rec("driver", cbid=307, start=2, end=3, processId=10, threadId=20, correlationId=43),
    )
    r = t["runtime"]
    assert [strs[i] for i in r["name"]] == ["cudaLaunchKernel", "cuLaunchKernel"]
    assert [strs[i] for i in r["api"]] == ["runtime", "driver"]
    assert list(r["cbid"]) == [211, 307] and list(r["correlation_id"]) == [42, 43]
    assert list(r["pid"]) == [10, 10] and list(r["tid"]) == [20, 20]


def test_nvtx_ranges_pair_by_id_and_marks_are_instant() -> None:
    # CUpti_ActivityFlag: MARKER_INSTANTANEOUS=1, START=2, END=4
    t, strs = decode(
        rec(
            "marker",
            flags=2,
            timestamp=100,
            id=1,
            name="step 0",
            domain="train",
            processId=5,
            threadId=6,
        ),
        rec("marker", flags=2, timestamp=110, id=2, name="forward"),
        rec("marker", flags=4, timestamp=150, id=2),
        rec("marker", flags=1, timestamp=160, id=3, name="checkpoint"),
        rec("marker", flags=4, timestamp=200, id=1),
        rec("marker", flags=4, timestamp=210, id=99),
    )
    m = t["markers"]
    rows = sorted(
        zip(
            (strs[i] for i in m["name"]),
            m["start_ns"],
            m["end_ns"],
            (s(strs, i) for i in m["domain"]),
            (strs[i] for i in m["kind"]),
            strict=True,
        )
    )
    assert rows == [
        ("checkpoint", 160, 160, None, "mark"),
        ("forward", 110, 150, None, "range"),
        ("step 0", 100, 200, "train", "range"),
    ]
    r = _native_testing.decode_records([rec("marker", flags=4, timestamp=1, id=7)])
    assert r["unmatched_marker_end"] == 1 and "markers" not in r["tables"]


def test_open_range_is_closed_at_stop_with_zero_length() -> None:
    t, strs = decode(rec("marker", flags=2, timestamp=500, id=4, name="unfinished"))
    m = t["markers"]
    assert (m["start_ns"][0], m["end_ns"][0], strs[m["name"][0]]) == (500, 500, "unfinished")


def test_sync_overhead_device_context() -> None:
    t, strs = decode(
        rec("sync", type=3, start=10, end=90, correlationId=8, contextId=1, streamId=13),
        rec("sync", type=4, start=10, end=20, contextId=1, streamId=0xFFFFFFFF),
        rec("overhead", overheadKind=1 << 16, start=5, end=9, processId=3, threadId=4),
        rec(
            "device",
            id=0,
            name="NVIDIA H200",
            numMultiprocessors=132,
            computeCapabilityMajor=9,
            computeCapabilityMinor=0,
            coreClockRate=1_980_000,
            globalMemorySize=141 << 30,
            globalMemoryBandwidth=4_800_000_000,
            maxThreadsPerBlock=1024,
            maxSharedMemoryPerBlock=49152,
            maxRegistersPerBlock=65536,
            numThreadsPerWarp=32,
        ),
        rec("context", contextId=1, deviceId=0, nullStreamId=7),
    )
    sy = t["sync"]
    assert [strs[i] for i in sy["sync_kind"]] == ["stream", "context"]
    assert list(sy["stream_id"]) == [13, None]
    o = t["overhead"]
    assert strs[o["name"][0]] == "cupti_buffer_flush" and (o["pid"][0], o["tid"][0]) == (3, 4)
    d = {c: v[0] for c, v in t["devices"].items()}
    assert strs[d.pop("name")] == "NVIDIA H200"
    assert d == {
        "device_id": 0,
        "sm_count": 132,
        "compute_capability_major": 9,
        "compute_capability_minor": 0,
        "core_clock_khz": 1_980_000,
        "memory_bytes": 141 << 30,
        "memory_bandwidth_bytes_per_s": 4_800_000_000 * 1000,  # header: KB/s
        "max_threads_per_block": 1024,
        "shared_memory_per_block_bytes": 49152,
        "registers_per_block": 65536,
        "warp_size": 32,
    }
    c = t["_contexts"]
    assert (c["context_id"][0], c["device_id"][0], c["null_stream_id"][0]) == (1, 0, 7)


def test_unknown_kind_is_counted_not_decoded() -> None:
    r = _native_testing.decode_records([_native_testing.test_record("kernel", {"kind": 9999})])
    assert r["unknown_kind"] == 1 and r["tables"] == {}


def test_columns_are_numpy_views_without_copies() -> None:
    r = _native_testing.decode_records([rec("kernel", start=1, end=2, name="k")])
    arr, valid, nulls = r["tables"]["kernels"]["start_ns"]
    assert not arr.flags["OWNDATA"] and arr.base is not None  # owned by the C++ buffer
    assert valid is None and nulls == 0  # no nulls: no bitmap at all
    assert arr.dtype == np.int64


def test_column_types_are_the_layouts() -> None:
    r = _native_testing.decode_records(
        [rec("memory", memoryOperationType=1, address=1 << 40, bytes=8, timestamp=1)]
    )
    m = r["tables"]["memory"]
    assert (m["address"][0].dtype, m["pid"][0].dtype, m["ts_ns"][0].dtype) == (
        np.uint64,
        np.int32,
        np.int64,
    )
