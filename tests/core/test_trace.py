"""Trace directory format: round trip, validation, atomic replacement, generated docs."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import tbdtrace
from tbdtrace import schema
from tbdtrace.errors import TraceError

ROOT = Path(__file__).resolve().parents[2]


def test_round_trip_types_and_nulls(tmp_path):
    cols = {"start_ns": [1, 2], "end_ns": [3, 4], "name": ["k", None], "grid_x": [1, None]}
    tbdtrace.write(tmp_path / "t", {"kernels": cols}, {"source": "test"})
    tr = tbdtrace.open(tmp_path / "t")
    tbl = tr.table("kernels")
    assert tbl.schema == schema.table("kernels").arrow_schema()
    assert tbl["name"].type == pa.dictionary(pa.int32(), pa.string())
    assert tbl["name"].to_pylist() == ["k", None]
    assert tbl["grid_x"].to_pylist() == [1, None]
    assert tbl["stream_id"].null_count == 2
    assert tr.table("kernels", ["end_ns"]).column_names == ["end_ns"]
    assert tr.meta["schema_version"] == schema.SCHEMA_VERSION
    assert tr.table("memcpy").num_rows == 0  # absent table reads as empty
    assert tr.num_rows("kernels") == 2


def test_lossy_cast_is_refused(tmp_path):
    with pytest.raises((pa.ArrowInvalid, OverflowError)):
        tbdtrace.write(
            tmp_path / "t", {"kernels": {"start_ns": [1], "end_ns": [2], "grid_x": [2**40]}}, {}
        )
    assert not (tmp_path / "t").exists()


def test_open_errors_name_the_file(tmp_path):
    with pytest.raises(TraceError, match="not a trace directory"):
        tbdtrace.open(tmp_path / "missing")
    (tmp_path / "d").mkdir()
    with pytest.raises(TraceError, match="no meta.json"):
        tbdtrace.open(tmp_path / "d")
    (tmp_path / "d" / "meta.json").write_text('{"schema_version": 999}')
    with pytest.raises(TraceError, match="schema version 999"):
        tbdtrace.open(tmp_path / "d")
    (tmp_path / "d" / "meta.json").write_text("{oops")
    with pytest.raises(TraceError, match="invalid JSON"):
        tbdtrace.open(tmp_path / "d")


def test_corrupt_table_file_is_reported(tmp_path):
    tbdtrace.write(tmp_path / "t", {"kernels": {"start_ns": [1], "end_ns": [2]}}, {})
    (tmp_path / "t" / "kernels.parquet").write_bytes(b"garbage")
    with pytest.raises(TraceError, match="kernels.parquet"):
        tbdtrace.open(tmp_path / "t").table("kernels")


def test_write_refuses_foreign_directory(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    (d / "precious.txt").write_text("keep")
    with pytest.raises(TraceError, match="not a tbdtrace trace"):
        tbdtrace.write(d, {}, {})
    assert (d / "precious.txt").read_text() == "keep"


def test_write_replaces_previous_trace(tmp_path):
    tbdtrace.write(tmp_path / "t", {"kernels": {"start_ns": [1], "end_ns": [2]}}, {})
    tbdtrace.write(tmp_path / "t", {"memcpy": {"start_ns": [1], "end_ns": [2], "bytes": [8]}}, {})
    tr = tbdtrace.open(tmp_path / "t")
    assert tr.table("kernels").num_rows == 0 and tr.table("memcpy").num_rows == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]


def test_schema_declarations_are_consistent():
    for t in schema.TABLES:
        names = t.column_names
        assert len(names) == len(set(names)), t.name
        for c in t.columns:
            if c.name.endswith("_ns"):
                assert c.type == pa.int64(), (t.name, c.name)
            if c.name.endswith("_bytes"):
                assert c.type in (pa.int64(), pa.int32()), (t.name, c.name)
            assert c.doc, (t.name, c.name)


def test_trace_format_doc_is_generated_from_schema():
    doc = (ROOT / "docs" / "TRACE_FORMAT.md").read_text()
    assert doc == schema.render_markdown(), "run `make docs` to regenerate docs/TRACE_FORMAT.md"


def test_meta_json_is_plain_json(tmp_path):
    tbdtrace.write(tmp_path / "t", {}, {"source": "test", "command": ["a", "b"]})
    meta = json.loads((tmp_path / "t" / "meta.json").read_text())
    assert meta["command"] == ["a", "b"] and meta["clock"] == "CLOCK_REALTIME"
