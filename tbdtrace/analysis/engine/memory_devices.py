"""Per-device memory levels for the memory pass.

A device's level (per level, device type and id, rank, process) comes from one of two
sources:

* ``allocator_totals``: the totals the allocator itself wrote on each event
  (``total_allocated_bytes``; torch.profiler's ``Total Allocated``). They count memory
  allocated before the profiler started, which no replay of the trace's events can see.
  The replay of individual allocations still gives the breakdown by category; at each
  event it is aligned to the total, and the difference (what was alive before the trace
  started and not yet freed) is its own part, ``pre_existing``.
* ``replay``: the replay of individual allocations alone (``blocks.pair``), for sources
  whose rows already carry what was alive at start (tbdtrace's own trackers) or that
  write no totals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace.analysis.engine.grouping import dict_codes
from tbdtrace.analysis.engine.intervals import is_sorted
from tbdtrace.analysis.engine.memory_blocks import group_codes
from tbdtrace.arrow_ints import int_column
from tbdtrace.schema import MEMORY_CATEGORIES

I64 = npt.NDArray[np.int64]
BREAKDOWN = (*MEMORY_CATEGORIES, "pre_existing")
_PRE = len(MEMORY_CATEGORIES)
_NULL = np.iinfo(np.int64).min


@dataclass(frozen=True)
class Events:
    """The replay's effective allocs and frees, sorted by (level, time, row order)."""

    ts: I64  # ns
    seq: I64  # tie order: 2 * row + 1 (a free closed by a later alloc: 2 * row - 1)
    group: I64  # index into the memory table's group keys (blocks.group_keys)
    category: I64  # index into MEMORY_CATEGORIES
    sign: I64  # +1 for an alloc, -1 for a free
    delta: I64  # sign * bytes


@dataclass(frozen=True)
class Series:
    """One device's level over time (one row per event, in time order)."""

    key: tuple[object, ...]  # (level, device_type, device_id, rank, pid)
    source: str  # allocator_totals or replay
    ts: I64  # ns
    total: I64  # the level just after each event, bytes
    parts: I64  # (events, len(BREAKDOWN)) breakdown just after each event, bytes
    total_before: int  # the level before the first event
    parts_before: I64  # its breakdown
    replay_excess_bytes: int  # most the replay exceeded the totals by (0: consistent)
    reserved_ts: I64  # events with a reserved total (total_reserved_bytes), ns
    reserved: I64  # that total, bytes


def series(mem: pa.Table, keys: list[tuple[object, ...]], ev: Events, totals: bool) -> list[Series]:
    """The level of every device of ``mem`` (columns of the memory pass plus
    total_allocated_bytes and total_reserved_bytes). ``keys``: the group keys the events'
    ``group`` indexes; ``totals``: use the allocator's totals where rows carry them."""
    row_group, row_keys = group_codes(mem)
    index = {k: i for i, k in enumerate(keys)}
    row_grp = np.array([index.get(k, -1) for k in row_keys] or [-1], dtype=np.int64)[row_group]
    ts = int_column(mem, "ts_ns", 0)
    ta = int_column(mem, "total_allocated_bytes", _NULL)
    tr = int_column(mem, "total_reserved_bytes", _NULL)
    acodes, alabels = dict_codes(mem, "action")
    sign = np.array([1 if x == "alloc" else -1 for x in alabels] or [1], dtype=np.int64)
    signed = sign[acodes] * int_column(mem, "bytes", 0) if mem.num_rows else ts
    # Rows by (device, time, row order) and events by device (stable: their time order
    # kept), each device's part a slice of one sort.
    # A stored memory table is in time order: a stable sort by device alone then (none
    # for one device).
    if is_sorted(ts):
        order = _stable_order(row_grp)
    else:
        order = np.lexsort((np.arange(ts.size), ts, row_grp))
    row_cut = np.searchsorted(row_grp[order], np.arange(len(keys) + 1))
    ev_order = _stable_order(ev.group)
    ev_cut = np.searchsorted(ev.group[ev_order], np.arange(len(keys) + 1))
    out = []
    for g, key in enumerate(keys):
        rows = order[row_cut[g] : row_cut[g + 1]]
        m = ev_order[ev_cut[g] : ev_cut[g + 1]]
        live = _replay(ev.category[m], ev.delta[m])
        with_total = rows[ta[rows] != _NULL] if totals else rows[:0]
        with_res = rows[tr[rows] != _NULL]
        reserved = (ts[with_res], tr[with_res])
        if with_total.size:
            out.append(
                _aligned(key, ev.ts[m], ev.seq[m], live, with_total, ts, ta, signed, reserved)
            )
        else:
            out.append(_replayed(key, ev.ts[m], live, reserved))
    return out


def _stable_order(codes: I64) -> I64:
    """``np.argsort(codes, kind="stable")``, without sorting when every code is equal."""
    if codes.size == 0 or codes.min() == codes.max():
        return np.arange(codes.size, dtype=np.int64)
    return np.argsort(codes, kind="stable")


def _replay(cat: I64, delta: I64) -> I64:
    """Live bytes per category after each event: (events, len(MEMORY_CATEGORIES))."""
    d = np.zeros((cat.size, len(MEMORY_CATEGORIES)), dtype=np.int64)
    d[np.arange(cat.size), cat] = delta
    return np.cumsum(d, axis=0)


def _replayed(key: tuple[object, ...], ts: I64, live: I64, reserved: tuple[I64, I64]) -> Series:
    parts = np.hstack([live, np.zeros((live.shape[0], 1), np.int64)])
    total = parts.sum(axis=1)
    return Series(
        key=key,
        source="replay",
        ts=ts,
        total=total,
        parts=parts,
        total_before=0,
        parts_before=np.zeros(len(BREAKDOWN), np.int64),
        replay_excess_bytes=0,
        reserved_ts=reserved[0],
        reserved=reserved[1],
    )


def _aligned(
    key: tuple[object, ...],
    e_ts: I64,
    e_seq: I64,
    live: I64,
    rows: I64,
    ts: I64,
    ta: I64,
    signed: I64,
    reserved: tuple[I64, I64],
) -> Series:
    """The allocator's totals at each of ``rows`` (time order), with the replay's state
    just after that row (events up to the same time and row order) as the breakdown."""
    q_ts, q_seq = ts[rows], 2 * rows + 1
    # Events (kind 0) sort before a query (kind 1) with the same time and sequence: the
    # event of the query's own row counts.
    all_ts = np.concatenate([e_ts, q_ts])
    all_seq = np.concatenate([e_seq, q_seq])
    kind = np.concatenate([np.zeros(e_ts.size, np.int64), np.ones(q_ts.size, np.int64)])
    o = np.lexsort((kind, all_seq, all_ts))
    seen = np.cumsum(kind[o] == 0)  # events at or before each position
    n_before = np.empty(kind.size, np.int64)
    n_before[o] = seen
    pos = n_before[e_ts.size :]  # events at or before each query
    zero = np.zeros((1, len(MEMORY_CATEGORIES)), np.int64)
    rep = np.vstack([zero, live])[pos]
    total = ta[rows]
    rep_total = rep.sum(axis=1)
    pre = np.maximum(total - rep_total, 0)
    before = int(total[0] - signed[rows[0]])
    return Series(
        key=key,
        source="allocator_totals",
        ts=q_ts,
        total=total,
        parts=np.hstack([rep, pre[:, None]]),
        total_before=before,
        parts_before=np.array([0] * _PRE + [max(before, 0)], dtype=np.int64),
        replay_excess_bytes=int(np.maximum(rep_total - total, 0).max(initial=0)),
        reserved_ts=reserved[0],
        reserved=reserved[1],
    )
