"""The HTML report: one self-contained page, opened in headless Chromium.

The browser test opens the report of the largest Kineto fixture, reads the DOM after the
page's script ran (``--dump-dom``): no script error, every plot drew data elements, and the
counts of the bar and timeline plots match a reading of the raw file
(tests/rawkineto.py). It leaves a screenshot for people in ``out/report-screenshot.png``.
Skipped, with the reason, only where Chromium is absent or cannot start.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tbdtrace
from tbdtrace.importers import kineto
from tbdtrace.report import ReportOptions, build, html
from tests import rawkineto
from tests.conftest import KINETO_TRACES, ROOT, fixture
from tests.report.conftest import browse

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

LARGEST = "kineto/hta/df_index_resolver.json.gz"
SCREENSHOT = ROOT / "out" / "report-screenshot.png"


def _tbdtrace(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tbdtrace", *args], check=True, capture_output=True, text=True
    )


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], Path]:
    src = fixture(LARGEST)
    out = tmp_path_factory.mktemp("html") / "report.html"
    _tbdtrace("report", str(src), "--format", "html", "-o", str(out))
    doc = json.loads(_tbdtrace("report", str(src), "--format", "json").stdout)
    return out, doc, src


def test_page_is_self_contained_and_small(page: tuple[Path, dict[str, Any], Path]) -> None:
    path, doc, _ = page
    text = path.read_text(encoding="utf-8")
    assert path.stat().st_size < 5 * 2**20
    assert not re.search(r"<script[^>]*\bsrc=|<link\b|@import|<img\b|<iframe\b", text)
    assert not re.search(r"url\((?!#)", text)  # only references inside the page
    assert set(re.findall(r'\bhref="(.)', text)) <= {"#"}
    # Every section of the document has its heading and tables.
    for key in doc:
        assert f'id="s-{key}"' in text


def _raw_expectations(src: Path) -> tuple[int, int, int]:
    """From one reading of the raw file (this trace has one rank and no warm-up): distinct
    kernel names, the median ProfilerStep#N's number, and the device events (kernels,
    memcpys, memsets) overlapping it."""
    events = [e for e in rawkineto.load(src)["traceEvents"] if e.get("ph") == "X"]
    steps = sorted(
        (rawkineto.ns(e["dur"]), int(e["name"].split("#")[1]), rawkineto.ns(e["ts"]))
        for e in events
        if str(e.get("name", "")).startswith("ProfilerStep#")
    )
    dur, num, start = steps[(len(steps) - 1) // 2]
    device = rawkineto.KERNEL | rawkineto.MEMCPY | rawkineto.MEMSET
    names, n = set(), 0
    for e in events:
        if e.get("cat") not in device:
            continue
        if e.get("cat") in rawkineto.KERNEL:
            names.add(e["name"])
        s = rawkineto.ns(e["ts"])
        n += s < start + dur and s + rawkineto.ns(e.get("dur", 0)) > start
    return len(names), num, n


def test_chromium_draws_every_plot_without_errors(
    page: tuple[Path, dict[str, Any], Path], chromium: str
) -> None:
    path, doc, src = page
    # No name resolves: anything the page tried to fetch would fail on the console.
    r = browse(chromium, path.as_uri(), "--dump-dom", "--host-resolver-rules=MAP * ~NOTFOUND")
    assert r.returncode == 0, r.stderr[-2000:]
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
    assert console == []
    dom = r.stdout
    root = re.search(r"<html[^>]*>", dom)
    assert root is not None and "data-js-errors" not in root.group(0)
    assert 'data-report-ready="1"' in dom
    points = dict(re.findall(r'data-plot="([a-z_]+)" data-points="(\d+)"', dom))
    drawn = re.search(r'data-plots-drawn="(\d+)/(\d+)"', dom)
    assert drawn is not None and drawn.group(1) == drawn.group(2) == str(len(points))
    assert set(points) == {
        "steps",
        "utilization",
        "categories",
        "kernels",
        "ops",
        "idle",
        "memory",
        "step_timeline",
    }
    assert all(int(v) > 0 for v in points.values())
    # Each curated table, after the page's script ran: its rows are its JSON table's.
    curated = re.findall(
        r'<table class="sortable curated" data-table="([a-z_]+)" data-source="([a-z_.]+)" '
        r'data-rows="(\d+)"><thead>.*?</thead><tbody>(.*?)</tbody>',
        dom,
    )
    assert [c[0] for c in curated] == [
        "kernels",
        "ops",
        "copies",
        "collectives",
        "idle",
        "steps",
        "memory_by_op",
        "memory_by_module",
    ]
    for key, source, n_rows, body in curated:
        want: Any = doc
        for k in source.split("."):
            want = want[k]
        if key == "collectives":
            want = [k for k in want if k["category"] == "communication"]
        assert int(n_rows) == len(want) > 0, key
        assert body.count("<tr>") == min(len(want), html.MAX_ROWS), key
    names, step, n = _raw_expectations(src)
    assert int(points["kernels"]) == min(15, names)  # one bar per kernel
    assert doc["step_timeline"]["step"] == step
    assert doc["step_timeline"]["event_count"] == n
    assert int(points["step_timeline"]) == min(n, 4000)  # one bar per event shown


def test_screenshot_for_people(page: tuple[Path, dict[str, Any], Path], chromium: str) -> None:
    path, _, _ = page
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    r = browse(
        chromium,
        path.as_uri(),
        "--hide-scrollbars",
        "--window-size=1280,1400",
        f"--screenshot={SCREENSHOT}",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    head = SCREENSHOT.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(head[16:20], "big") == 1280  # IHDR width


CHROME = [p for p in KINETO_TRACES if p.name != "memory_timeline.raw.gz"]


@pytest.mark.parametrize("src", CHROME, ids=lambda p: p.name)
def test_every_fixture_gets_its_plots(src: Path, tmp_path: Path) -> None:
    tables, meta = kineto.import_files([src])
    tr = tbdtrace.open(tbdtrace.trace.write(tmp_path / "t", tables, meta))
    doc = build(tr, ReportOptions())
    figs, notes = html.figures(doc)
    assert notes == []
    keys = {k for k, _ in figs}
    if doc["kernels"]:
        assert {"categories", "kernels"} <= keys
    if doc["steps"]["steps"]:
        assert "steps" in keys
    ranks = {s["rank"] for s in doc["steps"]["steps"]}
    assert ("ranks" in keys) == (len(ranks) > 1)
