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
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

import tbdtrace
from tbdtrace.importers import kineto
from tbdtrace.report import ReportOptions, build, html
from tests import rawkineto
from tests.conftest import KINETO_TRACES, ROOT, fixture

LARGEST = "kineto/hta/df_index_resolver.json.gz"
SCREENSHOT = ROOT / "out" / "report-screenshot.png"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


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


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if path := shutil.which(name):
            return path
    pytest.skip("Chromium is not installed (make test installs the Debian package chromium)")


def _browse(exe: str, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [
                exe,
                *FLAGS,
                f"--user-data-dir={profile}",
                "--enable-logging=stderr",
                "--v=0",
                *extra,
                url,
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )


@pytest.fixture(scope="module")
def chromium() -> str:
    exe = _chromium()
    probe = _browse(exe, "data:text/html,<p>tbd-probe</p>", "--dump-dom")
    if probe.returncode != 0 or "tbd-probe" not in probe.stdout:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"Chromium cannot run here (exit {probe.returncode}): {last}")
    return exe


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
    r = _browse(chromium, path.as_uri(), "--dump-dom")
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
    names, step, n = _raw_expectations(src)
    assert int(points["kernels"]) == min(15, names)  # one bar per kernel
    assert doc["step_timeline"]["step"] == step
    assert doc["step_timeline"]["event_count"] == n
    assert int(points["step_timeline"]) == min(n, 4000)  # one bar per event shown


def test_screenshot_for_people(page: tuple[Path, dict[str, Any], Path], chromium: str) -> None:
    path, _, _ = page
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    r = _browse(
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


def test_any_section_renders_and_known_plots_tolerate_other_shapes() -> None:
    doc: dict[str, Any] = {
        "trace": {"path": "x", "source": "test"},
        "steps": {"steps": "not a list of steps"},  # a shape the plot does not expect
        "new_section": {"total_ns": 5, "rows": [{"name": "a<b", "share": 0.25}]},
        "flops": [
            {"precision": "bf16", "efficiency_busy": 0.4, "coverage": 0.9},
            {"precision": "fp32", "efficiency_busy": None},  # no number: not drawn
        ],
    }
    figs, notes = html.figures(doc)
    assert [k for k, _ in figs] == ["flops"]
    assert [n.split(":")[0] for n in notes] == ["steps", "ranks"]
    assert "steps.steps is not a list of records" in notes[0]
    assert html.flops_rows(doc) == [
        {
            "label": "bf16",
            "efficiency": 0.4,
            "coverage": 0.9,
            "basis": "efficiency_busy",
            "note": None,
        }
    ]
    page = html.render(doc)
    assert 'id="s-new_section"' in page and "new_section.rows" in page
    assert "a&lt;b" in page and "25.0%" in page and "5 ns" in page
    assert 'data-plot="flops"' in page and "not drawn" in page
    # Without a flops section, FP32 efficiency stands in.
    fp32 = {"fp32": [{"rank": None, "efficiency_busy": 0.125, "flops_source": "matmuls only"}]}
    assert html.flops_rows(fp32) == [
        {
            "label": "fp32",
            "efficiency": 0.125,
            "coverage": None,
            "basis": "efficiency_busy",
            "note": "matmuls only",
        }
    ]


def test_tables_sort_in_the_browser(chromium: str, tmp_path: Path) -> None:
    """The page's sorter, clicked in Chromium: numbers by value (nulls first), text
    alphabetically, a second click reverses."""
    doc = {"t": [{"name": n, "total_ns": v} for n, v in (("b", 30), ("a", 1000), ("c", None))]}
    page = html.render(doc).replace(
        "</body>",
        "<script>var t=document.querySelector('table.sortable'),h=t.tHead.rows[0].cells;"
        "function col(i){return Array.prototype.map.call(t.tBodies[0].rows,"
        "function(r){return r.cells[i].textContent;}).join(',');}"
        "var out=[];h[1].click();out.push(col(0));h[1].click();out.push(col(0));"
        "h[0].click();out.push(col(0));"
        "document.body.setAttribute('data-sorted',out.join('|'));</script></body>",
    )
    path = tmp_path / "sort.html"
    path.write_text(page, encoding="utf-8")
    r = _browse(chromium, path.as_uri(), "--dump-dom")
    assert 'data-sorted="c,b,a|a,b,c|a,b,c"' in r.stdout
