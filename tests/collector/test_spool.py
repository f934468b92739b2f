"""Spool files: round trip through the C++ writer and the Python reader, crash recovery
(truncated or corrupt last chunk), and merging spools of several processes into a trace."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest

from tbdtrace import _native_testing, trace
from tbdtrace.collector import merge, spool
from tbdtrace.errors import TraceError


def kernel(i: int) -> bytes:
    return _native_testing.test_record(
        "kernel",
        {
            "start": 1000 + 10 * i,
            "end": 1005 + 10 * i,
            "correlationId": i,
            "deviceId": i % 2,
            "contextId": 1,
            "name": f"kern_{i % 3}",
        },
    )


def runtime(i: int) -> bytes:
    return _native_testing.test_record(
        "runtime",
        {
            "cbid": 211,
            "start": 990 + 10 * i,
            "end": 995 + 10 * i,
            "correlationId": i,
            "processId": 77,
            "threadId": 78,
        },
    )


def write(
    path: Path, n: int, pid: int = 77, spill_every: int = 10, meta: dict | None = None
) -> int:
    recs = [r for i in range(n) for r in (kernel(i), runtime(i))]
    return _native_testing.write_spool(
        str(path), recs, pid, spill_every, json.dumps(meta) if meta is not None else ""
    )


def chunk_offsets(path: Path) -> list[int]:
    """Independent walk of the chunk headers: offsets where each chunk ends."""
    data = path.read_bytes()
    off, ends = 16, []
    while off + 32 <= len(data):
        _, _, nbytes, _, _, _ = struct.unpack_from("<IIQQII", data, off)
        off += 32 + nbytes
        ends.append(off)
    return ends


def test_round_trip_keeps_every_row_and_string(tmp_path: Path) -> None:
    p = tmp_path / "77.tbds"
    size = write(p, 25, meta={"pid": 77, "dropped_records": {"1": 3}})
    assert size == p.stat().st_size
    sp = spool.read(p)
    assert sp.pid == 77 and sp.truncated_bytes == 0 and sp.meta is not None
    k = spool.columns(sp, "kernels")
    assert k["correlation_id"].to_pylist() == list(range(25))
    assert k["start_ns"].to_pylist() == [1000 + 10 * i for i in range(25)]
    assert k["name"].cast("string").to_pylist() == [f"kern_{i % 3}" for i in range(25)]
    assert k["graph_id"].null_count == 25
    assert spool.columns(sp, "runtime")["name"].cast("string").to_pylist() == (
        ["cudaLaunchKernel"] * 25
    )


def test_nulls_survive_chunks_and_growth_as_validity_bitmaps(tmp_path: Path) -> None:
    # graph_id is null where graphId is 0. Spilled every 2500 records: the first chunk's
    # first null comes at row 1500, after the first capacity (1024 rows), so its bitmap is
    # made late and then grown; the second chunk starts with nulls; the third has none
    # (no bitmap). graph_node_id (graphNodeId 0) is null everywhere.
    n = 6000
    graph = [0 if 1500 <= i < 4000 and i % 3 == 0 else i + 1 for i in range(n)]
    recs = [
        _native_testing.test_record(
            "kernel", {"start": i, "end": i + 1, "correlationId": i, "graphId": g, "name": "k"}
        )
        for i, g in enumerate(graph)
    ]
    p = tmp_path / "5.tbds"
    _native_testing.write_spool(str(p), recs, 5, 2500, "")
    sp = spool.read(p)
    assert sp.version == 2 and sp.chunks == 1 + 3  # strings + 3 kernel chunks
    assert [sorted(v) for v in sp.valid["kernels"]] == [["graph_id", "graph_node_id"]] * 2 + [
        ["graph_node_id"]
    ]
    k = spool.columns(sp, "kernels")
    assert k["graph_id"].to_pylist() == [g or None for g in graph]
    assert k["graph_node_id"].null_count == n
    assert k["correlation_id"].null_count == 0 and k["mangled_name"].null_count == 0


def v1_spool(path: Path) -> None:
    """A version 1 spool written here, byte by byte from the format's description (nulls as
    the type's minimum value, -1 for a string code): one strings chunk, one kernels chunk."""

    def chunk(typ: int, rows: int, ncols: int, payload: bytes) -> bytes:
        head = struct.pack(
            "<IIQQII", 0x4B484354, typ, len(payload), rows, zlib.crc32(payload), ncols
        )
        return head + payload

    def pad(b: bytes) -> bytes:
        return b + b"\0" * (-len(b) % 8)

    strings = struct.pack("<Q", 0) + b"".join(struct.pack("<I", len(x)) + x for x in (b"k0",))
    cols = [
        ("start_ns", 2, struct.pack("<2q", 10, 20)),
        ("device_id", 1, struct.pack("<2i", 0, -(2**31))),
        ("graph_id", 2, struct.pack("<2q", 7, -(2**63))),
        ("name", 4, struct.pack("<2i", 0, -1)),
    ]
    body = b"".join(
        struct.pack("<HBBIQ", len(n), t, 0, 0, len(d)) + pad(n.encode()) + pad(d)
        for n, t, d in cols
    )
    path.write_bytes(
        b"TBDSPOOL"
        + struct.pack("<II", 1, 9)
        + chunk(100, 1, 0, pad(strings))
        + chunk(1, 2, len(cols), body)
    )


def test_version_1_spools_are_still_read_with_their_sentinel_nulls(tmp_path: Path) -> None:
    p = tmp_path / "9.tbds"
    v1_spool(p)
    sp = spool.read(p)
    assert (sp.version, sp.pid, sp.chunks, sp.truncated_bytes) == (1, 9, 2, 0)
    k = spool.columns(sp, "kernels")
    assert k["start_ns"].to_pylist() == [10, 20]
    assert k["device_id"].to_pylist() == [0, None]
    assert k["graph_id"].to_pylist() == [7, None]
    assert k["name"].cast("string").to_pylist() == ["k0", None]


def test_an_unknown_spool_version_is_one_clear_error(tmp_path: Path) -> None:
    p = tmp_path / "9.tbds"
    v1_spool(p)
    data = bytearray(p.read_bytes())
    data[8:12] = struct.pack("<I", 3)
    p.write_bytes(bytes(data))
    with pytest.raises(TraceError, match="spool version 3 is not supported"):
        spool.read(p)


def test_truncated_last_chunk_is_dropped_and_the_rest_read(tmp_path: Path) -> None:
    p = tmp_path / "77.tbds"
    write(p, 40, spill_every=10)  # a SIGKILL leaves a prefix of whole chunks + a torn one
    ends = chunk_offsets(p)
    data = p.read_bytes()
    cut = ends[-2] + 20  # inside the header of the last chunk... then inside its payload
    for tail in (cut, ends[-1] - 5):
        q = tmp_path / f"cut{tail}.tbds"
        q.write_bytes(data[:tail])
        sp = spool.read(q)
        assert sp.truncated_bytes == tail - ends[-2]
        assert sp.chunks == len(ends) - 1
        n = len(spool.columns(sp, "kernels").get("start_ns", []))
        m = len(spool.columns(sp, "runtime").get("start_ns", []))
        # Every row read is a whole record pair from the start of the run.
        assert n + m < 80 and spool.columns(sp, "kernels")["correlation_id"].to_pylist() == (
            list(range(n))
        )


def test_corrupt_chunk_stops_reading_at_it(tmp_path: Path) -> None:
    p = tmp_path / "77.tbds"
    write(p, 20, spill_every=10)
    ends = chunk_offsets(p)
    data = bytearray(p.read_bytes())
    data[ends[-2] + 40] ^= 0xFF  # a byte in the last chunk's payload: its CRC fails
    p.write_bytes(bytes(data))
    sp = spool.read(p)
    assert sp.chunks == len(ends) - 1 and sp.truncated_bytes == ends[-1] - ends[-2]


def test_not_a_spool_is_one_clear_error(tmp_path: Path) -> None:
    p = tmp_path / "x.tbds"
    p.write_bytes(b"hello world, not a spool")
    with pytest.raises(TraceError, match="not a tbdtrace spool file"):
        spool.read(p)


def test_merge_of_two_processes_keeps_pids_and_writes_a_trace(tmp_path: Path) -> None:
    write(
        tmp_path / "10.tbds",
        5,
        pid=10,
        meta={"pid": 10, "start_time_ns": 900, "dropped_records": {"1": 2}},
    )
    write(tmp_path / "11.tbds", 3, pid=11)  # killed: no meta chunk
    spools = [spool.read(tmp_path / "10.tbds"), spool.read(tmp_path / "11.tbds")]
    tables, meta = merge.merge(spools)
    out = trace.write(tmp_path / "trace", tables, meta)
    t = trace.open(out)
    k = t.table("kernels").to_pydict()
    assert sorted(k["pid"]) == [10] * 5 + [11] * 3
    assert set(k["device_type"]) == {"cuda"}
    # runtime records carry their own process id (77), which wins over the spool's
    assert set(t.table("runtime").to_pydict()["pid"]) == {77}
    assert t.meta["dropped_records"] == {"10:1": 2}
    assert t.meta["start_time_ns"] == 900
    procs = {p["pid"]: p["clean_stop"] for p in t.meta["extra"]["collector_processes"]}
    assert procs == {10: True, 11: False}


def test_sigkill_while_spilling_leaves_a_readable_prefix(tmp_path: Path) -> None:
    """A real process writing a spool is killed with SIGKILL mid-run."""
    import signal
    import subprocess
    import sys
    import time

    p = tmp_path / "k.tbds"
    code = (
        "import sys; from tbdtrace import _native_testing; "
        "r=[_native_testing.test_record('kernel', {'start': i, 'end': i + 1, 'correlationId': i,"
        " 'name': 'k'}) for i in range(300000)]; print('go', flush=True); "
        "_native_testing.write_spool(sys.argv[1], r, 5, 50)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(p)],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"go"
    deadline = time.monotonic() + 30
    while (not p.exists() or p.stat().st_size < 200_000) and time.monotonic() < deadline:
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    sp = spool.read(p)
    assert sp.meta is None and sp.chunks > 0
    ids = spool.columns(sp, "kernels")["correlation_id"].to_pylist()
    # Whole chunks of 50 rows, in order, from the first record on.
    assert len(ids) % 50 == 0 and ids == list(range(len(ids))) and 0 < len(ids) < 300000
