"""Device utilization per step and over the measured window; CPU utilization from samples.

Definitions (docs/METRICS.md): in a window [start, end), ``compute_busy_ns`` = length of
the union of the device's kernel intervals inside it, ``memory_busy_ns`` = the same for
its memcpy and memset intervals, ``busy_ns`` = the union of all three;
each ``*_utilization`` = that busy time / window length. Windows are the measured steps of
the device's rank (steps pass); a device whose rank has no steps gets one row over its
own span (first start to last end of its activity), as in the summary pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace.analysis.engine import intervals, outputs, shared_arrays
from tbdtrace.analysis.engine.context import Source, of
from tbdtrace.analysis.engine.grouping import decode_device_key
from tbdtrace.analysis.engine.intervals import covered_in_merged
from tbdtrace.analysis.passes import steps as steps_pass
from tbdtrace.arrow_ints import int_column

SCHEMA = outputs.UTILIZATION.arrow_schema()  # declared in analysis/engine/outputs.py


def run(ctx: Source, config: steps_pass.StepsConfig | None = None) -> pa.Table:
    """Per device: one row per measured step, then a total row (step null).

    The total row's window is the union of the step windows (or the device span when the
    rank has no steps). Columns: rank, device_type, device_id; step (null on the total
    row); start_ns, end_ns (window bounds), window_ns, compute_busy_ns, memory_busy_ns,
    busy_ns (ns); compute_utilization, memory_utilization, utilization (ratio 0..1, null
    for an empty window).
    """
    ctx = of(ctx)
    win = steps_pass.windows(ctx, config)
    w_rank = int_column(win, "rank")
    w_step, w_s, w_e = (int_column(win, c) for c in ("step", "start_ns", "end_ns"))
    rows: dict[str, list[Any]] = {f.name: [] for f in SCHEMA}
    for key in shared_arrays.device_keys_of(ctx):
        rank, dtype, dev = decode_device_key(key)
        sel = w_rank == (-1 if rank is None else rank)
        kern, mem, allm = (
            shared_arrays.merged_with_cum(ctx, key, w) for w in ("kernels", "memops", "all")
        )
        if sel.any():
            ws, we, st = w_s[sel], w_e[sel], [int(x) for x in w_step[sel]]
        else:
            first, last = shared_arrays.device_span(ctx, key) or (0, 0)
            ws, we, st = np.array([first]), np.array([last]), []
        comp, memb, busy = (covered_in_merged(m[0], m[1], ws, we, m[2]) for m in (kern, mem, allm))
        length = np.maximum(we - ws, 0)
        per_step = [
            (s, int(ws[i]), int(we[i]), int(length[i]), int(comp[i]), int(memb[i]), int(busy[i]))
            for i, s in enumerate(st)
        ]
        # Steps may overlap (several pids per rank); the total uses the union of windows.
        uws, uwe = intervals.merge(ws, we)
        total = (
            None,
            int(ws.min()),
            int(we.max()),
            int((uwe - uws).sum()),
            *(int(covered_in_merged(m[0], m[1], uws, uwe, m[2]).sum()) for m in (kern, mem, allm)),
        )
        for r in [*per_step, total]:
            _append(rows, rank, dtype, dev, r)
    return pa.table(rows, schema=SCHEMA)


def _append(rows: dict[str, list[Any]], rank: Any, dtype: Any, dev: Any, r: tuple) -> None:
    step, s, e, length, comp, mem, busy = r
    vals = {
        "rank": rank,
        "device_type": dtype,
        "device_id": dev,
        "step": step,
        "start_ns": s,
        "end_ns": e,
        "window_ns": length,
        "compute_busy_ns": comp,
        "memory_busy_ns": mem,
        "busy_ns": busy,
        "compute_utilization": comp / length if length else None,
        "memory_utilization": mem / length if length else None,
        "utilization": busy / length if length else None,
    }
    for k, v in vals.items():
        rows[k].append(v)


def cpu(
    ctx: Source, config: steps_pass.StepsConfig | None = None, metric: str = "cpu_util"
) -> dict[str, Any]:
    """CPU utilization from ``host_samples`` (metric cpu_util, index -1 = all cores; with
    ``metric="proc_cpu_cores"``, the captured process tree's CPU use in cores).

    Sample i holds the mean utilization over [ts[i-1], ts[i]]. ``mean``: the
    overlap-weighted mean of the samples over the measured steps (over the sampled time
    when the trace has no steps); ``per_step``: [{step, rank, samples (covering the
    step), mean}]; ratio 0..1. None when no sample covers the window.
    """
    ctx = of(ctx)
    hs = ctx.table("host_samples", ["ts_ns", "metric", "index", "value"])
    if hs.num_rows:
        hs = hs.filter(
            pc.and_(
                pc.equal(hs.column("metric").cast(pa.string()), metric),
                pc.equal(hs.column("index"), -1),
            )
        )
    order = np.argsort(int_column(hs, "ts_ns"), kind="stable")
    ts = int_column(hs, "ts_ns")[order]
    val = np.asarray(hs.column("value").to_numpy(), dtype=np.float64)[order]
    # A cpu_util sample is the mean utilization since the previous sample, so sample i
    # covers [ts[i-1], ts[i]]. A window's utilization is the overlap-weighted mean of
    # the samples covering it: exact for windows shorter than the sampling period too.
    lo, hi, v = ts[:-1], ts[1:], val[1:]
    win = steps_pass.windows(ctx, config)
    ws, we = int_column(win, "start_ns"), int_column(win, "end_ns")
    if not ws.size and ts.size:
        ws, we = ts[:1], ts[-1:]
    per_step = []
    tot_w = tot_wv = 0.0
    for i, (s, e) in enumerate(zip(ws.tolist(), we.tolist(), strict=True)):
        w = np.clip(np.minimum(hi, e) - np.maximum(lo, s), 0, None).astype(np.float64)
        tot_w += float(w.sum())
        tot_wv += float((w * v).sum())
        if i < win.num_rows:
            per_step.append(
                {
                    "rank": win.column("rank")[i].as_py(),
                    "step": int(win.column("step")[i].as_py()),
                    "samples": int((w > 0).sum()),
                    "mean": float((w * v).sum() / w.sum()) if w.sum() else None,
                }
            )
    covering = int(sum(p["samples"] for p in per_step)) if per_step else int(ts.size)
    return {
        "samples": covering,
        "mean": tot_wv / tot_w if tot_w else None,
        "per_step": per_step if ts.size else [],
    }
