"""``capture --backend torch --with-stack`` on a tiny script: each matmul's kernels land on
the line of the script that launched them, lines read from the script itself here.

The script runs three matrix products per iteration, in this order on one thread: a
``torch.mm`` call, a ``torch.matmul`` call, and ``a @ b`` inside a helper (operator
syntax, which the Python tracer does not record as a call: its line is the helper's
frame line, the ``def``). Each gives one ``aten::mm`` CPU kernel per iteration, so the
k-th ``aten::mm`` kernel of the trace belongs to line k mod 3: the expected time per
line comes from program order, not from the attribution under test."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tbdtrace
from tbdtrace.analysis.passes.hotspots import HotspotsConfig

pytestmark = pytest.mark.heavy  # runs a capture; make test-quick leaves it out

ITERS = 4
SCRIPT = """\
import torch


def helper(a, b):  # HELPER
    return a @ b


def step(a, b):
    x = torch.mm(a, b)  # MM
    y = torch.matmul(x, b)  # MATMUL
    return helper(y, b)


a, b = torch.randn(160, 160), torch.randn(160, 160)
for _ in range(ITERS):
    step(a, b)
""".replace("ITERS", str(ITERS))


def _line(text: str, tag: str) -> int:
    (n,) = [i for i, ln in enumerate(text.splitlines(), 1) if ln.rstrip().endswith(f"# {tag}")]
    return n


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "tbdtrace", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("stack")
    (d / "wl.py").write_text(SCRIPT)
    out = d / "run.tbd"
    cp = _cli(
        "capture", "--backend", "torch", "--with-stack", "--sample-hz", "5", "-o", str(out),
        "--", sys.executable, str(d / "wl.py"),
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr[-2000:]
    return out


def _expected(tr: tbdtrace.Trace) -> dict[int, int]:
    """Script line -> ns of its aten::mm kernels, by program order (module docstring)."""
    k = tr.table("kernels").to_pylist()
    mm = sorted((r["start_ns"], r["end_ns"] - r["start_ns"]) for r in k if r["name"] == "aten::mm")
    assert len(mm) == 3 * ITERS
    lines = [_line(SCRIPT, "MM"), _line(SCRIPT, "MATMUL"), _line(SCRIPT, "HELPER")]
    return {ln: sum(d for _, d in mm[i::3]) for i, ln in enumerate(lines)}


def _by_line(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """by=source rows of wl.py, keyed by line number."""
    out = {}
    for r in rows:
        file, _, line = r["source"].rpartition(":")
        if Path(file).name == "wl.py":
            out[int(line)] = r
    return out


def test_kernels_land_on_their_lines(captured: Path) -> None:
    tr = tbdtrace.open(captured)
    assert tr.meta["extra"]["torch"]["config"]["with_stack"] is True
    want = _expected(tr)
    a = tbdtrace.analyze(captured)
    rows = _by_line(a.hotspots(HotspotsConfig(top=None, by="source")).to_pylist())
    for line, ns in want.items():
        r = rows[line]
        assert (r["kernel_count"], r["top_kernel"], r["total_ns"]) == (ITERS, "aten::mm", ns)
    assert rows[_line(SCRIPT, "MM")]["line_kind"] == "call"
    assert rows[_line(SCRIPT, "MATMUL")]["function"] == "step"
    assert (
        rows[_line(SCRIPT, "HELPER")]["function"],
        rows[_line(SCRIPT, "HELPER")]["line_kind"],
    ) == (
        "helper",
        "frame",
    )
    # The kernel table's source for aten::mm: the line with most of its time.
    (mm,) = [r for r in a.hotspots(HotspotsConfig(top=None)).to_pylist() if r["name"] == "aten::mm"]
    top = max(want, key=lambda ln: want[ln])
    assert mm["source"].endswith(f"wl.py:{top}")
    assert mm["source_share"] == pytest.approx(want[top] / sum(want.values()))


def test_command_views_agree(captured: Path) -> None:
    js = _cli("hotspots", str(captured), "--by", "source", "--top", "100", "--format", "json")
    assert js.returncode == 0, js.stderr
    rows = json.loads(js.stdout)["rows"]
    cs = _cli("hotspots", str(captured), "--by", "source", "--top", "100", "--format", "csv")
    assert cs.returncode == 0, cs.stderr
    table = list(csv.DictReader(io.StringIO(cs.stdout)))
    assert [(r["source"], int(r["total_ns"])) for r in table] == [
        (r["source"], r["total_ns"]) for r in rows
    ]
    want = _expected(tbdtrace.open(captured))
    got = _by_line(rows)
    assert {ln: got[ln]["total_ns"] for ln in want} == want
    text = _cli("hotspots", str(captured), "--by", "source")
    assert text.returncode == 0 and f"wl.py:{_line(SCRIPT, 'MATMUL')}" in text.stdout
    html = captured.parent / "r.html"
    rep = _cli("report", str(captured), "--format", "html", "-o", str(html))
    assert rep.returncode == 0, rep.stderr
    page = html.read_text()
    assert "hotspots.sources" in page and "user source lines" in page
    assert f"wl.py:{_line(SCRIPT, 'MM')}" in page


@pytest.mark.parametrize("backend", ["cupti", "tf"])
def test_with_stack_needs_the_torch_backend(tmp_path: Path, backend: str) -> None:
    cp = _cli(
        "capture", "--backend", backend, "--with-stack", "-o", str(tmp_path / "t"), "--", "true"
    )
    assert cp.returncode == 2
    (line,) = cp.stderr.strip().splitlines()
    assert "--with-stack needs the torch backend" in line and f"this run: {backend}" in line
    assert not (tmp_path / "t").exists()
