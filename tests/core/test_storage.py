"""On-disk storage of trace tables: time order, encoded columns, row counts, old files.

Expected values come from the rows given to ``write`` (re-sorted by a plain Python sort)
and from a raw read of the Arrow file with pyarrow, not from tbdtrace's reader.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

import tbdtrace
from tbdtrace import schema
from tbdtrace import trace as trace_mod


def _raw(path, table):
    with pa.memory_map(str(path / f"{table}.arrow")) as src:
        return pa.ipc.open_file(src).read_all()


def test_rows_are_written_in_time_order_and_decoded_exactly(tmp_path):
    rng = np.random.default_rng(1)
    n = 5000
    start = rng.integers(-(2**62), 2**62, n)  # deltas overflow int64: must wrap back
    start[:10] = [2**63 - 1, -(2**63), 0, 5, 5, 5, -1, 1, 2**40, -(2**40)]
    dur = rng.integers(0, 10**6, n)
    end = np.where(start > 2**63 - 1 - dur, start, start + dur)
    corr = [None if i % 7 == 0 else int(x) for i, x in enumerate(rng.integers(0, 2**62, n))]
    names = [f"k{i % 13}" for i in range(n)]
    tbdtrace.write(
        tmp_path / "t",
        {"kernels": {"start_ns": start, "end_ns": end, "correlation_id": corr, "name": names}},
        {},
    )
    rows = sorted(
        zip(start.tolist(), end.tolist(), corr, names, strict=True), key=lambda r: r[0]
    )  # Python's sort is stable, as the writer's must be
    got = tbdtrace.open(tmp_path / "t").table(
        "kernels", ["start_ns", "end_ns", "correlation_id", "name"]
    )
    assert list(zip(*(got.column(c).to_pylist() for c in got.column_names), strict=True)) == rows


def test_encoded_fields_are_named_and_hold_differences(tmp_path):
    tbdtrace.write(
        tmp_path / "t",
        {
            "runtime": {
                "start_ns": [30, 10, 20],
                "end_ns": [35, 12, 29],
                "correlation_id": [7, 5, None],
            }
        },
        {},
    )
    raw = _raw(tmp_path / "t", "runtime")
    assert "start_ns.delta" in raw.column_names and "start_ns" not in raw.column_names
    # time order 10, 20, 30: first value, then differences; end as end - start
    assert raw["start_ns.delta"].to_pylist() == [10, 10, 10]
    assert raw["end_ns.minus_start_ns"].to_pylist() == [2, 9, 5]
    # correlation ids in that order: 5, None, 7 -> 5, null (delta 0 kept as null), 2
    assert raw["correlation_id.delta"].to_pylist() == [5, None, 2]
    assert int(raw.schema.metadata[trace_mod.ROWS_KEY]) == 3
    tr = tbdtrace.open(tmp_path / "t")
    assert tr.num_rows("runtime") == 3
    assert tr.table("runtime", ["correlation_id"]).column(0).to_pylist() == [5, None, 7]


def test_end_alone_reads_its_start(tmp_path):
    tbdtrace.write(
        tmp_path / "t", {"memcpy": {"start_ns": [4, 1], "end_ns": [9, 3], "bytes": [1, 2]}}, {}
    )
    tr = tbdtrace.open(tmp_path / "t")
    assert tr.table("memcpy", ["end_ns"]).column(0).to_pylist() == [3, 9]
    assert tr.table("memcpy", ["start_ns", "bytes"]).to_pylist() == [
        {"start_ns": 1, "bytes": 2},
        {"start_ns": 4, "bytes": 1},
    ]


def test_uncached_reads_match_cached_ones(tmp_path):
    tbdtrace.write(
        tmp_path / "t",
        {"kernels": {"start_ns": [3, 1, 2], "end_ns": [4, 5, 6], "external_id": [1, None, 3]}},
        {},
    )
    tr = tbdtrace.open(tmp_path / "t")
    once = tr.table("kernels", ["end_ns", "external_id"], cache=False)
    again = tr.table("kernels", ["end_ns", "external_id"])
    assert once.equals(again)
    assert once["end_ns"].to_pylist() == [5, 6, 4]


def test_version_1_files_are_read(tmp_path):
    """A version-1 trace (plain fields, rows in any order, no row count) reads as is."""
    d = tmp_path / "v1"
    d.mkdir()
    decl = schema.table("kernels")
    tbl = pa.table(
        {
            "start_ns": pa.array([5, 1], pa.int64()),
            "end_ns": pa.array([6, 2], pa.int64()),
            "name": pa.array(["b", "a"]).dictionary_encode(),
        }
    )
    with pa.OSFile(str(d / "kernels.arrow"), "wb") as sink, pa.ipc.new_file(sink, tbl.schema) as w:
        w.write_table(tbl)
    (d / "meta.json").write_text(json.dumps({"schema_version": 1}))
    tr = tbdtrace.open(d)
    assert tr.num_rows("kernels") == 2
    got = tr.table("kernels", ["start_ns", "end_ns", "name", "grid_x"])
    assert got.to_pylist() == [
        {"start_ns": 5, "end_ns": 6, "name": "b", "grid_x": None},
        {"start_ns": 1, "end_ns": 2, "name": "a", "grid_x": None},
    ]
    assert got.schema == pa.schema([decl.arrow_schema().field(c) for c in got.column_names])


def test_absent_column_reads_as_nulls_without_memory(tmp_path):
    tbdtrace.write(tmp_path / "t", {"kernels": {"start_ns": [1, 2], "end_ns": [3, 4]}}, {})
    col = tbdtrace.open(tmp_path / "t").column("kernels", "tid")
    assert col.type == pa.int64() and col.null_count == 2 and col.to_pylist() == [None, None]
    assert trace_mod.null_array(3, schema.STR).to_pylist() == [None] * 3


@pytest.mark.parametrize("compression", ["zstd", "lz4", None])
def test_every_compression_round_trips(tmp_path, monkeypatch, compression):
    monkeypatch.setattr(trace_mod, "COMPRESSION", compression)
    start = [9, 3, 3, 1]
    tbdtrace.write(
        tmp_path / "t",
        {"kernels": {"start_ns": start, "end_ns": [10, 4, 8, 2], "correlation_id": [4, 2, 3, 1]}},
        {},
    )
    got = tbdtrace.open(tmp_path / "t").table("kernels", ["start_ns", "end_ns", "correlation_id"])
    assert got.to_pylist() == [
        {"start_ns": 1, "end_ns": 2, "correlation_id": 1},
        {"start_ns": 3, "end_ns": 8, "correlation_id": 3},  # the longer range first
        {"start_ns": 3, "end_ns": 4, "correlation_id": 2},
        {"start_ns": 9, "end_ns": 10, "correlation_id": 4},
    ]
