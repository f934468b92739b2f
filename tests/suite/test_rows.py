"""A TBD row from hand-made traces, against figures worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

import tbdtrace
from tbdtrace import trace
from tbdtrace.suite import rows

S = 1_000_000_000  # one second in ns


def _trace(tmp_path: Path, tables: dict) -> tbdtrace.trace.Trace:  # type: ignore[type-arg]
    return tbdtrace.open(trace.write(tmp_path / "t", tables, {"source": "test"}))


STEPS = {
    # warm-up step 0 (slow), then steps of 1 s, 2 s and 0.5 s with 8 samples each, plus the
    # same steps seen again as NVTX ranges without samples.
    "step": [0, 1, 2, 3, 1, 2, 3],
    "start_ns": [0, 10 * S, 11 * S, 13 * S, 10 * S, 11 * S, 13 * S],
    "end_ns": [10 * S, 11 * S, 13 * S, 13 * S + S // 2, 11 * S, 13 * S, 13 * S + S // 2],
    "samples": [8, 8, 8, 8, None, None, None],
    "warmup": [True, False, False, False, False, False, False],
    "loss": [3.0, 2.5, 2.0, 1.5, None, None, None],
    "source": ["harness"] * 4 + ["nvtx"] * 3,
}


def test_throughput_is_total_samples_over_total_time(tmp_path: Path) -> None:
    cells, notes = rows.compute(_trace(tmp_path, {"steps": STEPS}))
    # 24 samples in 1 + 2 + 0.5 s (the per-step rates 8, 4, 16 would average 9.33)
    assert cells["throughput_samples_per_s"] == pytest.approx(24 / 3.5)
    assert cells["step_time_ns"] == S  # median of 1 s, 2 s, 0.5 s
    assert cells["measured_steps"] == 3
    assert (cells["loss_first"], cells["loss_last"]) == (3.0, 1.5)
    assert cells.get("cpu_utilization") is None and cells.get("gpu_utilization") is None
    # per-step rates 8, 4, 16: the spread
    assert (cells["throughput_min_samples_per_s"], cells["throughput_max_samples_per_s"]) == (
        pytest.approx(4.0),
        pytest.approx(16.0),
    )
    assert notes == []


def test_cpu_utilization_is_the_process_trees_inside_the_measured_steps(tmp_path: Path) -> None:
    # Measured steps cover [10 s, 13.5 s]. Process-tree samples (cores since the previous
    # sample) at 5 s (covers the warm-up), 12 s (2 s of it measured), 13 s (1 s) and 20 s
    # (0.5 s): (2 x 0.5 + 1 x 1.5 + 0.5 x 2.0) / 3.5 = 1.0 core, of 4 logical CPUs. The
    # whole machine (cpu_util) was busy throughout: other processes, not the workload.
    host = {
        "ts_ns": [5 * S, 12 * S, 13 * S, 20 * S] * 2,
        "metric": ["proc_cpu_cores"] * 4 + ["cpu_util"] * 4,
        "index": [-1] * 8,
        "value": [3.0, 0.5, 1.5, 2.0] + [1.0] * 4,
    }
    meta = {"source": "test", "extra": {"logical_cpus": 4}}
    tables = {"steps": STEPS, "host_samples": host}
    cells, _ = rows.compute(tbdtrace.open(trace.write(tmp_path / "t", tables, meta)))
    assert cells["cpu_cores_used"] == pytest.approx(1.0)
    assert cells["cpu_utilization"] == pytest.approx(0.25)
    assert cells.get("gpu_utilization") is None


def test_protocol_takes_throughput_from_the_unprofiled_run() -> None:
    unprofiled = {
        "measured_steps": 20,
        "throughput_samples_per_s": 100.0,
        "throughput_min_samples_per_s": 90.0,
        "throughput_max_samples_per_s": 110.0,
        "step_time_ns": 80_000_000,
        "cpu_utilization": 0.5,
        "cpu_cores_used": 1.0,
    }
    profiled = {
        "measured_steps": 20,
        "throughput_samples_per_s": 40.0,
        "step_time_ns": 200_000_000,
        "cpu_utilization": 0.9,
        "gpu_utilization": 0.3,
        "weights_bytes": 1000,
    }
    row = rows.protocol(unprofiled, profiled)
    assert row["throughput_samples_per_s"] == 100.0 and row["cpu_utilization"] == 0.5
    assert row["profiled_throughput_samples_per_s"] == 40.0
    assert row["profiler_slowdown"] == pytest.approx(2.5)  # 200 ms / 80 ms
    assert row["gpu_utilization"] == 0.3 and row["weights_bytes"] == 1000
    alone = rows.protocol(unprofiled, None)
    assert alone["profiled_throughput_samples_per_s"] is None
    assert alone["profiler_slowdown"] is None


def test_gpu_kernels_give_gpu_compute_utilization(tmp_path: Path) -> None:
    # Measured steps cover [10 s, 13.5 s]. Kernels: one in warm-up (ignored); [10, 10.5) and
    # [10.25, 11) overlap (1 s busy); [12, 12.75) (0.75 s): 1.75 s busy of 3.5 s.
    kernels = {
        "start_ns": [1 * S, 10 * S, 10 * S + S // 4, 12 * S],
        "end_ns": [5 * S, 10 * S + S // 2, 11 * S, 12 * S + 3 * S // 4],
        "device_id": [0] * 4,
        "device_type": ["cuda"] * 4,
        "name": ["w", "a", "b", "c"],
    }
    host = {"ts_ns": [12 * S], "metric": ["cpu_util"], "index": [-1], "value": [0.1]}
    tr = _trace(tmp_path, {"steps": STEPS, "kernels": kernels, "host_samples": host})
    cells, _ = rows.compute(tr)
    assert cells["gpu_utilization"] == pytest.approx(1.75 / 3.5)


def test_a_trace_without_steps_says_so(tmp_path: Path) -> None:
    cells, notes = rows.compute(_trace(tmp_path, {}))
    assert cells["measured_steps"] == 0
    assert cells["throughput_samples_per_s"] is None
    assert notes == ["trace has no steps"]


def test_steps_without_samples_have_durations_but_no_throughput(tmp_path: Path) -> None:
    steps = {
        "step": [0, 1],
        "start_ns": [0, S],
        "end_ns": [S, 3 * S],
        "samples": [None, None],
        "warmup": [False, False],
        "source": ["nvtx", "nvtx"],
    }
    cells, _ = rows.compute(_trace(tmp_path, {"steps": steps}))
    assert cells["throughput_samples_per_s"] is None
    assert cells["step_time_ns"] == int(1.5 * S)
    assert cells["measured_steps"] == 2


def test_memory_peak_and_breakdown_come_from_the_memory_pass(tmp_path: Path) -> None:
    # Warm-up step (0..10 s): weights 100 @1 ns and a one-time 400-byte buffer @2, freed @3
    # (whole-trace peak 500, in the warm-up). Measured step 1 (10..11 s): activations 50,
    # gradients 100 (peak 250), activations freed. The row is the measured steps' peak.
    t = [1, 2, 3, 10 * S + 1, 10 * S + 2, 10 * S + 3]
    mem = {
        "ts_ns": t,
        "action": ["alloc", "alloc", "free", "alloc", "alloc", "free"],
        "level": ["allocated"] * 6,
        "bytes": [100, 400, 400, 50, 100, 50],
        "address": [0x1000, 0x4000, 0x4000, 0x2000, 0x3000, 0x2000],
        "device_id": [0] * 6,
        "device_type": ["cpu"] * 6,
        "pid": [7] * 6,
        "category": ["weights", "other", "other", "activations", "gradients", "activations"],
    }
    cells, notes = rows.compute(_trace(tmp_path, {"steps": STEPS, "memory": mem}))
    assert notes == []
    assert cells["peak_memory_bytes"] == 250
    assert (cells["weights_bytes"], cells["activations_bytes"], cells["gradients_bytes"]) == (
        100,
        50,
        100,
    )
    assert cells["optimizer_state_bytes"] == 0 and cells["other_bytes"] == 0


def test_memory_without_measured_steps_uses_the_whole_trace(tmp_path: Path) -> None:
    mem = {
        "ts_ns": [1, 2, 3],
        "action": ["alloc", "alloc", "free"],
        "level": ["allocated"] * 3,
        "bytes": [100, 400, 400],
        "address": [1, 2, 2],
        "device_id": [0] * 3,
        "device_type": ["cpu"] * 3,
        "category": ["weights", "other", "other"],
    }
    cells, _ = rows.compute(_trace(tmp_path, {"memory": mem}))
    assert cells["peak_memory_bytes"] == 500
    assert (cells["weights_bytes"], cells["other_bytes"]) == (100, 400)


def test_categories_a_capture_does_not_tell_apart_are_empty_with_a_reason(
    tmp_path: Path,
) -> None:
    # A TensorFlow capture labels weights, optimizer state and other only: its zero
    # gradients, inputs, activations and workspace are unknown, not 0.
    mem = {
        "ts_ns": [1, 2],
        "action": ["alloc", "alloc"],
        "level": ["allocated"] * 2,
        "bytes": [100, 300],
        "address": [1, 2],
        "device_id": [0] * 2,
        "device_type": ["cpu"] * 2,
        "category": ["weights", "other"],
    }
    meta = {
        "source": "test",
        "backend": "tf",
        "extra": {"memory_categories": ["weights", "optimizer_state", "other"]},
    }
    tr = tbdtrace.open(trace.write(tmp_path / "t", {"memory": mem}, meta))
    cells, notes = rows.compute(tr)
    assert (cells["weights_bytes"], cells["optimizer_state_bytes"], cells["other_bytes"]) == (
        100,
        0,
        300,
    )
    for c in ("gradients", "inputs", "activations", "workspace"):
        assert cells[f"{c}_bytes"] is None
    assert any("not told apart by the tf capture" in n and "gradients" in n for n in notes)


def test_no_memory_events_leave_memory_cells_empty(tmp_path: Path) -> None:
    cells, _ = rows.compute(_trace(tmp_path, {"steps": STEPS}))
    assert "peak_memory_bytes" not in cells or cells["peak_memory_bytes"] is None


def test_fp32_efficiency_from_kernel_flops_and_the_device_peak(tmp_path: Path) -> None:
    # An A100: NVIDIA's datasheet quotes 19.5 TFLOP/s FP32, the peak whatever the trace
    # records (108 SMs x 64 lanes x 2 x 1.41 GHz would give 19.49). Kernels in the 3.5 s
    # measured window do 10% of that.
    peak = 19.5e12
    flops = int(0.1 * peak * 3.5)
    kernels = {
        "start_ns": [1 * S, 10 * S, 12 * S],
        "end_ns": [2 * S, 11 * S, 13 * S],
        "device_id": [0] * 3,
        "device_type": ["cuda"] * 3,
        "name": ["warm", "a", "b"],
        "flops": [10**15, flops // 2, flops - flops // 2],
    }
    devices = {
        "device_id": [0],
        "device_type": ["cuda"],
        "name": ["NVIDIA A100-SXM4-40GB"],
        "sm_count": [108],
        "compute_capability_major": [8],
        "compute_capability_minor": [0],
        "core_clock_khz": [1_410_000],
    }
    tr = _trace(tmp_path, {"steps": STEPS, "kernels": kernels, "devices": devices})
    cells, notes = rows.compute(tr)
    assert notes == []
    assert cells["fp32_efficiency"] == pytest.approx(0.1, rel=1e-6)


def test_fp32_without_flops_is_empty_with_a_reason(tmp_path: Path) -> None:
    kernels = {
        "start_ns": [10 * S],
        "end_ns": [11 * S],
        "device_id": [0],
        "device_type": ["cpu"],
        "name": ["aten::add"],
    }
    cells, notes = rows.compute(_trace(tmp_path, {"steps": STEPS, "kernels": kernels}))
    assert cells.get("fp32_efficiency") is None
    assert len(notes) == 1 and notes[0].startswith("fp32: ")
