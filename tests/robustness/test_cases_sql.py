"""Runs the hostile-SQL case table (cases_sql.py) through `tbdtrace sql`.

A refused query exits 1 with one line and leaves the trace and the sentinel directory as
they were; an allowed one exits 0. The trace is imported from a small Kineto document the
test writes (two kernels, one op).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from tbdtrace.cli import main
from tests.robustness.cases_input import SMALL
from tests.robustness.cases_sql import ALLOWED, REFUSED, SqlCase


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("sqlcases")
    src = d / "small.json"
    src.write_bytes(SMALL)
    assert main(["import", str(src), "--out", str(d / "t")]) == 0
    return d / "t"


@pytest.fixture
def sentinel(tmp_path: Path) -> Path:
    (tmp_path / "private.txt").write_text("s3cr3t-content\n")
    return tmp_path


def _state(*dirs: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for d in dirs for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", REFUSED, ids=[c.name for c in REFUSED])
def test_refused(
    trace_dir: Path, sentinel: Path, capsys: pytest.CaptureFixture[str], case: SqlCase
) -> None:
    before = _state(trace_dir, sentinel)
    assert main(["sql", str(trace_dir), case.query.format(d=sentinel)]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "s3cr3t-content" not in out + err
    assert len(err.strip().splitlines()) == 1 and case.says in err, err
    assert _state(trace_dir, sentinel) == before


@pytest.mark.parametrize("case", ALLOWED, ids=[c.name for c in ALLOWED])
def test_allowed(trace_dir: Path, capsys: pytest.CaptureFixture[str], case: SqlCase) -> None:
    assert main(["sql", str(trace_dir), case.query, "--format", "csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) >= 2  # a header and at least one row


def test_counts_come_from_the_trace(trace_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # SMALL holds two kernel events and one cpu_op (tests/robustness/cases_input.py).
    q = "SELECT (SELECT count(*) FROM kernels) AS k, (SELECT count(*) FROM ops) AS o"
    assert main(["sql", str(trace_dir), q, "--format", "csv"]) == 0
    assert capsys.readouterr().out.split() == ["k,o", "2,1"]
