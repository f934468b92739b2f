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

from tbdtrace.analysis.engine import intervals, outputs, shared_arrays, summaries
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
    """``engine.summaries.cpu_utilization`` over this trace's steps."""
    ctx = of(ctx)
    return summaries.cpu_utilization(ctx, steps_pass.run(ctx, config), metric)
