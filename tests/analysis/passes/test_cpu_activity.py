"""cpu_activity pass: golden rows from a tiny trace, and the CPU-only fixture's report."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tbdtrace.analysis.passes import cpu_activity
from tbdtrace.cli import main
from tests.analysis.tiny import US, make
from tests.conftest import fixture


def test_per_thread_busy_is_the_union_of_nested_ops(tmp_path: Path) -> None:
    # Thread 1: [0, 10) holding nested [2, 4), then [20, 25): busy 15, span 25.
    # Thread 2: one op [5, 6). A null tid groups on its own.
    ops = {
        "start_ns": [0, 2 * US, 20 * US, 5 * US, 1 * US],
        "end_ns": [10 * US, 4 * US, 25 * US, 6 * US, 3 * US],
        "pid": [7, 7, 7, 7, 7],
        "tid": [1, 1, 1, 2, None],
        "name": ["fwd", "aten::mm", "aten::add", "aten::copy_", "x"],
    }
    got = cpu_activity.run(make(tmp_path, {"ops": ops})).to_pylist()
    want = [
        {
            "rank": None,
            "pid": 7,
            "tid": 1,
            "op_count": 3,
            "span_ns": 25 * US,
            "busy_ns": 15 * US,
            "busy_ratio": 15 / 25,
        },
        {
            "rank": None,
            "pid": 7,
            "tid": None,
            "op_count": 1,
            "span_ns": 2 * US,
            "busy_ns": 2 * US,
            "busy_ratio": 1.0,
        },
        {
            "rank": None,
            "pid": 7,
            "tid": 2,
            "op_count": 1,
            "span_ns": 1 * US,
            "busy_ns": 1 * US,
            "busy_ratio": 1.0,
        },
    ]
    assert got == want


def test_no_ops_is_empty(tmp_path: Path) -> None:
    tr = make(
        tmp_path,
        {
            "kernels": {
                "start_ns": [0],
                "end_ns": [1],
                "name": ["k"],
                "device_id": [0],
                "device_type": ["cuda"],
            }
        },
    )
    assert cpu_activity.run(tr).num_rows == 0


def test_cpu_only_profile_reports_its_cpu_activity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = fixture("kineto/hta/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    with gzip.open(src) as f:
        raw = json.load(f)
    ops = [e for e in raw["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    # Its ops all come after its one profiler step: the whole trace, not the measured window.
    assert main(["report", str(src)]) == 0
    assert "No device or CPU activity in this window" in capsys.readouterr().out
    assert main(["report", str(src), "--window", "all"]) == 0
    text = capsys.readouterr().out
    assert "No device activity" not in text and "CPU activity only" in text
    assert main(["report", str(src), "--format", "json", "--window", "all"]) == 0
    doc = json.loads(capsys.readouterr().out)
    section = doc["cpu_activity"]
    assert section["device_activity"] is False
    assert sum(r["op_count"] for r in section["threads"]) == len(ops)
    tids = {(e["pid"], e["tid"]) for e in ops}
    assert {(r["pid"], r["tid"]) for r in section["threads"]} == tids
