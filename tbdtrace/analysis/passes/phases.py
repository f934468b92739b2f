"""Wall time and kernel time per phase (init, warm-up, measured, after), per rank.

Phases are those of :mod:`tbdtrace.analysis.engine.window` (split at the rank's first step start,
first measured step start and last measured step end); a kernel is in the phase that holds
its placement time (the start of its launching runtime call, else its own start), so the
phases of a rank partition its kernels. The open ends are closed by the rank's own
activity: ``init`` starts at the rank's first event and ``after`` ends at its last event
end (over kernels, memcpy, memset, runtime calls, ops and markers). A rank without steps
takes the phases of the steps that have no rank (one process's harness steps), else gets
one row, phase ``all``. Device work launched before the trace began
(:func:`tbdtrace.analysis.engine.window.pre_trace_rows`) is in none of these: a rank that has any
gets a ``pre-trace`` row first, spanning that work, and its other phases start after it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace.analysis.engine import outputs, shared_arrays, window
from tbdtrace.analysis.engine.context import AnalysisContext, Source, of
from tbdtrace.analysis.engine.grouping import one_rank_key, row_rank_keys

SCHEMA = outputs.PHASES.arrow_schema()  # declared in analysis/engine/outputs.py
_ACTIVITY = ("kernels", "memcpy", "memset", "runtime", "ops", "markers")


def run(ctx: Source, config: None = None) -> pa.Table:
    """One row per (rank, phase), ranks ascending (null first), phases in time order.

    Columns: rank; phase (init, warmup, measured, after; ``all`` for a rank without
    steps); start_ns, end_ns (the phase's bounds, its open end closed by the rank's
    first/last activity; null when the rank has none); wall_ns = end - start (0 when the
    phase is empty); step_count (steps starting in it); kernel_count, kernel_time_ns
    (kernels placed in it, and their summed durations, ns).
    """
    ctx = of(ctx)
    first, last = _activity_bounds(ctx)
    # Kernels of one rank (the common case): that rank's rows are all rows, no copies.
    k_one = one_rank_key(ctx, "kernels")
    k_rank = row_rank_keys(ctx, "kernels") if k_one is None else None
    n_k = ctx.num_rows("kernels")
    k_time = window.row_times(ctx, "kernels") if n_k else np.zeros(0, np.int64)
    # Not kept: on a windowed report this is the whole trace's, which no later section
    # reads (10M kernels: 76 MB beside the window's own).
    k_dur = shared_arrays.durations(ctx, "kernels", keep=False)
    k_pre = window.pre_trace_rows(ctx, "kernels")
    pre_bounds = _pre_trace_bounds(ctx)
    none = np.zeros(0, np.int64)
    no_pre = np.zeros(0, bool)
    phases = window.phase_bounds(ctx)
    steps = window.step_rows(ctx)
    rows: list[dict[str, Any]] = []
    ranks = set(first) | set(phases) | set(pre_bounds)
    if window.NO_RANK in phases and window.NO_RANK not in first and len(ranks) > 1:
        ranks.discard(window.NO_RANK)  # unranked steps only lend their phases
    for r in sorted(ranks):
        if k_rank is not None:
            sel = k_rank == r
            kt, kd, kp = k_time[sel], k_dur[sel], k_pre[sel]
        else:
            kt, kd, kp = (k_time, k_dur, k_pre) if r == k_one else (none, none, no_pre)
        rank = None if r == window.NO_RANK else r
        if r in pre_bounds:
            ps, pe = pre_bounds[r]
            rows.append(
                {
                    "rank": rank,
                    "phase": window.PRE_TRACE,
                    "start_ns": ps,
                    "end_ns": pe,
                    "wall_ns": max(0, pe - ps),
                    "step_count": 0,
                    "kernel_count": int(np.count_nonzero(kp)),
                    "kernel_time_ns": int(np.sum(kd, where=kp)),
                }
            )
        f, e = first.get(r), last.get(r)
        # A rank without steps takes the phases of the steps without a rank, if any.
        bounds = phases.get(r) or phases.get(window.NO_RANK) or {"all": (window.LO, window.HI)}
        st = steps.get(r, steps.get(window.NO_RANK, {})).get("start_ns", np.zeros(0, np.int64))
        for name, (lo, hi) in bounds.items():
            s = f if lo == window.LO else lo
            t = e if hi == window.HI else hi
            if s is not None and t is not None and s > t:  # no activity on that side
                s, t = (t, t) if lo == window.LO else (s, s)
            inside = _between(kt, lo, hi)
            if kp.any():
                inside &= ~kp
            rows.append(
                {
                    "rank": rank,
                    "phase": name,
                    "start_ns": s,
                    "end_ns": t,
                    "wall_ns": max(0, t - s) if s is not None and t is not None else 0,
                    "step_count": int(((st >= lo) & (st < hi)).sum()),
                    "kernel_count": int(np.count_nonzero(inside)),
                    "kernel_time_ns": int(np.sum(kd, where=inside)),
                }
            )
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _between(t: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """lo <= t < hi, per element (an open bound, LO or HI, is not compared)."""
    if lo == window.LO and hi == window.HI:
        return np.ones(t.size, dtype=bool)
    if lo == window.LO:
        return t < hi
    if hi == window.HI:
        return t >= lo
    inside = t >= lo
    inside &= t < hi
    return inside


def _pre_trace_bounds(ctx: AnalysisContext) -> dict[int, tuple[int, int]]:
    """Per rank key with device work launched before the trace began: its first start
    and last end."""
    out: dict[int, tuple[int, int]] = {}
    for t in shared_arrays.EVENT_TABLES:
        pre = window.pre_trace_rows(ctx, t)
        if not pre.any():
            continue
        s = shared_arrays.ints(ctx, t, "start_ns")[pre]
        e = shared_arrays.ints(ctx, t, "end_ns")[pre]
        rank = row_rank_keys(ctx, t)[pre]
        for r in np.unique(rank).tolist():
            sel = rank == r
            lo, hi = int(s[sel].min()), int(e[sel].max())
            if r in out:
                lo, hi = min(lo, out[r][0]), max(hi, out[r][1])
            out[r] = (lo, hi)
    return out


def _activity_bounds(ctx: AnalysisContext) -> tuple[dict[int, int], dict[int, int]]:
    """Per rank key: first start and last end over the activity tables (device work
    launched before the trace began left out: it is the pre-trace phase)."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for t in _ACTIVITY:
        if not ctx.num_rows(t):
            continue
        one = one_rank_key(ctx, t)
        pre = window.pre_trace_rows(ctx, t) if t in shared_arrays.EVENT_TABLES else None
        if pre is not None and pre.any():
            keep = ~pre
            if not keep.any():
                continue
            s = shared_arrays.ints(ctx, t, "start_ns")[keep]
            e = shared_arrays.ints(ctx, t, "end_ns")[keep]
            rank = row_rank_keys(ctx, t)[keep]
            for r in np.unique(rank).tolist():
                sel = rank == r
                first[r] = min(first.get(r, int(s[sel].min())), int(s[sel].min()))
                last[r] = max(last.get(r, int(e[sel].max())), int(e[sel].max()))
            continue
        if one is not None:  # every row of one rank: no per-rank selection
            lo, hi = shared_arrays.time_bounds(ctx, t)
            first[one] = min(first.get(one, lo), lo)
            last[one] = max(last.get(one, hi), hi)
            continue
        s, e = shared_arrays.ints(ctx, t, "start_ns"), shared_arrays.ints(ctx, t, "end_ns")
        rank = row_rank_keys(ctx, t)
        for r in np.unique(rank):
            sel = rank == r
            key = int(r)
            first[key] = min(first.get(key, int(s[sel].min())), int(s[sel].min()))
            last[key] = max(last.get(key, int(e[sel].max())), int(e[sel].max()))
    return first, last
