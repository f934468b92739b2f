"""The memory report section: JSON document and text rendering."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import tbdtrace
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
    assert "Memory at peak (allocated, cuda:0)" in out
    lines = {ln.split("│")[1].strip(): ln for ln in out.splitlines() if ln.count("│") >= 3}
    assert "1.00 KiB" in lines["weights"] and "16.7%" in lines["weights"]
    assert "5.00 KiB" in lines["activations"] and "83.3%" in lines["activations"]
    assert "6.00 KiB" in lines["total"]
    assert "Memory per step" in out
    assert "carries a category" not in out


def test_text_says_when_nothing_is_classified(tmp_path: Path) -> None:
    assert "carries a category" in _text(_write(tmp_path, [None, None]))


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
    assert "Memory at peak (allocated, cuda:0)" in out
    lines = {ln.split("│")[1].strip(): ln for ln in out.splitlines() if ln.count("│") >= 3}
    assert "976.56 KiB" in lines["pre_existing"]  # 1,000,000 bytes
    assert "Memory peak per device" in out
    dev = [ln for ln in out.splitlines() if ln.count("│") >= 5]
    cuda = next(ln for ln in dev if "cuda:0" in ln)
    cpu = next(ln for ln in dev if "│ cpu" in ln)
    assert "977.54 KiB" in cuda and "allocator" in cuda and "2.00 MiB" in cuda  # 1,001,000
    assert "4.77 MiB" in cpu  # 5,000,010: the host's, never added into the GPU's headline


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
