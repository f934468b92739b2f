"""Dictionary columns decoded a row group at a time into narrow codes (ops names and
categories of a big report), against the rows as written and Arrow's own combination;
thread ids read as int32 where the statistics prove they fit; the launch search's hits
placed a block at a time, against a brute-force search."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tbdtrace
from tbdtrace import schema, tablefile
from tbdtrace.analysis.engine import attribution, context, op_flops, shared_arrays, window
from tbdtrace.analysis.engine.window import WindowSpec
from tbdtrace.commands._open import open_or_import
from tbdtrace.errors import TraceError
from tbdtrace.report import ReportOptions, build
from tbdtrace.trace import Streamed, write
from tests.analysis.engine.test_thread_groups_order import OPS, _brute, _trace
from tests.analysis.tiny import US, make
from tests.conftest import fixture

DICT = pa.dictionary(pa.int32(), pa.string())


def _groups_file(path: Path, groups: list[list[str | None]], typ: pa.DataType = DICT) -> Path:
    """A Parquet file of one ``category`` column, one row group per list (each with a
    dictionary of its own values)."""
    with pq.ParquetWriter(path, pa.schema([("category", typ)])) as w:
        for g in groups:
            w.write_table(pa.table({"category": pa.array(g, pa.string()).cast(typ)}))
    assert pq.ParquetFile(path).metadata.num_row_groups == len(groups)
    return path


OPS_DECL = schema.table("ops")


def test_codes_of_row_groups_with_their_own_dictionaries(tmp_path: Path) -> None:
    groups = [["b", "a", "b"], ["c", None, "a"], ["d", "d", None, "b"]]
    f = _groups_file(tmp_path / "ops.parquet", groups)
    got = tablefile.read_label_codes(f, OPS_DECL, "category")
    assert got is not None
    codes, labels = got
    assert codes.dtype == np.int8
    # Each row's label, as written; a null is the code after the last label.
    rows = [x for g in groups for x in g]
    assert [labels[c] if c < len(labels) else None for c in codes.tolist()] == rows
    assert [c == len(labels) for c in codes.tolist()] == [x is None for x in rows]
    # The labels in the order Arrow's combination of the column gives them.
    col = pq.read_table(f).column("category").unify_dictionaries().combine_chunks()
    assert labels == col.dictionary.to_pylist()


def test_many_labels_widen_then_give_up(tmp_path: Path) -> None:
    many = [f"op{i}" for i in range(200)]  # past 126: int16
    f = _groups_file(tmp_path / "a.parquet", [many[:100], many[100:], many[:3]])
    got = tablefile.read_label_codes(f, OPS_DECL, "category")
    assert got is not None and got[0].dtype == np.int16
    assert [got[1][c] for c in got[0].tolist()] == many + many[:3]
    # 2^15 - 1 labels do not fit the int16 codes: the caller reads the column.
    too = [f"x{i}" for i in range(2**15 - 1)]
    f = _groups_file(tmp_path / "b.parquet", [too[:20000], too[20000:]])
    assert tablefile.read_label_codes(f, OPS_DECL, "category") is None


def test_not_codes_where_the_column_is_not_so_stored(tmp_path: Path) -> None:
    f = tmp_path / "s.parquet"
    pq.write_table(pa.table({"category": ["a", "b"]}), f)  # plain strings
    assert tablefile.read_label_codes(f, OPS_DECL, "category") is None
    f = _groups_file(tmp_path / "n.parquet", [["a"]])
    assert tablefile.read_label_codes(f, OPS_DECL, "name") is None  # absent
    f = _groups_file(tmp_path / "z.parquet", [[None, None]])  # all null by statistics
    assert tablefile.read_label_codes(f, OPS_DECL, "category") is None


def test_an_unreadable_file_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.parquet"
    f.write_bytes(b"PAR1 not a footer PAR1")
    with pytest.raises(TraceError, match="bad.parquet: not a readable Parquet file"):
        tablefile.read_label_codes(f, OPS_DECL, "category")


def _ops_trace(tmp_path: Path):
    names = ["aten::mm", "nn.Module: L", "aten::add", "aten::mm", "aten::relu", "aten::mm"]
    n = len(names)
    ops = {
        "start_ns": [i * 10 * US for i in range(n)],
        "end_ns": [i * 10 * US + 5 * US for i in range(n)],
        "pid": [1] * n,
        "tid": [2] * n,
        "name": names,
        "category": ["cpu_op", "python_function"] * (n // 2),
    }
    return make(tmp_path, {"ops": ops}), names


def test_ops_names_as_narrow_codes(tmp_path: Path) -> None:
    tr, names = _ops_trace(tmp_path)
    ctx = context.of(tr)
    codes, labels = shared_arrays.codes(ctx, "ops", "name")
    assert codes.dtype == np.int8 and not ctx.holds("ops", "name")
    assert [labels[c] for c in codes.tolist()] == names
    # The same labels, in the same order, as the stored column's dictionary.
    col = pq.read_table(tr.path / "ops.parquet").column("name").combine_chunks()
    assert labels == col.dictionary.to_pylist()
    assert codes.tolist() == col.indices.to_pylist()
    # A mask over the names is made from the codes, not from a read of the column.
    mask = shared_arrays.label_mask(ctx, "ops", "name", lambda x: x == "aten::mm")
    assert mask.tolist() == [x == "aten::mm" for x in names]
    # Some rows of the column, made from the codes: those rows as the column has them.
    take = pa.array([5, 0, 2])
    assert op_flops._rows_of(ctx, "name", take).equals(col.take(take))
    assert not ctx.holds("ops", "name")
    cat = shared_arrays.label_mask(ctx, "ops", "category", lambda x: x == "cpu_op")
    assert cat.tolist() == [True, False] * 3


def test_ops_names_of_a_window(tmp_path: Path) -> None:
    names = ["a", "b", "c", "a", "d", "b"]
    # [0,5) [10,15) [20,25) ... us; one measured step [12us, 42us)
    ops = {
        "start_ns": [i * 10 * US for i in range(6)],
        "end_ns": [i * 10 * US + 5 * US for i in range(6)],
        "pid": [1] * 6,
        "tid": [2] * 6,
        "name": names,
    }
    steps = {"step": [1], "start_ns": [12 * US], "end_ns": [42 * US], "warmup": [False]}
    whole = context.of(make(tmp_path, {"ops": ops, "steps": steps}))
    view = whole.windowed(window.resolve(whole, window.WindowSpec("measured")))
    # The ops overlapping [12us, 42us): [10,15) [20,25) [30,35) [40,45)
    assert view.row_run("ops") == (1, 5)
    codes, labels = shared_arrays.codes(view, "ops", "name")
    assert [labels[c] for c in codes.tolist()] == names[1:5]
    assert not view.holds("ops", "name") and not whole.holds("ops", "name")


@pytest.mark.parametrize("block", [1, 2, 1 << 20])
def test_hits_placed_by_blocks_as_brute_force(monkeypatch, block: int) -> None:
    monkeypatch.setattr(attribution, "_PLACE_ROWS", block)
    ctx = context.of(_trace())
    q_t = np.array([5, 15, 30, 35, 55, 65, 75, 95, 110, 125, 140], np.int64)
    keep = np.ones(len(OPS) + 1, bool)
    # Every query on one thread (the times read in place) ...
    got = attribution.on_threads(ctx, "ops", keep, {(1, 7): np.arange(q_t.size)}, q_t)
    assert got.tolist() == [_brute(int(t)) for t in q_t]
    # ... and the queries on two threads: thread 8's one op holds every time up to 200.
    sel7, sel8 = np.arange(0, q_t.size, 2), np.arange(1, q_t.size, 2)
    got = attribution.on_threads(ctx, "ops", keep, {(1, 7): sel7, (1, 8): sel8}, q_t)
    expect = [_brute(int(t)) if i % 2 == 0 else len(OPS) for i, t in enumerate(q_t.tolist())]
    assert got.tolist() == expect


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real trace (ops, markers, Python functions and modules, warm-up steps) written
    as a trace directory, its ops in row groups of 997 rows."""
    tr = open_or_import(str(fixture("kineto/hta/df_index_resolver.json.gz")))
    tables: dict[str, object] = {t.name: tr.table(t.name) for t in schema.TABLES if tr.has(t.name)}
    ops = tr.table("ops")
    assert ops.num_rows > 3 * 997
    tables["ops"] = Streamed(ops.schema, lambda: iter(ops.to_batches(max_chunksize=997)))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tablefile, "STREAM_GROUP_ROWS", 997)
        out = write(tmp_path_factory.mktemp("real") / "t", tables, tr.meta)  # type: ignore[arg-type]
    assert pq.ParquetFile(out / "ops.parquet").metadata.num_row_groups > 3
    return out


@pytest.mark.parametrize("kind", ["measured", "all"])
def test_report_the_same_with_the_columns_read(monkeypatch, stored: Path, kind: str) -> None:
    opts = ReportOptions(window=WindowSpec(kind))

    def doc() -> str:
        return json.dumps(build(tbdtrace.open(stored), opts), default=str)

    read = tablefile.read_label_codes
    asked: list[tuple[str, str, bool]] = []

    def counted(f: Path, decl: schema.Table, column: str, expect: object = None) -> object:
        out = read(f, decl, column, expect)
        asked.append((decl.name, column, out is not None))
        return out

    narrow = tablefile.read_narrow_ints
    ids: list[str] = []

    def counted_ids(f: Path, decl: schema.Table, column: str, expect: object = None) -> object:
        out = narrow(f, decl, column, expect)
        if out is not None:
            ids.append(f"{decl.name}.{column}")
        return out

    monkeypatch.setattr(tablefile, "read_label_codes", counted)
    monkeypatch.setattr(tablefile, "read_narrow_ints", counted_ids)
    got = doc()
    assert "ops.tid" in ids
    # The narrow codes were made, from the row groups; the thread ids read as int32.
    assert ("ops", "name", True) in asked and ("ops", "category", True) in asked
    # The columns read whole instead (ops names as their int32 indices): the same.
    monkeypatch.setattr(tablefile, "read_label_codes", lambda *a, **k: None)
    monkeypatch.setattr(tablefile, "read_narrow_ints", lambda *a, **k: None)
    assert doc() == got


def _ints_file(path: Path, groups: list[list[int | None]]) -> Path:
    with pq.ParquetWriter(path, pa.schema([("tid", pa.int64())])) as w:
        for g in groups:
            w.write_table(pa.table({"tid": pa.array(g, pa.int64())}))
    return path


def test_ids_read_narrow_where_the_statistics_prove_they_fit(tmp_path: Path) -> None:
    groups = [[7, -1, 2**31 - 2], [5, 5], [-(2**31), 0, 9]]
    f = _ints_file(tmp_path / "ops.parquet", groups)
    got = tablefile.read_narrow_ints(f, OPS_DECL, "tid")
    assert got is not None and got.dtype == np.int32
    assert got.tolist() == [x for g in groups for x in g]
    # The largest int32 (an id + 1 would wrap), a wider value, a null: not narrowed.
    for bad in ([1, 2**31 - 1], [1, 2**31], [1, None]):
        f = _ints_file(tmp_path / "b.parquet", [[3], bad])
        assert tablefile.read_narrow_ints(f, OPS_DECL, "tid") is None
    assert tablefile.read_narrow_ints(f, OPS_DECL, "name") is None  # not int64


def test_thread_groups_the_same_from_narrow_ids(tmp_path: Path, monkeypatch) -> None:
    tids = [9, 4, 9, 4, 11, 9]
    ops = {
        "start_ns": [i * US for i in range(6)],
        "end_ns": [i * US + US // 2 for i in range(6)],
        "pid": [1] * 6,
        "tid": tids,
        "name": ["a"] * 6,
    }
    tr = make(tmp_path, {"ops": ops})
    ctx = context.of(tr)
    assert shared_arrays.ids_once(ctx, "ops", "tid").dtype == np.int32
    groups = attribution.range_groups(ctx, "ops")
    # Rows per thread, in the order of the threads' first rows: written out from tids.
    assert {k: v.tolist() for k, v in groups.items()} == {
        (1, 9): [0, 2, 5],
        (1, 4): [1, 3],
        (1, 11): [4],
    }
    assert list(groups) == [(1, 9), (1, 4), (1, 11)]
    assert not ctx.holds("ops", "tid")
    # Read as int64 instead: the same groups, the same order.
    monkeypatch.setattr(tablefile, "read_narrow_ints", lambda *a, **k: None)
    wide = attribution.range_groups(context.of(tbdtrace.open(tr.path)), "ops")
    assert list(wide) == list(groups)
    assert all(wide[k].tolist() == groups[k].tolist() for k in groups)
