"""flops pass: formulas (matmul, convolution, attention), precision split, coverage, peaks,
the bf16 fixtures. Expected values are formulas written here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tbdtrace.analysis.engine import flop_formulas as ff
from tbdtrace.analysis.engine import peaks
from tbdtrace.analysis.engine.op_flops import OpCounts
from tbdtrace.analysis.passes import flops
from tests.analysis.tiny import US, make, measured


def conv_out(i: int, k: int, s: int, p: int, d: int) -> int:
    return (i + 2 * p - d * (k - 1) - 1) // s + 1


# conv2d: N=2, Cin=6, 17x20 input, Cout=4, groups 2 (Cin/g = 3), k 3x5, stride (2,3),
# padding (1,2), dilation (1,2): output spatial from the textbook formula.
_OH, _OW = conv_out(17, 3, 2, 1, 1), conv_out(20, 5, 3, 2, 2)
_CONV_FWD = 2 * 2 * 4 * _OH * _OW * 3 * 3 * 5


@pytest.mark.parametrize(
    "name,shapes,concrete,want",
    [
        ("aten::mm", [[64, 128], [128, 32]], None, 2 * 64 * 128 * 32),
        ("aten::_scaled_mm", [[16, 32], [32, 8], [], []], None, 2 * 16 * 32 * 8),
        ("aten::addmm", [[32], [64, 128], [128, 32], [], []], None, 2 * 64 * 128 * 32),
        ("aten::bmm", [[8, 16, 32], [8, 32, 4]], None, 2 * 8 * 16 * 32 * 4),
        ("aten::baddbmm", [[8, 16, 4], [8, 16, 32], [8, 32, 4]], None, 2 * 8 * 16 * 32 * 4),
        ("aten::linear", [[4, 10, 128], [256, 128], [256]], None, 2 * 40 * 128 * 256),
        ("aten::matmul", [[3, 1, 5, 6], [2, 6, 7]], None, 2 * 6 * 5 * 6 * 7),
        (
            "aten::conv2d",
            [[2, 6, 17, 20], [4, 3, 3, 5], [4], [], [], [], []],
            ["", "", "", "[2, 3]", "[1, 2]", "[1, 2]", "2"],
            _CONV_FWD,
        ),
        (  # mkldnn_convolution lists padding before stride
            "aten::mkldnn_convolution",
            [[2, 6, 17, 20], [4, 3, 3, 5], [4], [], [], [], []],
            ["", "", "", "[1, 2]", "[2, 3]", "[1, 2]", "2"],
            _CONV_FWD,
        ),
        (
            "aten::convolution",
            [[1, 3, 8, 8], [5, 3, 3, 3], [], [], [], [], [], [], []],
            ["", "", "", "[1, 1]", "same", "[1, 1]", "False", "[0, 0]", "1"],
            2 * 1 * 5 * 8 * 8 * 3 * 9,
        ),
        (  # transposed: every input element meets the whole weight once
            "aten::convolution",
            [[2, 4, 5, 5], [4, 3, 2, 2], [], [], [], [], [], [], []],
            ["", "", "", "[2, 2]", "[0, 0]", "[1, 1]", "True", "[0, 0]", "1"],
            2 * 2 * 4 * 5 * 5 * 3 * 2 * 2,
        ),
        (  # backward: input gradient and weight gradient, each = forward
            "aten::convolution_backward",
            [[2, 4, 9, 6], [2, 6, 17, 20], [4, 3, 3, 5], [], [], [], [], [], [], [], []],
            [
                "",
                "",
                "",
                "[4]",
                "[2, 3]",
                "[1, 2]",
                "[1, 2]",
                "False",
                "[0]",
                "2",
                "[True, True, False]",
            ],
            2 * (2 * 2 * 4 * 9 * 6 * 3 * 3 * 5),
        ),
        (  # first layer: no input gradient
            "aten::convolution_backward",
            [[2, 4, 9, 6], [2, 6, 17, 20], [4, 3, 3, 5], [], [], [], [], [], [], [], []],
            [
                "",
                "",
                "",
                "[4]",
                "[2, 3]",
                "[1, 2]",
                "[1, 2]",
                "False",
                "[0]",
                "2",
                "[False, True, True]",
            ],
            2 * 2 * 4 * 9 * 6 * 3 * 3 * 5,
        ),
        (  # B=2, H=8, L=141, D=64: QK^T and PV
            "aten::scaled_dot_product_attention",
            [[2, 8, 141, 64], [2, 8, 141, 64], [2, 8, 141, 64], [], [], [], [], []],
            ["", "", "", "", "0.", "False", "", "False"],
            2 * (2 * 2 * 8 * 141 * 141 * 64),
        ),
        (  # causal: half
            "aten::_scaled_dot_product_flash_attention",
            [[2, 8, 141, 64], [2, 8, 141, 64], [2, 8, 141, 64], [], [], [], []],
            ["", "", "", "0.", "True", "False", "0.125"],
            2 * 2 * 8 * 141 * 141 * 64,
        ),
        (  # [B, L, H, D] layout, backward = 2 x forward (dQ, dK, dV, dP)
            "aten::_flash_attention_backward",
            [[2, 141, 8, 64]] * 5 + [[2, 8, 141]] + [[]] * 6,
            [""] * 6 + ["", "", "141", "141", "0.", "False"],
            2 * 2 * (2 * 2 * 8 * 141 * 141 * 64),
        ),
        ("aten::conv2d", [[1, 3, 8, 8], [4, 3, 3, 3], [4], [], [], [], []], None, None),
        ("aten::relu", [[4, 4]], None, None),
    ],
)
def test_formulas(name: str, shapes: list, concrete: list | None, want: int | None) -> None:
    got = ff.op_flops(name, json.dumps(shapes), json.dumps(concrete) if concrete else None)
    assert got == want


@pytest.mark.parametrize(
    "dtypes,want",
    [
        (["float", "float"], "fp32"),
        (["c10::BFloat16", "c10::BFloat16"], "bf16"),
        (["c10::Half"], "fp16"),
        (["double"], "fp64"),
        (["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float"], "fp8"),
        (["signed char", "signed char"], "int8"),
        (["Scalar", "float"], "fp32"),
        ([], None),
    ],
)
def test_precision_from_dtypes(dtypes: list[str], want: str | None) -> None:
    assert ff.precision(json.dumps(dtypes)) == want


H100 = {
    "device_id": [0],
    "device_type": ["cuda"],
    "name": ["NVIDIA H100 80GB HBM3"],
    "sm_count": [132],
    "compute_capability_major": [9],
    "compute_capability_minor": [0],
}


def _mixed_trace(tmp_path: Path, meta: dict | None = None):
    """One thread launches: a bf16 linear (with its addmm inside: counted once), an fp32
    conv2d, an fp16 SDPA, and an aten::mm without shapes (its GEMM kernel time is not
    covered). Kernels join their launching op through runtime calls (correlation id)."""
    ops = [  # (start_us, end_us, name, shapes, dtypes, concrete)
        (0, 50, "aten::linear", [[64, 128], [32, 128], [32]], ["c10::BFloat16"] * 3, None),
        (5, 45, "aten::addmm", [[32], [64, 128], [128, 32], [], []], ["c10::BFloat16"] * 3, None),
        (
            60,
            90,
            "aten::conv2d",
            [[2, 6, 17, 20], [4, 3, 3, 5], [4], [], [], [], []],
            ["float", "float", "float"],
            ["", "", "", "[2, 3]", "[1, 2]", "[1, 2]", "2"],
        ),
        (
            100,
            120,
            "aten::scaled_dot_product_attention",
            [[1, 2, 16, 8], [1, 2, 16, 8], [1, 2, 16, 8], [], [], [], [], []],
            ["c10::Half"] * 3,
            ["", "", "", "", "0.", "True", "", "False"],
        ),
        (130, 150, "aten::mm", None, None, None),
    ]
    runtime_at = [10, 70, 105, 135, 140]  # launch times inside linear, conv, sdpa, mm, mm
    kern = [
        (20, 60, "sm90_xmma_gemm_bf16"),
        (75, 95, "cudnn::conv_fprop"),
        (110, 130, "flash_fwd_kernel"),
        (140, 170, "sm90_xmma_gemm_f32"),
        (172, 182, "elementwise_kernel"),
    ]
    tables = {
        "ops": {
            "start_ns": [o[0] * US for o in ops],
            "end_ns": [o[1] * US for o in ops],
            "name": [o[2] for o in ops],
            "pid": [1] * 5,
            "tid": [7] * 5,
            "input_shapes": [json.dumps(o[3]) if o[3] else None for o in ops],
            "input_dtypes": [json.dumps(o[4]) if o[4] else None for o in ops],
            "concrete_inputs": [json.dumps(o[5]) if o[5] else None for o in ops],
        },
        "runtime": {
            "start_ns": [t * US for t in runtime_at],
            "end_ns": [t * US + 1 for t in runtime_at],
            "name": ["cudaLaunchKernel"] * 5,
            "pid": [1] * 5,
            "tid": [7] * 5,
            "correlation_id": [1, 2, 3, 4, 5],
        },
        "kernels": {
            "start_ns": [k[0] * US for k in kern],
            "end_ns": [k[1] * US for k in kern],
            "name": [k[2] for k in kern],
            "device_id": [0] * 5,
            "device_type": ["cuda"] * 5,
            "correlation_id": [1, 2, 3, 4, 5],
        },
        "devices": H100,
        "steps": {
            "step": [0],
            "start_ns": [0],
            "end_ns": [200 * US],
            "warmup": [False],
            "samples": [16],
        },
    }
    return make(tmp_path, tables, meta=meta or {"source": "test"})


def test_op_counts_hold_flops_for_the_rows_that_have_them() -> None:
    # Rows 2, 5 and 9 of ten ops have FLOPs; every other row reads -1.
    oc = OpCounts(
        rows=np.array([2, 5, 9]),
        flops=np.array([10, 20, 30]),
        source=np.array([1, 2, 2], dtype=np.int8),
        precision=np.full(10, -1, dtype=np.int8),
        counted=np.zeros(10, dtype=bool),
    )
    assert oc.flops_of(np.array([0, 2, 3, 5, 9, 8, 2])).tolist() == [-1, 10, -1, 20, 30, -1, 10]
    assert np.flatnonzero(oc.has_flops()).tolist() == [2, 5, 9]
    none = OpCounts(
        np.zeros(0, np.int64),
        np.zeros(0, np.int64),
        np.zeros(0, np.int8),
        np.full(3, -1, np.int8),
        np.zeros(3, dtype=bool),
    )
    assert none.flops_of(np.array([0, 2])).tolist() == [-1, -1]
    assert not none.has_flops().any()


def test_precision_split_coverage_and_peaks(tmp_path: Path) -> None:
    rows = {r["precision"]: r for r in flops.run(measured(_mixed_trace(tmp_path))).to_pylist()}
    assert set(rows) == {"bf16", "fp32", "fp16"}
    assert rows["bf16"]["flops"] == 2 * 64 * 128 * 32  # linear once, not also its addmm
    assert rows["fp32"]["flops"] == _CONV_FWD
    assert rows["fp16"]["flops"] == 2 * 1 * 2 * 16 * 16 * (8 + 8) // 2  # causal
    assert all(r["analytic_flops"] == r["flops"] for r in rows.values())
    r = rows["bf16"]
    assert r["window_ns"] == 200 * US and "measured steps" in r["window_source"]
    # gemm + conv + attention kernel time 40 + 20 + 20 + 30 us; the mm's 30 us uncounted
    assert r["flop_kernel_ns"] == 110 * US and r["counted_kernel_ns"] == 80 * US
    assert r["coverage"] == pytest.approx(80 / 110)
    assert r["peak_flops_per_s"] == pytest.approx(989.4e12)  # datasheet, H100 SXM bf16
    assert "H100 SXM" in r["peak_source"]
    assert rows["fp32"]["peak_flops_per_s"] == pytest.approx(67e12)
    busy = (60 - 20) + (95 - 75) + (130 - 110) + (170 - 140) + (182 - 172)  # kernels, us
    assert r["busy_ns"] == busy * US
    assert r["efficiency_wall"] == pytest.approx(r["flops"] / 200e-6 / 989.4e12)
    assert r["efficiency_busy"] == pytest.approx(r["flops"] / (busy * 1e-6) / 989.4e12)


def test_tf32_from_meta_and_mfu(tmp_path: Path) -> None:
    meta = {"source": "test", "extra": {"torch": {"allow_tf32": {"matmul": True, "cudnn": True}}}}
    tr = _mixed_trace(tmp_path, meta)
    cfg = flops.FlopsConfig(model_flops_per_sample=1e9)
    rows = {r["precision"]: r for r in flops.run(measured(tr), cfg).to_pylist()}
    assert "fp32" not in rows and rows["tf32"]["flops"] == _CONV_FWD
    assert rows["tf32"]["peak_flops_per_s"] == pytest.approx(494.7e12)
    r = rows["bf16"]
    assert r["samples"] == 16 and r["model_flops_source"] == "--model-flops-per-sample"
    assert r["mfu"] == pytest.approx(1e9 * 16 / 200e-6 / 989.4e12)


def test_hardware_counters_come_first(tmp_path: Path) -> None:
    tr = _mixed_trace(tmp_path)
    t = tr.table("kernels").to_pydict()
    t["flops"] = [1000, 2000, 3000, None, None]
    tr2 = make(
        tmp_path,
        {
            **{k: tr.table(k).to_pydict() for k in ("ops", "runtime", "steps", "devices")},
            "kernels": t,
        },
        name="hw",
    )
    rows = {r["precision"]: r for r in flops.run(tr2).to_pylist()}
    assert {p: r["hardware_flops"] for p, r in rows.items()} == {
        "bf16": 1000,
        "fp32": 2000,
        "fp16": 3000,
    }
    assert rows["bf16"]["coverage"] == pytest.approx(80 / 110)  # kernels with counts


def test_no_source_names_the_reason(tmp_path: Path) -> None:
    k = {"start_ns": [0], "end_ns": [10], "name": ["k"], "device_id": [0], "device_type": ["cuda"]}
    r = flops.run(make(tmp_path, {"kernels": k})).to_pylist()
    assert len(r) == 1 and r[0]["precision"] is None and "no FLOP source" in r[0]["flops_source"]


@pytest.mark.parametrize(
    "name,cc,sms,clock_khz,precision,want",
    [
        ("NVIDIA A100-SXM4-80GB", (8, 0), None, None, "bf16", 312e12),
        ("NVIDIA A100-PG509-200", (8, 0), None, None, "tf32", 156e12),
        ("NVIDIA H100 PCIe", (9, 0), None, None, "fp8", 1513e12),
        ("NVIDIA H100 NVL", (9, 0), None, None, "bf16", 835.5e12),
        ("NVIDIA H200", (9, 0), None, None, "fp8", 1978.9e12),
        ("NVIDIA B200", (10, 0), None, None, "bf16", 2250e12),
        ("NVIDIA GB200", (10, 0), None, None, "fp8", 5000e12),
        ("Tesla V100-SXM2-32GB", (7, 0), None, None, "fp16", 125e12),
        ("NVIDIA L4", (8, 9), None, None, "fp8", 242.5e12),
        ("NVIDIA L40S", (8, 9), None, None, "bf16", 362.05e12),
        ("NVIDIA A10", (8, 6), None, None, "int8", 250e12),
        ("AMD Instinct MI300X", None, None, None, "bf16", 1307.4e12),
        ("AMD Instinct MI325X", None, None, None, "fp8", 2614.9e12),
        ("AMD Instinct MI250X", None, None, None, "fp64", 95.7e12),
        # a known chip: the datasheet even when the trace records SMs and a clock
        ("NVIDIA A100-SXM4-40GB", (8, 0), 108, 1_410_000, "fp16", 312e12),
        ("NVIDIA H200", (9, 0), 132, 1_980_000, "bf16", 989.4e12),
        # a MIG slice (42 of the H100's 132 SMs): the datasheet figure x 42/132
        ("NVIDIA H100 80GB HBM3 MIG 3g.40gb", (9, 0), 42, 1_755_000, "bf16", 989.4e12 * 42 / 132),
        # a chip the table lacks: SMs x per-SM rate x the trace's clock
        ("NVIDIA RTX 6000 Ada Generation", (8, 9), 142, 2_505_000, "bf16", 142 * 1024 * 2.505e9),
        ("NVIDIA GeForce GTX 1080", (6, 1), None, None, "fp32", None),
    ],
)
def test_peaks(name: str, cc, sms, clock_khz, precision: str, want: float | None) -> None:
    dev = {"name": name, "sm_count": sms, "core_clock_khz": clock_khz}
    if cc:
        dev.update(compute_capability_major=cc[0], compute_capability_minor=cc[1])
    got, src = peaks.gpu_peak(dev, precision)
    assert (got == pytest.approx(want)) if want else got is None
    assert src
    if want and sms and "Ada" in name:
        assert src.startswith("computed") and "not in gpu_peaks.csv" in src
    elif want and sms:
        assert "datasheet" in src and ("MIG" not in name or "42/132 SMs" in src)


def test_every_datasheet_row_names_its_source() -> None:
    rows = peaks._csv("gpu_peaks.csv")
    assert rows and all("datasheet" in r["source"] for r in rows)


# --- bf16 fixtures: an independent count from the raw JSON ------------------------------

_BF16 = "c10::BFloat16"


def _raw_bf16_flops(path: Path) -> int:
    """bf16 FLOPs of the outermost linear/addmm/mm/SDPA ops inside the CPU ProfilerStep,
    counted from the raw events with plain loops and the formulas written here."""
    import gzip

    with gzip.open(path) as f:
        ev = json.load(f)["traceEvents"]
    step = [
        (e["ts"], e["ts"] + e["dur"])
        for e in ev
        if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")
    ]

    def count(e: dict) -> int | None:
        a = e["args"]
        d, c = a["Input Dims"], a.get("Concrete Inputs")
        if a["Input type"][0] != _BF16:
            return None
        if e["name"] == "aten::linear":
            n = 1
            for x in d[0][:-1]:
                n *= x
            return 2 * n * d[0][-1] * d[1][0]
        if e["name"] == "aten::addmm":
            return 2 * d[1][0] * d[1][1] * d[2][1]
        if e["name"] == "aten::mm":
            return 2 * d[0][0] * d[0][1] * d[1][1]
        if e["name"] == "aten::scaled_dot_product_attention":
            b, h, lq, dq = d[0]
            f = 2 * b * h * lq * d[1][2] * (dq + d[2][3])
            return f // 2 if c[5] == "True" else f
        return None

    cands = [
        e
        for e in ev
        if e.get("cat") == "cpu_op"
        and "Input Dims" in e.get("args", {})
        and e["name"]
        in (
            "aten::linear",
            "aten::addmm",
            "aten::mm",
            "aten::scaled_dot_product_attention",
            "aten::_scaled_dot_product_flash_attention",
            "aten::_flash_attention_forward",
        )
    ]
    total = 0
    for e in cands:
        s, end = e["ts"], e["ts"] + e["dur"]
        if any(
            o is not e and o["tid"] == e["tid"] and o["ts"] <= s and end <= o["ts"] + o["dur"]
            for o in cands
        ):
            continue  # inside another counted op
        if any(a <= s <= b for a, b in step):
            total += count(e) or 0
    return total


@pytest.mark.parametrize(
    "rel",
    [
        "kineto/tracelens/gaunernst_bert-small-uncased__1016001.json.gz",
        "kineto/tracelens/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    ],
)
def test_bf16_fixtures_report_bf16_efficiency_with_coverage(rel: str) -> None:
    from tbdtrace.importers import kineto
    from tbdtrace.trace import from_tables
    from tests.conftest import fixture

    path = fixture(rel)
    tr = from_tables(*kineto.import_files([path]))
    rows = {r["precision"]: r for r in flops.run(tr).to_pylist()}
    r = rows["bf16"]
    assert r["flops"] == _raw_bf16_flops(path) > 0
    assert r["efficiency_wall"] is not None and 0 < r["efficiency_busy"] < 1
    assert r["coverage"] is not None and 0 < r["coverage"] <= 1
    assert "H100 SXM" in r["peak_source"]


def _two_mm_trace(tmp_path: Path):
    """Two FP32 mm ops [64,32]x[32,16]; the first launches a TF32 tensor-core GEMM (by its
    name), the second a SIMT SGEMM, and then a second kernel (a bias add)."""
    mm = json.dumps([[64, 32], [32, 16]])
    tables = {
        "ops": {
            "start_ns": [0, 50 * US],
            "end_ns": [40 * US, 90 * US],
            "name": ["aten::mm"] * 2,
            "pid": [1, 1],
            "tid": [7, 7],
            "input_shapes": [mm, mm],
            "input_dtypes": ['["float","float"]'] * 2,
        },
        "runtime": {
            "start_ns": [10 * US, 60 * US, 70 * US],
            "end_ns": [11 * US, 61 * US, 71 * US],
            "name": ["cudaLaunchKernel"] * 3,
            "pid": [1] * 3,
            "tid": [7] * 3,
            "correlation_id": [1, 2, 3],
        },
        "kernels": {
            "start_ns": [20 * US, 62 * US, 80 * US],
            "end_ns": [30 * US, 78 * US, 82 * US],
            "name": [
                "sm80_xmma_gemm_tf32f32_tf32f32_f32_nn_n",
                "ampere_sgemm_128x64_nn",
                "elementwise_kernel",
            ],
            "device_id": [0] * 3,
            "device_type": ["cuda"] * 3,
            "correlation_id": [1, 2, 3],
        },
        "devices": {
            **H100,
            "name": ["NVIDIA A100-SXM4-80GB"],
            "sm_count": [108],
            "compute_capability_major": [8],
        },
        "steps": {"step": [0], "start_ns": [0], "end_ns": [100 * US], "warmup": [False]},
    }
    return make(tmp_path, tables)


def test_tf32_from_kernel_names_and_fp32_section_rates_fp32_only(tmp_path: Path) -> None:
    from tbdtrace.analysis.passes import fp32

    tr = _two_mm_trace(tmp_path)
    rows = {r["precision"]: r for r in flops.run(tr).to_pylist()}
    f = 2 * 64 * 32 * 16
    assert rows["tf32"]["flops"] == f and rows["fp32"]["flops"] == f
    assert "TF32 by name" in rows["tf32"]["flops_source"]
    assert rows["tf32"]["peak_flops_per_s"] == pytest.approx(156e12)  # A100 datasheet
    # The FP32 figure covers what ran as FP32; the TF32 work is rated in the tf32 row only.
    r = fp32.run(tr).to_pylist()[0]
    assert r["flops"] == f and f"{f} FLOPs on FP32 inputs ran as TF32" in r["flops_source"]


def test_kernel_flops_where_the_op_launched_one_kernel(tmp_path: Path) -> None:
    from tbdtrace.analysis.passes import kernel_flops

    got = kernel_flops.run(_two_mm_trace(tmp_path)).to_pylist()
    # the second mm launched two kernels: its FLOPs are not any one kernel's
    assert [(r["name"], r["precision"], r["kernels"]) for r in got] == [
        ("sm80_xmma_gemm_tf32f32_tf32f32_f32_nn_n", "tf32", 1)
    ]
    r = got[0]
    f = 2 * 64 * 32 * 16
    assert r["flops"] == f and r["total_ns"] == 10 * US
    assert r["achieved_flops_per_s"] == pytest.approx(f / 10e-6)
    assert r["efficiency"] == pytest.approx(f / 10e-6 / 156e12)
    rows = kernel_flops.run(_mixed_trace(tmp_path / "m")).to_pylist()
    assert [x["name"] for x in rows] == [  # longest first; the mm without shapes absent
        "sm90_xmma_gemm_bf16",
        "cudnn::conv_fprop",
        "flash_fwd_kernel",
    ]
    assert rows[1]["flops"] == _CONV_FWD and rows[1]["precision"] == "fp32"


def test_resnet50_v100_trace_without_concrete_inputs_matches_a_per_layer_count() -> None:
    """The 2021 tb_plugin trace (PyTorch 1.9: no ``Concrete Inputs``) of ResNet-50 training
    at batch 32, 224 px, 1000 classes: convolutions are counted from their autograd nodes'
    grad_output shapes and cuDNN's backward children. Expected: steps x the per-layer count
    from torchvision's layer shapes (tests/collector/test_torch_flops.py)."""
    import gzip

    from tbdtrace.importers import kineto
    from tbdtrace.trace import from_tables
    from tests.collector.test_torch_flops import _independent_resnet50_count
    from tests.conftest import fixture

    path = fixture("kineto/kineto_tb_plugin/worker0.1623143089861.pt.trace.json.gz")
    with gzip.open(path) as f:
        ev = json.load(f)["traceEvents"]
    steps = {e["name"] for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")}
    tr = from_tables(*kineto.import_files([path]))
    (r,) = flops.run(tr).to_pylist()
    assert r["precision"] == "fp32" and "V100" in r["peak_source"]
    assert r["flops"] == len(steps) * _independent_resnet50_count(32, 224, 1000)
    assert r["coverage"] > 0.99
