"""FP32 efficiency: achieved FLOP/s over the measured steps / peak FP32 FLOP/s.

Per rank (docs/METRICS.md, "FP32"): the window and the FLOPs are the fp32 row of the
``flops`` pass (:func:`tbdtrace.passes.flops.fp32_flops`: hardware counters, else framework
counts and analytic formulas of matmul, convolution and attention ops whose inputs are
FP32 and did not run as TF32); else null with a reason. Achieved = FLOPs / window
(``*_wall``) and FLOPs / device compute-busy time in the window (``*_busy``). Peak = sum
over the rank's devices
(those that ran kernels) of GPU: SMs x FP32 lanes/SM x 2 x clock, CPU: cores x SIMD
lanes x FMA units x 2 x clock from the capture's CPU description in meta.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from tbdtrace.passes import flops as flops_mod
from tbdtrace.passes import outputs, shared_arrays
from tbdtrace.passes import steps as steps_pass
from tbdtrace.passes.device_peaks import device_props, gpu_fp32_peak
from tbdtrace.passes.grouping import decode_device_key
from tbdtrace.trace import Trace

SCHEMA = outputs.FP32.arrow_schema()  # declared in passes/outputs.py

# SIMD FP32 lanes by the widest vector extension in /proc/cpuinfo flags.
_SIMD = (("avx512f", 16), ("avx2", 8), ("avx", 8), ("asimd", 4), ("neon", 4), ("sse2", 4))


def run(trace: Trace, config: steps_pass.StepsConfig | None = None) -> pa.Table:
    """One row per rank that ran kernels. Columns: rank; devices (names); window_ns,
    busy_ns (ns); flops (count, null when unknown); flops_source (or the reason there are
    none); achieved_flops_per_s_wall/_busy (FLOP/s); peak_flops_per_s (FLOP/s, null when
    unknown); peak_source (every factor's source, or the reason); efficiency_wall/_busy
    (ratio 0..1)."""
    keys = shared_arrays.device_keys_of(trace, ("kernels",))
    if not keys:
        return SCHEMA.empty_table()
    props = device_props(trace)
    by_rank: dict[int, list[int]] = {}
    for key in keys:
        rank = decode_device_key(key)[0]
        by_rank.setdefault(-1 if rank is None else rank, []).append(key)
    rows = []
    for r, rkeys in sorted(by_rank.items()):
        w = flops_mod.measured_window(trace, r, rkeys, config)
        window = w.length_ns
        busy = flops_mod.compute_busy_ns(trace, rkeys)  # the flops section's busy time
        flops, fsrc = flops_mod.fp32_flops(trace, r, rkeys, config)
        peak, psrc, names = _peak(trace, props, rkeys)
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
    trace: Trace, props: dict[int, dict[str, Any]], keys: list[int]
) -> tuple[float | None, str, str]:
    total, srcs, names = 0.0, [], []
    for key in keys:
        _, dtype, dev = decode_device_key(key)
        d = props.get(key)
        if dtype == "cpu":
            p, src = cpu_fp32_peak(trace.meta)
            names.append(f"cpu:{dev}")
        elif d is None:
            p, src = None, f"device {dtype}:{dev} not described in the trace"
            names.append(f"{dtype}:{dev}")
        else:
            p, src = gpu_fp32_peak(d)
            names.append(str(d.get("name")))
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


def cpu_fp32_peak(meta: dict[str, Any]) -> tuple[float | None, str]:
    """Peak FP32 FLOP/s of the capture host from ``meta.extra.cpu`` ({cores, flags, mhz}).

    cores x SIMD lanes (widest of avx512f 16, avx2/avx 8, asimd/neon/sse2 4) x FMA units
    (2 with the ``fma`` or ``asimd`` flag, an assumption: current x86 and Arm server
    cores have two FMA pipes; else 1) x 2 x clock (MHz as /proc/cpuinfo gives it).
    """
    cpu = (meta.get("extra") or {}).get("cpu") or meta.get("cpu") or {}
    cores, mhz = cpu.get("cores") or cpu.get("physical_cores"), cpu.get("mhz") or cpu.get("max_mhz")
    flags = cpu.get("flags") or []
    flags = set(flags.split() if isinstance(flags, str) else flags)
    if not cores or not mhz or not flags:
        return None, (
            "CPU peak unknown: the trace has no CPU description (cores, flags, "
            "clock from /proc/cpuinfo) in meta.extra.cpu"
        )
    lanes = next((n for f, n in _SIMD if f in flags), 1)
    fma = 2 if ("fma" in flags or "asimd" in flags) else 1
    peak = float(cores) * lanes * fma * 2 * float(mhz) * 1e6
    return peak, (
        f"{cores} cores x {lanes} FP32 SIMD lanes x {fma} FMA units (assumed) x 2 "
        f"x {mhz} MHz (meta.extra.cpu, from /proc/cpuinfo at capture)"
    )
