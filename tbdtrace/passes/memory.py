"""Memory over time: live bytes per category, the peak and what it is made of, per step.

Input: the ``memory`` table (alloc/free events, level reserved or allocated, category).
Events are paired into blocks by :func:`tbdtrace.memory.blocks.pair`; a free without a
matching alloc (the block predates the capture) is dropped, so no total ever goes
negative, and a block's free subtracts exactly what its alloc added. A row without a
category counts as ``other``.

Levels are never mixed: ``reserved`` (what the allocator took from the device, CUPTI) and
``allocated`` (tensors inside the allocator) each get their own timeline, summed over
every device and process of that level. The headline numbers use ``allocated`` when the
trace has it (it carries the categories), else ``reserved``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace.memory.blocks import INT64_MAX, Blocks, group_codes, pair
from tbdtrace.passes._util import dict_codes, int_column
from tbdtrace.schema import MEMORY_CATEGORIES, MEMORY_LEVELS
from tbdtrace.trace import Trace

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


@dataclass(frozen=True)
class MemoryConfig:
    level: str | None = None  # level for the headline numbers; None = allocated if present


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


def timeline(trace: Trace, config: MemoryConfig | None = None) -> pa.Table:
    """One row per effective alloc or free, in time order within each level.

    Columns: ts_ns (ns); level; device_type, device_id, rank, pid (where the event was);
    action (alloc|free); category; bytes (size of the block); ``<category>_bytes`` for each
    of MEMORY_CATEGORIES and total_bytes: live bytes of that level, summed over devices,
    just after the event; device_total_bytes: live bytes of that level on the event's
    device (same rank, pid, device) just after it. Frees with no matching alloc are absent.
    """
    mem = trace.table("memory", _COLS)
    return _timeline(mem, pair(mem))


def run(trace: Trace, config: MemoryConfig | None = None) -> pa.Table:
    """The pass entry point: :func:`timeline`."""
    return timeline(trace, config)


def _timeline(mem: pa.Table, blocks: Blocks) -> pa.Table:
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
    b_all, sign, ts, lvl = b_all[order], sign[order], ts[order], lvl[order]
    delta = np.zeros((b_all.size, len(MEMORY_CATEGORIES)), dtype=np.int64)
    delta[np.arange(b_all.size), cat[b_all]] = sign * blocks.bytes[b_all]
    live = np.zeros_like(delta)
    dev_total = np.zeros(b_all.size, dtype=np.int64)
    grp = blocks.group[b_all]
    for lv in np.unique(lvl):
        m = lvl == lv
        live[m] = np.cumsum(delta[m], axis=0)
    row_delta = delta.sum(axis=1)
    for g in np.unique(grp):
        m = grp == g
        dev_total[m] = np.cumsum(row_delta[m])
    keys = blocks.group_keys
    cols: dict[str, Any] = {
        "ts_ns": pa.array(ts, pa.int64()),
        "level": _take(list(MEMORY_LEVELS), lvl, pa.string()),
        "device_type": _take([k[1] for k in keys], grp, pa.string()),
        "device_id": _take([k[2] for k in keys], grp, pa.int32()),
        "rank": _take([k[3] for k in keys], grp, pa.int32()),
        "pid": _take([k[4] for k in keys], grp, pa.int32()),
        "action": _take(["free", "alloc"], (sign > 0).astype(np.int64), pa.string()),
        "category": _take(list(MEMORY_CATEGORIES), cat[b_all], pa.string()),
        "bytes": pa.array(blocks.bytes[b_all], pa.int64()),
    }
    for i, name in enumerate(CATEGORY_COLUMNS):
        cols[name] = pa.array(live[:, i], pa.int64())
    cols["total_bytes"] = pa.array(live.sum(axis=1), pa.int64())
    cols["device_total_bytes"] = pa.array(dev_total, pa.int64())
    return pa.table(cols)


def _take(values: list[Any], idx: npt.NDArray[np.int64], typ: pa.DataType) -> pa.Array:
    """``values[idx]`` as an Arrow array of ``typ`` (nulls where the value is None);
    strings stay dictionary-encoded (the few labels, then one index per row)."""
    if pa.types.is_string(typ):
        uniq = list(dict.fromkeys(values))  # a dictionary's values must be distinct
        lut = np.array([uniq.index(v) for v in values] or [0], dtype=np.int32)
        codes = lut[idx] if len(idx) else np.zeros(0, dtype=np.int32)
        return pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(uniq, typ))
    return pa.array(values, typ).take(pa.array(idx, pa.int64()))


def _peak(tl: pa.Table) -> dict[str, Any]:
    """Peak of total_bytes (first moment it is reached) and the breakdown then."""
    if tl.num_rows == 0:
        return {
            "peak_bytes": 0,
            "peak_ts_ns": None,
            "breakdown_at_peak": {c: 0 for c in MEMORY_CATEGORIES},
        }
    total = tl.column("total_bytes").to_numpy()
    i = int(np.argmax(total))
    return {
        "peak_bytes": int(total[i]),
        "peak_ts_ns": int(tl.column("ts_ns")[i].as_py()),
        "breakdown_at_peak": {
            c: int(tl.column(f"{c}_bytes")[i].as_py()) for c in MEMORY_CATEGORIES
        },
    }


def _level(tl: pa.Table, level: str) -> pa.Table:
    return tl.filter(pa.compute.equal(tl.column("level"), level))


def per_step(tl: pa.Table, steps: pa.Table) -> list[dict[str, Any]]:
    """For each step window [start_ns, end_ns]: live bytes at its start and end, and its
    peak (including what was live when it began) with the breakdown at that moment."""
    out = []
    ts = tl.column("ts_ns").to_numpy() if tl.num_rows else np.zeros(0, np.int64)
    live = (
        np.stack([tl.column(c).to_numpy() for c in CATEGORY_COLUMNS], axis=1)
        if tl.num_rows
        else np.zeros((0, len(CATEGORY_COLUMNS)), np.int64)
    )
    zero = np.zeros(len(CATEGORY_COLUMNS), np.int64)
    for step, s, e in zip(
        int_column(steps, "step"),
        int_column(steps, "start_ns"),
        int_column(steps, "end_ns"),
        strict=True,
    ):
        lo = int(np.searchsorted(ts, s, side="left"))
        hi = int(np.searchsorted(ts, e, side="right"))
        first = live[lo - 1] if lo else zero
        cand = np.vstack([first[None, :], live[lo:hi]])
        k = int(np.argmax(cand.sum(axis=1)))
        at = cand[k]
        out.append(
            {
                "step": int(step),
                "start_ns": int(s),
                "end_ns": int(e),
                "start_bytes": int(first.sum()),
                "end_bytes": int((live[hi - 1] if hi else zero).sum()),
                "peak_bytes": int(at.sum()),
                "peak_ts_ns": int(s) if k == 0 else int(ts[lo + k - 1]),
                "breakdown_at_peak": {
                    c: int(v) for c, v in zip(MEMORY_CATEGORIES, at, strict=True)
                },
            }
        )
    return out


def summarize(
    trace: Trace, config: MemoryConfig | None = None, tl: pa.Table | None = None
) -> dict[str, Any]:
    """The report's ``memory`` document.

    Keys: level (the one the headline numbers are for), peak_bytes, peak_ts_ns,
    breakdown_at_peak (every category, bytes, 0 where none), levels (level -> the same
    three for each level present), devices (per level and device: peak_bytes,
    peak_ts_ns), steps (per step: see :func:`per_step`), event_count, first_ts_ns (the
    earliest memory event, ns; null when none), unmatched_frees
    (frees dropped because their alloc predates the capture), allocator_peak_bytes (the
    largest total_allocated_bytes the allocator itself reported; null when absent),
    allocator_reserved_peak_bytes (the same for total_reserved_bytes: the caching
    allocator's reserved memory in torch.profiler traces),
    model_bytes (weights/gradients/optimizer_state sized from a model's variables, for
    frameworks sampled by totals such as TensorFlow; null otherwise).
    """
    config = config or MemoryConfig()
    mem = trace.table("memory", _COLS + ["total_allocated_bytes", "total_reserved_bytes"])
    blocks = pair(mem)
    tl = _timeline(mem, blocks) if tl is None else tl
    seen = set(pa.compute.unique(tl.column("level")).to_pylist())
    present = [lv for lv in MEMORY_LEVELS if lv in seen]
    level = config.level or (
        "allocated" if "allocated" in present else (present[0] if present else "allocated")
    )
    main = _level(tl, level)
    doc: dict[str, Any] = {"level": level, **_peak(main)}
    doc["levels"] = {lv: _peak(_level(tl, lv)) for lv in present}
    doc["devices"] = _devices(tl)
    doc["steps"] = per_step(main, trace.table("steps", ["step", "start_ns", "end_ns"]))
    doc["event_count"] = mem.num_rows
    doc["first_ts_ns"] = int(pa.compute.min(mem.column("ts_ns")).as_py()) if mem.num_rows else None
    doc["unmatched_frees"] = blocks.unmatched_frees
    for key, col in (
        ("allocator_peak_bytes", "total_allocated_bytes"),
        ("allocator_reserved_peak_bytes", "total_reserved_bytes"),
    ):
        reported = mem.column(col)
        doc[key] = (
            int(pa.compute.max(reported).as_py()) if reported.null_count < len(reported) else None
        )
    extra = trace.meta.get("extra") or {}
    doc["model_bytes"] = extra.get("memory_model") if isinstance(extra, dict) else None
    return doc


def _devices(tl: pa.Table) -> list[dict[str, Any]]:
    """Peak of ``device_total_bytes`` per (level, device_type, device_id, rank, pid), in
    key order with nulls last; the first moment of the maximum wins."""
    if tl.num_rows == 0:
        return []
    group, keys = group_codes(tl)
    total = int_column(tl, "device_total_bytes", 0)
    ts = int_column(tl, "ts_ns", 0)
    order = np.lexsort((-total, group))  # stable: the first row of a group holds its max
    first = order[np.searchsorted(group[order], np.arange(len(keys)))]
    out = [
        dict(
            zip(_DEVICE_KEY, key, strict=True), peak_bytes=int(total[row]), peak_ts_ns=int(ts[row])
        )
        for key, row in zip(keys, first, strict=True)
    ]
    out.sort(key=lambda d: tuple((d[k] is None, d[k] or 0) for k in _DEVICE_KEY))
    return out


_DEVICE_KEY = ("level", "device_type", "device_id", "rank", "pid")
