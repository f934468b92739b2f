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

from tbdtrace.analysis.engine import attribution, intervals, outputs, shared_arrays
from tbdtrace.analysis.engine.context import AnalysisContext, Source, of
from tbdtrace.arrow_ints import int_column

_NULL = -(2**62)  # stands for a null rank/pid/tid while grouping
_SCHEMA = outputs.CPU_ACTIVITY.arrow_schema()  # declared in analysis/engine/outputs.py


def run(ctx: Source, config: None = None) -> pa.Table:
    """Per-thread table, busiest first.

    Columns: rank, pid, tid, op_count, span_ns, busy_ns (ns), busy_ratio (0..1; null
    when the span is 0).
    """
    ctx = of(ctx)
    if ctx.num_rows("ops") == 0:
        return _SCHEMA.empty_table()
    rows: dict[str, list[Any]] = {n: [] for n in _SCHEMA.names}
    # Threads in (rank, pid, tid) order; each thread's times gathered in turn, not all
    # at once (29M ops: 0.45 GB of copies).
    start, end, threads = _threads(ctx)
    for key, sel in sorted(threads, key=lambda t: t[0]):
        if isinstance(sel, slice):
            s, e = start[sel], end[sel]
            span, busy, count = intervals.span(s, e), intervals.union_length(s, e), s.size
        else:
            # A thread's rows a block at a time (a thread of 20M ops: ~0.8 GB of gathered
            # copies and merge temporaries otherwise)
            span, busy = intervals.span_and_union_of_rows(start, end, sel)
            count = sel.size
        for name, v in zip(("rank", "pid", "tid"), key, strict=True):
            rows[name].append(None if v == _NULL else int(v))
        rows["op_count"].append(count)
        rows["span_ns"].append(span)
        rows["busy_ns"].append(busy)
        rows["busy_ratio"].append(busy / span if span else None)
    tbl = pa.table(rows, schema=_SCHEMA)
    return tbl.sort_by([("busy_ns", "descending"), ("tid", "ascending")])


Rows = slice | npt.NDArray[np.integer[Any]]
Thread = tuple[tuple[int, int, int], Rows]  # (rank, pid, tid), its rows of the arrays


def _threads(
    ctx: AnalysisContext,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], list[Thread]]:
    """(start_ns, end_ns, threads): every thread as ((rank, pid, tid), its rows of
    start_ns and end_ns), in no set order; a null id is ``_NULL``.

    Without null ids, from the ops' rows per (pid, tid) that the attribution of kernels
    also groups by (one grouping, the int64 columns shared): a 29M-op trace took ~3 GiB
    for a sort by three columns and its reordered copies."""
    one_rank = ctx.constant("ops", "rank")  # from the file's statistics, if they tell
    ids = (
        ("pid", "tid")
        if one_rank is not None and one_rank[0] is not None
        else ("rank", "pid", "tid")
    )
    # Null counts from the file's statistics, else read for them and not kept (the
    # grouping reads the ids once, and keeps only its groups).
    if any(_has_nulls(ctx, c) for c in ids):
        return _sorted_threads(ctx)
    start = shared_arrays.ints(ctx, "ops", "start_ns")
    end = shared_arrays.ints(ctx, "ops", "end_ns")
    rank = None if len(ids) == 2 else shared_arrays.ints(ctx, "ops", "rank", keep=False)
    out: list[Thread] = []
    for (pid, tid), idx in attribution.range_groups(ctx, "ops").items():
        if rank is None:
            assert one_rank is not None
            out.append(((int(one_rank[0]), pid, tid), idx))
            continue
        r = rank[idx]
        # One rank on the thread (the common case) without hashing its rows.
        ranks = [int(r[0])] if r.size and r.min() == r.max() else np.unique(r).tolist()
        for rk in ranks:
            sel = idx if len(ranks) == 1 else idx[r == rk]
            out.append(((int(rk), pid, tid), sel))
    return start, end, out


def _has_nulls(ctx: AnalysisContext, column: str) -> bool:
    known = ctx.null_free("ops", column)
    if known is not None:
        return not known
    return bool(ctx.table("ops", [column], cache=False).column(0).null_count)


def _sorted_threads(
    ctx: AnalysisContext,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], list[Thread]]:
    """:func:`_threads` where ids are null: nulls become a value no real id takes, so they
    group together; threads are runs of one stable sort (a boolean mask per thread and
    np.unique(axis=0) cost ~50 ms on 200k ops)."""
    ops = ctx.table("ops", ["rank", "pid", "tid", "start_ns", "end_ns"])
    fill = {c: int_column(ops, c, _NULL) for c in ("rank", "pid", "tid")}
    start, end = int_column(ops, "start_ns"), int_column(ops, "end_ns")
    order = np.lexsort((fill["tid"], fill["pid"], fill["rank"]))
    key = np.stack([fill["rank"][order], fill["pid"][order], fill["tid"][order]])
    cuts = np.flatnonzero((key[:, 1:] != key[:, :-1]).any(axis=0)) + 1
    bounds = np.concatenate([[0], cuts, [order.size]])
    start, end = start[order], end[order]
    out: list[Thread] = []
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        k = key[:, lo].tolist()
        out.append(((k[0], k[1], k[2]), slice(lo, hi)))
    return start, end, out
