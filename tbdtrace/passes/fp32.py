"""FP32 efficiency: achieved FLOP/s over the measured steps / peak FP32 FLOP/s.

Per rank (docs/METRICS.md, "FP32"): the window is the union of the rank's measured steps
(else the span of its kernels). FLOPs come from, in order: hardware counters
(``kernels.flops``, per-kernel counts) of kernels starting in the window; the profiler's op counts
(``ops.flops``); analytic shape formulas (:mod:`tbdtrace.passes.flops`) of ops starting in
the window; else null with a reason. Achieved = FLOPs / window (``*_wall``) and FLOPs /
device compute-busy time in the window (``*_busy``). Peak = sum over the rank's devices
(those that ran kernels) of GPU: SMs x FP32 lanes/SM x 2 x clock, CPU: cores x SIMD
lanes x FMA units x 2 x clock from the capture's CPU description in meta.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace import intervals
from tbdtrace.passes import _frame
from tbdtrace.passes import flops as flops_mod
from tbdtrace.passes import steps as steps_pass
from tbdtrace.passes._devices import device_props, gpu_fp32_peak
from tbdtrace.passes._intervals_ext import covered_in_merged
from tbdtrace.passes._util import decode_device_key, int_column
from tbdtrace.trace import Trace

SCHEMA = pa.schema(
    [
        ("rank", pa.int32()),
        ("devices", pa.string()),
        ("window_ns", pa.int64()),
        ("busy_ns", pa.int64()),
        ("flops", pa.int64()),
        ("flops_source", pa.string()),
        ("achieved_flops_per_s_wall", pa.float64()),
        ("achieved_flops_per_s_busy", pa.float64()),
        ("peak_flops_per_s", pa.float64()),
        ("peak_source", pa.string()),
        ("efficiency_wall", pa.float64()),
        ("efficiency_busy", pa.float64()),
    ]
)

# SIMD FP32 lanes by the widest vector extension in /proc/cpuinfo flags.
_SIMD = (("avx512f", 16), ("avx2", 8), ("avx", 8), ("asimd", 4), ("neon", 4), ("sse2", 4))


def in_windows(t: np.ndarray, ms: np.ndarray, me: np.ndarray) -> np.ndarray:
    """Mask of times inside the sorted disjoint windows [ms, me]."""
    i = np.searchsorted(ms, t, side="right") - 1
    ic = np.clip(i, 0, None)
    return (i >= 0) & (t <= me[ic]) if ms.size else np.zeros(t.size, dtype=bool)


def run(trace: Trace, config: steps_pass.StepsConfig | None = None) -> pa.Table:
    """One row per rank that ran kernels. Columns: rank; devices (names); window_ns,
    busy_ns (ns); flops (count, null when unknown); flops_source (or the reason there are
    none); achieved_flops_per_s_wall/_busy (FLOP/s); peak_flops_per_s (FLOP/s, null when
    unknown); peak_source (every factor's source, or the reason); efficiency_wall/_busy
    (ratio 0..1)."""
    keys = _frame.device_keys_of(trace, ("kernels",))
    if not keys:
        return SCHEMA.empty_table()
    ops = trace.table(
        "ops",
        [
            "start_ns",
            "end_ns",
            "pid",
            "tid",
            "rank",
            "name",
            "input_shapes",
            "input_dtypes",
            "flops",
        ],
    )
    win = steps_pass.windows(trace, config)
    props = device_props(trace)
    by_rank: dict[int, list[int]] = {}
    for key in keys:
        rank = decode_device_key(key)[0]
        by_rank.setdefault(-1 if rank is None else rank, []).append(key)
    rows = []
    for r, rkeys in sorted(by_rank.items()):
        wsel = int_column(win, "rank") == r
        if wsel.any():
            ms, me = intervals.merge(
                int_column(win, "start_ns")[wsel], int_column(win, "end_ns")[wsel]
            )
        else:
            ks = [_frame.spans(trace, "kernels", d) for d in rkeys]
            ms = np.array([min(int(s.min()) for s, _ in ks)])
            me = np.array([max(int(e.max()) for _, e in ks)])
        window = int((me - ms).sum())
        busy = 0
        for d in rkeys:
            kms, kme, cum = _frame.merged_with_cum(trace, d, "kernels")
            busy += int(covered_in_merged(kms, kme, ms, me, cum).sum())
        flops, fsrc = _flops(trace, rkeys, ops, r, ms, me)
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


def _flops(
    trace: Trace, keys: list[int], ops: pa.Table, rank: int, ms: np.ndarray, me: np.ndarray
) -> tuple[int | None, str]:
    if trace.column("kernels", "flops").null_count < trace.num_rows("kernels"):
        kf = _frame.ints(trace, "kernels", "flops")
        ks = _frame.ints(trace, "kernels", "start_ns")
        total, any_counted = 0, False
        for d in keys:
            rows = _frame.rows_of(trace, "kernels", d)
            f = kf[rows]
            kin = in_windows(ks[rows], ms, me) & (f >= 0)
            if kin.any():
                any_counted = True
                total += int(f[kin].sum())
        if any_counted:
            return total, "per-kernel counts (kernels.flops)"
    osel = (int_column(ops, "rank") == rank) & in_windows(int_column(ops, "start_ns"), ms, me)
    sub = ops.filter(pa.array(osel))
    f, counted = flops_mod.op_flops(sub)
    if counted.any():
        return int(f.sum()), "profiler op counts (ops.flops, leaf ops)"
    f, counted = flops_mod.analytic_flops(sub)
    if counted.any():
        return int(f.sum()), (
            "analytic: FP32 matmul-family shape formulas (ops.input_shapes); "
            "convolutions and other ops not counted"
        )
    return None, (
        "no FLOP source: no kernels.flops, no ops.flops, no matmul shapes "
        "(record shapes or FLOPs at capture)"
    )


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
