"""``report --format xlsx``: the workbook read back with the tests' own small reader
(tests/xlsx_reader.py), every cell compared with the JSON report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.inprocess import tbd as _run
from tests.robustness import synth
from tests.xlsx_reader import read_workbook

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "tests/data/gpu/h200_resnet50_cupti"


def _lookup(doc: dict[str, Any], table: str) -> Any:
    """The document's value a table name points at: ``a.b.c`` is doc[a][b][c]."""
    v: Any = doc
    for k in table.split("."):
        v = v[k]
    return v


def _field(record: dict[str, Any], col: str) -> Any:
    """A flat column ``a.b`` of a record: record[a][b] (nested objects), the list as JSON."""
    v: Any = record
    for k in col.split("."):
        v = v[k] if isinstance(v, dict) else None
    return json.dumps(v) if isinstance(v, list) else v


def _want(v: Any) -> Any:
    """What a cell holds for a JSON value (the rules of docs/METRICS.md "Workbook")."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int):
        return float(v) if abs(v) <= 2**53 else str(v)
    if isinstance(v, float):
        return v
    return v


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, float) and isinstance(got, float):
        # numbers are written with 16 significant digits
        return got == pytest.approx(want, rel=1e-15, abs=0)
    return got == want and type(got) is type(want)


@pytest.fixture(scope="module")
def gpu_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    out = tmp_path_factory.mktemp("xlsx") / "report.xlsx"
    _run("report", str(GPU), "--format", "xlsx", "-o", str(out))
    doc = json.loads(_run("report", str(GPU), "--format", "json").stdout)
    return read_workbook(out), doc


def test_every_sheet_holds_its_json_table_cell_by_cell(gpu_report) -> None:
    book, doc = gpu_report
    book = dict(book)
    contents = book.pop("contents")
    assert contents[0] == ["sheet", "table", "rows", "note"]
    listed = {row[0]: (row[1], row[2]) for row in contents[1:]}
    assert list(listed) == list(book)  # every sheet listed, in order
    checked_cells = 0
    seen_tables = set()
    for sheet, rows in book.items():
        table, count = listed[sheet]
        seen_tables.add(table)
        assert len(sheet) <= 31
        if not rows:  # an empty list: no columns to name
            assert count == 0 and _lookup(doc, table) == [], table
            continue
        header, body = rows[0], rows[1:]
        value = _lookup(doc, table)
        # a section's scalars are one row
        records = value if isinstance(value, list) else [value]
        if records and not isinstance(records[0], dict):
            records = [{"value": x} for x in records]
        assert count == len(records), table
        assert len(body) <= len(records), table
        body += [[] for _ in range(len(records) - len(body))]  # rows of empty cells
        for got_row, rec in zip(body, records, strict=True):
            got_row = got_row + [None] * (len(header) - len(got_row))
            for col, got in zip(header, got_row, strict=True):
                want = _want(_field(rec, col))
                assert _same(got, want), (table, col, got, want)
                checked_cells += 1
    # the tables a user of the report looks for first are there
    for t in ("kernels", "hotspots.kernels", "hotspots.ops", "steps.steps", "memcpy", "memory"):
        assert t in seen_tables, t
    assert checked_cells > 10_000


def test_big_integers_are_text_and_times_keep_every_digit(gpu_report) -> None:
    book, doc = gpu_report
    contents = {r[1]: r[0] for r in book["contents"][1:]}
    rows = book[contents["steps.steps"]]
    col = rows[0].index("start_ns")
    assert [r[col] for r in rows[1:]] == [str(s["start_ns"]) for s in doc["steps"]["steps"]]
    assert all(int(r[col]) > 2**53 for r in rows[1:])


def test_names_that_look_like_formulas_stay_text(tmp_path: Path) -> None:
    names = [
        '=HYPERLINK("http://evil.example","x")',
        "+cmd|' /C calc'!A0",
        "-2+3",
        "@SUM(A1:A9)",
        "\t=1+1",
        "\r=1+1",
        "=1+1\x01",
        "_x0041_ literal",
        "http://example.com/x",
        "12.5",
    ]
    src = synth.kineto(tmp_path / "t.json", names)
    out = tmp_path / "r.xlsx"
    _run("report", str(src), "--format", "xlsx", "-o", str(out))
    book = read_workbook(out)
    sheet = {r[1]: r[0] for r in book["contents"][1:]}["kernels"]
    rows = book[sheet]
    col = rows[0].index("name")
    assert sorted(r[col] for r in rows[1:]) == sorted(names)


def test_xlsx_needs_a_file_and_keeps_an_existing_one(tmp_path: Path) -> None:
    r = _run("report", str(GPU), "--format", "xlsx", check=False)
    assert r.returncode == 2 and "--format xlsx needs -o FILE" in r.stderr
    user = tmp_path / "mine.xlsx"
    user.write_bytes(b"user data")
    r = _run("report", str(GPU), "--format", "xlsx", "-o", str(user), check=False)
    assert r.returncode == 1 and "--force" in r.stderr
    assert user.read_bytes() == b"user data"


def test_sheet_names_are_valid_and_unique_and_long_tables_say_they_are_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tbdtrace.report import xlsx
    from tbdtrace.report.tabular import Tab

    long = "memory.advice.peak_by_module_and_more_words"
    tabs = [
        Tab(long, ["a"], [[1]]),
        Tab(long + "x", ["a"], [[2]]),
        Tab("a[b]:c*d?e/f\\g", ["a"], [[3]]),
        Tab("Contents", ["a"], [[4]]),
        Tab("big", ["n", "s"], [[i, f"={i}"] for i in range(7)]),
    ]
    monkeypatch.setattr(xlsx, "ROWS_MAX", 5)
    out = tmp_path / "t.xlsx"
    with out.open("wb") as f:
        xlsx.write(tabs, f)
    book = read_workbook(out)
    names = list(book)
    assert names[0] == "contents"
    assert names[1:] == [long[:31], long[:29] + "~2", "a_b__c_d_e_f_g", "Contents~2", "big"]
    assert len({n.lower() for n in names}) == len(names)
    contents = book["contents"]
    assert [r[1] for r in contents[1:]] == [t.name for t in tabs]
    big = contents[-1]
    assert big[2] == 7.0 and "first 5 rows" in big[3]
    assert book["big"][1:] == [[float(i), f"={i}"] for i in range(5)]


def test_diff_writes_a_workbook_of_its_csv_tables(tmp_path: Path) -> None:
    """``diff --format xlsx``: a sheet per table the CSV folder holds, every cell the same
    (numbers as numbers), read back with the tests' own reader."""
    import csv

    from tests.conftest import fixture

    a = fixture("kineto/hta/sampled_rank-0.json.gz")
    b = fixture("kineto/hta/sampled_rank-1.json.gz")
    out = tmp_path / "d.xlsx"
    _run("diff", str(a), str(b), "--format", "xlsx", "-o", str(out))
    _run("diff", str(a), str(b), "--format", "csv", "--raw-csv", "-o", str(tmp_path / "csv"))
    book = read_workbook(out)
    listed = {row[1]: row[0] for row in book["contents"][1:]}
    files = sorted(p.stem for p in (tmp_path / "csv").glob("*.csv"))
    assert sorted(listed) == files and {"kernels", "ops", "categories"} <= set(files)
    cells = 0
    for table, sheet in listed.items():
        with open(tmp_path / "csv" / f"{table}.csv", newline="", encoding="utf-8") as f:
            want_rows = list(csv.reader(f))
        got_rows = book[sheet]
        assert len(got_rows) == len(want_rows), table
        for got_row, want_row in zip(got_rows, want_rows, strict=True):
            got_row = got_row + [None] * (len(want_row) - len(got_row))
            for got, want in zip(got_row, want_row, strict=True):
                if isinstance(got, float):
                    assert got == pytest.approx(float(want), rel=1e-15), (table, got, want)
                else:
                    assert (got if got is not None else "") == want, (table, got, want)
                cells += 1
    assert cells > 500
