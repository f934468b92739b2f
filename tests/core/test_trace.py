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
    tr = tbdtrace.open(tmp_path / "t")  # named, and left out: it reads as absent
    assert [p for p in tr.problems if "kernels.parquet" in p and "7 bytes" in p]
    assert not tr.has("kernels") and tr.table("kernels").num_rows == 0
    with pytest.raises(TraceError, match="kernels.parquet.*--strict"):
        tbdtrace.open(tmp_path / "t", strict=True)


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


def _kernels(n: int, **cols):
    base = {"start_ns": list(range(0, 10 * n, 10)), "end_ns": list(range(5, 10 * n, 10))}
    return {**base, **cols}


def test_min_max_and_nulls_come_from_the_statistics_of_every_row_group(tmp_path, monkeypatch):
    from tbdtrace import tablefile
    from tbdtrace.analysis.engine import context, shared_arrays, window

    monkeypatch.setattr(tablefile, "ROW_GROUP_ROWS", 2)  # 5 rows: three row groups
    starts = [40, 10, 30, 0, 20]  # not in order: the extremes sit in different groups
    ends = [45, 95, 35, 5, 25]
    ops = {
        "start_ns": starts,
        "end_ns": ends,
        "name": ["a"] * 5,
        "pid": [1, 1, None, 1, 1],  # one null
    }
    tbdtrace.write(tmp_path / "t", {"ops": ops}, {})
    tr = tbdtrace.open(tmp_path / "t")
    assert tr.min_max("ops", "start_ns") == (min(starts), max(starts)) == (0, 40)
    assert tr.min_max("ops", "end_ns") == (min(ends), max(ends)) == (5, 95)
    assert tr.min_max("ops", "pid") is None  # a null: the statistics do not tell
    assert tr.min_max("ops", "name") is None  # not integer
    assert tr.min_max("markers", "start_ns") is None  # no such table
    assert tr.null_free("ops", "start_ns") is True and tr.null_free("ops", "pid") is False
    assert tr.null_free("markers", "pid") is None
    # a window's rows of a column without nulls have none; with nulls, unknown
    win = context.WindowRows(context.of(tr), window.resolve(context.of(tr), None))
    assert win.null_free("ops", "start_ns") is True and win.null_free("ops", "pid") is None
    # the whole trace's bounds from the statistics, no column decoded
    ctx = context.of(tr)
    assert shared_arrays.time_bounds(ctx, "ops") == (0, 95)
    assert ("ops", "start_ns") not in tr._columns and ("ops", "end_ns") not in tr._columns
    # a trace in memory: the same facts from its columns (one pass each, kept)
    mem = tbdtrace.trace.from_tables({"ops": ops}, {})
    for t, c in [("ops", "start_ns"), ("ops", "end_ns"), ("ops", "pid"), ("markers", "pid")]:
        assert mem.min_max(t, c) == tr.min_max(t, c), c
        assert mem.null_free(t, c) == tr.null_free(t, c), c
    assert mem.min_max("ops", "name") is None
    assert shared_arrays.time_bounds(context.of(mem), "ops") == (0, 95)


def test_constant_columns_come_from_the_statistics_of_every_row_group(tmp_path, monkeypatch):
    from tbdtrace import tablefile

    monkeypatch.setattr(tablefile, "ROW_GROUP_ROWS", 2)  # 5 rows: three row groups
    cols = _kernels(
        5,
        rank=[3] * 5,
        device_type=["cuda"] * 5,
        grid_x=[1, 1, 1, 1, 2],  # differs in the last row group only
        block_x=[7, 7, None, 7, 7],  # one null
        stream_id=[None] * 5,
    )
    tbdtrace.write(tmp_path / "t", {"kernels": cols}, {})
    import pyarrow.parquet as pq

    assert pq.read_metadata(tmp_path / "t" / "kernels.parquet").num_row_groups == 3
    tr = tbdtrace.open(tmp_path / "t")
    assert tr.constant("kernels", "rank") == (3,)
    assert tr.constant("kernels", "device_type") == ("cuda",)
    assert tr.constant("kernels", "stream_id") == (None,)
    assert tr.constant("kernels", "grid_x") is None
    assert tr.constant("kernels", "block_x") is None
    assert tr.constant("runtime", "rank") is None  # no such table
    # what the statistics say agrees with the decoded values
    for c in ("rank", "device_type", "stream_id"):
        assert set(tr.table("kernels", [c]).column(0).to_pylist()) == {tr.constant("kernels", c)[0]}
    # a trace in memory tells the same of its integer and all-null columns
    mem = tbdtrace.trace.from_tables({"kernels": cols}, {})
    for c, want in [("rank", (3,)), ("stream_id", (None,)), ("grid_x", None), ("block_x", None)]:
        assert mem.constant("kernels", c) == tr.constant("kernels", c) == want, c
    assert mem.constant("runtime", "rank") is None
    assert mem.constant("kernels", "device_type") is None  # not an integer: not looked at


def test_concurrent_reads_give_the_columns_of_one_at_a_time_reads(tmp_path, monkeypatch):
    import tbdtrace.trace as trace_mod

    monkeypatch.setattr(trace_mod, "_cores", lambda: 4)  # threads even on a one-core machine
    kern = _kernels(50, name=[f"k{i % 3}" for i in range(50)], grid_x=list(range(50)))
    rt = {"start_ns": list(range(50)), "end_ns": list(range(1, 51)), "name": ["launch"] * 50}
    tbdtrace.write(tmp_path / "t", {"kernels": kern, "runtime": rt}, {})
    one = tbdtrace.open(tmp_path / "t")
    many = tbdtrace.open(tmp_path / "t")
    many.prefetch_tables([("kernels", ["start_ns", "name"]), ("runtime", ["end_ns", "name"])])
    for table, c in (("kernels", "start_ns"), ("kernels", "name"), ("runtime", "end_ns")):
        assert many.column(table, c).equals(one.column(table, c))
    got = many.read_columns("kernels", ["grid_x", "end_ns", "start_ns"])
    assert [a.to_pylist() for a in got] == [kern["grid_x"], kern["end_ns"], kern["start_ns"]]


def test_an_error_on_a_reading_thread_reaches_the_caller(tmp_path, monkeypatch):
    import tbdtrace.trace as trace_mod

    monkeypatch.setattr(trace_mod, "_cores", lambda: 4)
    tbdtrace.write(
        tmp_path / "t",
        {"kernels": _kernels(3), "runtime": {"start_ns": [1], "end_ns": [2]}},
        {},
    )
    tr = tbdtrace.open(tmp_path / "t")
    real = trace_mod.tablefile.read

    def fails(file, decl, cols, *rest):
        if decl.name == "runtime":
            raise TraceError(f"{file}: not a readable Parquet file (damaged)")
        return real(file, decl, cols, *rest)

    monkeypatch.setattr(trace_mod.tablefile, "read", fails)
    with pytest.raises(TraceError, match="runtime.parquet"):
        tr.prefetch_tables([("kernels", ["start_ns"]), ("runtime", ["start_ns"])])


@pytest.mark.parametrize("pool_loaded", [False, True])
def test_write_at_interpreter_exit_keeps_every_table(tmp_path, pool_loaded):
    """A profiled child writes its trace from an exit handler, when no new thread may
    start (the pool's module cannot load, or a loaded pool refuses work): the tables that
    would be written side by side are written in turn."""
    import subprocess
    import sys

    prog = (
        ("import concurrent.futures.thread\n" if pool_loaded else "")
        + f"""
import atexit
import tbdtrace
from tbdtrace import trace
trace._cores = lambda: 4  # side by side, as on any machine of two cores or more
tables = {{
    "kernels": {{"start_ns": [1, 5], "end_ns": [2, 9]}},
    "ops": {{"start_ns": [0, 3, 4], "end_ns": [10, 4, 6]}},
    "memcpy": {{"start_ns": [1], "end_ns": [2], "bytes": [8]}},
}}
# One table first (written on this thread): what pyarrow loads lazily loads now, not
# at exit; the thread pool is not imported yet.
tbdtrace.write({str(tmp_path / "one")!r}, {{"memcpy": tables["memcpy"]}}, {{}})
atexit.register(lambda: tbdtrace.write({str(tmp_path / "t")!r}, tables, {{}}))
"""
    )
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and not r.stderr, r.stderr[-2000:]
    tr = tbdtrace.open(tmp_path / "t")
    assert [tr.num_rows(n) for n in ("kernels", "ops", "memcpy")] == [2, 3, 1]
