"""Memory advice: what the peak is made of by op and by module, the allocator's
fragmentation at the peak, and the headroom left on the device (docs/METRICS.md,
"Memory advice").

Rules, on the memory summary's headline device and level
(:func:`tbdtrace.analysis.engine.memory_replay.summarize`) and its peak (the window's):

- live at the peak: the blocks of that device and level (allocs paired with frees,
  :func:`tbdtrace.analysis.engine.memory_blocks.pair`) allocated at or before the peak's
  time and freed after it (or never);
- by op: each live block goes to the outermost framework op on its allocating thread
  (pid, tid) that contains the allocation's time (the op the program called, such as
  ``aten::linear`` or an autograd ``evaluate_function``, rather than the ``aten::empty``
  inside it), skipping ``nn.Module`` ranges and Python-function frames; by module: to
  the innermost ``nn.Module: ...`` range containing it. A block whose thread or time
  holds no such range is ``null`` (not attributed); the peak's bytes that no block
  explains (allocated before the trace began, where the level is the allocator's own
  total) are a row of their own, ``pre_existing`` true;
- fragmentation: the reserved level minus the allocated level at the allocated peak
  (bytes the allocator holds but no tensor uses), where the trace has both levels on
  that device (never for the CPU, whose allocator keeps no reserve); the reserved level
  is replayed from reserved events, else the allocator's last reported reserved total;
- headroom: the device's memory (``devices.memory_bytes``) minus the reserved peak (the
  allocated peak where no reserved level is known), where the trace describes the
  device; null (unknown) otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace.analysis.engine import shared_arrays
from tbdtrace.analysis.engine.attribution import on_threads, outermost, thread_groups
from tbdtrace.analysis.engine.context import AnalysisContext
from tbdtrace.analysis.engine.memory_blocks import blocks_of, group_codes
from tbdtrace.arrow_ints import int_column

I64 = npt.NDArray[np.int64]
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
    "tid",
]
BY = ("op", "module")


def _key(summary: dict[str, Any], level: str) -> tuple[object, ...] | None:
    d = summary.get("device")
    if not d:
        return None
    return (level, d["device_type"], d["device_id"], d["rank"], d["pid"])


def live_at(ctx: AnalysisContext, key: tuple[object, ...], ts: int) -> tuple[pa.Table, I64, I64]:
    """(the memory table, alloc rows of the blocks live at ``ts`` on device and level
    ``key``, their bytes)."""
    mem = ctx.table("memory", _COLS)
    blocks = blocks_of(ctx, mem)
    if key not in blocks.group_keys:
        return mem, np.zeros(0, np.int64), np.zeros(0, np.int64)
    g = blocks.group_keys.index(key)
    live = (
        (blocks.group == g)
        & (blocks.alloc_row >= 0)
        & (blocks.alloc_ts_ns <= ts)
        & (blocks.free_ts_ns > ts)
    )
    return mem, blocks.alloc_row[live], blocks.bytes[live]


def owners(ctx: AnalysisContext, mem: pa.Table, rows: I64, by: str) -> list[str | None]:
    """The op (``by="op"``) or module (``"module"``) each memory row of ``rows`` was
    allocated in (rules in the module docstring); None where none contains it."""
    if rows.size == 0 or ctx.num_rows("ops") == 0:
        return [None] * int(rows.size)
    tid = int_column(mem, "tid", -1)[rows]
    pid = int_column(mem, "pid", -1)[rows]
    ts = int_column(mem, "ts_ns", 0)[rows]
    o_codes, o_labels = shared_arrays.codes(ctx, "ops", "name")
    lut = np.array([x is not None and x.startswith("nn.Module:") for x in o_labels], bool)
    is_module = lut[o_codes] if o_codes.size else np.zeros(0, bool)
    q = np.flatnonzero(tid >= 0)
    found = np.full(rows.size, -1, np.int64)
    if q.size:
        groups = thread_groups(pid[q], tid[q])
        if by == "module":
            keep = is_module
        else:
            is_py = shared_arrays.label_mask(
                ctx, "ops", "category", lambda x: x == "python_function"
            )
            keep = outermost(ctx, ~is_py & ~is_module)
        found[q] = on_threads(ctx, "ops", keep, groups, ts[q])
    names = [o_labels[o_codes[i]] if i >= 0 else None for i in found.tolist()]
    return names


def peak_by(ctx: AnalysisContext, summary: dict[str, Any], by: str) -> list[dict[str, Any]]:
    """Rows of the peak by ``by`` (op or module), largest first: name (null: not
    attributed), blocks, bytes, share of the peak, pre_existing (the row of bytes no
    block explains)."""
    if by not in BY:
        raise ValueError(f"by must be one of {BY}, not {by!r}")
    peak, ts = summary.get("peak_bytes"), summary.get("peak_ts_ns")
    key = _key(summary, str(summary.get("level")))
    if peak is None or ts is None or key is None:
        return []
    mem, alloc_rows, nbytes = live_at(ctx, key, int(ts))
    names = owners(ctx, mem, alloc_rows, by)
    acc: dict[str | None, list[int]] = {}
    for name, b in zip(names, nbytes.tolist(), strict=True):
        a = acc.setdefault(name, [0, 0])
        a[0] += 1
        a[1] += b
    peak = int(peak)
    out: list[tuple[str | None, int, int, bool]] = [(n, c, b, False) for n, (c, b) in acc.items()]
    rest = peak - int(nbytes.sum())
    if rest > 0:
        out.append((None, 0, rest, True))
    out.sort(key=lambda r: (-r[2], r[0] is None, r[0] or ""))
    return [
        {"name": n, "blocks": c, "bytes": b, "share": b / peak if peak else None, "pre_existing": p}
        for n, c, b, p in out
    ]


def _reserved_at(ctx: AnalysisContext, summary: dict[str, Any], ts: int) -> int | None:
    """The reserved level of the headline device at ``ts``: replayed from its reserved
    events (blocks allocated at or before ``ts`` and freed after it), else the last
    reserved total the allocator reported at or before ``ts``; None without either."""
    key = _key(summary, "reserved")
    if key is None or key[1] == "cpu":  # the CPU allocator keeps no reserve
        return None
    mem = ctx.table("memory", [*_COLS, "total_reserved_bytes"])
    codes, keys = group_codes(mem)
    if key in keys:
        _, _, nbytes = live_at(ctx, key, ts)
        return int(nbytes.sum())
    alloc_key = ("allocated", *key[1:])
    if alloc_key not in keys:
        return None
    sel = codes == keys.index(alloc_key)
    tr = int_column(mem, "total_reserved_bytes", -1)
    t = int_column(mem, "ts_ns", 0)
    ok = np.flatnonzero(sel & (tr >= 0) & (t <= ts))
    return int(tr[ok[-1]]) if ok.size else None


def _device_memory(ctx: AnalysisContext, summary: dict[str, Any]) -> int | None:
    d = summary.get("device") or {}
    dev = ctx.table("devices", ["device_type", "device_id", "rank", "memory_bytes"])
    best = None
    for r in dev.to_pylist():
        if r["device_type"] != d.get("device_type") or r["device_id"] != d.get("device_id"):
            continue
        if d.get("rank") is not None and r["rank"] is not None and r["rank"] != d["rank"]:
            continue
        if r["memory_bytes"]:
            best = int(r["memory_bytes"])
    return best


def advice(ctx: AnalysisContext, summary: dict[str, Any]) -> dict[str, Any]:
    """The memory section's ``advice``: the peak by op and by module, fragmentation and
    headroom (module docstring), on ``ctx`` (the whole trace) and ``summary`` (the memory
    summary of the report's window)."""
    levels = summary.get("levels") or {}
    alloc = levels.get("allocated") or {}
    reserved = levels.get("reserved") or {}
    frag = reserved_at = None
    if alloc.get("peak_bytes") is not None and alloc.get("peak_ts_ns") is not None:
        reserved_at = _reserved_at(ctx, summary, int(alloc["peak_ts_ns"]))
        if reserved_at is not None:
            frag = reserved_at - int(alloc["peak_bytes"])
    total = _device_memory(ctx, summary)
    held = reserved.get("peak_bytes")
    held_level = "reserved"
    if held is None:
        held, held_level = summary.get("peak_bytes"), str(summary.get("level"))
    headroom = None if total is None or held is None else total - int(held)
    return {
        "peak_bytes": summary.get("peak_bytes"),
        "level": summary.get("level"),
        "reserved_at_peak_bytes": reserved_at,
        "fragmentation_bytes": frag,
        "device_memory_bytes": total,
        "headroom_bytes": headroom,
        "headroom_of": held_level if headroom is not None else None,
        "peak_by_op": peak_by(ctx, summary, "op"),
        "peak_by_module": peak_by(ctx, summary, "module"),
    }
