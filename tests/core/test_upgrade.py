"""Version-2 traces (Arrow IPC, encoded fields) open as they are, and ``tbdtrace upgrade``
rewrites them as version 3 in place.

The version-2 files are made here by the test's own encoder of the previous format
(``start_ns.delta`` = differences from the previous row, ``end_ns.minus_start_ns``,
ids as differences; rows in time order), written straight with pyarrow, so the reader
is checked against an independent writer, not against itself.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tbdtrace
from tbdtrace.errors import TraceError
from tbdtrace.upgrade import upgrade


def _delta(v: list[int | None]) -> pa.Array:
    """Version 2's `delta`: nulls stored as null (the running value carries on)."""
    out, prev = [], 0
    for x in v:
        if x is None:
            out.append(None)
        else:
            out.append(x - prev)
            prev = x
    return pa.array(out, pa.int64())


def _write_v2(d, rows):
    """A version-2 trace with a kernels and a steps table from ``rows`` (time order)."""
    d.mkdir()
    start = [r[0] for r in rows]
    kernels = pa.table(
        {
            "start_ns.delta": _delta(start),
            "end_ns.minus_start_ns": pa.array([r[1] - r[0] for r in rows], pa.int64()),
            "correlation_id.delta": _delta([r[2] for r in rows]),
            "stream_id": pa.array([r[3] for r in rows], pa.int64()),
            "name": pa.array([r[4] for r in rows]).dictionary_encode(),
        },
        metadata={b"tbdtrace.rows": str(len(rows)).encode()},
    )
    steps = pa.table(
        {
            "step": pa.array([0], pa.int64()),
            "start_ns.delta": pa.array([start[0]], pa.int64()),
            "end_ns.minus_start_ns": pa.array([rows[-1][1] - start[0]], pa.int64()),
        }
    )
    for name, tbl in (("kernels", kernels), ("steps", steps)):
        opts = pa.ipc.IpcWriteOptions(compression="zstd")
        sink = pa.OSFile(str(d / f"{name}.arrow"), "wb")
        with sink, pa.ipc.new_file(sink, tbl.schema, options=opts) as w:
            w.write_table(tbl)
    (d / "meta.json").write_text(json.dumps({"schema_version": 2, "source": "kineto"}))
    (d / "notes.txt").write_text("kept\n")


@pytest.fixture
def rows():
    rng = np.random.default_rng(7)
    n = 3000
    start = np.sort(rng.integers(10**18, 10**18 + 10**12, n)).tolist()
    dur = rng.integers(0, 10**5, n).tolist()
    return [
        (s, s + d, None if i % 9 == 0 else 1000 + i, i % 3, f"k{i % 5}")
        for i, (s, d) in enumerate(zip(start, dur, strict=True))
    ]


COLS = ["start_ns", "end_ns", "correlation_id", "stream_id", "name"]


def test_version_2_trace_opens(tmp_path, rows):
    _write_v2(tmp_path / "v2", rows)
    tr = tbdtrace.open(tmp_path / "v2")
    assert tr.num_rows("kernels") == len(rows)
    got = tr.table("kernels", COLS)
    assert [tuple(r.values()) for r in got.to_pylist()] == rows
    # end_ns alone needs start_ns, which the reader fetches itself
    end = tbdtrace.open(tmp_path / "v2").column("kernels", "end_ns").to_pylist()
    assert end == [r[1] for r in rows]


def test_upgrade_rewrites_in_place_with_true_values(tmp_path, rows):
    d = tmp_path / "v2"
    _write_v2(d, rows)
    assert upgrade(d) == (2, 3)
    assert sorted(f.name for f in d.iterdir()) == [
        ".tbdtrace-trace.json",  # the marker, with each table's fingerprint, rows, bytes
        "kernels.parquet",
        "meta.json",
        "notes.txt",
        "steps.parquet",
    ]
    meta = json.loads((d / "meta.json").read_text())
    assert meta["schema_version"] == 3 and meta["source"] == "kineto"
    raw = pq.read_table(d / "kernels.parquet", columns=COLS)
    assert [tuple(r.values()) for r in raw.to_pylist()] == rows
    assert pq.read_table(d / "steps.parquet")["end_ns"].to_pylist() == [rows[-1][1]]
    assert (d / "notes.txt").read_text() == "kept\n"
    assert not [p for p in tmp_path.iterdir() if p.name != "v2"]  # no leftovers
    assert upgrade(d) == (3, 3)  # nothing left to do


def test_upgrade_refuses_a_directory_that_is_not_a_trace(tmp_path):
    d = tmp_path / "photos"
    d.mkdir()
    (d / "a.jpg").write_bytes(b"x")
    with pytest.raises(TraceError, match="not a tbdtrace trace"):
        upgrade(d)
    assert (d / "a.jpg").read_bytes() == b"x"


def test_upgrade_failure_leaves_the_old_trace(tmp_path, rows, monkeypatch):
    d = tmp_path / "v2"
    _write_v2(d, rows)
    before = {f.name: f.read_bytes() for f in d.iterdir()}
    from tbdtrace import tablefile

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(tablefile, "write", boom)
    with pytest.raises(TraceError, match=r"cannot write the trace \(disk full\).*unchanged"):
        upgrade(d)
    assert {f.name: f.read_bytes() for f in d.iterdir()} == before
    assert not [p for p in tmp_path.iterdir() if p.name != "v2"]


def test_upgrade_command(tmp_path, rows):
    _write_v2(tmp_path / "v2", rows)
    cmd = [sys.executable, "-m", "tbdtrace", "upgrade"]
    r = subprocess.run([*cmd, str(tmp_path / "v2")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "from schema version 2 to 3" in r.stdout
    r = subprocess.run([*cmd, str(tmp_path / "nope")], capture_output=True, text=True)
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "nope" in r.stderr and "Traceback" not in r.stderr
