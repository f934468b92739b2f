"""idle pass: a hand-made device timeline with known host-bound, queued and sync gaps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tbdtrace.analysis.passes import idle
from tests.analysis.tiny import US, kernels, make

B = 1000  # base, us


def _trace(tmp_path: Path):
    ks = [
        (B + 0, B + 10, "k1"),
        (B + 30, B + 40, "k2"),
        (B + 45, B + 50, "k3"),
        (B + 100, B + 110, "k4"),
    ]
    return make(
        tmp_path,
        {
            "kernels": kernels(ks, correlation_id=[1, 2, 3, 4]),
            "runtime": {
                "start_ns": [(B + x) * US for x in (-5, 20, 12, 60)],
                "end_ns": [(B + x) * US for x in (-1, 22, 19, 62)],
                "correlation_id": [1, 2, 3, 4],
                "name": ["cudaLaunchKernel"] * 4,
                "pid": [1] * 4,
                "tid": [1] * 4,
            },
            "sync": {"start_ns": [(B + 70) * US], "end_ns": [(B + 90) * US]},
        },
    )


def test_gap_split(tmp_path: Path) -> None:
    r = idle.run(_trace(tmp_path)).to_pylist()[0]
    # gap [10,30): launched at 20 -> 10 host-bound, 10 queued; gap [40,45): launched at 12
    # (queued) -> 5 short; gap [50,100): launched at 60 -> 10 host-bound, [60,100) = 40
    # queued of which [70,90) sync -> 20 short + 20 sync.
    assert r["span_ns"] == 110 * US and r["busy_ns"] == 35 * US and r["idle_ns"] == 75 * US
    assert r["host_bound_ns"] == 20 * US
    assert r["queued_ns"] == 35 * US
    assert r["sync_wait_ns"] == 20 * US
    assert r["host_bound_ns"] + r["queued_ns"] + r["sync_wait_ns"] == r["idle_ns"]
    assert r["gap_count"] == 3


def test_launch_latency_and_short_kernels(tmp_path: Path) -> None:
    r = idle.run(_trace(tmp_path)).to_pylist()[0]
    lat = np.array([5, 10, 33, 40]) * US
    assert r["launch_count"] == 4
    assert r["launch_latency_mean_ns"] == pytest.approx(lat.mean())
    assert r["launch_latency_p50_ns"] == pytest.approx(np.median(lat))
    assert r["launch_latency_max_ns"] == 40 * US
    # k3 runs 5 us, its launch call took 7 us
    assert r["short_kernel_count"] == 1 and r["short_kernel_ns"] == 5 * US


def test_without_runtime_the_threshold_decides(tmp_path: Path) -> None:
    tr = make(tmp_path, {"kernels": kernels([(0, 10, "a"), (15, 20, "b"), (100, 110, "c")])})
    r = idle.run(tr, idle.IdleConfig(queued_threshold_ns=10 * US)).to_pylist()[0]
    assert r["queued_ns"] == 5 * US and r["host_bound_ns"] == 80 * US
    assert r["launch_count"] == 0 and r["launch_latency_p50_ns"] is None


def test_empty_trace(tmp_path: Path) -> None:
    assert idle.run(make(tmp_path, {})).num_rows == 0
