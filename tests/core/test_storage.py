"""On-disk storage of trace tables: time order, true values, encodings, old files.

Expected values come from the rows given to ``write`` (re-sorted by a plain Python sort)
and from raw reads of the table files by pyarrow, Polars, pandas and DuckDB, not from
tbdtrace's reader.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tbdtrace
from tbdtrace import schema, tablefile
from tbdtrace import trace as trace_mod


def _raw(path, table):
    return pq.read_table(path / f"{table}.parquet")


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


def test_stored_columns_hold_true_values_in_the_formats_encodings(tmp_path):
    tbdtrace.write(
        tmp_path / "t",
        {
            "runtime": {
                "start_ns": [30, 10, 20],
                "end_ns": [35, 12, 29],
                "correlation_id": [7, 5, None],
                "name": ["b", "a", "b"],
            }
        },
        {},
    )
    raw = _raw(tmp_path / "t", "runtime")
    # time order 10, 20, 30, true values, strings as dictionaries
    assert raw["start_ns"].to_pylist() == [10, 20, 30]
    assert raw["end_ns"].to_pylist() == [12, 29, 35]
    assert raw["correlation_id"].to_pylist() == [5, None, 7]
    assert raw.schema.field("name").type == schema.STR
    assert raw["name"].to_pylist() == ["a", "b", "b"]
    md = pq.ParquetFile(tmp_path / "t" / "runtime.parquet").metadata.row_group(0)
    enc = {md.column(i).path_in_schema: md.column(i).encodings for i in range(md.num_columns)}
    for c in ("start_ns", "end_ns", "correlation_id"):
        assert "DELTA_BINARY_PACKED" in enc[c], (c, enc[c])
    assert "RLE_DICTIONARY" in enc["name"] and md.column(0).compression == "ZSTD"
    tr = tbdtrace.open(tmp_path / "t")
    assert tr.num_rows("runtime") == 3
    assert tr.table("runtime", ["correlation_id"]).column(0).to_pylist() == [5, None, 7]


def test_other_readers_see_the_same_rows(tmp_path):
    """DuckDB, Polars and pandas on a table file give tbdtrace.open's rows."""
    import duckdb
    import pandas as pd
    import polars as pl

    rng = np.random.default_rng(3)
    n = 2000
    start = rng.integers(0, 10**15, n)
    tbdtrace.write(
        tmp_path / "t",
        {
            "kernels": {
                "start_ns": start,
                "end_ns": start + rng.integers(0, 10**6, n),
                "correlation_id": [None if i % 5 == 0 else i for i in range(n)],
                "stream_id": rng.integers(0, 4, n),
                "name": [f"k{i % 7}" for i in range(n)],
                "grid_x": rng.integers(1, 9, n).astype(np.int32),
            }
        },
        {},
    )
    cols = ["start_ns", "end_ns", "correlation_id", "stream_id", "name", "grid_x"]
    want = tbdtrace.open(tmp_path / "t").table("kernels", cols).to_pylist()
    f = str(tmp_path / "t" / "kernels.parquet")
    assert pl.read_parquet(f, columns=cols).to_dicts() == want
    df = pd.read_parquet(f, columns=cols)
    got = [
        {c: (None if pd.isna(v) else (str(v) if c == "name" else int(v))) for c, v in r.items()}
        for r in df.to_dict("records")
    ]
    assert got == want
    sel = ", ".join(cols)
    rows = duckdb.sql(f"select {sel} from read_parquet('{f}')").fetchall()
    assert [dict(zip(cols, r, strict=True)) for r in rows] == want


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
    monkeypatch.setattr(tablefile, "COMPRESSION", compression)
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


def test_all_null_columns_read_from_the_statistics(tmp_path):
    # flops: null in every row (known from the statistics, not decoded); grid_x: some
    # values (decoded).
    n = 5
    k = {
        "start_ns": list(range(0, 10 * n, 10)),
        "end_ns": list(range(5, 10 * n + 5, 10)),
        "name": ["k"] * n,
        "flops": [None] * n,
        "grid_x": [None, 4, None, 8, None],
    }
    p = trace_mod.write(tmp_path / "t", {"kernels": k}, {"source": "test"})
    f = p / "kernels.parquet"
    stats = pq.ParquetFile(f).metadata.row_group(0)
    names = pq.ParquetFile(f).schema_arrow.names
    assert stats.column(names.index("flops")).statistics.null_count == n
    decl = schema.table("kernels")
    got = tablefile.read(f, decl, ["flops", "grid_x", "name"])
    assert got["flops"].type == decl.column("flops").type and got["flops"].null_count == n
    assert got["grid_x"].to_pylist() == k["grid_x"]
    assert got["name"].to_pylist() == k["name"]
    assert tablefile._all_null_columns(pq.ParquetFile(f).metadata, ["flops", "grid_x"]) == {"flops"}


def _mixed_kernels(n: int) -> dict[str, object]:
    rng = np.random.default_rng(7)
    start = rng.integers(0, 10**12, n)
    return {
        "start_ns": start,
        "end_ns": start + rng.integers(0, 10**6, n),
        "correlation_id": [None if i % 5 == 0 else int(i) for i in range(n)],
        "name": [f"kernel_{i % 37}" for i in range(n)],
        "grid_x": [None if i % 3 == 0 else i % 9 for i in range(n)],
    }


def test_table_files_are_pyarrow_parquets_own_bytes(tmp_path):
    """The writer (pyarrow's Parquet extension, without pyarrow.parquet) writes the file
    pq.write_table writes with the same options, byte for byte, in one group and in
    batches; and the reader gives pq.read_table's columns."""
    decl = schema.table("kernels")
    tbl = trace_mod.stored(decl, trace_mod.to_table("kernels", _mixed_kernels(20_000)))
    ours, theirs = tmp_path / "ours.parquet", tmp_path / "theirs.parquet"
    opts = tablefile._options(decl, tablefile.COMPRESSION)
    for batched in (False, True):
        if batched:
            batches = tbl.to_batches(max_chunksize=3000)
            rows = tablefile.write_batches(ours, decl, iter(batches), "w1")
            assert rows == tbl.num_rows
            with pq.ParquetWriter(theirs, tablefile._with_id(tbl.schema, "w1"), **opts) as w:
                w.write_table(tbl.replace_schema_metadata(None), row_group_size=tbl.num_rows)
        else:
            tablefile.write(ours, decl, tbl, "w1")
            meta = {tablefile.WRITE_ID_KEY: b"w1"}
            pq.write_table(tbl.replace_schema_metadata(meta), theirs, row_group_size=2**24, **opts)
        assert ours.read_bytes() == theirs.read_bytes(), f"batched={batched}"
        got = tablefile.read(ours, decl, ["start_ns", "correlation_id", "name", "grid_x"])
        raw = pq.read_table(theirs)
        for c, arr in got.items():
            assert arr.to_pylist() == raw.column(c).to_pylist(), c
        assert tablefile.num_rows(ours) == tbl.num_rows == tablefile.footer(ours).num_rows


def test_tables_are_listed_in_the_order_given_whatever_their_size(tmp_path):
    """Written largest first across threads, the marker and meta still list the tables as
    given, each with its own rows."""
    tables = {
        "steps": {"step": [1, 2], "start_ns": [0, 10], "end_ns": [10, 20]},
        "kernels": _mixed_kernels(30_000),
        "memcpy": {"start_ns": [5], "end_ns": [6], "bytes": [64]},
        "runtime": {"start_ns": list(range(2000)), "end_ns": list(range(1, 2001))},
    }
    tbdtrace.write(tmp_path / "t", tables, {})
    marker = json.loads((tmp_path / "t" / ".tbdtrace-trace.json").read_text())
    assert list(marker["tables"]) == list(tables)
    assert {t: e["rows"] for t, e in marker["tables"].items()} == {
        "steps": 2,
        "kernels": 30_000,
        "memcpy": 1,
        "runtime": 2000,
    }
    for t in tables:
        assert _raw(tmp_path / "t", t).num_rows == marker["tables"][t]["rows"]


def test_read_ahead_gives_the_columns_a_plain_read_gives(tmp_path):
    """Columns read ahead on another thread are pyarrow's own read of the file; a read
    while they are decoded waits for them; a table that fails to read ahead fails the
    caller's own read with the usual error, and the others are still read."""
    import threading

    tbdtrace.write(
        tmp_path / "t",
        {
            "kernels": _mixed_kernels(50_000),
            "memcpy": {"start_ns": [1], "end_ns": [2], "bytes": [8]},
        },
        {},
    )
    tr = tbdtrace.open(tmp_path / "t")
    gate = threading.Event()
    real = tr._load
    loads: list[str] = []

    def held(decl, cols):  # the first table waits until the caller is inside a read
        loads.append(decl.name)
        if decl.name == "kernels":
            gate.wait(5)
        return real(decl, cols)

    tr._load = held  # type: ignore[method-assign]
    run = tr.read_ahead([("kernels", ["start_ns", "name", "grid_x"]), ("memcpy", ["start_ns"])])
    worker = threading.Thread(target=run)
    worker.start()
    threading.Timer(0.2, gate.set).start()
    got = tr.table("kernels", ["start_ns", "name", "grid_x"])  # waits for the thread
    worker.join()
    raw = _raw(tmp_path / "t", "kernels")
    for c in got.column_names:
        assert got.column(c).to_pylist() == raw.column(c).to_pylist(), c
    assert tr.column("memcpy", "start_ns").to_pylist() == [1]
    assert loads == ["kernels", "memcpy"]  # each decoded once, on the thread

    tr2 = tbdtrace.open(tmp_path / "t")
    (tmp_path / "t" / "kernels.parquet").write_bytes(b"not parquet any more")
    tr2.read_ahead([("kernels", ["start_ns"]), ("memcpy", ["end_ns"])])()
    assert tr2.column("memcpy", "end_ns").to_pylist() == [2]
    with pytest.raises(tbdtrace.TraceError, match="kernels.parquet"):
        tr2.table("kernels", ["start_ns"])


def test_a_trace_opened_ahead_is_the_trace_open_gives(tmp_path, monkeypatch):
    """`begin_open(..., read_ahead=...)` of a trace directory: the trace of `open`, its
    columns read ahead; the open's error raised by `.trace()`, not before; and without a
    thread to open it (the process at its limit), opened when asked."""
    import threading

    from tbdtrace.commands import _open

    tbdtrace.write(tmp_path / "t", {"kernels": _mixed_kernels(1000)}, {"source": "x"})
    wanted = [("kernels", ["start_ns", "name"])]
    tr = _open.begin_open(str(tmp_path / "t"), read_ahead=wanted).trace()
    tr._wait_ahead("kernels", ["start_ns", "name"])
    assert ("kernels", "name") in tr._columns and tr.meta["source"] == "x"
    raw = _raw(tmp_path / "t", "kernels")
    assert tr.table("kernels", ["name"]).column(0).to_pylist() == raw["name"].to_pylist()

    (tmp_path / "not-a-trace").mkdir()
    pending = _open.begin_open(str(tmp_path / "not-a-trace"), read_ahead=wanted)
    with pytest.raises(tbdtrace.TraceError, match="no meta.json"):
        pending.trace()

    def refuse(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    tr = _open.begin_open(str(tmp_path / "t"), read_ahead=wanted).trace()
    assert not tr._columns and tr.num_rows("kernels") == 1000


def test_columns_of_several_row_groups_read_a_group_at_a_time(tmp_path):
    # A kernels file of 5 row groups: fixed-width columns come back whole, equal to
    # pyarrow's own read of the file; one with a null in a row group is read as before.
    n = 1000
    rng = np.random.default_rng(5)
    start = np.sort(rng.integers(0, 10**12, n))
    corr = rng.integers(0, 10**6, n).astype(np.int64)
    grid = [None if i == 777 else int(x) for i, x in enumerate(rng.integers(1, 99, n))]
    tbl = pa.table(
        {
            "start_ns": pa.array(start, pa.int64()),
            "end_ns": pa.array(start + 5, pa.int64()),
            "correlation_id": pa.array(corr, pa.int64()),
            "grid_x": pa.array(grid, pa.int32()),
        }
    )
    path = tmp_path / "kernels.parquet"
    pq.write_table(tbl, path, row_group_size=200)
    assert pq.ParquetFile(path).metadata.num_row_groups == 5
    decl = schema.table("kernels")
    got = tablefile.read(path, decl, ["start_ns", "correlation_id", "grid_x"])
    for c in ("start_ns", "correlation_id", "grid_x"):
        assert got[c].to_pylist() == tbl.column(c).to_pylist()
    assert got["grid_x"].null_count == 1
