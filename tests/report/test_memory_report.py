"""The memory report section: JSON document and text rendering."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import tbdtrace
from tbdtrace.analysis.engine.window import WindowSpec
from tbdtrace.report import ReportOptions, build
from tbdtrace.report.text import render
from tbdtrace.report.textui import Console

ROOT = Path(__file__).resolve().parents[2]


def _write(
    tmp_path: Path, categories: list[str | None], meta: dict[str, object] | None = None
) -> Path:
    n = len(categories)
    return tbdtrace.write(
        tmp_path / "t",
        {
            "memory": {
                "ts_ns": [10 * (i + 1) for i in range(n)],
                "action": ["alloc"] * n,
                "level": ["allocated"] * n,
                "bytes": [1024 * (i + 1) for i in range(n)],
                "address": list(range(1, n + 1)),
                "device_type": ["cuda"] * n,
                "device_id": [0] * n,
                "category": categories,
            },
            "steps": {"step": [0], "start_ns": [0], "end_ns": [100]},
        },
        {"source": "test", **(meta or {})},
    )


def _text(path: Path) -> str:
    con = Console(record=True, width=160)
    opts = ReportOptions()
    render(build(tbdtrace.open(path), opts), opts, console=con)
    return con.export_text()


def test_text_shows_breakdown_and_steps(tmp_path: Path) -> None:
    out = _text(_write(tmp_path, ["weights", "activations", "activations"]))
    assert "Memory at peak (allocated, cuda:0, measured steps)" in out
    lines = {ln.split("│")[1].strip(): ln for ln in out.splitlines() if ln.count("│") >= 3}
    assert "1.00 KiB" in lines["weights"] and "16.7%" in lines["weights"]
    assert "5.00 KiB" in lines["activations"] and "83.3%" in lines["activations"]
    assert "6.00 KiB" in lines["total"]
    assert "Memory per step" in out
    assert "carries a category" not in out


def test_text_says_when_nothing_is_classified(tmp_path: Path) -> None:
    path = _write(tmp_path, [None, None])
    out = _text(path)
    # One line with the peak, no rows of zero bytes that would look measured.
    assert (
        "Memory peak (allocated, cuda:0, measured steps): 3.00 KiB; no categories in this trace"
        in out
    )
    assert "Memory at peak" not in out
    assert not any(ln.split("│")[1].strip() == "weights" for ln in out.splitlines() if "│" in ln)
    assert build(tbdtrace.open(path), ReportOptions())["memory"]["has_categories"] is False


def test_cli_json_has_memory(tmp_path: Path) -> None:
    path = _write(tmp_path, ["gradients", None])
    res = subprocess.run(
        [sys.executable, "-m", "tbdtrace", "report", str(path), "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    doc = json.loads(res.stdout)["memory"]
    assert doc["peak_bytes"] == 3072 and doc["peak_ts_ns"] == 20
    assert doc["breakdown_at_peak"] == {
        "weights": 0,
        "gradients": 1024,
        "optimizer_state": 0,
        "inputs": 0,
        "activations": 0,
        "workspace": 0,
        "other": 2048,
        "pre_existing": 0,
    }
    assert doc["steps"][0]["peak_bytes"] == 3072


def test_text_shows_the_allocator_peak_per_device(tmp_path: Path) -> None:
    # A PyTorch-profiler import: each event carries the allocator's total; cuda:0 held
    # 1,000,000 bytes before the trace, the host 5,000,000.
    mem = {
        "ts_ns": [10, 15, 20],
        "action": ["alloc", "alloc", "free"],
        "level": ["allocated"] * 3,
        "bytes": [1000, 10, 1000],
        "address": [1, 2, 1],
        "device_type": ["cuda", "cpu", "cuda"],
        "device_id": [0, None, 0],
        "total_allocated_bytes": [1_001_000, 5_000_010, 1_000_000],
        "total_reserved_bytes": [2_097_152, None, 2_097_152],
    }
    path = tbdtrace.write(tmp_path / "k", {"memory": mem}, {"source": "kineto"})
    out = _text(path)
    # No category in this trace: the peak in one line, what predates the trace with it.
    assert (
        "Memory peak (allocated, cuda:0, whole trace): 977.54 KiB; no categories in this "
        "trace; allocated before the trace began: 976.56 KiB"  # 1,000,000 bytes
    ) in out
    # The allocator's reserved total names its source; the CPU allocator has none.
    assert "peak reserved (allocator total): 2.00 MiB" in out
    assert "Memory peak per device" in out
    dev = [ln for ln in out.splitlines() if ln.count("│") >= 5]
    cuda = next(ln for ln in dev if "cuda:0" in ln)
    cpu = next(ln for ln in dev if "│ cpu" in ln)
    assert "977.54 KiB" in cuda and "allocator" in cuda and "2.00 MiB" in cuda  # 1,001,000
    assert "4.77 MiB" in cpu  # 5,000,010: the host's, never added into the GPU's headline
    assert cpu.split("│")[6].strip() == "-" and cpu.split("│")[7].strip() == "-"
    assert cuda.split("│")[7].strip() == "allocator total"


def test_posthoc_labels_name_what_they_cannot_tell_apart(tmp_path: Path) -> None:
    caveats = ["activations vs kept temporaries", "inputs vs data pools"]
    meta = {"extra": {"torch_memory": {"mode": "posthoc", "cannot_tell_apart": caveats}}}
    path = _write(tmp_path, ["weights", "activations"], meta)
    doc = build(tbdtrace.open(path), ReportOptions())["memory"]
    assert doc["labels"] == {"mode": "posthoc", "cannot_tell_apart": caveats}
    out = _text(path)
    assert "Categories labelled post hoc" in out
    assert "  - activations vs kept temporaries" in out and "  - inputs vs data pools" in out
    exact = _write(tmp_path / "e", ["weights"], {"extra": {"torch_memory": {"mode": "exact"}}})
    assert "labelled by the hook tracker" in _text(exact)
    assert (
        build(tbdtrace.open(_write(tmp_path / "n", ["weights"])), ReportOptions())["memory"][
            "labels"
        ]
        is None
    )


def _windowed(tmp_path: Path) -> Path:
    # cuda:0, allocated level: weights 100 B at t=5 (before the first step), activations
    # 30 B live over [25, 27) inside the steps [10, 40], and an evaluation's 1,000 B over
    # [50, 55) after the last step. Measured window: [10, 40] (three steps, no warm-up).
    mem = {
        "ts_ns": [5, 25, 27, 50, 55],
        "action": ["alloc", "alloc", "free", "alloc", "free"],
        "level": ["allocated"] * 5,
        "bytes": [100, 30, 30, 1000, 1000],
        "address": [1, 2, 2, 3, 3],
        "device_type": ["cuda"] * 5,
        "device_id": [0] * 5,
        "category": ["weights", "activations", "activations", "activations", "activations"],
    }
    steps = {"step": [0, 1, 2], "start_ns": [10, 20, 30], "end_ns": [20, 30, 40]}
    return tbdtrace.write(tmp_path / "w", {"memory": mem, "steps": steps}, {"source": "test"})


def test_headline_is_the_windows_peak_with_the_whole_trace_beside(tmp_path: Path) -> None:
    path = _windowed(tmp_path)
    doc = build(tbdtrace.open(path), ReportOptions())
    m = doc["memory"]
    assert doc["window"]["sections"]["memory"] == "measured steps"
    # In the window: weights (live since t=5) + activations at t=25.
    assert (m["peak_bytes"], m["peak_ts_ns"], m["covers"]) == (130, 25, "measured steps")
    assert m["breakdown_at_peak"]["weights"] == 100
    assert m["breakdown_at_peak"]["activations"] == 30
    assert m["window_start_bytes"] == 100
    assert m["whole_trace"] == {"peak_bytes": 1100, "peak_ts_ns": 50, "phase": "after"}
    assert m["levels"]["allocated"]["peak_bytes"] == 130
    (dev,) = m["devices"]
    assert (dev["peak_bytes"], dev["whole_trace_peak_bytes"]) == (130, 1100)
    # The memory timeline (the HTML plot's rows) starts from what was live at t=10.
    tl = [(r["ts_ns"], r["total_bytes"], r["weights_bytes"]) for r in doc["memory_timeline"]]
    assert tl == [(10, 100, 100), (25, 130, 100), (27, 100, 100)]
    assert max(r["total_bytes"] for r in doc["memory_timeline"]) == m["peak_bytes"]
    out = _text(path)
    assert "Memory at peak (allocated, cuda:0, measured steps)" in out
    assert "Whole-trace peak: 1.07 KiB in after" in out
    # The HTML cards say the same: the window's peak, the whole trace's beside it.
    from tbdtrace.report import html

    cards = html._cards(doc)
    assert ">130 B<" in cards and "peak memory (allocated, measured steps)" in cards
    assert ">1.07 KiB<" in cards and "whole-trace peak memory (in after)" in cards
    # The whole trace: the evaluation's peak is the headline.
    whole = build(tbdtrace.open(path), ReportOptions(window=WindowSpec("all")))["memory"]
    assert (whole["peak_bytes"], whole["covers"]) == (1100, "whole trace")
    assert whole["window_start_bytes"] is None


def test_cpu_allocator_has_no_reserved_level(tmp_path: Path) -> None:
    # A PyTorch-profiler import whose CPU rows carry a "Total Reserved" (the CPU
    # allocator reports one, but it keeps no reserve): shown as "-", never as a level.
    mem = {
        "ts_ns": [10, 20],
        "action": ["alloc", "alloc"],
        "level": ["allocated"] * 2,
        "bytes": [300 << 20, 29 << 20],
        "address": [1, 2],
        "device_type": ["cpu", "cpu"],
        "device_id": [None, None],
        "total_allocated_bytes": [300 << 20, 329 << 20],
        "total_reserved_bytes": [192 << 10, 192 << 10],
    }
    path = tbdtrace.write(tmp_path / "c", {"memory": mem}, {"source": "kineto"})
    doc = build(tbdtrace.open(path), ReportOptions())
    m = doc["memory"]
    assert m["peak_bytes"] == 329 << 20
    assert "reserved" not in m["levels"] and m["allocator_reserved_peak_bytes"] is None
    assert all(d["allocator_reserved_peak_bytes"] is None for d in m["devices"])
    assert not [r for r in doc["memory_timeline"] if r["level"] == "reserved"]
    out = _text(path)
    assert "192.00 KiB" not in out
    assert "reserved: - (the CPU allocator keeps no reserve)" in out


def test_thinned_timeline_keeps_the_level_at_the_window_start(tmp_path: Path) -> None:
    from tbdtrace.analysis.engine import context, window
    from tbdtrace.analysis.passes import memory_series

    whole = context.of(tbdtrace.open(_windowed(tmp_path)))
    view = whole.windowed(window.resolve(whole))
    # One bucket keeps its largest point (t=25) and its last (t=27); the start stays.
    rows = memory_series.run(view, memory_series.MemorySeriesConfig(max_points=1)).to_pylist()
    assert [(r["ts_ns"], r["total_bytes"]) for r in rows] == [(10, 100), (25, 130), (27, 100)]


def test_timeline_of_an_import_draws_the_allocator_total(tmp_path: Path) -> None:
    # A PyTorch-profiler import: cuda:0 held 1,000,000 B before the trace; the trace
    # allocates 1,000 B (weights) at t=10 and frees it at t=20. The section's peak is the
    # allocator's 1,001,000 B; the plot's rows must reach it, the 1,000,000 B drawn as
    # pre_existing (a replay alone would peak at 1,000 B).
    mem = {
        "ts_ns": [10, 20],
        "action": ["alloc", "free"],
        "level": ["allocated"] * 2,
        "bytes": [1000, 1000],
        "address": [1, 1],
        "device_type": ["cuda"] * 2,
        "device_id": [0, 0],
        "category": ["weights", "weights"],
        "total_allocated_bytes": [1_001_000, 1_000_000],
        "total_reserved_bytes": [2_097_152, 2_097_152],
    }
    path = tbdtrace.write(tmp_path / "k", {"memory": mem}, {"source": "kineto"})
    doc = build(tbdtrace.open(path), ReportOptions())
    rows = [r for r in doc["memory_timeline"] if r["level"] == "allocated"]
    got = [
        (r["ts_ns"], r["weights_bytes"], r["pre_existing_bytes"], r["total_bytes"]) for r in rows
    ]
    assert got == [(10, 1000, 1_000_000, 1_001_000), (20, 0, 1_000_000, 1_000_000)]
    assert max(r["total_bytes"] for r in rows) == doc["memory"]["peak_bytes"] == 1_001_000
    assert {r["source"] for r in rows} == {"allocator_total"}


MEMORY_TRACES = [
    "kineto/hta/df_index_resolver.json.gz",
    "kineto/kineto_tb_plugin/worker0.1623143089861.pt.trace.json.gz",
    "kineto/tracelens/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "kineto/tracelens/gaunernst_bert-small-uncased__1016001.json.gz",
    "tests/data/gpu/h200_demo_resnet50_small",
    "tests/data/gpu/h200_resnet50_cupti",
]


@pytest.mark.parametrize("name", MEMORY_TRACES)
@pytest.mark.parametrize("kind", ["measured", "all"])
def test_plot_rows_reach_the_sections_peak(name: str, kind: str) -> None:
    # The plot's rows (memory_timeline) and the memory section read one level: on the
    # headline device, the plotted allocated peak is the headline peak, and in a window
    # that began with memory live, the first plotted point is that level at its start.
    from tbdtrace.analysis.engine import context, window
    from tbdtrace.analysis.engine import memory_replay as memory
    from tbdtrace.analysis.passes import memory_series
    from tbdtrace.commands._open import open_or_import
    from tests.conftest import fixture

    path = ROOT / name if name.startswith("tests/") else fixture(name)
    whole = context.of(open_or_import(str(path)))
    view = whole.windowed(window.resolve(whole, WindowSpec(kind)))
    m = memory.summarize(whole, window=view.window)
    d = m["device"]
    rows = [
        r
        for r in memory_series.run(view).to_pylist()
        if r["level"] == "allocated"
        and (r["device_type"], r["device_id"], r["rank"])
        == (d["device_type"], d["device_id"], d["rank"])
    ]
    assert max(r["total_bytes"] for r in rows) == m["peak_bytes"]
    if m["window_start_bytes"]:
        starts = {r.start_ns for r in view.window.ranks}
        assert rows[0]["ts_ns"] in starts
        assert rows[0]["total_bytes"] == m["window_start_bytes"]
