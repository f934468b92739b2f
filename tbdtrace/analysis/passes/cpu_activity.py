"""CPU activity from profiled operators, per thread.

Definitions (docs/METRICS.md, "CPU activity"): over the ``ops`` rows of one (rank, pid,
tid), ``op_count`` is their number, ``span_ns`` = last end - first start and ``busy_ns``
= length of the union of their intervals (nested ops, e.g. aten::linear inside a module
call, count once). ``busy_ratio`` = busy / span. A trace with CPU ops and no GPU rows (a
CPU-only PyTorch profile, or one where the device side was not recorded) is described by
this pass instead of the per-device summary.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace.analysis.engine import intervals, outputs
from tbdtrace.analysis.engine.context import Source, of
from tbdtrace.arrow_ints import int_column

_NULL = -(2**62)  # stands for a null rank/pid/tid while grouping
_SCHEMA = outputs.CPU_ACTIVITY.arrow_schema()  # declared in analysis/engine/outputs.py


def run(ctx: Source, config: None = None) -> pa.Table:
    """Per-thread table, busiest first.

    Columns: rank, pid, tid, op_count, span_ns, busy_ns (ns), busy_ratio (0..1; null
    when the span is 0).
    """
    ctx = of(ctx)
    ops = ctx.table("ops", ["rank", "pid", "tid", "start_ns", "end_ns"])
    if ops.num_rows == 0:
        return _SCHEMA.empty_table()
    # Nulls become a value no real id takes, so they group together.
    fill = {c: int_column(ops, c, _NULL) for c in ("rank", "pid", "tid")}
    start, end = int_column(ops, "start_ns"), int_column(ops, "end_ns")
    # Threads in (rank, pid, tid) order, each one run of rows of one stable sort (a
    # boolean mask per thread and np.unique(axis=0) cost ~50 ms on 200k ops).
    order = np.lexsort((fill["tid"], fill["pid"], fill["rank"]))
    key = np.stack([fill["rank"][order], fill["pid"][order], fill["tid"][order]])
    cuts = np.flatnonzero((key[:, 1:] != key[:, :-1]).any(axis=0)) + 1
    bounds = np.concatenate([[0], cuts, [order.size]])
    start, end = start[order], end[order]
    rows: dict[str, list[Any]] = {n: [] for n in _SCHEMA.names}
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        s, e = start[lo:hi], end[lo:hi]
        span = intervals.span(s, e)
        busy = intervals.union_length(s, e)
        for name, v in zip(("rank", "pid", "tid"), key[:, lo].tolist(), strict=True):
            rows[name].append(None if v == _NULL else int(v))
        rows["op_count"].append(hi - lo)
        rows["span_ns"].append(span)
        rows["busy_ns"].append(busy)
        rows["busy_ratio"].append(busy / span if span else None)
    tbl = pa.table(rows, schema=_SCHEMA)
    return tbl.sort_by([("busy_ns", "descending"), ("tid", "ascending")])
