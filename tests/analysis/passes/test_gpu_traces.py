"""The analysis on tbdtrace's own captures from a real GPU (tests/data/gpu/README.md).

Expected values come from the raw table files (read with pyarrow alone, using the documented
v2 storage: `end_ns.minus_start_ns` is each row's duration) and from a per-layer count of
ResNet-50's FLOPs written here, not from tbdtrace's code.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.ipc as ipc

GPU = Path(__file__).resolve().parents[2] / "data" / "gpu"
RESNET = GPU / "h200_resnet50_cupti"
DEMO = GPU / "h200_demo_resnet50_small"


def _raw(trace: Path, table: str) -> dict[str, list]:
    with ipc.open_file(trace / f"{table}.arrow") as f:
        return f.read_all().to_pydict()


def _report(trace: Path, *args: str) -> dict:
    r = subprocess.run(
        [sys.executable, "-m", "tbdtrace", "report", str(trace), "--format", "json", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(r.stdout)


def _resnet50_training_flops(batch: int, steps: int) -> int:
    """torchvision ResNet-50 at 224x224: multiply-adds per image of every convolution and of
    the classifier; a training step does forward, input-gradient and weight-gradient work
    (2 FLOPs per multiply-add each), except that the first convolution has no input
    gradient."""
    first = 64 * 112 * 112 * 3 * 7 * 7
    macs, h, cin = first, 56, 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        out = width * 4
        for b in range(blocks):
            ho = h // (stride if b == 0 else 1)
            macs += width * h * h * cin + width * ho * ho * width * 9 + out * ho * ho * width
            if b == 0:
                macs += out * ho * ho * cin  # the projection shortcut
            cin, h = out, ho
    macs += 2048 * 1000
    return (6 * macs - 2 * first) * batch * steps


def test_kernel_count_and_time_equal_the_raw_tables() -> None:
    raw = _raw(RESNET, "kernels")
    doc = _report(RESNET, "--window", "all")
    assert doc["summary"]["kernel_count"] == len(raw["end_ns.minus_start_ns"]) > 10_000
    assert doc["summary"]["kernel_time_ns"] == sum(raw["end_ns.minus_start_ns"])


def test_every_nvtx_step_range_was_captured() -> None:
    names = _raw(RESNET, "markers")["name"]
    assert sorted(n for n in names if n.startswith("step ")) == sorted(
        [f"step {-i}" for i in range(1, 4)] + [f"step {i}" for i in range(20)]
    )


def test_flops_of_a_real_gpu_capture_equal_a_per_layer_count() -> None:
    # cuDNN convolutions and cuBLAS matmuls run as TF32 under PyTorch's defaults, so the
    # work is reported as tf32. The FLOP figures cover the report's window, the measured
    # steps: the NVTX ranges "step 0".."step 19" of batch 64 (the three "step -N" ranges are
    # warm-up), as every other section.
    doc = _report(RESNET)
    rows = {r["precision"]: r for r in doc["flops"]["rows"]}
    counted = sum(r["flops"] for r in rows.values())
    expected = _resnet50_training_flops(64, 20)
    assert all(r["window_source"] == "measured steps (20 steps)" for r in rows.values())
    assert abs(counted - expected) / expected < 0.01
    assert rows["tf32"]["coverage"] > 0.99


def test_demo_capture_has_the_harness_steps() -> None:
    doc = _report(DEMO)
    s = doc["steps"]["summary"]
    assert (s["step_count"], s["warmup_count"]) == (3, 0)  # the measured window's steps
    assert doc["window"]["kind"] == "measured"


def test_steps_come_from_the_nvtx_step_ranges_without_a_steps_table() -> None:
    # The capture has no steps.arrow: its 23 steps are the NVTX ranges "step N", and the
    # three with a negative N are warm-up. Start times are the running sum of the stored
    # deltas, end = start + the stored length.
    import tbdtrace
    from tbdtrace.analysis.passes import steps

    assert not (RESNET / "steps.arrow").exists()
    raw = _raw(RESNET, "markers")
    start, expected = 0, {}
    for name, delta, length in zip(
        raw["name"], raw["start_ns.delta"], raw["end_ns.minus_start_ns"], strict=True
    ):
        start += delta
        if name.startswith("step "):
            expected[int(name[5:])] = (start, start + length)
    table = steps.run(tbdtrace.open(RESNET))
    got = {
        r["step"]: (r["start_ns"], r["end_ns"], r["warmup"], r["source"]) for r in table.to_pylist()
    }
    assert len(got) == table.num_rows == 23
    assert got == {n: (s, e, n < 0, "nvtx") for n, (s, e) in expected.items()}
    summary = steps.summarize(table)
    assert (summary["warmup_count"], summary["measured_count"]) == (3, 20)
    assert summary["measured_ns"] == sum(e - s for n, (s, e) in expected.items() if n >= 0)


def test_a_gpu_capture_without_the_flop_recorder_says_it_has_no_flop_source(
    tmp_path: Path,
) -> None:
    # The same capture as if taken without --torch-flops: no ops rows, no recorder meta.
    import tbdtrace

    src = tbdtrace.open(RESNET)
    meta = dict(src.meta)
    meta["extra"] = {k: v for k, v in (meta.get("extra") or {}).items() if k != "torch_flops"}
    out = tmp_path / "no_recorder"
    tbdtrace.write(out, {n: src.table(n) for n in ("kernels", "devices", "markers")}, meta)
    doc = _report(out)
    assert all(r["flops"] is None for r in doc["flops"]["rows"])
    assert "--torch-flops" in doc["flops"]["note"]
    assert _report(RESNET)["flops"]["note"] is None


def test_a_capture_is_rated_against_the_datasheet_peak(tmp_path: Path) -> None:
    # NVIDIA H200 datasheet, SXM column: TF32 989 TFLOPS with sparsity (494.7 dense), FP32
    # 67 TFLOPS. The capture records the maximum clock (1980 MHz); 132 SMs x 2048 TF32
    # FLOPs/clock x 1980 MHz would read 535.2 TFLOP/s, 8% above the datasheet.
    dev = _raw(RESNET, "devices")
    assert dev["name"] == ["NVIDIA H200"] and dev["core_clock_khz"] == [1_980_000]
    want = {"tf32": 494.7e12, "fp32": 67e12}
    doc = _report(RESNET)
    rows = {r["precision"]: r for r in doc["flops"]["rows"]}
    assert set(want) <= set(rows)
    for prec, peak in want.items():
        assert abs(rows[prec]["peak_flops_per_s"] - peak) < 1e6, prec
        assert "datasheet" in rows[prec]["peak_source"]
    assert abs(doc["fp32"][0]["peak_flops_per_s"] - want["fp32"]) < 1e6
    # The same chip described as an import describes it (no clock): the same peaks.
    import tbdtrace
    from tbdtrace.analysis.engine import peaks

    imported = {"name": "NVIDIA H200", "sm_count": 132, "compute_capability_major": 9}
    imported["compute_capability_minor"] = 0
    captured = tbdtrace.open(RESNET).table("devices").to_pylist()[0]
    for prec in ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8"):
        assert peaks.gpu_peak(imported, prec)[0] == peaks.gpu_peak(captured, prec)[0], prec
