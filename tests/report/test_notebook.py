"""Notebook use: a trace's HTML summary (``tbdtrace.analyze(tr)`` in a cell), its
report, and the example script run as a user would run it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import tbdtrace
from tests import rawkineto
from tests.conftest import ROOT, fixture

SMALL = "kineto/kineto_tb_plugin/worker0.1623143089861.pt.trace.json.gz"


def _imported(tmp_path: Path) -> Path:
    out = tmp_path / "t"
    subprocess.run(
        [sys.executable, "-m", "tbdtrace", "import", str(fixture(SMALL)), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    return out


def test_analysis_repr_html_and_report(tmp_path: Path) -> None:
    path = _imported(tmp_path)
    tr = tbdtrace.open(path)
    a = tbdtrace.analyze(tr)
    page = a._repr_html_()
    raw = rawkineto.expected_report(fixture(SMALL))
    assert str(path) in page and "kineto" in page
    assert f"<td>kernels</td><td style='text-align:right'>{raw['kernel_count']:,}</td>" in page
    doc = a.report()
    cli = subprocess.run(
        [sys.executable, "-m", "tbdtrace", "report", str(path), "--format", "json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert json.loads(json.dumps(doc)) == json.loads(cli)
    assert doc["summary"]["kernel_count"] == raw["kernel_count"]


def test_example_script_runs(tmp_path: Path) -> None:
    path = _imported(tmp_path)
    out = tmp_path / "figs"
    r = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "examples" / "notebook.py"), str(path), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    raw = rawkineto.expected_report(fixture(SMALL))
    assert f"{raw['kernel_count']:,} kernels" in r.stdout
    pngs = sorted(p.stem for p in out.glob("*.png"))
    assert {"categories", "kernels", "steps"} <= set(pngs)
    assert all((out / f"{p}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
