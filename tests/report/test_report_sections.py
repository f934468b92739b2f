"""The report's pass sections: JSON keys and shapes on every fixture, text rendering, and
a CPU-backend-shaped trace (kernels = leaf CPU ops, no runtime table)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import tbdtrace
from tbdtrace.analysis.engine.window import WindowSpec
from tbdtrace.importers import kineto
from tbdtrace.report import ReportOptions, build
from tbdtrace.report.text import render
from tbdtrace.report.textui import Console
from tests import rawkineto
from tests.analysis.tiny import US, make
from tests.conftest import KINETO_TRACES

KEYS = ("steps", "utilization", "categories", "hotspots", "idle", "memcpy", "fp32", "flops")
CHROME = [p for p in KINETO_TRACES if p.name != "memory_timeline.raw.gz"]


@pytest.mark.parametrize("path", CHROME, ids=lambda p: p.name)
def test_every_fixture_reports_all_pass_keys(path: Path, tmp_path: Path) -> None:
    tables, meta = kineto.import_files([path])
    tr = tbdtrace.open(tbdtrace.trace.write(tmp_path / "t", tables, meta))
    doc = build(tr, ReportOptions(top=5, top_json=5, window=WindowSpec("all")))
    json.dumps(doc, allow_nan=False)  # strict JSON: no NaN anywhere
    for k in ("trace", "summary", "devices", "kernels", *KEYS):
        assert k in doc
    raw = rawkineto.expected_report(path)
    for c in doc["categories"]:
        assert set(c) == {"category", "count", "total_ns", "share", "by_op_ns", "by_name_ns"}
    cat_ns = sum(c["total_ns"] for c in doc["categories"])
    want = raw["kernel_time_ns"] + sum(
        e - s for g in ("memcpy", "memset") for s, e, _, _ in rawkineto.device_events(path)[g]
    )
    assert cat_ns == want
    for d in doc["idle"]["devices"]:
        assert d["host_bound_ns"] + d["queued_ns"] + d["sync_wait_ns"] == d["idle_ns"]
        assert (
            d["idle_ns"]
            == raw["devices"][d["device_id"]]["span_ns"] - raw["devices"][d["device_id"]]["busy_ns"]
        )
    buf = io.StringIO()
    render(doc, ReportOptions(top=5), Console(file=buf, width=160))
    assert "Device time by category" in buf.getvalue() or not doc["categories"]


def test_cpu_backend_shaped_trace(tmp_path: Path) -> None:
    # Leaf CPU ops as kernels on thread 7; the ops table holds them and their parents.
    tr = make(
        tmp_path,
        {
            "kernels": {
                "start_ns": [10 * US, 40 * US],
                "end_ns": [30 * US, 45 * US],
                "name": ["aten::addmm", "aten::relu"],
                "device_type": ["cpu"] * 2,
                "device_id": [0, 0],
                "pid": [1, 1],
                "tid": [7, 7],
            },
            "ops": {
                "start_ns": [0, 10 * US, 40 * US],
                "end_ns": [35 * US, 30 * US, 45 * US],
                "name": ["aten::linear", "aten::addmm", "aten::relu"],
                "pid": [1] * 3,
                "tid": [7] * 3,
                "input_shapes": ["[[8,16],[4,16],[4]]", "[[4],[8,16],[16,4],[],[]]", "[[8,4]]"],
                "input_dtypes": [
                    '["float","float","float"]',
                    '["float","float","float"]',
                    '["float"]',
                ],
            },
            "steps": {
                "step": [0, 1],
                "start_ns": [0, 0],
                "end_ns": [0, 50 * US],
                "warmup": [True, False],
                "samples": [8, 8],
            },
        },
        meta={
            "source": "torch",
            "extra": {"cpu": {"cores": 2, "mhz": 2000, "flags": ["avx2", "fma"]}},
        },
    )
    doc = build(tr, ReportOptions())
    assert doc["steps"]["summary"]["throughput_per_s"] == pytest.approx(8 / 50e-6)
    assert [c["category"] for c in doc["categories"]] == ["gemm", "elementwise"]
    hk = {r["name"]: r for r in doc["hotspots"]["kernels"]}
    # the kernel's own ops row is skipped: the launcher is the enclosing aten::linear
    assert hk["aten::addmm"]["op"] == "aten::linear"
    assert hk["aten::relu"]["op"] is None  # no op encloses relu but itself
    u = [r for r in doc["utilization"]["devices"] if r["step"] is None][0]
    assert u["device_type"] == "cpu" and u["compute_busy_ns"] == 25 * US
    f = doc["fp32"][0]
    assert f["flops"] == 2 * 8 * 16 * 4
    assert f["peak_flops_per_s"] == pytest.approx(2 * 8 * 2 * 2 * 2e9)
    assert f["efficiency_wall"] == pytest.approx(f["flops"] / 50e-6 / f["peak_flops_per_s"])


def test_idle_plot_and_text_name_and_draw_the_same_figures(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from tbdtrace.report import plots

    # k1 [0,10), k2 [30,40), k3 [100,110) us; k2 launched at 20 (10 host-bound, 10 queued),
    # k3 launched at 50 (10 host-bound, 50 queued of which [60,80) is a sync: 30 queued).
    tr = make(
        tmp_path,
        {
            "kernels": {
                "start_ns": [0, 30 * US, 100 * US],
                "end_ns": [10 * US, 40 * US, 110 * US],
                "name": ["k1", "k2", "k3"],
                "device_id": [0] * 3,
                "device_type": ["cuda"] * 3,
                "correlation_id": [1, 2, 3],
            },
            "runtime": {
                "start_ns": [-5 * US, 20 * US, 50 * US],
                "end_ns": [-1 * US, 22 * US, 52 * US],
                "correlation_id": [1, 2, 3],
                "name": ["cudaLaunchKernel"] * 3,
                "pid": [1] * 3,
                "tid": [1] * 3,
            },
            "sync": {"start_ns": [60 * US], "end_ns": [80 * US]},
        },
    )
    doc = build(tr, ReportOptions(top=5, top_json=5, window=WindowSpec("all")))
    (d,) = doc["idle"]["devices"]
    assert (d["host_bound_ns"], d["queued_ns"], d["sync_wait_ns"]) == (20 * US, 40 * US, 20 * US)
    fig = plots.idle_breakdown(doc["idle"]["devices"])
    (ax,) = fig.axes
    drawn = {}
    for p in ax.patches:
        gid = p.get_gid() or ""
        if gid.startswith("tbd-data-idle-"):
            drawn[gid.removeprefix("tbd-data-idle-").removesuffix("-0")] = p.get_width()
    # The plot draws the table's columns, in ms.
    for key in ("busy_ns", "host_bound_ns", "queued_ns", "sync_wait_ns"):
        assert drawn[key] == pytest.approx(d[key] / 1e6), key
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "work queued" in legend and "sync wait" in legend
    buf = io.StringIO()
    render(doc, ReportOptions(top=5), Console(file=buf, width=250))
    text = buf.getvalue()
    assert "Work queued" in text and "Queue delay p50" in text and "Launch call p50" in text
    assert "short gaps" not in legend and "Launch p50" not in text
