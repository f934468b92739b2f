"""fp32 pass: analytic FLOPs, peaks from their factors, efficiency over wall and busy time."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbdtrace.analysis.engine import flop_formulas, peaks
from tbdtrace.analysis.passes import fp32
from tests.analysis.tiny import US, kernels, make, measured


@pytest.mark.parametrize(
    "name,shapes,want",
    [
        ("aten::mm", "[[64,128],[128,32]]", 2 * 64 * 128 * 32),
        ("aten::addmm", "[[32],[64,128],[128,32],[],[]]", 2 * 64 * 128 * 32),
        ("aten::bmm", "[[8,16,32],[8,32,4]]", 2 * 8 * 16 * 32 * 4),
        ("aten::baddbmm", "[[8,16,4],[8,16,32],[8,32,4],[],[]]", 2 * 8 * 16 * 32 * 4),
        ("aten::linear", "[[4,10,128],[256,128],[256]]", 2 * 40 * 128 * 256),
        ("aten::matmul", "[[3,1,5,6],[2,6,7]]", 2 * 6 * 5 * 6 * 7),
        ("aten::matmul", "[[6],[6,7]]", 2 * 6 * 7),
        ("aten::conv2d", "[[1,3,8,8],[4,3,3,3],[4],[],[],[],[]]", None),
        ("aten::mm", "not json", None),
    ],
)
def test_shape_formulas(name: str, shapes: str, want: int | None) -> None:
    assert flop_formulas.op_flops(name, shapes, None) == want


def _gpu_trace(tmp_path: Path, **devices: object):
    dev = {
        "device_id": [0],
        "device_type": ["cuda"],
        "name": ["Tesla V100-SXM2-32GB"],
        "sm_count": [80],
        "compute_capability_major": [7],
        "compute_capability_minor": [0],
        **devices,
    }
    # linear [0,50] contains addmm [5,40] (counted once, the leaf); a bf16 mm is not FP32.
    ops = {
        "start_ns": [0, 5 * US, 60 * US],
        "end_ns": [50 * US, 40 * US, 70 * US],
        "name": ["aten::linear", "aten::addmm", "aten::mm"],
        "pid": [1] * 3,
        "tid": [1] * 3,
        "input_shapes": [
            "[[64,128],[32,128],[32]]",
            "[[32],[64,128],[128,32],[],[]]",
            "[[64,64],[64,64]]",
        ],
        "input_dtypes": [
            '["float","float","float"]',
            '["float","float","float","Scalar"]',
            '["c10::BFloat16","c10::BFloat16"]',
        ],
    }
    k = kernels([(10, 30, "volta_sgemm"), (70, 80, "bf16_gemm")])
    steps = {"step": [0], "start_ns": [0], "end_ns": [100 * US], "warmup": [False]}
    return make(tmp_path, {"kernels": k, "ops": ops, "devices": dev, "steps": steps})


def test_gpu_efficiency_against_the_datasheet_peak(tmp_path: Path) -> None:
    r = fp32.run(measured(_gpu_trace(tmp_path))).to_pylist()[0]
    f = 2 * 64 * 128 * 32
    assert r["flops"] == f and r["flops_source"].startswith("analytic")
    peak = 15.7e12  # NVIDIA Tesla V100 datasheet, SXM2: 15.7 TFLOPS single precision
    assert r["peak_flops_per_s"] == pytest.approx(peak)
    assert "datasheet" in r["peak_source"]
    assert r["window_ns"] == 100 * US and r["busy_ns"] == 30 * US
    assert r["achieved_flops_per_s_wall"] == pytest.approx(f / 100e-6)
    assert r["efficiency_busy"] == pytest.approx(f / 30e-6 / peak)
    # A capture of the same chip (SMs and its maximum clock recorded): the same peak.
    cap = fp32.run(measured(_gpu_trace(tmp_path / "cap", core_clock_khz=[1_597_000])))
    assert cap.to_pylist()[0]["peak_flops_per_s"] == pytest.approx(peak)


def test_chip_not_in_the_datasheet_table_is_computed(tmp_path: Path) -> None:
    p100 = {"name": ["Tesla P100-SXM2-16GB"], "sm_count": [56], "compute_capability_minor": [0]}
    p100["compute_capability_major"] = [6]
    r = fp32.run(_gpu_trace(tmp_path, **p100)).to_pylist()[0]
    assert r["peak_flops_per_s"] == pytest.approx(56 * 64 * 2 * 1480e6)  # boost looked up
    assert "looked up" in r["peak_source"]


def test_clock_and_counters_from_the_trace_win(tmp_path: Path) -> None:
    p100 = {"name": ["Tesla P100-SXM2-16GB"], "sm_count": [56], "compute_capability_major": [6]}
    tr = _gpu_trace(tmp_path, core_clock_khz=[1_000_000], **p100)
    r = fp32.run(tr).to_pylist()[0]
    assert r["peak_flops_per_s"] == pytest.approx(56 * 64 * 2 * 1e9)
    assert "devices.core_clock_khz" in r["peak_source"]
    tr2 = make(
        tmp_path,
        {
            "kernels": kernels([(0, 10, "k")], flops=[5_000_000]),
            "devices": {"device_id": [0], "device_type": ["cuda"], "name": ["?"]},
        },
        name="t2",
    )
    r2 = fp32.run(tr2).to_pylist()[0]
    assert r2["flops"] == 5_000_000 and r2["flops_source"].startswith("hardware counters")
    assert r2["peak_flops_per_s"] is None and "SM count" in r2["peak_source"]


def test_cpu_peak_from_meta() -> None:
    meta = {"extra": {"cpu": {"cores": 8, "mhz": 3000.0, "flags": "sse2 avx avx2 fma"}}}
    peak, src = peaks.cpu_fp32_peak(meta)
    assert peak == pytest.approx(8 * 8 * 2 * 2 * 3e9)
    assert "/proc/cpuinfo" in src
    assert peaks.cpu_fp32_peak({})[0] is None


def test_no_flops_source_gives_a_reason(tmp_path: Path) -> None:
    tr = make(tmp_path, {"kernels": kernels([(0, 10, "k")])})
    r = fp32.run(tr).to_pylist()[0]
    assert r["flops"] is None and "no FLOP source" in r["flops_source"]
    assert fp32.run(make(tmp_path, {}, name="e")).num_rows == 0


def test_fixture_analytic_flops_match_an_independent_count(tmp_path: Path) -> None:
    """control.json: FP32 matmul FLOPs inside the ProfilerSteps, counted from the raw JSON
    with plain loops (leaf ops only: no counted op inside them on their thread)."""
    import math
    from collections import defaultdict

    import tbdtrace
    from tbdtrace.importers import kineto
    from tests import rawkineto
    from tests.conftest import fixture

    path = fixture("kineto/hta/control.json.gz")
    tables, meta = kineto.import_files([path])
    tr = tbdtrace.open(tbdtrace.trace.write(tmp_path / "t", tables, meta))
    ev = [e for e in rawkineto.load(path)["traceEvents"] if e.get("ph") == "X"]
    steps = [
        (rawkineto.ns(e["ts"]), rawkineto.ns(e["ts"]) + rawkineto.ns(e["dur"]))
        for e in ev
        if str(e.get("name", "")).startswith("ProfilerStep#")
    ]
    fam = defaultdict(list)
    for e in ev:
        if e.get("cat") == "cpu_op" and e["name"] in flop_formulas.MATMUL:
            s = rawkineto.ns(e["ts"])
            fam[(e["pid"], e["tid"])].append((s, s + rawkineto.ns(e["dur"]), e))

    def count(name, dims):
        if name == "aten::mm":
            return 2 * dims[0][0] * dims[0][1] * dims[1][1]
        if name == "aten::addmm":
            return 2 * dims[1][0] * dims[1][1] * dims[2][1]
        if name == "aten::bmm":
            return 2 * dims[0][0] * dims[0][1] * dims[0][2] * dims[1][2]
        if name == "aten::linear":
            return 2 * math.prod(dims[0][:-1]) * dims[0][-1] * dims[1][0]
        return None  # matmul/baddbmm: not expected as leaves here

    total = 0
    for ops in fam.values():
        for s, e, x in ops:
            if any(s <= s2 and e2 <= e and o is not x for s2, e2, o in ops):
                continue  # has a counted op inside: not a leaf
            if not any(a <= s <= b for a, b in steps):
                continue
            types = [t for t in x["args"].get("Input type", []) if t]
            if types and types[0] != "float":
                continue
            v = count(x["name"], x["args"]["Input Dims"])
            total += v or 0
    # Work on FP32 inputs splits into what ran as FP32 (the fp32 section) and what ran as
    # TF32 (the flops section's tf32 row, rated against the TF32 peak): together the count.
    from tbdtrace.analysis.passes import flops

    r = fp32.run(tr).to_pylist()[0]
    rows = {x["precision"]: x for x in flops.run(tr).to_pylist()}
    assert total > 0 and r["flops"] + rows["tf32"]["flops"] == total
    assert r["flops"] == rows["fp32"]["flops"]
    assert r["achieved_flops_per_s_wall"] == pytest.approx(r["flops"] * 1e9 / r["window_ns"])
