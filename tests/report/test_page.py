"""The HTML page's curated tables (kernels, ops, copies, collectives, idle causes, steps)
read back from the page and compared with the JSON report, cell by cell.

What each table shows is written here (heading -> the JSON field it holds), independently
of tbdtrace/report/page.py; the page keeps each number's raw value on its cell
(``data-v``) and each text's whole value in its ``title``."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tbdtrace.report import html
from tests.inprocess import tbd as _run

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "tests/data/gpu/h200_resnet50_cupti"

# heading on the page -> JSON field of the table's rows (None: derived, checked apart)
EXPECTED: dict[str, tuple[str, dict[str, str | None]]] = {
    "kernels": (
        "hotspots.kernels",
        {
            "kernel": "name",
            "category": "category",
            "launching op": "op",
            "launches": "count",
            "total time": "total_ns",
            "mean": "mean_ns",
            "max": "max_ns",
            "share of kernel time": "share",
        },
    ),
    "ops": (
        "roofline.ops",
        {
            "op": "op",
            "shapes": "input_shapes",
            "precision": "precision",
            "calls": "count",
            "kernel time": "kernel_ns",
            "FLOP/s": "achieved_flops_per_s",
            "bytes/s": "achieved_bytes_per_s",
            "FLOP per byte": "intensity_flop_per_byte",
            "bound": "bound",
            "of its roof": "roof_share",
        },
    ),
    "copies": (
        "memcpy",
        {
            "device": None,
            "direction": "copy_kind",
            "copies": "count",
            "size": "bytes",
            "time": "total_ns",
            "bandwidth": "bandwidth_bytes_per_s",
        },
    ),
    "idle": (
        "idle.devices",
        {
            "device": None,
            "window": "span_ns",
            "busy": "busy_ns",
            "idle": "idle_ns",
            "host-bound": "host_bound_ns",
            "queued": "queued_ns",
            "waiting on a sync": "sync_wait_ns",
            "gaps": "gap_count",
            "short kernels": "short_kernel_count",
        },
    ),
    "steps": (
        "steps.steps",
        {
            "step": "step",
            "start": "start_ns",
            "duration": "duration_ns",
            "warm-up": "warmup",
            "marked by": "source",
        },
    ),
    "memory_by_op": (
        "memory.advice.peak_by_op",
        {"op": None, "blocks live": "blocks", "size": "bytes", "share of the peak": "share"},
    ),
    "memory_by_module": (
        "memory.advice.peak_by_module",
        {"module": None, "blocks live": "blocks", "size": "bytes", "share of the peak": "share"},
    ),
}


class _Tables(HTMLParser):
    """Every ``<table class="... curated">``: its attributes, headings and cells
    (``(data-v, title, text)``)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[dict[str, Any]] = []
        self._cell: list[Any] | None = None
        self._in = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and "curated" in (a.get("class") or ""):
            self.tables.append({"attrs": a, "head": [], "rows": []})
            self._in = True
        elif self._in and tag == "tr":
            self.tables[-1]["rows"].append([])
        elif self._in and tag in ("th", "td"):
            self._cell = [tag, a.get("data-v"), a.get("title"), ""]

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell[3] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in = False
        elif tag in ("th", "td") and self._cell is not None:
            kind, v, title, text = self._cell
            t = self.tables[-1]
            if kind == "th":
                t["head"].append(text)
            else:
                t["rows"][-1].append((v, title, text))
            self._cell = None


def read_tables(page: str) -> dict[str, dict[str, Any]]:
    p = _Tables()
    p.feed(page)
    for t in p.tables:
        t["rows"] = [r for r in t["rows"] if r]  # the heading row has no td
    return {t["attrs"]["data-table"]: t for t in p.tables}


def _lookup(doc: dict[str, Any], dotted: str) -> Any:
    v: Any = doc
    for k in dotted.split("."):
        v = v[k]
    return v


@pytest.fixture(scope="module")
def gpu(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    out = tmp_path_factory.mktemp("page") / "report.html"
    _run("report", str(GPU), "--format", "html", "-o", str(out))
    # the page computes the roofline (its ops table); the JSON asks for it
    doc = json.loads(_run("report", str(GPU), "--format", "json", "--roofline").stdout)
    return out.read_text(encoding="utf-8"), doc


def test_curated_tables_come_first_and_hold_the_json_values(gpu) -> None:
    page, doc = gpu
    tables = read_tables(page)
    # one GPU, no communication kernels: the collectives heading says so
    assert list(tables) == [
        "kernels",
        "ops",
        "copies",
        "idle",
        "steps",
        "memory_by_op",
        "memory_by_module",
    ]
    assert not any(k["category"] == "communication" for k in doc["hotspots"]["kernels"])
    assert re.search(r'id="t-collectives">.*?</p><p>\(no rows in this window\)', page)
    # near the top: before the plots and the other tables
    assert page.index('id="t-kernels"') < page.index('id="plots"') < page.index('id="more"')
    t0 = min(p["start_ns"] for p in doc["phases"])
    cells = 0
    for key, (source, cols) in EXPECTED.items():
        t = tables[key]
        rows = _lookup(doc, source)
        assert t["attrs"]["data-source"] == source
        assert len(rows) > 0 and len(t["rows"]) == min(len(rows), 500), key
        assert set(cols) <= set(t["head"]), (key, t["head"])
        assert not any("_" in h for h in t["head"]), t["head"]  # no raw keys
        for got, want in zip(t["rows"], rows, strict=False):
            for head, cell in zip(t["head"], got, strict=True):
                field = cols.get(head)
                if field is None:
                    continue
                v = want[field]
                data_v, title, text = cell
                if v is None:
                    assert text == "-", (key, head)
                elif isinstance(v, str | bool):
                    assert title == str(v), (key, head)
                else:
                    assert json.loads(data_v) == v, (key, head)
                    if head == "start":  # relative to the trace start, in seconds
                        assert text == f"{(v - t0) / 1e9:.6f} s"
                    if head == "size":
                        assert text == f"{v:.0f} B" if v < 1024 else "iB" in text
                cells += 1
    assert cells > 1000
    # derived: the device column names the row's device
    for key in ("copies", "idle"):
        src = _lookup(doc, EXPECTED[key][0])
        col = tables[key]["head"].index("device")
        assert [r[col][2] for r in tables[key]["rows"]] == [
            f"{r['device_type']}:{r['device_id']}" for r in src
        ]


def test_memory_cards_are_the_advice_figures(gpu) -> None:
    page, doc = gpu
    adv = doc["memory"]["advice"]
    cards = dict(
        (k, v)
        for v, k in re.findall(
            r'<div class="card"><div class="v">([^<]*)</div><div class="k">([^<]*)</div>', page
        )
    )
    gib = 2**30
    assert (
        cards["headroom (device memory - reserved peak)"]
        == f"{adv['headroom_bytes'] / gib:.2f} GiB"
    )
    frag = adv["fragmentation_bytes"]
    assert cards["fragmentation at peak (reserved - allocated)"] == f"{frag / gib:.2f} GiB"
    # this capture's allocations carry no thread: one row, not attributed, the whole peak
    rows = read_tables(page)["memory_by_op"]["rows"]
    assert [(r[0][2], json.loads(r[2][0])) for r in rows] == [
        ("(not attributed)", doc["memory"]["peak_bytes"])
    ]


def test_unknown_columns_are_left_out_and_named(gpu) -> None:
    page, doc = gpu
    kernels = read_tables(page)["kernels"]
    # this capture has no Python stacks: no row has a module or source line
    assert not any(k["source"] for k in doc["hotspots"]["kernels"])
    assert "source line" not in kernels["head"] and "module" not in kernels["head"]
    assert "Not in this trace: module, source line" in page


def test_collectives_are_the_communication_kernels() -> None:
    doc = {
        "hotspots": {
            "kernels": [
                {"name": "ncclAllReduce", "category": "communication", "count": 4,
                 "total_ns": 400, "share": 0.4, "op": "c10d::allreduce_"},
                {"name": "sgemm", "category": "gemm", "count": 1, "total_ns": 600,
                 "share": 0.6, "op": None},
            ]
        },
        "collective_skew": {
            "summary": [{"name": "ncclAllReduce", "skew_median_ns": 7, "skew_max_ns": 9,
                         "most_often_last_rank": 1}],
        },
    }  # fmt: skip
    t = read_tables(html.render(doc))["collectives"]
    assert t["head"] == [
        "collective kernel",
        "launching op",
        "launches",
        "total time",
        "share of kernel time",
        "start skew, median",
        "start skew, max",
        "most often last",
    ]
    assert [(c[0], c[1], c[2]) for c in t["rows"][0]] == [
        (None, "ncclAllReduce", "ncclAllReduce"),
        (None, "c10d::allreduce_", "c10d::allreduce_"),
        ("4", None, "4"),
        ("400", None, "400 ns"),
        ("0.4", None, "40.0%"),
        ("7", None, "7 ns"),
        ("9", None, "9 ns"),
        ("1", None, "1"),
    ]


def test_other_tables_have_headings_for_people(gpu) -> None:
    page, doc = gpu
    heads = re.findall(r"<th>([^<]*)</th>", page)
    assert heads and not [h for h in heads if re.search(r"_ns$|_bytes$|_", h)]
    for key in doc:  # every section keeps its anchor
        assert f'id="s-{key}"' in page


def test_step_timeline_bars_are_the_events(gpu) -> None:
    page, doc = gpu
    st = doc["step_timeline"]
    box = re.search(r'<svg class="tl-data".*?</svg>', page, re.S)
    assert box is not None
    bars = re.findall(r'<rect x="([^"]+)" y="(\d+)" width="([^"]+)"', box.group(0))
    # one bar per event, at its offset and of its duration (us in the SVG's coordinates)
    got = sorted((float(x), float(w)) for x, _, w in bars)
    want = sorted((e["offset_ns"] / 1e3, e["duration_ns"] / 1e3) for e in st["events"])
    assert got == want and len(got) == st["shown"] > 0
    lanes = {(e["device_type"], e["device_id"], e["stream_id"]) for e in st["events"]}
    assert len({y for _, y, _ in bars}) == len(lanes)
    dur = max(w["end_ns"] - w["start_ns"] for w in st["windows"])
    assert f'viewBox="0 0 {dur / 1e3!r} ' in box.group(0)


@pytest.mark.heavy
def test_step_timeline_zooms_in_the_browser(gpu, chromium: str, tmp_path: Path) -> None:
    """The wheel zooms around the pointer, a double click shows the whole step again;
    the axis is redrawn for the shown range; no script error."""
    from tests.report.conftest import browse

    page, doc = gpu
    probe = (
        "<script>window.addEventListener('load',function(){"
        "var box=document.querySelector('.timeline'),d=box.querySelector('svg.tl-data'),"
        "r=d.getBoundingClientRect(),out=[box.getAttribute('data-view-us')];"
        "function ax(){return Array.prototype.map.call(box.querySelectorAll('g.tl-axis text'),"
        "function(t){return t.textContent;}).join(',');}"
        "out.push(ax());"
        "d.dispatchEvent(new WheelEvent('wheel',{deltaY:-800,clientX:r.left+r.width/4,"
        "clientY:r.top+2,bubbles:true,cancelable:true}));"
        "out.push(box.getAttribute('data-view-us'));out.push(d.getAttribute('viewBox'));"
        "out.push(ax());"
        "d.dispatchEvent(new MouseEvent('dblclick',{bubbles:true}));"
        "out.push(box.getAttribute('data-view-us'));"
        "document.body.setAttribute('data-zoom',out.join('|'));});</script></body>"
    )
    path = tmp_path / "zoom.html"
    path.write_text(page.replace("</body>", probe), encoding="utf-8")
    r = browse(chromium, path.as_uri(), "--dump-dom", "--window-size=1400,900")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "data-js-errors" not in (re.search(r"<html[^>]*>", r.stdout) or [""])[0]
    m = re.search(r'data-zoom="([^"]*)"', r.stdout)
    assert m is not None, r.stdout[-2000:]
    start, axis0, zoomed, view_box, axis1, reset = m.group(1).split("|")
    st = doc["step_timeline"]
    full = max(w["end_ns"] - w["start_ns"] for w in st["windows"]) / 1e3
    assert [float(x) for x in start.split()] == [0.0, full]
    a, b = (float(x) for x in zoomed.split())
    assert 0 <= a < b <= full and (b - a) < full / 2
    # zoomed around the pointer, a quarter of the way in: that time stays a quarter in
    c = full / 4
    assert (c - a) / (b - a) == pytest.approx(0.25, abs=0.01)
    vb = [float(x) for x in view_box.split()]
    assert vb[:3] == [pytest.approx(a), 0.0, pytest.approx(b - a)]
    assert axis0 != axis1 and axis1
    assert [float(x) for x in reset.split()] == [0.0, full]


def test_readme_shows_the_page() -> None:
    """The README's picture of the page (scripts/report_screenshot.py): a PNG under
    300 KB, 1280 px wide, that the README links."""
    png = ROOT / "docs/img/report.png"
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(data[16:20], "big") == 1280
    assert len(data) < 300 * 1024
    assert "](docs/img/report.png)" in (ROOT / "README.md").read_text(encoding="utf-8")
