"""Hardware FLOP counters, host side: which CUPTI metrics make a FLOP count, and the
config images and counter-data evaluation of CUPTI's Profiler Host API for a chip name
(no GPU needed: ``_native.counter_config`` and friends, ``csrc/collector/counters_host.cpp``).

FLOPs per precision follow Nsight Compute's roofline convention: adds + multiplies + 2 x
fused multiply-adds, each the count of thread-level SASS instructions executed with all
predicates true (``smsp__sass_thread_inst_executed_op_{add,mul,fma}_pred_on.sum`` with
``f`` = FP32, ``d`` = FP64, ``h`` = FP16). Caveats: a packed half2 instruction (HFMA2) is
one thread instruction here, so FP16 FLOPs can be under-counted up to 2x; tensor-core work
is not in these counters at all: ``sm__inst_executed_pipe_tensor.sum`` (warp-level tensor
instructions, not FLOPs) is recorded beside them where the chip has it.

The device side (``csrc/collector/counters_device.cpp``: Range Profiling API, auto range, kernel
replay) writes one counter data image per context into the spool; :func:`join_ranges`
puts each range's FLOPs on its kernel (launch order, names checked). UNVERIFIED: not run on
a GPU yet (docs/COLLECTOR.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tbdtrace.errors import TraceError

# precision -> (add, multiply, fused multiply-add) SASS op names
PRECISIONS: dict[str, tuple[str, str, str]] = {
    "fp64": ("dadd", "dmul", "dfma"),
    "fp32": ("fadd", "fmul", "ffma"),
    "fp16": ("hadd", "hmul", "hfma"),
}
TENSOR_METRIC = "sm__inst_executed_pipe_tensor.sum"


def sass_metric(op: str) -> str:
    return f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum"


def flop_metrics() -> list[str]:
    """The counter metrics a FLOP count needs, precision by precision."""
    return [sass_metric(op) for ops in PRECISIONS.values() for op in ops]


def flops_from_counters(values: Mapping[str, float]) -> dict[str, float]:
    """FLOPs per precision (and ``total``) from metric values; a missing metric counts 0."""
    out: dict[str, float] = {}
    for prec, (add, mul, fma) in PRECISIONS.items():
        out[prec] = (
            values.get(sass_metric(add), 0.0)
            + values.get(sass_metric(mul), 0.0)
            + 2.0 * values.get(sass_metric(fma), 0.0)
        )
    out["total"] = sum(out[p] for p in PRECISIONS)
    return out


@dataclass(frozen=True)
class CounterPlan:
    chip: str  # CUPTI chip name, e.g. GH100
    metrics: tuple[str, ...]  # in the order the counter data holds them
    config_image: bytes  # for cuptiRangeProfilerSetConfig
    passes: int  # replay passes the metrics need on this chip (1: no multi-pass replay)


def _native() -> Any:
    from tbdtrace.collector.native import native

    return native()


def _call(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except RuntimeError as e:  # csrc/collector/counters_host.cpp: one line naming chip and metric
        raise TraceError(f"hardware counters: {e}") from None


def chips() -> list[str]:
    """Chip names this CUPTI's host API knows."""
    return list(_call(_native().profiler_chips))


def plan(chip: str, tensor: bool = True) -> CounterPlan:
    """Config image for the FLOP metrics on ``chip`` (plus the tensor-pipe metric when the
    chip has it and ``tensor``); TraceError (one line) for an unknown chip."""
    metrics = flop_metrics()
    n = _native()
    if tensor:
        try:
            n.counter_config(chip, [TENSOR_METRIC])
            metrics.append(TENSOR_METRIC)
        except RuntimeError:
            pass  # the chip (or an unknown chip, reported below) lacks it
    image, passes = _call(n.counter_config, chip, metrics)
    return CounterPlan(chip, tuple(metrics), bytes(image), int(passes))


def metric_properties(chip: str, metrics: Sequence[str]) -> list[dict[str, Any]]:
    """Description, hardware unit, dimension and type of each metric on ``chip``."""
    return list(_call(_native().counter_metric_properties, chip, list(metrics)))


def decode(
    chip: str, counter_data: bytes, metrics: Sequence[str]
) -> list[tuple[str, dict[str, float]]]:
    """(range name, {metric: value}) per range of a counter data image recorded by the
    Range Profiling API for these metrics. Only pass images CUPTI wrote (carried in a
    CRC-checked container): libcupti 13.0 does not validate the image and may crash on
    arbitrary bytes."""
    ranges = _call(_native().evaluate_counter_data, chip, counter_data, list(metrics))
    return [(name, dict(zip(metrics, vals, strict=True))) for name, vals in ranges]


def join_ranges(
    names: Sequence[str], mangled: Sequence[str], ranges: Sequence[tuple[str, Mapping[str, float]]]
) -> tuple[list[float] | None, str]:
    """Per-kernel FP32 FLOPs from auto ranges (what ``kernels.flops`` holds: the fp32 pass
    reads it as TBD's FP32 count), or (None, why not).

    ``names``/``mangled``: one context's kernels in launch order (correlation id order: kernel
    replay serializes kernels, so ranges come in the same order). The join is made only when
    there are as many ranges as kernels and each range is named like its kernel (either
    name); anything else is refused rather than guessed.
    """
    if len(ranges) != len(names):
        return None, f"{len(ranges)} counter ranges for {len(names)} kernels"
    out: list[float] = []
    for i, (rname, vals) in enumerate(ranges):
        if rname not in (names[i], mangled[i]):
            return None, f"range {i} is {rname!r} but kernel {i} is {names[i]!r}"
        out.append(flops_from_counters(vals)["fp32"])
    return out, "joined"


__all__ = [
    "PRECISIONS",
    "TENSOR_METRIC",
    "CounterPlan",
    "chips",
    "decode",
    "flop_metrics",
    "flops_from_counters",
    "join_ranges",
    "metric_properties",
    "plan",
    "sass_metric",
]
