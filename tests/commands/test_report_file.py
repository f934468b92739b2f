"""``report FILE``: a profiler file imported in memory reports exactly as its trace."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import KINETO

FIXTURE = KINETO / "kineto_tb_plugin" / "worker0.1623143089861.pt.trace.json.gz"


def _report(arg: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "tbdtrace", "report", arg, "--format", "json"],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


def test_report_of_a_file_equals_report_of_its_imported_trace(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "tbdtrace", "import", str(FIXTURE), "--out", str(tmp_path / "t")],
        check=True,
        capture_output=True,
    )
    from_dir = _report(str(tmp_path / "t"))
    from_file = _report(str(FIXTURE))
    assert from_file["trace"].pop("path") == str(FIXTURE)
    from_dir["trace"].pop("path")
    assert from_file == from_dir
    assert from_file["summary"]["kernel_count"] == 8772
    assert not any(p.name != "t" for p in tmp_path.iterdir())  # nothing else written


def test_a_file_that_is_not_a_trace_is_one_line(tmp_path):
    bad = tmp_path / "x.txt"
    bad.write_text("hello")
    r = subprocess.run(
        [sys.executable, "-m", "tbdtrace", "report", str(bad)], capture_output=True, text=True
    )
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1
    assert str(bad) in r.stderr and "Traceback" not in r.stderr
