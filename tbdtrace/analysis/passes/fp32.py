"""FP32 efficiency: achieved FLOP/s over the measured steps / peak FP32 FLOP/s.

Per rank (docs/METRICS.md, "FP32"): the window and the FLOPs are the fp32 row of the
``flops`` pass (:func:`tbdtrace.analysis.passes.flops.fp32_flops`: hardware counters, else framework
counts and analytic formulas of matmul, convolution and attention ops whose inputs are
FP32 and did not run as TF32); else null with a reason. Achieved = FLOPs / window
(``*_wall``) and FLOPs / device compute-busy time in the window (``*_busy``). Peak = sum
over the rank's devices
(those that ran kernels) of GPU: SMs x FP32 lanes/SM x 2 x clock, CPU: cores x SIMD
lanes x FMA units x 2 x clock from the capture's CPU description in meta.
"""

from __future__ import annotations

import pyarrow as pa

from tbdtrace.analysis.engine import outputs, shared_arrays
from tbdtrace.analysis.engine.context import AnalysisContext, Source, of
from tbdtrace.analysis.engine.grouping import decode_device_key
from tbdtrace.analysis.engine.peaks import (
    DeviceProps,
    cpu_fp32_peak,
    device_props,
    gpu_fp32_peak,
    label,
)
from tbdtrace.analysis.passes import flops as flops_mod
from tbdtrace.analysis.passes import steps as steps_pass

SCHEMA = outputs.FP32.arrow_schema()  # declared in analysis/engine/outputs.py


def run(ctx: Source, config: steps_pass.StepsConfig | None = None) -> pa.Table:
    """One row per rank that ran kernels. Columns: rank; devices (names); window_ns,
    busy_ns (ns); flops (count, null when unknown); flops_source (or the reason there are
    none); achieved_flops_per_s_wall/_busy (FLOP/s); peak_flops_per_s (FLOP/s, null when
    unknown); peak_source (every factor's source, or the reason); efficiency_wall/_busy
    (ratio 0..1)."""
    ctx = of(ctx)
    by_rank = shared_arrays.devices_by_rank(ctx)
    if not by_rank:
        return SCHEMA.empty_table()
    props = device_props(ctx)
    rows = []
    for r, rkeys in sorted(by_rank.items()):
        w = flops_mod.measured_window(ctx, r, rkeys, config)
        window = w.length_ns
        busy = flops_mod.compute_busy_ns(ctx, rkeys)  # the flops section's busy time
        flops, fsrc = flops_mod.fp32_flops(ctx, r, rkeys, config)
        peak, psrc, names = _peak(ctx, props, rkeys)
        wall = flops * 1e9 / window if flops is not None and window else None
        bz = flops * 1e9 / busy if flops is not None and busy else None
        rows.append(
            {
                "rank": None if r < 0 else r,
                "devices": names,
                "window_ns": window,
                "busy_ns": busy,
                "flops": flops,
                "flops_source": fsrc,
                "achieved_flops_per_s_wall": wall,
                "achieved_flops_per_s_busy": bz,
                "peak_flops_per_s": peak,
                "peak_source": psrc,
                "efficiency_wall": wall / peak if wall is not None and peak else None,
                "efficiency_busy": bz / peak if bz is not None and peak else None,
            }
        )
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _peak(
    ctx: AnalysisContext, props: DeviceProps, keys: list[int]
) -> tuple[float | None, str, str]:
    total, srcs, names = 0.0, [], []
    for key in keys:
        _, dtype, dev = decode_device_key(key)
        d = props.get(key)
        names.append(label(props, key))
        if dtype == "cpu":
            p, src = cpu_fp32_peak(ctx.meta)
        elif d is None:
            p, src = None, f"device {dtype}:{dev} not described in the trace"
        else:
            p, src = gpu_fp32_peak(d)
        if p is None:
            return None, src, ", ".join(names)
        total += p
        srcs.append(src)
    uniq = list(dict.fromkeys(srcs))
    return (
        total,
        "; ".join(uniq) + (f" (sum over {len(keys)} devices)" if len(keys) > 1 else ""),
        ", ".join(dict.fromkeys(names)),
    )
