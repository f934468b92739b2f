"""Collective skew across ranks: how far apart the ranks start the same collective.

A collective kernel (category ``communication``: NCCL/RCCL kernels) waits on the device
for its peers, so the rank that starts it last holds the others up: its start minus the
first rank's start is the collective's arrival skew, and that rank is the straggler of
that collective. Instances are matched across ranks by (step number, kernel name,
occurrence within the step on that rank); without steps, by (name, occurrence in the
trace). Only instances found on two or more ranks count, and only in (step, name) groups
with the same number of kernels on every rank that runs them (where counts differ, the
k-th kernels need not be the same operation).

Ranks' clocks are compared as recorded: traces from different hosts are only as aligned as
the hosts' clocks (NTP: often within a millisecond), which bounds what a skew below that
means.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tbdtrace.analysis.engine import categories, outputs, shared_arrays, summaries
from tbdtrace.analysis.engine.context import Source, of
from tbdtrace.analysis.engine.grouping import decode_device_key
from tbdtrace.analysis.passes import steps as steps_pass
from tbdtrace.arrow_ints import int_column

SCHEMA = outputs.COLLECTIVE_SKEW.arrow_schema()  # declared in analysis/engine/outputs.py


def run(ctx: Source, config: None = None) -> pa.Table:
    """One row per collective instance seen on at least two ranks, by first start.

    Columns: name (kernel name); step (null when the trace has no steps); occurrence
    (0-based, within the step on each rank); ranks (how many ranks ran it);
    first_start_ns, last_start_ns (earliest and latest start over the ranks, ns);
    skew_ns = last - first; last_rank (the rank that started it last).
    """
    ctx = of(ctx)
    codes, labels = shared_arrays.codes(ctx, "kernels", "name")
    is_comm = np.array(
        [categories.classify(lbl) == "communication" for lbl in labels] or [False], dtype=bool
    )
    starts = shared_arrays.ints(ctx, "kernels", "start_ns")
    per_rank = [
        (decode_device_key(k)[0], rows) for k, rows in shared_arrays.device_rows(ctx, "kernels")
    ]
    if len({r for r, _ in per_rank if r is not None}) < 2:
        return SCHEMA.empty_table()
    st = steps_pass.run(ctx)
    parts = []
    for rank, rows in per_rank:
        if rank is None:
            continue
        idx = np.arange(starts.size)[rows] if isinstance(rows, slice) else rows
        idx = idx[is_comm[codes[idx]]]
        if idx.size:
            parts.append(
                _occurrences(idx, starts[idx], codes[idx], _step_of(st, rank, starts[idx]), rank)
            )
    if not parts:
        return SCHEMA.empty_table()
    return _instances(np.concatenate(parts, axis=1), labels, has_steps=st.num_rows > 0)


def _occurrences(
    idx: np.ndarray, s: np.ndarray, code: np.ndarray, step: np.ndarray, rank: int
) -> np.ndarray:
    """Rows (step, code, occurrence, start, rank) of one rank's collective kernels; the
    occurrence counts the (step, name) group's kernels in start order."""
    order = np.lexsort((s, code, step))
    step, code, s = step[order], code[order], s[order]
    new = np.r_[True, (step[1:] != step[:-1]) | (code[1:] != code[:-1])]
    group_start = np.maximum.accumulate(np.where(new, np.arange(s.size), 0))
    occ = np.arange(s.size) - group_start
    return np.stack([step, code, occ, s, np.full(s.size, rank, dtype=np.int64)])


def _instances(m: np.ndarray, labels: list[str | None], has_steps: bool) -> pa.Table:
    step, code, occ, s, rank = m
    keep = step >= 0 if has_steps else np.ones(s.size, dtype=bool)
    step, code, occ, s, rank = step[keep], code[keep], occ[keep], s[keep], rank[keep]
    same = _same_count(step, code, rank)
    step, code, occ, s, rank = step[same], code[same], occ[same], s[same], rank[same]
    # Each rank has at most one row per (step, code, occurrence): a group's size is its
    # number of ranks. Sorted by key, then start: a group's first row starts first.
    order = np.lexsort((rank, s, occ, code, step))
    step, code, occ, s, rank = step[order], code[order], occ[order], s[order], rank[order]
    new = np.r_[True, (step[1:] != step[:-1]) | (code[1:] != code[:-1]) | (occ[1:] != occ[:-1])]
    first = np.flatnonzero(new)
    last = np.r_[first[1:], s.size] - 1
    size = last - first + 1
    ok = size >= 2
    first, last, size = first[ok], last[ok], size[ok]
    by_time = np.argsort(s[first], kind="stable")
    first, last, size = first[by_time], last[by_time], size[by_time]
    names = np.array(labels, dtype=object)[code[first]] if first.size else np.zeros(0, object)
    return pa.table(
        {
            "name": pa.array(names.tolist(), pa.string()),
            "step": pa.array(step[first], pa.int64(), mask=np.full(first.size, not has_steps)),
            "occurrence": occ[first],
            "ranks": size,
            "first_start_ns": s[first],
            "last_start_ns": s[last],
            "skew_ns": s[last] - s[first],
            "last_rank": pa.array(rank[last], pa.int32()),
        },
        schema=SCHEMA,
    )


def _same_count(step: np.ndarray, code: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Rows whose (step, name) group has the same number of kernels on every rank that
    runs it: where counts differ, the k-th kernels need not be the same operation."""
    if not step.size:
        return np.zeros(0, dtype=bool)
    trip = np.stack([step, code, rank], axis=1)
    u, inv, cnt = np.unique(trip, axis=0, return_inverse=True, return_counts=True)
    pair, pinv = np.unique(u[:, :2], axis=0, return_inverse=True)
    lo = np.full(len(pair), np.iinfo(np.int64).max)
    hi = np.zeros(len(pair), dtype=np.int64)
    np.minimum.at(lo, pinv.reshape(-1), cnt)
    np.maximum.at(hi, pinv.reshape(-1), cnt)
    ok_pair = lo == hi
    return ok_pair[pinv.reshape(-1)][inv.reshape(-1)]


def _step_of(st: pa.Table, rank: int, s: np.ndarray) -> np.ndarray:
    """Step number of each start on ``rank`` (-1 outside every step, or without steps)."""
    out = np.full(s.size, -1, dtype=np.int64)
    if st.num_rows == 0:
        return out
    sel = int_column(st, "rank") == rank
    for n, a, b in zip(
        int_column(st, "step")[sel],
        int_column(st, "start_ns")[sel],
        int_column(st, "end_ns")[sel],
        strict=True,
    ):
        out[(s >= a) & (s < b)] = n
    return out


# The per-name reduction lives in the engine (engine/summaries.py).
summarize = summaries.collective_skew_summary
