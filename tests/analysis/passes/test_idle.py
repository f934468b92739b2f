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


def test_queue_delay_launch_call_and_short_kernels(tmp_path: Path) -> None:
    r = idle.run(_trace(tmp_path)).to_pylist()[0]
    # Queue delay: kernel start - launch call start; launch call: its own duration.
    lat = np.array([5, 10, 33, 40]) * US
    call = np.array([4, 2, 7, 2]) * US
    assert r["launch_count"] == 4
    assert r["queue_delay_mean_ns"] == pytest.approx(lat.mean())
    assert r["queue_delay_p50_ns"] == pytest.approx(np.median(lat))
    assert r["queue_delay_max_ns"] == 40 * US
    assert r["launch_call_mean_ns"] == pytest.approx(call.mean())
    assert r["launch_call_p50_ns"] == pytest.approx(np.median(call))
    assert r["launch_call_p99_ns"] == pytest.approx(np.percentile(call, 99))
    assert r["launch_call_max_ns"] == 7 * US
    # k3 runs 5 us, its launch call took 7 us
    assert r["short_kernel_count"] == 1 and r["short_kernel_ns"] == 5 * US


def test_without_runtime_the_threshold_decides(tmp_path: Path) -> None:
    tr = make(tmp_path, {"kernels": kernels([(0, 10, "a"), (15, 20, "b"), (100, 110, "c")])})
    r = idle.run(tr, idle.IdleConfig(queued_threshold_ns=10 * US)).to_pylist()[0]
    assert r["queued_ns"] == 5 * US and r["host_bound_ns"] == 80 * US
    assert r["launch_count"] == 0 and r["queue_delay_p50_ns"] is None
    assert r["launch_call_p50_ns"] is None


def test_empty_trace(tmp_path: Path) -> None:
    assert idle.run(make(tmp_path, {})).num_rows == 0


@pytest.mark.parametrize(
    "call,sync",
    [
        ("cudaMemcpy", True),
        ("hipMemcpyWithStream", True),
        ("hipMemcpy", True),
        ("cuMemcpyDtoH_v2", True),
        ("cudaMemcpy2D", True),
        ("cudaMemcpyAsync", False),
        ("hipMemcpyAsync", False),
    ],
)
def test_blocking_copy_is_sync_wait(tmp_path: Path, call: str, sync: bool) -> None:
    # k1 [0,100); the host then calls a copy at 50 that returns at 510; the copy itself
    # runs [400,500) on the device. The gap [100,400) is the device catching up while the
    # host sits in the call: a blocking copy makes it 300 us of sync wait, an async one
    # 300 us of work queued (the copy was issued at 50, before the gap began).
    tr = make(
        tmp_path,
        {
            "kernels": kernels([(B, B + 100, "k1")], correlation_id=[1]),
            "memcpy": {
                "start_ns": [(B + 400) * US],
                "end_ns": [(B + 500) * US],
                "bytes": [1 << 20],
                "device_id": [0],
                "device_type": ["cuda"],
                "correlation_id": [2],
            },
            "runtime": {
                "start_ns": [(B - 10) * US, (B + 50) * US],
                "end_ns": [(B - 5) * US, (B + 510) * US],
                "correlation_id": [1, 2],
                "name": ["cudaLaunchKernel", call],
                "pid": [1, 1],
                "tid": [1, 1],
            },
        },
    )
    r = idle.run(tr).to_pylist()[0]
    assert r["idle_ns"] == 300 * US
    assert r["sync_wait_ns"] == (300 * US if sync else 0)
    assert r["queued_ns"] == (0 if sync else 300 * US)
    assert r["host_bound_ns"] == 0


@pytest.mark.parametrize("tie_gaps_max", [1024, 0])
def test_gap_launches_of_kernels_out_of_start_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tie_gaps_max: int
) -> None:
    """Kernels of two streams interleaved (not in start order), some starting at the same
    ns: each gap's launch is the latest launch-call start among the kernels starting where
    the gap ends, as a walk over the rows finds it."""
    from tbdtrace.analysis.engine import shared_arrays
    from tbdtrace.analysis.engine.context import of

    monkeypatch.setattr(idle, "_TIE_GAPS_MAX", tie_gaps_max)
    rng = np.random.default_rng(3)
    n = 400
    start = np.sort(rng.integers(0, 40 * n, n))
    start[rng.choice(n, 40, replace=False)] = start[rng.choice(n, 40, replace=False)]
    dur = rng.integers(1, 30, n)
    perm = rng.permutation(n)  # file order: not by start
    s_us, e_us = start[perm], (start + dur)[perm]
    launch_us = s_us - rng.integers(1, 50, n)
    tr = make(
        tmp_path,
        {
            "kernels": kernels(
                [(int(a), int(b), "k") for a, b in zip(s_us, e_us, strict=True)],
                correlation_id=list(range(1, n + 1)),
            ),
            "runtime": {
                "start_ns": (launch_us * US).tolist(),
                "end_ns": ((launch_us + 1) * US).tolist(),
                "correlation_id": list(range(1, n + 1)),
                "name": ["cudaLaunchKernel"] * n,
                "pid": [1] * n,
                "tid": [1] * n,
            },
        },
    )
    ctx = of(tr)
    (key,) = shared_arrays.device_keys_of(ctx)
    got = idle._kernel_gap_launches(ctx, key)
    # Merged busy intervals by a walk in start order; a gap ends at each later opening.
    opens, end = [], None
    for a, b in sorted(zip(s_us.tolist(), e_us.tolist(), strict=True)):
        if end is None or a > end:
            opens.append(a)
            end = b
        else:
            end = max(end, b)
    want = [max(int(launch_us[i]) * US for i in range(n) if s_us[i] == g) for g in opens[1:]]
    assert not (np.diff(s_us) >= 0).all()
    assert any(int((s_us == g).sum()) > 1 for g in opens[1:])  # ties where gaps end
    assert got.tolist() == want
