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
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace.analysis.engine import intervals, outputs
from tbdtrace.analysis.engine.context import Source, of
from tbdtrace.analysis.engine.grouping import dense_codes
from tbdtrace.arrow_ints import int_column

I64 = npt.NDArray[np.int64]
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
    order, key, bounds = _threads(fill["rank"], fill["pid"], fill["tid"])
    start, end = start[order], end[order]
    rows: dict[str, list[Any]] = {n: [] for n in _SCHEMA.names}
    for i, (lo, hi) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)):
        s, e = start[lo:hi], end[lo:hi]
        span = intervals.span(s, e)
        busy = intervals.union_length(s, e)
        for name, v in zip(("rank", "pid", "tid"), key[:, i].tolist(), strict=True):
            rows[name].append(None if v == _NULL else int(v))
        rows["op_count"].append(hi - lo)
        rows["span_ns"].append(span)
        rows["busy_ns"].append(busy)
        rows["busy_ratio"].append(busy / span if span else None)
    tbl = pa.table(rows, schema=_SCHEMA)
    return tbl.sort_by([("busy_ns", "descending"), ("tid", "ascending")])


def _threads(rank: I64, pid: I64, tid: I64) -> tuple[I64, I64, I64]:
    """(row order: rows by (rank, pid, tid), stable; each thread's key, 3 x threads, in
    that order; the bounds of each thread's run of rows).

    The rows are grouped by hashing (linear) and put in order by a counting sort of the
    threads' ranks, the few threads sorted by their keys; a lexsort of three row-sized
    columns took ~0.4 s on 3M ops. Ids too many to pack fall back to the lexsort."""
    codes, values = zip(*(dense_codes(c) for c in (rank, pid, tid)), strict=True)
    widths = [len(v) for v in values]
    if widths[0] * widths[1] * widths[2] >= 1 << 62:
        order = np.lexsort((tid, pid, rank))
        key = np.stack([rank[order], pid[order], tid[order]])
        cuts = np.flatnonzero((key[:, 1:] != key[:, :-1]).any(axis=0)) + 1
        bounds = np.concatenate([[0], cuts, [order.size]])
        return order, key[:, bounds[:-1]], bounds
    packed = (codes[0] * widths[1] + codes[1]) * widths[2] + codes[2]
    group, ukeys = dense_codes(packed)
    # Each thread's (rank, pid, tid) from its packed key; threads in key order.
    t_key = np.stack(
        [
            values[0][ukeys // (widths[1] * widths[2])],
            values[1][(ukeys // widths[2]) % widths[1]],
            values[2][ukeys % widths[2]],
        ]
    )
    t_order = np.lexsort((t_key[2], t_key[1], t_key[0]))
    t_rank = np.empty(t_order.size, np.int32)
    t_rank[t_order] = np.arange(t_order.size, dtype=np.int32)
    pos = pa.array(t_rank[group])
    order = pc.array_sort_indices(pos).to_numpy()  # stable counting sort
    counts = np.bincount(t_rank[group], minlength=t_order.size)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    return order, t_key[:, t_order], bounds
