"""``tbdtrace sql TRACE QUERY``: DuckDB over every table, formats, bad SQL."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

import tbdtrace
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
    q = " UNION ALL ".join(f"SELECT '{t.name}' AS t, count(*) AS n FROM {t.name}"
                           for t in schema.TABLES)
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
