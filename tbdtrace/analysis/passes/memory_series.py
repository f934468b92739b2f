"""Memory over time per device, by category: the report's memory plot, thinned.

From :func:`tbdtrace.analysis.engine.memory_replay.timeline` (blocks paired, frees without an alloc
dropped), live bytes per category are summed per (level, device_type, device_id, rank)
over its processes, just after each event. A series with more events than
``max_points`` is thinned: its time span is cut into ``max_points`` equal buckets and
each bucket keeps its event of largest total (so the peak is always kept) and the
bucket's last event (so levels between spikes stay right).

Where the allocator reported its own totals (``memory.total_reserved_bytes``, e.g. the
caching allocator's reserved memory in torch.profiler traces) and the trace has no
``reserved`` events, those totals form a ``reserved`` series per device with source
``allocator_total`` and null categories; not for the CPU, whose allocator keeps no
reserve.

In a window (the report's measured steps, say) the series are the whole trace's replay
cut to the window on each device's rank: the first point, stamped at the window's start,
is what was live then (weights and optimizer state included), so the plot's levels are
the memory section's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace.analysis.engine import memory_replay as memory
from tbdtrace.analysis.engine import outputs
from tbdtrace.analysis.engine.context import AnalysisContext, Source, of
from tbdtrace.analysis.engine.grouping import dict_codes, row_codes
from tbdtrace.analysis.engine.memory_devices import Series
from tbdtrace.analysis.engine.window import Window
from tbdtrace.arrow_ints import int_column
from tbdtrace.schema import MEMORY_CATEGORIES

I64 = npt.NDArray[np.int64]
CATEGORY_COLUMNS = memory.CATEGORY_COLUMNS
SCHEMA = outputs.MEMORY_SERIES.arrow_schema()  # declared in analysis/engine/outputs.py


@dataclass(frozen=True)
class MemorySeriesConfig:
    # Buckets per series; each keeps up to two events (its largest total and its last).
    max_points: int = 400


def run(ctx: Source, config: MemorySeriesConfig | None = None) -> pa.Table:
    """One row per kept point, by (level, device_type, device_id, rank), then time.

    Columns: level (allocated|reserved); source (events: paired alloc/free events;
    allocator_total: the allocator's reported reserved total); device_type, device_id,
    rank; ts_ns (ns); ``<category>_bytes`` for each of MEMORY_CATEGORIES (live bytes on
    that device after the event; null for allocator totals); total_bytes.
    """
    ctx = of(ctx)
    cfg = config or MemorySeriesConfig()
    win = ctx.window
    tl = memory.timeline(ctx.whole)
    totals, replaced = _from_allocator_totals(ctx.whole, cfg.max_points, win)
    # Devices whose allocated level is the allocator's totals are left out of the replay's
    # series before they are cut and thinned (on PyTorch-profiler files, most events).
    events = _from_events(tl, cfg.max_points, win, replaced)
    if replaced and events.num_rows:  # rows of a group whose key is not one value
        keep = [
            (lv, dt, di, rk) not in replaced
            for lv, dt, di, rk in zip(*(events.column(c).to_pylist() for c in _GROUP), strict=True)
        ]
        events = events.filter(pa.array(keep))
    parts = [events, totals]
    # pc.unique: the levels present (to_pylist of a dictionary column costs ~10 us a row).
    if "reserved" not in pc.unique(tl.column("level")).to_pylist():
        parts.append(_from_totals(ctx.whole, cfg.max_points, win))
    out = pa.concat_tables([p for p in parts if p.num_rows] or [SCHEMA.empty_table()])
    return out


def _keys(tbl: pa.Table, cols: tuple[str, ...]) -> tuple[I64, I64]:
    arrays = []
    for c in cols:
        if pa.types.is_dictionary(tbl.schema.field(c).type) or pa.types.is_string(
            tbl.schema.field(c).type
        ):
            codes, _ = dict_codes(tbl, c)
            arrays.append(codes)
        else:
            arrays.append(int_column(tbl, c, -1))
    return row_codes(*arrays)


_GROUP = ("level", "device_type", "device_id", "rank")


def _cut(ts: I64, rank: object, window: Window | None) -> tuple[I64, int | None]:
    """Of one device's time-ordered points: the positions inside the window on ``rank``,
    and the position of the last point before it (the level at the window's start; None
    when nothing came before), the window's start being returned by :func:`_start`."""
    b = memory._bounds_of(window, rank)
    if b is None:
        return np.arange(ts.size, dtype=np.int64), None
    a = int(np.searchsorted(ts, b[0], side="left"))
    z = int(np.searchsorted(ts, b[1], side="right"))
    return np.arange(a, z, dtype=np.int64), (a - 1 if a else None)


def _start(rank: object, window: Window | None) -> int:
    b = memory._bounds_of(window, rank)
    assert b is not None
    return b[0]


def _from_events(
    tl: pa.Table,
    max_points: int,
    window: Window | None = None,
    leave_out: set[tuple[object, ...]] | frozenset[tuple[object, ...]] = frozenset(),
) -> pa.Table:
    """The replay's series per (level, device_type, device_id, rank), but those whose
    key is in ``leave_out`` (a group is left out only when all its rows have that key:
    its codes make null and -1 one device id or rank)."""
    if tl.num_rows == 0:
        return SCHEMA.empty_table()
    code, first = _keys(tl, _GROUP)
    groups = np.argsort(first)  # groups in order of first appearance
    if leave_out and all(_one_null_state(tl, c, code, first) for c in ("device_id", "rank")):
        heads = tl.select(list(_GROUP)).take(pa.array(first[groups])).to_pylist()
        groups = groups[[tuple(h[c] for c in _GROUP) not in leave_out for h in heads]]
        if not groups.size:
            return SCHEMA.empty_table()
    cat_codes, cat_labels = dict_codes(tl, "category")
    cat_lut = np.array([MEMORY_CATEGORIES.index(c or "other") for c in cat_labels], np.int64)
    cat = cat_lut[cat_codes]
    act_codes, act_labels = dict_codes(tl, "action")
    sign = np.array([1 if a == "alloc" else -1 for a in act_labels], np.int64)[act_codes]
    delta = np.zeros((tl.num_rows, len(MEMORY_CATEGORIES)), np.int64)
    delta[np.arange(tl.num_rows), cat] = sign * int_column(tl, "bytes", 0)
    ts = int_column(tl, "ts_ns", 0)
    ranks = tl.column("rank").to_pylist() if window is not None else None
    keep_rows: list[I64] = []
    keep_ts: list[I64] = []
    live_parts: list[npt.NDArray[np.int64]] = []
    for g in groups:
        rows = np.flatnonzero(code == g)
        rows = rows[np.argsort(ts[rows], kind="stable")]
        live = np.cumsum(delta[rows], axis=0)
        t = ts[rows]
        if ranks is not None:
            rank = ranks[int(rows[0])]
            inside, before = _cut(t, rank, window)
            if before is not None:  # the level when the window began, at its start
                inside = np.concatenate([[before], inside])
            rows, live, t = rows[inside], live[inside], t[inside].copy()
            if before is not None:
                t[0] = _start(rank, window)
            if not rows.size:
                continue
        pick = thin(t, live.sum(axis=1), max_points)
        if ranks is not None and pick.size and pick[0] != 0:
            pick = np.concatenate([[0], pick])  # the level at the window's start stays
        keep_rows.append(rows[pick])
        keep_ts.append(t[pick])
        live_parts.append(live[pick])
    if not keep_rows:
        return SCHEMA.empty_table()
    rows = np.concatenate(keep_rows)
    live = np.concatenate(live_parts)
    head = tl.take(pa.array(rows))
    cols = {
        "level": head.column("level").cast(pa.string()),
        "source": pa.array(["events"] * rows.size, pa.string()),
        "device_type": head.column("device_type").cast(pa.string()),
        "device_id": head.column("device_id"),
        "rank": head.column("rank"),
        "ts_ns": pa.array(np.concatenate(keep_ts), pa.int64()),
    }
    for i, c in enumerate(CATEGORY_COLUMNS):
        cols[c] = pa.array(live[:, i], pa.int64())
    cols["pre_existing_bytes"] = pa.nulls(rows.size, pa.int64())
    cols["total_bytes"] = pa.array(live.sum(axis=1), pa.int64())
    return pa.table(cols, schema=SCHEMA)


def _one_null_state(tl: pa.Table, col: str, code: I64, first: I64) -> bool:
    """Whether every row of each group is null in ``col`` exactly when its first row is."""
    c = tl.column(col)
    if not c.null_count:
        return True
    null = np.asarray(c.is_null().to_numpy(zero_copy_only=False), bool)
    return bool(np.array_equal(null, null[first[code]]))


def _from_allocator_totals(
    ctx: AnalysisContext, max_points: int, window: Window | None
) -> tuple[pa.Table, set[tuple[object, ...]]]:
    """The allocated level of devices whose level is the allocator's own totals (the
    memory section's ``allocator_totals`` source, PyTorch-profiler imports): the total,
    the replay's categories and ``pre_existing`` (allocated before the trace began), as
    the memory section reads them. Devices with several processes keep the replay. Also
    the (level, device_type, device_id, rank) keys it covers."""
    if not memory._use_totals(ctx, memory.MemoryConfig()) or not ctx.num_rows("memory"):
        return SCHEMA.empty_table(), set()
    found = [
        s
        for s in memory.device_series(ctx, True)
        if s.key[0] == "allocated" and s.source == "allocator_totals" and s.ts.size
    ]
    by_dev: dict[tuple[object, ...], list[Series]] = {}
    for s in found:
        by_dev.setdefault(s.key[:4], []).append(s)
    out: list[pa.Table] = []
    replaced: set[tuple[object, ...]] = set()
    for key, group in by_dev.items():
        if len(group) != 1:
            continue
        s = group[0]
        t, total, parts = s.ts, s.total, s.parts
        if window is not None:
            b = memory._bounds_of(window, key[3])
            if b is not None:
                inside, before = _cut(t, key[3], window)
                at_start = ((total[before], parts[before]) if before is not None else None) or (
                    (s.total_before, s.parts_before) if b[0] < int(t[0]) else None
                )
                t, total, parts = t[inside], total[inside], parts[inside]
                if at_start is not None:
                    t = np.concatenate([[b[0]], t])
                    total = np.concatenate([[at_start[0]], total])
                    parts = np.vstack([at_start[1][None, :], parts])
        if not t.size:
            continue
        pick = thin(t, total, max_points)
        if window is not None and pick.size and pick[0] != 0:
            pick = np.concatenate([[0], pick])
        replaced.add(key)
        n = pick.size
        cols: dict[str, pa.Array] = {
            "level": pa.array([key[0]] * n, pa.string()),
            "source": pa.array(["allocator_total"] * n, pa.string()),
            "device_type": pa.array([key[1]] * n, pa.string()),
            "device_id": pa.array([key[2]] * n, pa.int32()),
            "rank": pa.array([key[3]] * n, pa.int32()),
            "ts_ns": pa.array(t[pick], pa.int64()),
        }
        for i, c in enumerate(CATEGORY_COLUMNS):
            cols[c] = pa.array(parts[pick, i], pa.int64())
        cols["pre_existing_bytes"] = pa.array(parts[pick, -1], pa.int64())
        cols["total_bytes"] = pa.array(total[pick], pa.int64())
        out.append(pa.table(cols, schema=SCHEMA))
    if not out:
        return SCHEMA.empty_table(), set()
    return pa.concat_tables(out), replaced


def _from_totals(ctx: AnalysisContext, max_points: int, window: Window | None = None) -> pa.Table:
    mem = ctx.table("memory", ["ts_ns", "device_type", "device_id", "rank", "total_reserved_bytes"])
    valid = ~np.asarray(
        mem.column("total_reserved_bytes").is_null().to_numpy(zero_copy_only=False), bool
    )
    # The CPU allocator keeps no reserve: its "reserved" totals are not a level.
    valid &= np.asarray(
        pc.fill_null(
            pc.not_equal(mem.column("device_type").cast(pa.string()), "cpu"), True
        ).to_numpy(zero_copy_only=False),
        bool,
    )
    if not valid.any():
        return SCHEMA.empty_table()
    mem = mem.filter(pa.array(valid))
    code, first = _keys(mem, ("device_type", "device_id", "rank"))
    ts = int_column(mem, "ts_ns", 0)
    total = int_column(mem, "total_reserved_bytes", 0)
    keep: list[I64] = []
    keep_ts: list[I64] = []
    ranks = mem.column("rank").to_pylist() if window is not None else None
    for g in np.argsort(first):
        rows = np.flatnonzero(code == g)
        rows = rows[np.argsort(ts[rows], kind="stable")]
        t = ts[rows]
        if ranks is not None:
            rank = ranks[int(rows[0])]
            inside, before = _cut(t, rank, window)
            if before is not None:
                inside = np.concatenate([[before], inside])
            rows, t = rows[inside], t[inside].copy()
            if before is not None:
                t[0] = _start(rank, window)
            if not rows.size:
                continue
        pick = thin(t, total[rows], max_points)
        if ranks is not None and pick.size and pick[0] != 0:
            pick = np.concatenate([[0], pick])
        keep.append(rows[pick])
        keep_ts.append(t[pick])
    if not keep:
        return SCHEMA.empty_table()
    rows = np.concatenate(keep)
    head = mem.take(pa.array(rows))
    n = rows.size
    dev = int_column(head, "device_id", -1)  # -1 (as an id) and null both mean none
    cols = {
        "level": pa.array(["reserved"] * n, pa.string()),
        "source": pa.array(["allocator_total"] * n, pa.string()),
        "device_type": head.column("device_type").cast(pa.string()),
        "device_id": pa.array(dev, pa.int32(), mask=dev < 0),
        "rank": head.column("rank"),
        "ts_ns": pa.array(np.concatenate(keep_ts), pa.int64()),
    }
    for c in CATEGORY_COLUMNS:
        cols[c] = pa.nulls(n, pa.int64())
    cols["pre_existing_bytes"] = pa.nulls(n, pa.int64())
    cols["total_bytes"] = pa.array(total[rows], pa.int64())
    return pa.table(cols, schema=SCHEMA)


def thin(ts: I64, total: I64, max_points: int) -> I64:
    """Indices kept of a time-ordered series: all when it has at most ``max_points``,
    else per equal time bucket the first index of its largest total and its last index,
    in time order (the global maximum is always kept)."""
    n = ts.size
    if n <= max_points:
        return np.arange(n, dtype=np.int64)
    span = max(int(ts[-1] - ts[0]), 1)
    bucket = np.minimum((ts - ts[0]) * max_points // span, max_points - 1)
    # Rows sorted by (bucket, -total, index): the first of each bucket is its maximum.
    order = np.lexsort((np.arange(n), -total, bucket))
    starts = np.flatnonzero(np.r_[True, bucket[order][1:] != bucket[order][:-1]])
    peaks = order[starts]
    lasts = np.flatnonzero(np.r_[bucket[1:] != bucket[:-1], True])
    return np.unique(np.concatenate([peaks, lasts])).astype(np.int64)
