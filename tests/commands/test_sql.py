"""``tbdtrace sql TRACE QUERY``: DuckDB over every table, formats, bad SQL."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

import tbdtrace
import tbdtrace.trace
from tbdtrace import schema
from tbdtrace.cli import main
from tbdtrace.importers import kineto
from tests import rawkineto
from tests.conftest import KINETO

FIXTURE = KINETO / "hta" / "step_based_trace_2543932.json.gz"


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tables, meta = kineto.import_files([FIXTURE])
    return tbdtrace.trace.write(tmp_path_factory.mktemp("sql") / "t", tables, meta)


def test_kernel_sums_match_the_raw_json(trace_dir: Path, capsys) -> None:
    q = "SELECT name, count(*) AS n, sum(end_ns - start_ns) AS t FROM kernels GROUP BY name"
    assert main(["sql", str(trace_dir), q, "--format", "json"]) == 0
    got = {r["name"]: (r["n"], int(r["t"])) for r in json.loads(capsys.readouterr().out)}
    want = rawkineto.expected_report(FIXTURE)["kernels"]
    assert got == {n: (w["count"], w["total_ns"]) for n, w in want.items()}


def test_every_table_is_registered_even_empty(trace_dir: Path, capsys) -> None:
    q = " UNION ALL ".join(
        f"SELECT '{t.name}' AS t, count(*) AS n FROM {t.name}" for t in schema.TABLES
    )
    assert main(["sql", str(trace_dir), q, "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    counts = {r["t"]: int(r["n"]) for r in rows}
    tr = tbdtrace.open(trace_dir)
    assert counts == {t.name: tr.num_rows(t.name) for t in schema.TABLES}
    assert counts["overhead"] == 0


def test_text_format(trace_dir: Path, capsys) -> None:
    assert main(["sql", str(trace_dir), "SELECT count(*) AS n FROM kernels"]) == 0
    out = capsys.readouterr().out
    n = len(rawkineto.device_events(FIXTURE)["kernels"])
    assert "1 row" in out and f"{n}" in out


def test_bad_sql_is_one_line_exit_1(trace_dir: Path, capsys) -> None:
    assert main(["sql", str(trace_dir), "SELEC nope"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "SQL error" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("SELECT * FROM read_text('/etc/hostname')", "reaches outside the trace"),
        ("SELECT * FROM read_csv('/etc/passwd')", "reaches outside the trace"),
        ("SELECT * FROM glob('/*')", "reaches outside the trace"),
        ("SELECT * FROM '/etc/passwd'", "/etc/passwd does not exist"),
        ("COPY kernels TO 'k.csv'", "COPY statements are not allowed"),
        ("ATTACH 'x.db' AS x", "ATTACH statements are not allowed"),
        ("INSTALL httpfs", "INSTALL statements are not allowed"),
        ("LOAD httpfs", "LOAD statements are not allowed"),
        ("SET enable_external_access = true", "SET statements are not allowed"),
        ("SELECT 1; DROP VIEW kernels", "DROP statements are not allowed"),
        ("CREATE TABLE t AS SELECT 1", "CREATE statements are not allowed"),
    ],
)
def test_sandbox_refuses_with_one_line(trace_dir: Path, capsys, query: str, says: str) -> None:
    before = sorted(p.name for p in trace_dir.iterdir())
    assert main(["sql", str(trace_dir), query]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "Traceback" not in err
    assert sorted(p.name for p in trace_dir.iterdir()) == before


def test_output_file_by_extension(trace_dir: Path, tmp_path: Path, capsys) -> None:
    q = "SELECT name, count(*) AS n FROM kernels GROUP BY name ORDER BY name"
    want = {n: w["count"] for n, w in rawkineto.expected_report(FIXTURE)["kernels"].items()}
    out = tmp_path / "k.csv"
    assert main(["sql", str(trace_dir), q, "--output", str(out)]) == 0
    assert {r["name"]: int(r["n"]) for r in csv.DictReader(out.open())} == want
    js = tmp_path / "k.json"
    assert main(["sql", str(trace_dir), q, "--output", str(js)]) == 0
    assert {r["name"]: r["n"] for r in json.loads(js.read_text())} == want
    assert capsys.readouterr().out == ""  # the result went to the files only


@pytest.mark.parametrize("name", ["meta.json", "kernels.csv", "sub/x.csv"])
def test_output_never_inside_the_trace(trace_dir: Path, capsys, name: str) -> None:
    before = {p.name: p.read_bytes() for p in trace_dir.iterdir()}
    assert main(["sql", str(trace_dir), "SELECT 1", "--output", str(trace_dir / name)]) == 1
    assert "inside the trace" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in trace_dir.iterdir()} == before
