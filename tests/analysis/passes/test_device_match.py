"""Devices are always identified: device work on an id the trace's devices table lacks.

With CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES the profiler records kernels on the
physical id (9) while the trace's only deviceProperties entry has id 0. Expected peaks
are the datasheet figures, written here.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from tbdtrace.analysis.passes import flops, fp32, memcpy, roofline
from tests.analysis.tiny import US, make, measured
from tests.inprocess import tbd

H100_BF16 = 989.4e12  # NVIDIA H100 datasheet, SXM: BF16 1,979 TFLOPS with sparsity, dense / 2
H100_FP32 = 67e12  # the same datasheet: FP32 67 TFLOPS
A100_BF16 = 312e12  # NVIDIA A100 datasheet: BF16 Tensor Core 312 TFLOPS (dense)
H100_DRAM = 3350e9  # NVIDIA H100 SXM datasheet: 3.35 TB/s


def _device(name: str, **cols: Any) -> dict[str, Any]:
    return {"name": name, "compute_capability_major": 9, "compute_capability_minor": 0, **cols}


def _tables(
    kernel_devices: list[tuple[int | None, int]],
    devices: list[tuple[int | None, int, dict[str, Any]]],
    dtype: str = "cuda",
) -> dict[str, dict[str, Any]]:
    """One bf16 linear per (rank, kernel device): a 20 us gemm launched from it."""
    n = len(kernel_devices)
    ranks = [r for r, _ in kernel_devices]
    shapes = ("[[64,128],[32,128],[32]]", "[[32],[64,128],[128,32],[],[]]")
    bf16 = '"c10::BFloat16"'
    ops = {
        "start_ns": [0, 5 * US] * n,
        "end_ns": [50 * US, 40 * US] * n,
        "name": ["aten::linear", "aten::addmm"] * n,
        "pid": [i + 1 for i in range(n) for _ in range(2)],
        "tid": [1] * 2 * n,
        "input_shapes": list(shapes) * n,
        "input_dtypes": [f"[{bf16},{bf16},{bf16}]", f'[{bf16},{bf16},{bf16},"Scalar"]'] * n,
        "rank": [r for r in ranks for _ in range(2)],
    }
    tables = {
        "ops": ops,
        "kernels": {
            "start_ns": [10 * US] * n,
            "end_ns": [30 * US] * n,
            "name": ["sm90_xmma_gemm_bf16bf16_bf16f32"] * n,
            "device_id": [d for _, d in kernel_devices],
            "device_type": [dtype] * n,
            "correlation_id": list(range(7, 7 + n)),
            "rank": ranks,
        },
        "runtime": {
            "start_ns": [6 * US] * n,
            "end_ns": [8 * US] * n,
            "name": ["cudaLaunchKernel"] * n,
            "pid": [i + 1 for i in range(n)],
            "tid": [1] * n,
            "correlation_id": list(range(7, 7 + n)),
            "rank": ranks,
        },
        "memcpy": {
            "start_ns": [31 * US] * n,
            "end_ns": [32 * US] * n,
            "device_id": [d for _, d in kernel_devices],
            "device_type": [dtype] * n,
            "copy_kind": ["DtoD"] * n,
            "bytes": [1 << 20] * n,
            "rank": ranks,
        },
        "devices": {
            "device_id": [d for _, d, _ in devices],
            "device_type": [dtype] * len(devices),
            "rank": [r for r, _, _ in devices],
            **{
                k: [row.get(k) for _, _, row in devices]
                for k in ("name", "compute_capability_major", "compute_capability_minor")
            },
        },
        "steps": {
            "step": [0] * len(set(ranks)),
            "start_ns": [0] * len(set(ranks)),
            "end_ns": [100 * US] * len(set(ranks)),
            "warmup": [False] * len(set(ranks)),
            "rank": sorted(set(ranks), key=lambda r: -1 if r is None else r),
        },
    }
    if all(r is None for r in ranks):
        for t in tables.values():
            t.pop("rank", None)
    return tables


def test_kernels_on_an_undescribed_id_take_the_one_described_device(tmp_path: Path) -> None:
    tr = make(tmp_path, _tables([(None, 9)], [(None, 0, _device("NVIDIA H100 80GB HBM3"))]))
    row = flops.run(measured(tr)).to_pylist()[0]
    # Before: devices "cpu:9", no peak ("device cuda:9 not described in the trace").
    assert row["devices"] == "NVIDIA H100 80GB HBM3"
    assert row["precision"] == "bf16" and row["peak_flops_per_s"] == pytest.approx(H100_BF16)
    assert "cuda:9 taken as cuda:0" in row["peak_source"] and "the trace" in row["peak_source"]
    assert row["efficiency_busy"] == pytest.approx(2 * 64 * 128 * 32 / 20e-6 / H100_BF16)
    f = fp32.run(measured(tr)).to_pylist()[0]
    assert f["devices"] == "NVIDIA H100 80GB HBM3"
    assert f["peak_flops_per_s"] == pytest.approx(H100_FP32)
    mc = memcpy.run(tr).to_pylist()[0]
    assert mc["peak_bytes_per_s"] == pytest.approx(H100_DRAM / 2)
    assert "taken as cuda:0" in mc["peak_source"]
    # Every view names the GPU, none calls it cpu.
    path = str(tmp_path / "t")
    text = tbd("report", path).stdout
    assert "cpu:" not in text and "(NVIDIA H100 80GB HBM3)" in text
    assert "taken as cuda:0" in text
    doc = json.loads(tbd("report", path, "--format", "json").stdout)
    assert "cpu:" not in json.dumps(doc["flops"]) + json.dumps(doc["fp32"])
    assert doc["flops"]["rows"][0]["peak_flops_per_s"] == pytest.approx(H100_BF16)
    rows = tbd("report", path, "--format", "csv", "--section", "flops.rows").stdout
    assert "NVIDIA H100 80GB HBM3" in rows and "cpu:" not in rows
    assert float(next(csv.DictReader(io.StringIO(rows)))["peak_flops_per_s"]) == H100_BF16
    tbd("report", path, "--format", "html", "-o", str(tmp_path / "r.html"))
    html = (tmp_path / "r.html").read_text()
    assert "NVIDIA H100 80GB HBM3" in html and "cpu:9" not in html


def test_each_rank_matches_its_own_described_device(tmp_path: Path) -> None:
    # Rank 0 ran on cuda:3 and describes an H100 as id 0; rank 1 ran on cuda:5 and
    # describes an A100 as id 0. Before: "cpu:3", "cpu:5", no peaks.
    a100 = _device("NVIDIA A100-SXM4-80GB", compute_capability_major=8)
    tr = make(
        tmp_path,
        _tables(
            [(0, 3), (1, 5)],
            [(0, 0, _device("NVIDIA H100 80GB HBM3")), (1, 0, a100)],
        ),
    )
    rows = {r["rank"]: r for r in flops.run(measured(tr)).to_pylist()}
    assert rows[0]["devices"] == "NVIDIA H100 80GB HBM3"
    assert rows[1]["devices"] == "NVIDIA A100-SXM4-80GB"
    assert rows[0]["peak_flops_per_s"] == pytest.approx(H100_BF16)
    assert rows[1]["peak_flops_per_s"] == pytest.approx(A100_BF16)
    assert "the only GPU rank 1 describes" in rows[1]["peak_source"]


def test_a_rank_tagged_gpu_described_without_a_rank_is_that_gpu(tmp_path: Path) -> None:
    # Kernels carry rank 0, the devices row has no rank (same id): before, "cpu:0".
    tables = _tables([(0, 0)], [(0, 0, _device("NVIDIA H100 80GB HBM3"))])
    tables["devices"]["rank"] = [None]
    tr = make(tmp_path, tables)
    row = flops.run(measured(tr)).to_pylist()[0]
    assert row["devices"] == "NVIDIA H100 80GB HBM3"
    assert row["peak_flops_per_s"] == pytest.approx(H100_BF16)
    assert "taken as" not in row["peak_source"]  # the same id: nothing to say


def test_two_described_devices_are_not_guessed_and_a_gpu_is_never_cpu(tmp_path: Path) -> None:
    h100 = _device("NVIDIA H100 80GB HBM3")
    devs = [(None, 0, h100), (None, 1, h100)]
    tr = make(tmp_path, _tables([(None, 9)], devs))
    row = flops.run(measured(tr)).to_pylist()[0]
    assert row["devices"] == "cuda:9"
    assert row["peak_flops_per_s"] is None and "cuda:9 not described" in row["peak_source"]
    rocm = make(tmp_path, _tables([(None, 2)], [], dtype="rocm"), name="rocm")
    assert flops.run(measured(rocm)).to_pylist()[0]["devices"] == "rocm:2"


def test_roofline_rates_a_rocm_device_as_a_gpu(tmp_path: Path) -> None:
    mi300x = {"name": "AMD Instinct MI300X", "compute_capability_major": 9}
    mi300x["compute_capability_minor"] = 4
    tr = make(tmp_path, _tables([(None, 2)], [(None, 0, mi300x)], dtype="rocm"))
    rows = roofline.run(measured(tr)).to_pylist()
    assert rows, "a roofline row for the gemm"
    # AMD Instinct MI300X datasheet: BF16 1,307.4 TFLOPS dense. Before: the CPU model.
    assert any(r.get("peak_flops_per_s") == pytest.approx(1307.4e12) for r in rows)
