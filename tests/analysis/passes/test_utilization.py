"""utilization pass: per-step and measured-window busy times on a hand-made trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbdtrace.analysis.passes import utilization
from tests.analysis.tiny import US, kernels, make


def _trace(tmp_path: Path, with_steps: bool = True):
    tables = {
        "kernels": kernels([(0, 10, "a"), (5, 20, "b"), (40, 50, "c")]),
        "memcpy": {
            "start_ns": [15 * US],
            "end_ns": [30 * US],
            "bytes": [1],
            "device_id": [0],
            "device_type": ["cuda"],
        },
    }
    if with_steps:
        tables["steps"] = {
            "step": [0, 1, 2],
            "start_ns": [-50 * US, 0, 25 * US],
            "end_ns": [0, 25 * US, 60 * US],
            "warmup": [True, False, False],
        }
    return make(tmp_path, tables)


def test_per_step_and_total_rows(tmp_path: Path) -> None:
    rows = utilization.run(_trace(tmp_path)).to_pylist()
    got = [
        (r["step"], r["window_ns"], r["compute_busy_ns"], r["memory_busy_ns"], r["busy_ns"])
        for r in rows
    ]
    # step 1 [0,25): kernels [0,20) memcpy [15,25); step 2 [25,60): kernel [40,50) memcpy [25,30)
    assert got == [
        (1, 25 * US, 20 * US, 10 * US, 25 * US),
        (2, 35 * US, 10 * US, 5 * US, 15 * US),
        (None, 60 * US, 30 * US, 15 * US, 40 * US),
    ]
    assert rows[2]["compute_utilization"] == pytest.approx(0.5)
    assert rows[2]["utilization"] == pytest.approx(40 / 60)
    assert rows[0]["device_type"] == "cuda" and rows[0]["device_id"] == 0


def test_without_steps_uses_the_device_span(tmp_path: Path) -> None:
    rows = utilization.run(_trace(tmp_path, with_steps=False)).to_pylist()
    assert len(rows) == 1 and rows[0]["step"] is None
    assert rows[0]["window_ns"] == 50 * US and rows[0]["busy_ns"] == 40 * US


def test_cpu_from_host_samples(tmp_path: Path) -> None:
    tr = make(
        tmp_path,
        {
            "steps": {
                "step": [0, 1],
                "start_ns": [0, 10 * US],
                "end_ns": [10 * US, 20 * US],
                "warmup": [True, False],
            },
            "host_samples": {
                "ts_ns": [5 * US, 12 * US, 15 * US, 15 * US, 30 * US],
                "metric": ["cpu_util"] * 3 + ["rss_bytes", "cpu_util"],
                "index": [-1, -1, -1, -1, -1],
                "value": [0.9, 0.2, 0.4, 7.0, 1.0],
            },
        },
    )
    c = utilization.cpu(tr)
    # cpu_util samples at 5, 12, 15, 30 us cover [5,12] = 0.2, [12,15] = 0.4, [15,30] = 1.0.
    # Measured step 1 is [10, 20]: 2 us at 0.2, 3 us at 0.4, 5 us at 1.0.
    want = (2 * 0.2 + 3 * 0.4 + 5 * 1.0) / 10
    assert c["samples"] == 3 and c["mean"] == pytest.approx(want)
    assert c["per_step"] == [{"rank": None, "step": 1, "samples": 3, "mean": pytest.approx(want)}]


def test_cpu_window_shorter_than_the_sampling_period(tmp_path: Path) -> None:
    """A 1 us step between two samples 1 ms apart takes the covering sample's value."""
    tr = make(
        tmp_path,
        {
            "steps": {"step": [0], "start_ns": [400 * US], "end_ns": [401 * US]},
            "host_samples": {
                "ts_ns": [0, 1000 * US],
                "metric": ["cpu_util"] * 2,
                "index": [-1, -1],
                "value": [0.1, 0.7],
            },
        },
    )
    assert utilization.cpu(tr)["mean"] == pytest.approx(0.7)


def test_empty_trace(tmp_path: Path) -> None:
    tr = make(tmp_path, {})
    assert utilization.run(tr).num_rows == 0
    assert utilization.cpu(tr)["mean"] is None


def test_fixture_per_step_busy_matches_the_raw_json(tmp_path: Path) -> None:
    """Per ProfilerStep window, kernel busy time from a plain-Python union of the raw events."""
    import tbdtrace
    from tbdtrace.importers import kineto
    from tests import rawkineto
    from tests.conftest import fixture

    path = fixture("kineto/hta/sampled_rank-0.json.gz")
    tables, meta = kineto.import_files([path])
    tr = tbdtrace.open(tbdtrace.trace.write(tmp_path / "t", tables, meta))
    raw = rawkineto.load(path)["traceEvents"]
    windows = sorted(
        (
            rawkineto.ns(e["ts"]),
            rawkineto.ns(e["ts"]) + rawkineto.ns(e["dur"]),
            int(e["name"].split("#")[1]),
        )
        for e in raw
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
    )
    assert windows
    kern = [(s, e) for s, e, _, _ in rawkineto.device_events(path)["kernels"]]
    rows = [r for r in utilization.run(tr).to_pylist() if r["step"] is not None]
    want = {
        step: rawkineto.union([(max(s, a), min(e, b)) for s, e in kern if e > a and s < b])
        for a, b, step in windows
    }
    assert {r["step"]: r["compute_busy_ns"] for r in rows} == want
    assert {r["step"]: r["window_ns"] for r in rows} == {st: b - a for a, b, st in windows}
