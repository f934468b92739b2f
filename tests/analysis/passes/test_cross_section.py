"""One window and one placement rule for every section: the same quantity read from two
sections is equal, on every real trace we have (the Kineto and Nsight Systems fixtures,
and the project's own CUPTI and MXNet captures under tests/data), in the report's default
window and in the whole trace.

Quantities: kernel counts (summary, kernels table, categories, hotspots by op, phases),
kernel time (the same sections), compute-busy time (summary vs the flops and fp32
sections), and the FLOP denominator's GEMM and convolution time against the categories
table (every gemm and conv kernel the categories table counts is in the denominator; the
uncounted part of the denominator is matrix work the categories table also holds).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tbdtrace.analysis.engine import context, window
from tbdtrace.analysis.engine.window import WindowSpec
from tbdtrace.analysis.passes import categories, flops, fp32, hotspots, kernels, phases, summary
from tbdtrace.commands._open import open_or_import
from tests.conftest import FIXTURES, fixture

ROOT = Path(__file__).resolve().parents[3]
KINETO = sorted(
    str(p.relative_to(FIXTURES)) for p in (FIXTURES / "kineto").rglob("*.json.gz") if p.is_file()
)
NSYS = ["nsys/perlmutter-cloverleaf-cuda.sqlite", "nsys/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"]
OWN = [
    "tests/data/gpu/h200_demo_resnet50_small",
    "tests/data/gpu/h200_resnet50_cupti",
    "tests/data/mxnet/gluon_mlp_profile.json.gz",
]
DEVICE_TABLE_CATEGORIES = ("memcpy", "memset")


def _open(name: str) -> Any:
    path = ROOT / name if name.startswith("tests/") else fixture(name)
    return open_or_import(str(path))


def _sections(trace: Any, kind: str) -> dict[str, Any]:
    whole = context.of(trace)
    view = whole.windowed(window.resolve(whole, WindowSpec(kind)))
    return {
        "view": view,
        "summary": summary.run(view).to_pylist(),
        "kernels": kernels.run(view).to_pylist(),
        "categories": categories.run(view).to_pylist(),
        "by_op": hotspots.run(view, hotspots.HotspotsConfig(top=None, by="op")).to_pylist(),
        "flops": flops.run(view).to_pylist(),
        "fp32": fp32.run(view).to_pylist(),
        "phases": phases.run(whole).to_pylist(),
    }


@pytest.mark.parametrize("kind", ["measured", "all"])
@pytest.mark.parametrize("name", KINETO + NSYS + OWN)
def test_sections_agree(name: str, kind: str) -> None:
    tr = _open(name)
    s = _sections(tr, kind)
    count = sum(r["kernel_count"] for r in s["summary"])
    time = sum(r["kernel_time_ns"] for r in s["summary"])
    kcats = [r for r in s["categories"] if r["category"] not in DEVICE_TABLE_CATEGORIES]
    assert sum(r["count"] for r in s["kernels"]) == count
    assert sum(r["total_ns"] for r in s["kernels"]) == time
    assert sum(r["count"] for r in kcats) == count
    assert sum(r["total_ns"] for r in kcats) == time
    if count:
        assert sum(r["kernel_count"] for r in s["by_op"]) == count
        assert sum(r["total_ns"] for r in s["by_op"]) == time
    if kind == "measured" and tr.num_rows("steps"):
        measured = [r for r in s["phases"] if r["phase"] in ("measured", "all")]
        assert sum(r["kernel_count"] for r in measured) == count

    # Busy time: the flops and fp32 sections' per rank = the summary's devices of the rank.
    busy: dict[Any, int] = {}
    for r in s["summary"]:
        busy[r["rank"]] = busy.get(r["rank"], 0) + r["compute_busy_ns"]
    for row in s["flops"] + s["fp32"]:
        assert row["busy_ns"] == busy[row["rank"]], (row["rank"], row.get("precision"))

    # One efficiency per precision: the FP32 figure is the flops section's fp32 row, never
    # FP32 plus the TF32 work (rated against the TF32 peak in its own row).
    fp32_rows = {r["rank"]: r["flops"] for r in s["flops"] if r["precision"] == "fp32"}
    unknown = {r["rank"] for r in s["flops"] if r["precision"] == "unknown"}
    for row in s["fp32"]:
        if row["rank"] not in unknown:
            assert row["flops"] == fp32_rows.get(row["rank"]), row["rank"]
    # ... rated against the same peak (the datasheet's for a listed chip; before, the fp32
    # section computed 15.67 TFLOP/s for a V100 where the flops row read the datasheet's
    # 15.7, so the two sections' efficiencies of one row differed).
    fp32_peaks = {r["rank"]: r["peak_flops_per_s"] for r in s["flops"] if r["precision"] == "fp32"}
    for row in s["fp32"]:
        if row["peak_flops_per_s"] is not None and fp32_peaks.get(row["rank"]) is not None:
            assert row["peak_flops_per_s"] == fp32_peaks[row["rank"]], row["rank"]

    # The FLOP denominator holds every gemm and conv kernel the categories table counts.
    per_rank = {r["rank"]: r for r in s["flops"]}
    cat = {r["category"]: r["total_ns"] for r in s["categories"]}
    denominator = sum(r["flop_kernel_ns"] for r in per_rank.values())
    uncounted = sum(r["flop_kernel_ns"] - r["counted_kernel_ns"] for r in per_rank.values())
    matmul = cat.get("gemm", 0) + cat.get("conv", 0)
    assert denominator >= matmul
    assert uncounted <= matmul + cat.get("softmax_attention", 0)
