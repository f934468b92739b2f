"""Achieved FLOP/s per kernel name, where a kernel's FLOPs are known on their own.

A kernel has its own FLOPs when the counted op it was launched from (see
:mod:`tbdtrace.analysis.passes.flops`: joined by time on the launching thread) launched no other
kernel in the window: the op's FLOPs are then the kernel's. Kernels with hardware counts
(``kernels.flops``) use those. Per rank, kernel name and precision: kernels, FLOPs,
total_ns, achieved FLOP/s over the kernels' own time, and the efficiency against the
precision's peak (docs/METRICS.md, "flops").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace.analysis.engine import flop_formulas as ff
from tbdtrace.analysis.engine import outputs, shared_arrays
from tbdtrace.analysis.engine.context import AnalysisContext, Source, of
from tbdtrace.analysis.engine.op_flops import op_counts
from tbdtrace.analysis.engine.peaks import DeviceProps, device_props
from tbdtrace.analysis.passes import flops

SCHEMA = outputs.KERNEL_FLOPS.arrow_schema()  # declared in analysis/engine/outputs.py


def run(ctx: Source, config: flops.FlopsConfig | None = None) -> pa.Table:
    """One row per (rank, kernel name, precision) with known FLOPs, longest total first
    within a rank. Columns: rank; name; precision; kernels (count); flops (count);
    total_ns (ns); achieved_flops_per_s = flops / total_ns (FLOP/s); peak_flops_per_s
    (the rank's devices' peak, FLOP/s); efficiency (0..1); source."""
    ctx = of(ctx)
    cfg = config or flops.FlopsConfig()
    by_rank = shared_arrays.devices_by_rank(ctx)
    props = device_props(ctx)
    rows: list[dict[str, Any]] = []
    for r, rkeys in sorted(by_rank.items()):
        rows.extend(_rank(ctx, cfg, r, rkeys, props))
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _rank(
    ctx: AnalysisContext, cfg: flops.FlopsConfig, r: int, rkeys: list[int], props: DeviceProps
) -> list[dict[str, Any]]:
    w = flops.measured_window(ctx, r, rkeys, cfg.steps)
    k = flops.kernels_in(ctx, rkeys, w)
    oc = op_counts(ctx)
    op_prec = flops.op_precisions(ctx)
    launcher = flops.launching_counted_op(ctx, k.rows)
    has_hw = bool(k.rows.size) and shared_arrays.has_values(ctx, "kernels", "flops")
    if not has_hw and not (launcher >= 0).any():
        return []  # no FLOPs from counters or from launching ops: no row is known
    prec = np.full(k.rows.size, -1, dtype=np.int64)
    if op_prec.size:
        prec = np.where(launcher >= 0, op_prec[np.clip(launcher, 0, None)], -1)
    if has_hw:
        hw = shared_arrays.ints(ctx, "kernels", "flops")[k.rows]
    else:  # no counter values: not a kept int64 copy of an all-null column (80 MB at 10M)
        hw = np.full(k.rows.size, -1, dtype=np.int64)
    if (hw >= 0).any():
        f, known, source = hw, hw >= 0, "hardware counters (kernels.flops)"
    else:
        ok = launcher >= 0
        counts = np.bincount(launcher[ok]) if ok.any() else np.zeros(0, np.int64)
        known = ok & (counts[np.clip(launcher, 0, None)] == 1) if ok.any() else ok
        f = hw
        if ok.any():
            f = np.full(launcher.size, -1, dtype=np.int64)
            f[known] = oc.flops_of(launcher[known])
        source = "the launching op's FLOPs (an op that launched this kernel only)"
    if not known.any():
        return []
    codes, labels = shared_arrays.codes(ctx, "kernels", "name")
    kc = codes[k.rows][known]
    pk = prec[known]
    key = kc * (len(ff.PRECISIONS) + 1) + (pk + 1)
    uniq, inv = np.unique(key, return_inverse=True)
    n = np.bincount(inv, minlength=uniq.size)
    fl = np.zeros(uniq.size, dtype=np.int64)
    np.add.at(fl, inv, f[known])
    ns = np.zeros(uniq.size, dtype=np.int64)
    np.add.at(ns, inv, k.dur[known])
    out = []
    for j in np.argsort(-ns, kind="stable").tolist():
        code, pi = divmod(int(uniq[j]), len(ff.PRECISIONS) + 1)
        p = ff.PRECISIONS[pi - 1] if pi else "unknown"
        peak, _ = flops.device_peak(ctx, props, rkeys, p)
        rate = int(fl[j]) * 1e9 / int(ns[j]) if ns[j] else None
        out.append(
            {
                "rank": None if r < 0 else r,
                "name": labels[code],
                "precision": p,
                "kernels": int(n[j]),
                "flops": int(fl[j]),
                "total_ns": int(ns[j]),
                "achieved_flops_per_s": rate,
                "peak_flops_per_s": peak,
                "efficiency": rate / peak if rate is not None and peak else None,
                "source": source,
            }
        )
    return out
