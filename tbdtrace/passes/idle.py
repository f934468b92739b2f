"""Device idle time and its causes; launch latency; kernels shorter than their launch.

Per device, over its span (as in the summary pass), every gap [a, b) between merged busy
intervals (kernels, memcpy, memset) is split (docs/METRICS.md, "Idle"):

* ``sync_wait_ns``: the part during which the host sat in a synchronization wait (rows of
  the ``sync`` table, and runtime calls named ``*Synchronize*``, of the same rank);
* ``host_bound_ns``: the rest of [a, L), where L is the start of the runtime call that
  launched the work ending the gap: nothing was queued, the device waited on the host;
* ``short_gap_ns``: the rest of [L, b): the next work was already issued (launch latency,
  stream dependencies). When the next work has no runtime call, a gap shorter than
  ``IdleConfig.short_gap_ns`` counts as a short gap and a longer one as host-bound.

The three sum to ``idle_ns`` = span - busy. Launch latency = kernel start - start of its
runtime call; a kernel is "shorter than its launch" when its duration is below the
duration of that runtime call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace import intervals
from tbdtrace.passes._intervals_ext import covered_in_windows
from tbdtrace.passes._util import decode_device_key, device_keys, dict_codes, int_column
from tbdtrace.passes.attribution import runtime_match
from tbdtrace.trace import Trace


@dataclass(frozen=True)
class IdleConfig:
    # Gap below which idle time counts as a short gap when no launch call is known (ns).
    short_gap_ns: int = 10_000


_EV = ["start_ns", "end_ns", "device_id", "device_type", "rank", "correlation_id"]
_STATS = ("mean", "p50", "p90", "p99", "max")
SCHEMA = pa.schema([
    ("rank", pa.int32()), ("device_type", pa.string()), ("device_id", pa.int32()),
    ("span_ns", pa.int64()), ("busy_ns", pa.int64()), ("idle_ns", pa.int64()),
    ("host_bound_ns", pa.int64()), ("short_gap_ns", pa.int64()), ("sync_wait_ns", pa.int64()),
    ("gap_count", pa.int64()), ("launch_count", pa.int64()),
    *[(f"launch_latency_{s}_ns", pa.float64()) for s in _STATS],
    ("short_kernel_count", pa.int64()), ("short_kernel_ns", pa.int64()),
])


def run(trace: Trace, config: IdleConfig | None = None) -> pa.Table:
    """One row per device. Columns: rank, device_type, device_id; span_ns, busy_ns,
    idle_ns, host_bound_ns, short_gap_ns, sync_wait_ns (ns); gap_count; launch_count
    (kernels with a matched runtime call); launch_latency_{mean,p50,p90,p99,max}_ns (ns,
    null without launches); short_kernel_count, short_kernel_ns (kernels shorter than
    their launch call, and their summed duration)."""
    cfg = config or IdleConfig()
    rt = trace.table("runtime", ["start_ns", "end_ns", "rank", "correlation_id", "name"])
    r_s, r_e = int_column(rt, "start_ns"), int_column(rt, "end_ns")
    parts = []
    for i, name in enumerate(("kernels", "memcpy", "memset")):
        t = trace.table(name, _EV)
        m = runtime_match(t, rt)
        mc = np.clip(m, 0, None)
        launch = np.where(m >= 0, r_s[mc] if rt.num_rows else -1, -1)
        launch_end = np.where(m >= 0, r_e[mc] if rt.num_rows else -1, -1)
        parts.append((device_keys(t), int_column(t, "start_ns"), int_column(t, "end_ns"),
                      launch, launch_end, np.full(t.num_rows, i)))
    key, s, e, ls, le, kind = (np.concatenate(x) for x in zip(*parts, strict=True))
    sync = _sync_intervals(trace, rt)
    rows: dict[str, list[Any]] = {f.name: [] for f in SCHEMA}
    for k in np.unique(key):
        sel = key == k
        rank, dtype, dev = decode_device_key(int(k))
        r = _device(s[sel], e[sel], ls[sel], le[sel], kind[sel] == 0,
                    sync.get(-1 if rank is None else rank, (np.zeros(0, np.int64),) * 2), cfg)
        r.update(rank=rank, device_type=dtype, device_id=dev)
        for c in rows:
            rows[c].append(r[c])
    return pa.table(rows, schema=SCHEMA)


def _sync_intervals(trace: Trace, rt: pa.Table) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    sy = trace.table("sync", ["start_ns", "end_ns", "rank"])
    codes, labels = dict_codes(rt, "name")
    is_sync = np.array(["Synchronize" in (x or "") for x in labels], dtype=bool)
    rsel = is_sync[codes] if codes.size else np.zeros(0, dtype=bool)
    rank = np.concatenate([int_column(sy, "rank"), int_column(rt, "rank")[rsel]])
    s = np.concatenate([int_column(sy, "start_ns"), int_column(rt, "start_ns")[rsel]])
    e = np.concatenate([int_column(sy, "end_ns"), int_column(rt, "end_ns")[rsel]])
    return {int(r): intervals.merge(s[rank == r], e[rank == r]) for r in np.unique(rank)}


def _device(s: np.ndarray, e: np.ndarray, ls: np.ndarray, le: np.ndarray,
            is_kernel: np.ndarray, sync: tuple[np.ndarray, np.ndarray],
            cfg: IdleConfig) -> dict[str, Any]:
    ms, me = intervals.merge(s, e)
    span = int(e.max() - s.min()) if s.size else 0
    busy = int((me - ms).sum())
    ga, gb = me[:-1], ms[1:]  # gaps between merged busy intervals
    # The work ending each gap: an event starting exactly at gb; prefer one with a launch.
    order = np.lexsort((-ls, s))
    pos = np.searchsorted(s[order], gb, side="left")
    nxt = order[np.clip(pos, 0, max(s.size - 1, 0))] if s.size else pos
    launch = ls[nxt] if gb.size else np.zeros(0, np.int64)
    known = launch >= 0
    cut = np.where(known, np.clip(launch, ga, gb),
                   np.where(gb - ga < cfg.short_gap_ns, ga, gb))
    sync_a = covered_in_windows(sync[0], sync[1], ga, cut)
    sync_b = covered_in_windows(sync[0], sync[1], cut, gb)
    host = int((cut - ga).sum() - sync_a.sum())
    short = int((gb - cut).sum() - sync_b.sum())
    out: dict[str, Any] = {
        "span_ns": span, "busy_ns": busy, "idle_ns": span - busy, "host_bound_ns": host,
        "short_gap_ns": short, "sync_wait_ns": int(sync_a.sum() + sync_b.sum()),
        "gap_count": int(ga.size),
    }
    launched = is_kernel & (ls >= 0)
    lat = (s - ls)[launched].astype(np.float64)
    out["launch_count"] = int(launched.sum())
    vals = (lat.mean(), *np.percentile(lat, [50, 90, 99]), lat.max()) if lat.size else \
        (None,) * len(_STATS)
    for st, v in zip(_STATS, vals, strict=True):
        out[f"launch_latency_{st}_ns"] = None if v is None else float(v)
    short_k = launched & ((e - s) < (le - ls))
    out["short_kernel_count"] = int(short_k.sum())
    out["short_kernel_ns"] = int((e - s)[short_k].sum())
    return out


def summarize(tbl: pa.Table) -> dict[str, Any]:
    """Totals over devices of the ns columns and the gap/short-kernel counts."""
    cols = ("span_ns", "busy_ns", "idle_ns", "host_bound_ns", "short_gap_ns", "sync_wait_ns",
            "gap_count", "launch_count", "short_kernel_count", "short_kernel_ns")
    return {c: int(pc.sum(tbl.column(c)).as_py() or 0) for c in cols}
