"""Runs the hostile-input case table (cases_input.py) through `tbdtrace import`.

Each case: exit 0 with exactly the expected skipped-event counts in meta.json (and the
expected rows), or exit 1 with one line naming the file and no trace written; never a
traceback. Cases with skipped events are run again with --strict, which must fail.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tbdtrace.cli import main
from tests.robustness.cases_input import CASES, Case


def _run(tmp_path: Path, case: Case, *extra: str) -> tuple[int, str, Path, Path]:
    src = tmp_path / f"input{case.suffix}"
    src.write_bytes(case.content)
    out = tmp_path / "out"
    args = ["import", str(src), "--out", str(out), *extra]
    if case.fmt:
        args += ["--format", case.fmt]
    return main(args), "", src, out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: Case) -> None:
    rc, _, src, out = _run(tmp_path, case)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert rc == case.expect, err
    if rc == 1:
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert str(src) in lines[0]
        for word in case.says:
            assert word in lines[0], lines[0]
        assert not out.exists()
        return
    meta = json.loads((out / "meta.json").read_text())
    assert meta["skipped_events"] == case.skipped
    import tbdtrace
    from tbdtrace import schema

    tr = tbdtrace.open(out)
    events = sum(tr.num_rows(t.name) for t in schema.TABLES if t.name != "devices")
    assert events or case.skipped  # never silently empty
    for table, n in case.rows.items():
        assert tr.num_rows(table) == n, table
    if case.skipped:
        n = sum(case.skipped.values())
        assert f"{n} event{'s' if n != 1 else ''} skipped" in err


STRICT = [c for c in CASES if c.skipped]


@pytest.mark.parametrize("case", STRICT, ids=[c.name for c in STRICT])
def test_strict_fails_on_skipped_events(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: Case
) -> None:
    rc, _, src, out = _run(tmp_path, case, "--strict")
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "--strict" in err and str(src) in err
    assert not out.exists()
