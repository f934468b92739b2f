"""Hardware FLOP counters, host side, through libcupti 13.0's Profiler Host API (no GPU
needed; skipped when this libcupti cannot answer without a driver, as newer ones)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tbdtrace import _native
from tbdtrace import _native_testing as nt
from tbdtrace.collector import flops, merge, spool
from tbdtrace.collector.cupti_backend import Backend, CuptiConfig
from tbdtrace.collector.strategies import Injection, command_env
from tbdtrace.errors import TraceError

pytestmark = pytest.mark.skipif(
    _native.cupti_version() <= 0, reason="this libcupti does not answer without a driver"
)

FP32 = [f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in ("fadd", "fmul", "ffma")]
FP64 = "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum"


def test_flop_formula_is_adds_plus_muls_plus_twice_fmas() -> None:
    vals = {m: v for m, v in zip(flops.flop_metrics(), range(1, 10), strict=True)}
    # metric order: dadd dmul dfma fadd fmul ffma hadd hmul hfma = 1..9
    got = flops.flops_from_counters(vals)
    assert got == {
        "fp64": 1 + 2 + 2 * 3,
        "fp32": 4 + 5 + 2 * 6,
        "fp16": 7 + 8 + 2 * 9,
        "total": 9 + 21 + 33,
    }
    assert flops.flops_from_counters({FP32[2]: 1e9})["fp32"] == 2e9  # 1e9 FFMA = 2 GFLOP


def test_known_chips_include_the_ones_the_gpu_check_may_meet() -> None:
    assert {"GV100", "TU102", "GA100", "GH100", "AD102", "GB100"} <= set(flops.chips())


def test_fp32_metrics_are_thread_instruction_counters_on_hopper() -> None:
    props = flops.metric_properties("GH100", FP32)
    assert [p["name"] for p in props] == FP32
    for p, op in zip(props, ("FADD", "FMUL", "FFMA"), strict=True):
        assert p["hw_unit"] == "smsp" and p["dim_unit"] == "instruction" and p["type"] == 0
        assert op in p["description"] and "predicates were true" in p["description"]


@pytest.mark.parametrize("chip", ["GV100", "TU102", "GA100", "GH100", "AD102", "GB100"])
def test_plan_passes_per_chip(chip: str) -> None:
    # The nine SASS counters fit one pass; the tensor-pipe counter needs a second (kernel
    # replay runs each kernel twice then). Figures from libcupti 13.0.85's host API.
    p = flops.plan(chip, tensor=False)
    assert p.chip == chip and p.passes == 1
    assert p.metrics == tuple(flops.flop_metrics())
    assert len(p.config_image) > 100
    assert flops.plan(chip, tensor=False).config_image == p.config_image  # deterministic
    with_tensor = flops.plan(chip)
    assert with_tensor.metrics == (*flops.flop_metrics(), flops.TENSOR_METRIC)
    assert with_tensor.passes == 2


def test_tensor_metric_is_added_where_the_chip_has_it() -> None:
    assert flops.TENSOR_METRIC in flops.plan("GH100").metrics
    assert flops.TENSOR_METRIC not in flops.plan("GH100", tensor=False).metrics


def test_bad_chip_and_metric_are_one_line_errors() -> None:
    with pytest.raises(TraceError, match=r"chip 'XX999' is not known to this CUPTI .*GH100"):
        flops.plan("XX999")
    with pytest.raises(TraceError, match=r"metric 'no_such__metric.sum' on GH100"):
        flops.metric_properties("GH100", ["no_such__metric.sum"])
    with pytest.raises(TraceError, match="counter data image is empty"):
        flops.decode("GH100", b"", FP32)


def _vals(fadd: float, fmul: float, ffma: float) -> dict[str, float]:
    return dict(zip(FP32, (fadd, fmul, ffma), strict=True))


def test_join_ranges_by_launch_order_and_name() -> None:
    names, mangled = ["gemm", "relu"], ["_Z4gemmv", "_Z4reluv"]
    vals, why = flops.join_ranges(
        names, mangled, [("_Z4gemmv", _vals(1, 2, 3)), ("relu", {**_vals(0, 5, 0), FP64: 9.0})]
    )
    assert why == "joined" and vals == [1 + 2 + 2 * 3, 5]  # FP32 only: FP64 is not in it
    vals, why = flops.join_ranges(names, mangled, [("_Z4gemmv", _vals(1, 2, 3))])
    assert vals is None and why == "1 counter ranges for 2 kernels"
    vals, why = flops.join_ranges(names, mangled, [("relu", {}), ("gemm", {})])
    assert vals is None and why == "range 0 is 'relu' but kernel 0 is 'gemm'"


def test_counters_chunk_round_trip(tmp_path: Path) -> None:
    image = bytes(range(256)) * 3 + b"\x07"  # 769 bytes: the payload pads to 8
    p = tmp_path / "c.tbds"
    assert nt.write_counters_spool(str(p), 9, "GH100", FP32, 3, 2, image)
    sp = spool.read(p)
    assert sp.truncated_bytes == 0 and sp.counters == [
        {"chip": "GH100", "metrics": FP32, "context_id": 3, "dropped_ranges": 2, "image": image}
    ]


def _kernel(i: int, ctx: int, name: str) -> bytes:
    fields: dict[str, int | str] = {"start": 10 * i, "end": 10 * i + 5, "correlationId": i}
    fields.update(contextId=ctx, name=name)
    return nt.test_record("kernel", fields)


def test_merge_fills_kernel_flops_from_counter_ranges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Context 1 launches gemm, relu, gemm (correlation ids 3, 1, 2 written out of order);
    # context 2's single kernel has a range count that does not match: left null.
    recs = [_kernel(3, 1, "gemm"), _kernel(1, 1, "gemm"), _kernel(2, 1, "relu")]
    recs.append(_kernel(4, 2, "gemm"))
    nt.write_spool(str(tmp_path / "k.tbds"), recs, 9)
    nt.write_counters_spool(str(tmp_path / "c1.tbds"), 9, "GH100", FP32, 1, 0, b"img1")
    nt.write_counters_spool(str(tmp_path / "c2.tbds"), 9, "GH100", FP32, 2, 0, b"img2")
    sp = spool.read(tmp_path / "k.tbds")
    sp.counters = (
        spool.read(tmp_path / "c1.tbds").counters + spool.read(tmp_path / "c2.tbds").counters
    )
    # What CUPTI's host API would decode from each image (the CUPTI seam).
    decoded = {
        b"img1": [("gemm", _vals(0, 0, 100)), ("relu", _vals(0, 7, 0)), ("gemm", _vals(1, 1, 1))],
        b"img2": [],
    }
    monkeypatch.setattr(flops, "decode", lambda chip, image, metrics: decoded[image])
    tables, meta = merge.merge([sp])
    k = tables["kernels"]
    got = dict(zip(k["correlation_id"].to_pylist(), k["flops"].to_pylist(), strict=True))
    assert got == {1: 200, 2: 7, 3: 4, 4: None}
    summary = {c["context_id"]: c for c in meta["extra"]["counters"]}
    assert summary[1]["joined"] and summary[1]["flops_by_precision"]["fp32"] == 211
    assert not summary[2]["joined"] and summary[2]["reason"] == "0 counter ranges for 1 kernels"


@pytest.mark.heavy
def test_counters_flag_needs_the_cupti_backend(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "tbdtrace", "capture", "--backend", "torch", "--counters"]
    r = subprocess.run(
        [*cmd, "flops", "-o", str(tmp_path / "t"), "--", "true"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "tbdtrace capture: --counters needs the cupti backend (this run: torch); "
        "add --backend cupti on a machine with a GPU"
    ]
    h = subprocess.run(
        [sys.executable, "-m", "tbdtrace", "capture", "--help"], capture_output=True, text=True
    )
    assert "kernel replay serializes kernels" in " ".join(h.stdout.split())


def test_counters_reach_the_injection_library_settings(tmp_path: Path) -> None:
    env = command_env(Injection(CuptiConfig(counters="flops")), tmp_path, None)
    assert env["TBDTRACE_COUNTER_METRICS"].split(",") == flops.flop_metrics()
    plain = command_env(Injection(CuptiConfig()), tmp_path, None)
    assert "TBDTRACE_COUNTER_METRICS" not in plain
    with pytest.raises(TraceError, match="need a capture of a command"):
        Backend(CuptiConfig(counters="flops")).start()
