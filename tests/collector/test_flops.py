"""Hardware FLOP counters, host side, through libcupti 13.0's Profiler Host API (no GPU
needed; skipped when this libcupti cannot answer without a driver, as newer ones)."""

from __future__ import annotations

import pytest

from tbdtrace import _native
from tbdtrace.collector import flops
from tbdtrace.errors import TraceError

pytestmark = pytest.mark.skipif(
    _native.cupti_version() <= 0, reason="this libcupti does not answer without a driver"
)

FP32 = [f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in ("fadd", "fmul", "ffma")]


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
