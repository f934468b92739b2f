"""Wall time and kernel time per phase (init, warm-up, measured, after), per rank.

Phases are those of :mod:`tbdtrace.passes.window` (split at the rank's first step start,
first measured step start and last measured step end); a kernel is in the phase that holds
its placement time (the start of its launching runtime call, else its own start), so the
phases of a rank partition its kernels. The open ends are closed by the rank's own
activity: ``init`` starts at the rank's first event and ``after`` ends at its last event
end (over kernels, memcpy, memset, runtime calls, ops and markers). A rank without steps
takes the phases of the steps that have no rank (one process's harness steps), else gets
one row, phase ``all``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace.passes import outputs, shared_arrays, window
from tbdtrace.trace import Trace

SCHEMA = outputs.PHASES.arrow_schema()  # declared in passes/outputs.py
_ACTIVITY = ("kernels", "memcpy", "memset", "runtime", "ops", "markers")


def run(trace: Trace, config: Any = None) -> pa.Table:
    """One row per (rank, phase), ranks ascending (null first), phases in time order.

    Columns: rank; phase (init, warmup, measured, after; ``all`` for a rank without
    steps); start_ns, end_ns (the phase's bounds, its open end closed by the rank's
    first/last activity; null when the rank has none); wall_ns = end - start (0 when the
    phase is empty); step_count (steps starting in it); kernel_count, kernel_time_ns
    (kernels placed in it, and their summed durations, ns).
    """
    first, last = _activity_bounds(trace)
    k_rank = window.row_rank_keys(trace, "kernels")
    k_time = window.row_times(trace, "kernels") if trace.num_rows("kernels") else k_rank
    k_dur = shared_arrays.durations(trace, "kernels")
    phases = window.phase_bounds(trace)
    steps = window.step_rows(trace)
    rows: list[dict[str, Any]] = []
    ranks = set(first) | set(phases)
    if window.NO_RANK in phases and window.NO_RANK not in first and len(ranks) > 1:
        ranks.discard(window.NO_RANK)  # unranked steps only lend their phases
    for r in sorted(ranks):
        sel = k_rank == r
        kt, kd = k_time[sel], k_dur[sel]
        f, e = first.get(r), last.get(r)
        # A rank without steps takes the phases of the steps without a rank, if any.
        bounds = phases.get(r) or phases.get(window.NO_RANK) or {"all": (window.LO, window.HI)}
        st = steps.get(r, steps.get(window.NO_RANK, {})).get("start_ns", np.zeros(0, np.int64))
        for name, (lo, hi) in bounds.items():
            s = f if lo == window.LO else lo
            t = e if hi == window.HI else hi
            if s is not None and t is not None and s > t:  # no activity on that side
                s, t = (t, t) if lo == window.LO else (s, s)
            inside = (kt >= lo) & (kt < hi)
            rows.append(
                {
                    "rank": None if r == window.NO_RANK else r,
                    "phase": name,
                    "start_ns": s,
                    "end_ns": t,
                    "wall_ns": max(0, t - s) if s is not None and t is not None else 0,
                    "step_count": int(((st >= lo) & (st < hi)).sum()),
                    "kernel_count": int(inside.sum()),
                    "kernel_time_ns": int(kd[inside].sum()),
                }
            )
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _activity_bounds(trace: Trace) -> tuple[dict[int, int], dict[int, int]]:
    """Per rank key: first start and last end over the activity tables."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for t in _ACTIVITY:
        if not trace.num_rows(t):
            continue
        rank = window.row_rank_keys(trace, t)
        s, e = shared_arrays.ints(trace, t, "start_ns"), shared_arrays.ints(trace, t, "end_ns")
        for r in np.unique(rank):
            sel = rank == r
            key = int(r)
            first[key] = min(first.get(key, int(s[sel].min())), int(s[sel].min()))
            last[key] = max(last.get(key, int(e[sel].max())), int(e[sel].max()))
    return first, last
