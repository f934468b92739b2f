"""The table writers: units, empty cells, markdown escaping."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from tbdtrace.suite import BenchConfig, table
from tbdtrace.suite.rows import COLUMN_NAMES, empty_row


def test_empty_cells_stay_empty_and_units_convert(tmp_path: Path) -> None:
    cfg = BenchConfig(out_dir=tmp_path)
    ok = empty_row(
        model="wgan",
        framework="pytorch",
        batch_size=8,
        status="ok",
        throughput_samples_per_s=123.456,
        step_time_ns=2_500_000,
        cpu_utilization=0.375,
        cpu_cores_used=0.75,
        throughput_min_samples_per_s=100.0,
        profiler_slowdown=1.5,
        peak_memory_bytes=3 << 20,
        weights_bytes=1 << 20,
    )
    bad = empty_row(
        model="a3c", framework="pytorch", status="failed", error="exit code 1: ValueError: a|b"
    )
    md, cs, js = table.write([ok, bad], cfg)
    with cs.open() as f:
        got = list(csv.DictReader(f))
    assert list(got[0]) == list(COLUMN_NAMES)
    assert got[0]["fp32_efficiency"] == "" and got[1]["throughput_samples_per_s"] == ""
    assert got[0]["step_time_ns"] == "2500000"
    doc = json.loads(js.read_text())
    assert doc["rows"][0]["fp32_efficiency"] is None
    assert doc["rows"][0]["peak_memory_bytes"] == 3 << 20
    lines = md.read_text().splitlines()
    head = [
        c.strip()
        for c in next(ln for ln in lines if ln.startswith("| Model")).strip("|").split("|")
    ]
    r0 = [
        c.strip() for c in next(ln for ln in lines if ln.startswith("| wgan")).strip("|").split("|")
    ]
    cell = dict(zip(head, r0, strict=True))
    assert cell["Throughput (samples/s)"] == "123.46"
    assert cell["Step (ms)"] == "2.5"
    assert cell["CPU util. (%)"] == "37.5" and cell["CPU cores"] == "0.75"
    assert cell["GPU util. (%)"] == "" and cell["Min"] == "100.00"
    assert cell["Profiler slowdown"] == "1.50"
    assert cell["Peak mem (MiB)"] == "3.0" and cell["Weights (MiB)"] == "1.0"
    assert cell["FP32 eff. (%)"] == ""
    assert "ValueError: a\\|b" in md.read_text()
