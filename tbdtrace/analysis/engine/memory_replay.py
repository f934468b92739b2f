"""The memory replay: live bytes per category over time, the peak and what it is made of,
per step. The ``memory`` pass returns :func:`timeline`; the report's memory section and
diff read :func:`summarize`.

Input: the ``memory`` table (alloc/free events, level reserved or allocated, category).
Events are paired into blocks by :func:`tbdtrace.analysis.engine.memory_blocks.pair`; a free
without a matching alloc (the block predates the capture) is dropped, so no total ever
goes negative, and a block's free subtracts exactly what its alloc added. A row without a
category counts as ``other``.

Levels are never mixed: ``reserved`` (what the allocator took from the device, CUPTI) and
``allocated`` (tensors inside the allocator) each get their own timeline (:func:`timeline`:
the replay, summed over every device and process of that level). The summary
(:func:`summarize`) works per device and never sums devices: a device's level is the
allocator's own totals where the trace has them (PyTorch-profiler imports), aligned with
the replay, else the replay (see :mod:`._memory_devices`). Its headline numbers use
``allocated`` when the trace has it (it carries the categories), else ``reserved``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace.analysis.engine.cache import Entry
from tbdtrace.analysis.engine.context import AnalysisContext, Source, of
from tbdtrace.analysis.engine.grouping import dict_codes
from tbdtrace.analysis.engine.memory_blocks import (
    INT64_MAX,
    Blocks,
    blocks_of,
    group_codes,
)
from tbdtrace.analysis.engine.memory_devices import BREAKDOWN, Events, Series, series
from tbdtrace.analysis.engine.window import HI, LO, Window, phase_bounds
from tbdtrace.arrow_ints import int_column
from tbdtrace.schema import MEMORY_CATEGORIES, MEMORY_LEVELS

CATEGORY_COLUMNS = tuple(f"{c}_bytes" for c in MEMORY_CATEGORIES)
_OTHER = MEMORY_CATEGORIES.index("other")
_COLS = [
    "ts_ns",
    "action",
    "level",
    "bytes",
    "address",
    "device_id",
    "device_type",
    "rank",
    "pid",
    "category",
]
# What the replay reads: the columns above and the allocator's own totals (the summary's).
_REPLAY_COLS = [*_COLS, "total_allocated_bytes", "total_reserved_bytes"]


@dataclass(frozen=True)
class MemoryConfig:
    level: str | None = None  # level for the headline numbers; None = allocated if present
    # Align each device's level to the allocator's own totals where rows carry them;
    # None = for imported PyTorch-profiler traces (meta source "kineto"), whose rows have
    # no record of what was allocated before profiling started.
    totals: bool | None = None


def _block_categories(mem: pa.Table, blocks: Blocks) -> npt.NDArray[np.int64]:
    codes, labels = dict_codes(mem, "category")
    lut = np.array(
        [MEMORY_CATEGORIES.index(lbl) if lbl in MEMORY_CATEGORIES else _OTHER for lbl in labels]
        or [_OTHER],
        dtype=np.int64,
    )
    row_cat = lut[codes] if codes.size else np.zeros(0, dtype=np.int64)
    rows = np.where(blocks.alloc_row >= 0, blocks.alloc_row, blocks.free_row)
    return row_cat[rows] if rows.size else np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class Replay:
    """A context's memory rows, their blocks and effective events (:func:`_events`)."""

    mem: pa.Table
    blocks: Blocks
    events: tuple[Events, npt.NDArray[np.int64]]


REPLAY: Entry[Replay] = Entry(
    "memory_replay.replay", "the memory rows, their blocks and effective events, sorted"
)
TIMELINE: Entry[pa.Table] = Entry("memory_replay.timeline", "the replay's timeline table")
SERIES: Entry[list[Series]] = Entry(
    "memory_replay.series", "every device's level (argument: the allocator's totals used)"
)


def replay(ctx: AnalysisContext) -> Replay:
    """The memory rows of ``ctx`` paired into blocks and replayed as events, once per
    context (the memory pass, the memory series and the memory section share them)."""

    def compute() -> Replay:
        mem = ctx.table("memory", _REPLAY_COLS)
        blocks = blocks_of(ctx, mem)
        ev, lvl = _events(mem, blocks)
        for a in (*vars(ev).values(), lvl):
            a.flags.writeable = False
        return Replay(mem, blocks, (ev, lvl))

    return ctx.cache.get(REPLAY, compute)


def device_series(ctx: AnalysisContext, totals: bool) -> list[Series]:
    """Every device's level (:func:`memory_devices.series`), once per context and
    ``totals``."""

    def compute() -> list[Series]:
        r = replay(ctx)
        return series(r.mem, r.blocks.group_keys, r.events[0], totals)

    return ctx.cache.get(SERIES, compute, totals)


def timeline(ctx: Source, config: MemoryConfig | None = None) -> pa.Table:
    """One row per effective alloc or free, in time order within each level.

    Columns: ts_ns (ns); level; device_type, device_id, rank, pid (where the event was);
    action (alloc|free); category; bytes (size of the block); ``<category>_bytes`` for each
    of MEMORY_CATEGORIES and total_bytes: live bytes of that level, summed over devices,
    just after the event; device_total_bytes: live bytes of that level on the event's
    device (same rank, pid, device) just after it. Frees with no matching alloc are absent.
    """
    c = of(ctx)

    def compute() -> pa.Table:
        r = replay(c)
        return _timeline(r.mem, r.blocks, r.events)

    return c.cache.get(TIMELINE, compute)


def _events(mem: pa.Table, blocks: Blocks) -> tuple[Events, npt.NDArray[np.int64]]:
    """The effective allocs and frees sorted by (level, time, row order), and the level
    index of each (into MEMORY_LEVELS)."""
    cat = _block_categories(mem, blocks)
    known = blocks.alloc_row >= 0  # blocks allocated inside the capture
    freed = known & (blocks.free_ts_ns != INT64_MAX)
    b_all = np.concatenate([np.flatnonzero(known), np.flatnonzero(freed)])
    sign = np.concatenate([np.ones(known.sum(), np.int64), -np.ones(freed.sum(), np.int64)])
    ts = np.concatenate([blocks.alloc_ts_ns[known], blocks.free_ts_ns[freed]])
    # Tie order: original row order; a free closed by a later alloc (lost free) goes first.
    free_rows = np.where(
        blocks.free_row[freed] >= 0, 2 * blocks.free_row[freed] + 1, 2 * blocks.alloc_row[freed] - 1
    )
    seq = np.concatenate([2 * blocks.alloc_row[known] + 1, free_rows])
    level_of_group = np.array(
        [MEMORY_LEVELS.index(k[0]) if k[0] in MEMORY_LEVELS else 0 for k in blocks.group_keys]
        or [0],
        dtype=np.int64,
    )
    lvl = level_of_group[blocks.group[b_all]] if b_all.size else np.zeros(0, np.int64)
    order = np.lexsort((seq, ts, lvl))
    b_all = b_all[order]
    ev = Events(
        ts=ts[order],
        seq=seq[order],
        group=blocks.group[b_all],
        category=cat[b_all],
        sign=sign[order],
        delta=sign[order] * blocks.bytes[b_all],
    )
    return ev, lvl[order]


def _timeline(
    mem: pa.Table, blocks: Blocks, events: tuple[Events, npt.NDArray[np.int64]] | None = None
) -> pa.Table:
    ev, lvl = events or _events(mem, blocks)
    n = ev.ts.size
    delta = np.zeros((n, len(MEMORY_CATEGORIES)), dtype=np.int64)
    delta[np.arange(n), ev.category] = ev.delta
    live = np.zeros_like(delta)
    grp = ev.group
    for lv in np.unique(lvl):
        m = lvl == lv
        live[m] = np.cumsum(delta[m], axis=0)
    dev_total = _device_totals(ev)
    ts, cat = ev.ts, ev.category
    nbytes = ev.sign * ev.delta
    keys = blocks.group_keys
    cols: dict[str, Any] = {
        "ts_ns": pa.array(ts, pa.int64()),
        "level": _take(list(MEMORY_LEVELS), lvl, pa.string()),
        "device_type": _take([k[1] for k in keys], grp, pa.string()),
        "device_id": _take([k[2] for k in keys], grp, pa.int32()),
        "rank": _take([k[3] for k in keys], grp, pa.int32()),
        "pid": _take([k[4] for k in keys], grp, pa.int32()),
        "action": _take(["free", "alloc"], (ev.sign > 0).astype(np.int64), pa.string()),
        "category": _take(list(MEMORY_CATEGORIES), cat, pa.string()),
        "bytes": pa.array(nbytes, pa.int64()),
    }
    for i, name in enumerate(CATEGORY_COLUMNS):
        cols[name] = pa.array(live[:, i], pa.int64())
    cols["total_bytes"] = pa.array(live.sum(axis=1), pa.int64())
    cols["device_total_bytes"] = pa.array(dev_total, pa.int64())
    return pa.table(cols)


def _device_totals(ev: Events) -> npt.NDArray[np.int64]:
    """Live bytes of each event's device (its replay group) just after the event: the
    timeline's device_total_bytes."""
    out = np.zeros(ev.ts.size, dtype=np.int64)
    for g in np.flatnonzero(np.bincount(ev.group)) if ev.group.size else ():
        m = ev.group == g
        out[m] = np.cumsum(ev.delta[m])
    return out


def _take(values: list[Any], idx: npt.NDArray[np.int64], typ: pa.DataType) -> pa.Array:
    """``values[idx]`` as an Arrow array of ``typ`` (nulls where the value is None);
    strings stay dictionary-encoded (the few labels, then one index per row)."""
    if pa.types.is_string(typ):
        uniq = list(dict.fromkeys(values))  # a dictionary's values must be distinct
        lut = np.array([uniq.index(v) for v in values] or [0], dtype=np.int32)
        codes = lut[idx] if len(idx) else np.zeros(0, dtype=np.int32)
        return pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(uniq, typ))
    return pa.array(values, typ).take(pa.array(idx, pa.int64()))


def _series_peak(sr: Series) -> dict[str, Any]:
    """Peak of a device's level (first moment it is reached; the level before the first
    event counts, stamped at the first event) and the breakdown then."""
    ts: int | None = int(sr.ts[0]) if sr.ts.size else None
    peak, parts = sr.total_before, sr.parts_before
    if sr.total.size and sr.total.max() > sr.total_before:
        i = int(np.argmax(sr.total))
        peak, ts, parts = int(sr.total[i]), int(sr.ts[i]), sr.parts[i]
    return {
        "peak_bytes": peak,
        "peak_ts_ns": ts,
        "breakdown_at_peak": {c: int(v) for c, v in zip(BREAKDOWN, parts, strict=True)},
    }


def _span_peak(sr: Series, s: int, e: int) -> dict[str, Any]:
    """The device's level over [s, e]: at the start (what was live when the span began),
    at the end, and its peak (the level at the start counts, stamped at ``s``) with the
    breakdown then."""
    lo = int(np.searchsorted(sr.ts, s, side="left"))
    hi = int(np.searchsorted(sr.ts, e, side="right"))
    first = int(sr.total[lo - 1]) if lo else sr.total_before
    cand = np.concatenate([[first], sr.total[lo:hi]])
    k = int(np.argmax(cand))
    at = sr.parts[lo + k - 1] if k or lo else sr.parts_before
    return {
        "start_bytes": first,
        "end_bytes": int(sr.total[hi - 1]) if hi else sr.total_before,
        "peak_bytes": int(cand[k]),
        "peak_ts_ns": int(s) if k == 0 else int(sr.ts[lo + k - 1]),
        "breakdown_at_peak": {c: int(v) for c, v in zip(BREAKDOWN, at, strict=True)},
    }


def _steps(sr: Series | None, steps: pa.Table) -> list[dict[str, Any]]:
    """For each step window [start_ns, end_ns] on the headline device: its level at the
    start and end, and its peak (the level at the start counts) with the breakdown then.
    Byte figures are null when the trace has no memory events."""
    out = []
    for step, s, e in zip(
        int_column(steps, "step"),
        int_column(steps, "start_ns"),
        int_column(steps, "end_ns"),
        strict=True,
    ):
        row: dict[str, Any] = {"step": int(step), "start_ns": int(s), "end_ns": int(e)}
        if sr is None:
            row.update(start_bytes=None, end_bytes=None, peak_bytes=None, peak_ts_ns=None)
            row["breakdown_at_peak"] = None
        else:
            row.update(_span_peak(sr, int(s), int(e)))
        out.append(row)
    return out


def _use_totals(ctx: AnalysisContext, config: MemoryConfig) -> bool:
    if config.totals is not None:
        return config.totals
    return ctx.meta.get("source") == "kineto"


def _headline(series: list[Series], level: str) -> Series | None:
    """The headline device at ``level``: a device (not the host) when there is one; of
    those, the largest peak (the first in key order on ties)."""
    at = [s for s in series if s.key[0] == level]
    gpu = [s for s in at if s.key[1] != "cpu"]
    pool = gpu or at
    if not pool:
        return None
    return max(pool, key=lambda s: _series_peak(s)["peak_bytes"])


def _bounds_of(window: Window | None, rank: object) -> tuple[int, int] | None:
    """The window's [lo, hi] on ``rank`` (None for the whole trace)."""
    if window is None or window.is_all:
        return None
    keys, lo, hi = window.bounds()
    rk = -1 if rank is None else int(rank)  # type: ignore[call-overload]
    at = np.flatnonzero(keys == rk)
    b = (int(lo[at[0]]), int(hi[at[0]])) if at.size else window.default
    return None if b == (LO, HI) else b


def _phase_at(ctx: AnalysisContext, rank: object, ts: int | None) -> str | None:
    """The phase (init, warmup, measured, after) holding ``ts`` on ``rank``; None when the
    rank has no steps."""
    if ts is None:
        return None
    rk = -1 if rank is None else int(rank)  # type: ignore[call-overload]
    for name, (lo, hi) in phase_bounds(ctx).get(rk, {}).items():
        if lo <= ts < hi or (name == "after" and ts >= lo):
            return name
    return None


def _has_categories(mem: pa.Table) -> bool:
    """Whether any memory row carries a category (else every byte would read as other)."""
    if not mem.num_rows:
        return False
    _, labels = dict_codes(mem, "category")
    return any(lbl for lbl in labels)


def summarize(
    ctx: Source, config: MemoryConfig | None = None, window: Window | None = None
) -> dict[str, Any]:
    """The report's ``memory`` document: per device, never summed across devices.

    Keys: level (the one the headline numbers are for); device (the headline device:
    device_type, device_id, rank, pid; a device rather than the host, the largest peak
    of those; null without memory events); source (how its level is known:
    ``allocator_totals`` or ``replay``, see :mod:`._memory_devices`); peak_bytes,
    peak_ts_ns and breakdown_at_peak (every category of MEMORY_CATEGORIES plus
    ``pre_existing``, bytes) of that device; levels (level -> the same three, same
    device; ``reserved`` from the allocator's reserved totals when no reserved rows
    exist, its breakdown null); devices (one row per level and device: peak_bytes,
    peak_ts_ns, source, replay_peak_bytes, allocator_reserved_peak_bytes); steps (per
    step on the headline device: see :func:`_steps`); event_count; first_ts_ns;
    unmatched_frees (frees whose alloc predates the capture); allocator_peak_bytes and
    allocator_reserved_peak_bytes (the largest allocated and reserved totals the
    allocator reported for the headline device; null when it reported none);
    replay_excess_bytes (the most the replay exceeded the allocator's total on the
    headline device: 0 when the two agree); model_bytes (weights/gradients/optimizer
    state sized from a model's variables, for frameworks sampled by totals such as
    TensorFlow; null otherwise); labels (PyTorch: ``mode``, how the categories were
    labelled, posthoc, exact or off, and ``cannot_tell_apart``, what post-hoc labels
    cannot separate; null when the trace does not say). Byte figures are null, not 0,
    when the trace has no memory events.

    With a ``window`` (not the whole trace) the headline peak, its breakdown, levels and
    each device row's peak_bytes are the window's, computed from the whole trace's
    replay so the level at the window's start (weights, optimizer state) counts;
    window_start_bytes is that level. Always: covers (the window's label, or "whole
    trace"); whole_trace (peak_bytes, peak_ts_ns and phase of the headline device's
    whole-trace peak: init, warmup, measured, after, or null without steps);
    has_categories (False when no memory row carries a category: the breakdown is then
    all other and says nothing); each level's and device row's ``reserved_source``
    (``driver_allocations``: reserved events, CUPTI's view of the driver;
    ``allocator_total``: the allocator's reported reserved total; null: none, and always
    for the CPU, whose allocator keeps no reserve).
    """
    ctx = of(ctx)
    config = config or MemoryConfig()
    r = replay(ctx)
    mem, blocks = r.mem, r.blocks
    all_series = device_series(ctx, _use_totals(ctx, config))
    present = [lv for lv in MEMORY_LEVELS if any(s.key[0] == lv for s in all_series)]
    level = config.level or (
        "allocated" if "allocated" in present else (present[0] if present else "allocated")
    )
    head = _headline(all_series, level)
    doc: dict[str, Any] = {"level": level, "device": None, "source": None}
    doc.update(peak_bytes=None, peak_ts_ns=None, breakdown_at_peak=None, levels={})
    doc["covers"] = "whole trace" if window is None or window.is_all else window.label()
    doc.update(window_start_bytes=None, whole_trace=None)
    doc["has_categories"] = _has_categories(mem)
    if head is not None:
        span = _bounds_of(window, head.key[3])
        whole = _series_peak(head)
        doc.update(device=dict(zip(_DEVICE_KEY[1:], head.key[1:], strict=True)))
        doc.update(source=head.source, **whole)
        doc["whole_trace"] = {
            "peak_bytes": whole["peak_bytes"],
            "peak_ts_ns": whole["peak_ts_ns"],
            "phase": _phase_at(ctx.whole, head.key[3], whole["peak_ts_ns"]),
        }
        if span is not None:
            w = _span_peak(head, *span)
            doc.update(
                peak_bytes=w["peak_bytes"],
                peak_ts_ns=_clamp_start(head, w["peak_ts_ns"]),
                breakdown_at_peak=w["breakdown_at_peak"],
                window_start_bytes=w["start_bytes"],
            )
        doc["levels"] = _levels(all_series, head, span)
    doc["devices"] = _device_rows(all_series, _devices(blocks, r.events), window)
    doc["steps"] = _steps(head, ctx.table("steps", ["step", "start_ns", "end_ns"]))
    doc["event_count"] = mem.num_rows
    doc["first_ts_ns"] = int(pa.compute.min(mem.column("ts_ns")).as_py()) if mem.num_rows else None
    doc["unmatched_frees"] = blocks.unmatched_frees
    doc["allocator_peak_bytes"] = _reported_max(mem, head, "total_allocated_bytes")
    doc["allocator_reserved_peak_bytes"] = (
        None
        if head is not None and head.key[1] == "cpu"
        else _reported_max(mem, head, "total_reserved_bytes")
    )
    doc["replay_excess_bytes"] = head.replay_excess_bytes if head is not None else None
    extra = ctx.meta.get("extra") or {}
    doc["model_bytes"] = extra.get("memory_model") if isinstance(extra, dict) else None
    doc["labels"] = _labels(extra)
    return doc


def _labels(extra: Any) -> dict[str, Any] | None:
    """How the PyTorch categories were labelled (``meta.extra.torch_memory``): the mode
    (posthoc, exact, off) and, post hoc, what the labels cannot tell apart."""
    tm = extra.get("torch_memory") if isinstance(extra, dict) else None
    if not isinstance(tm, dict) or not tm.get("mode"):
        return None
    caveats = tm.get("cannot_tell_apart")
    return {
        "mode": str(tm["mode"]),
        "cannot_tell_apart": [str(c) for c in caveats] if isinstance(caveats, list) else [],
    }


def _clamp_start(sr: Series, ts: int | None) -> int | None:
    """A peak stamped at an unbounded window start is stamped at the device's first event."""
    if ts is None or ts > LO:
        return ts
    return int(sr.ts[0]) if sr.ts.size else None


def _level_peak(sr: Series, span: tuple[int, int] | None) -> dict[str, Any]:
    if span is None:
        return _series_peak(sr)
    w = _span_peak(sr, *span)
    return {
        "peak_bytes": w["peak_bytes"],
        "peak_ts_ns": _clamp_start(sr, w["peak_ts_ns"]),
        "breakdown_at_peak": w["breakdown_at_peak"],
    }


def _reserved_peak(sr: Series, span: tuple[int, int] | None) -> tuple[int, int] | None:
    """(bytes, ts) of the largest reserved total the allocator reported for ``sr``'s
    device in ``span`` (the last report before the span counts, stamped at its start);
    None without reports, and for the CPU (its allocator keeps no reserve)."""
    if sr.key[1] == "cpu" or not sr.reserved.size:
        return None
    ts, val = sr.reserved_ts, sr.reserved
    if span is not None:
        lo, hi = span
        a = int(np.searchsorted(ts, lo, side="left"))
        b = int(np.searchsorted(ts, hi, side="right"))
        # Candidates: the last report before the span (stamped at its start), then the
        # reports inside it; the first of the largest wins.
        first, stop = max(a - 1, 0), max(a, b)
        if first >= stop:
            return None
        i = first + int(np.argmax(val[first:stop]))
        return int(val[i]), (lo if i < a else int(ts[i]))
    i = int(np.argmax(val))
    return int(val[i]), int(ts[i])


def _levels(
    all_series: list[Series], head: Series, span: tuple[int, int] | None = None
) -> dict[str, Any]:
    """Peak per level on the headline's device (same type, id, rank and process), in
    ``span`` (None: the whole trace), each with the source of a reserved figure."""
    out: dict[str, Any] = {}
    for lv in MEMORY_LEVELS:
        same = [s for s in all_series if s.key[0] == lv and s.key[1:] == head.key[1:]]
        if same:
            out[lv] = _level_peak(same[0], span)
            out[lv]["reserved_source"] = "driver_allocations" if lv == "reserved" else None
    if "reserved" not in out:
        got = _reserved_peak(head, span)
        if got is not None:
            out["reserved"] = {
                "peak_bytes": got[0],
                "peak_ts_ns": got[1],
                "breakdown_at_peak": None,
                "reserved_source": "allocator_total",
            }
    return out


def _device_rows(
    all_series: list[Series], replay: list[dict[str, Any]], window: Window | None = None
) -> list[dict[str, Any]]:
    """One row per (level, device): its peak in the window and over the whole trace, its
    source, the replay's own peak (whole trace) and the reserved total's peak in the
    window (null when not reported, and for the CPU); in key order, nulls last."""
    rep = {tuple(d[k] for k in _DEVICE_KEY): d for d in replay}
    out = []
    for s in all_series:
        span = _bounds_of(window, s.key[3])
        p = _level_peak(s, span)
        r = rep.get(s.key)
        res = _reserved_peak(s, span)
        out.append(
            {
                **dict(zip(_DEVICE_KEY, s.key, strict=True)),
                "peak_bytes": p["peak_bytes"],
                "peak_ts_ns": p["peak_ts_ns"],
                "whole_trace_peak_bytes": _series_peak(s)["peak_bytes"],
                "source": s.source,
                "replay_peak_bytes": r["peak_bytes"] if r else 0,
                "allocator_reserved_peak_bytes": None if res is None else res[0],
                "reserved_source": (
                    "driver_allocations"
                    if s.key[0] == "reserved"
                    else ("allocator_total" if res is not None else None)
                ),
            }
        )
    out.sort(key=lambda d: tuple((d[k] is None, d[k] or 0) for k in _DEVICE_KEY))
    return out


def _reported_max(mem: pa.Table, head: Series | None, col: str) -> int | None:
    """The largest ``col`` the allocator reported on the headline device; null if none."""
    if head is None:
        return None
    if col == "total_reserved_bytes":
        return int(head.reserved.max()) if head.reserved.size else None
    codes, keys = group_codes(mem)
    if head.key not in keys:
        return None
    vals = mem.column(col).filter(pa.array(codes == keys.index(head.key)))
    got = pa.compute.max(vals).as_py()
    return int(got) if got is not None else None


def _devices(blocks: Blocks, events: tuple[Events, npt.NDArray[np.int64]]) -> list[dict[str, Any]]:
    """Peak of the timeline's ``device_total_bytes`` per (level, device_type, device_id,
    rank, pid), in key order with nulls last; the first moment of the maximum wins. From
    the replay's events (the rows of :func:`timeline`, which the text report does not
    build): each event's key is its group's, with the event's level as the timeline
    writes it."""
    ev, lvl = events
    if ev.ts.size == 0:
        return []
    # The timeline's key of each event: its group's device, with the event's level (one
    # per group) as the timeline writes it; groups whose keys are alike share a key.
    gk = blocks.group_keys
    level_of = np.zeros(len(gk), dtype=np.int64)
    level_of[ev.group] = lvl
    keys: list[tuple[object, ...]] = []
    index: dict[tuple[object, ...], int] = {}
    code_of = np.zeros(len(gk), dtype=np.int64)
    for g in np.flatnonzero(np.bincount(ev.group, minlength=len(gk))).tolist():
        key = (MEMORY_LEVELS[int(level_of[g])], *gk[g][1:])
        code_of[g] = index.setdefault(key, len(keys))
        if code_of[g] == len(keys):
            keys.append(key)
    group = code_of[ev.group]
    total = _device_totals(ev)
    # The first moment of each key's maximum: a pass per key for a few devices, else a
    # sort by (key, -total), stable (the first row of a key holds its maximum).
    if len(keys) <= _FEW_DEVICES:
        first = [int(np.argmax(np.where(group == c, total, _I64_MIN))) for c in range(len(keys))]
    else:
        order = np.lexsort((-total, group))
        first = order[np.searchsorted(group[order], np.arange(len(keys)))].tolist()
    out = [
        dict(
            zip(_DEVICE_KEY, key, strict=True),
            peak_bytes=int(total[row]),
            peak_ts_ns=int(ev.ts[row]),
        )
        for key, row in zip(keys, first, strict=True)
    ]
    out.sort(key=lambda d: tuple((d[k] is None, d[k] or 0) for k in _DEVICE_KEY))
    return out


_I64_MIN = np.iinfo(np.int64).min
_FEW_DEVICES = 16  # (level, device) keys found by a pass each in _devices; more: a sort
_DEVICE_KEY = ("level", "device_type", "device_id", "rank", "pid")
