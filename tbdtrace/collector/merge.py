"""Turn collector spools (one per process) into trace tables and meta.

Spool columns are what CUPTI records carry; constant or per-process columns are filled in
here: ``pid`` (the spool's process where the record has none), ``device_type`` = cuda,
``memory.level`` = reserved (CUPTI MEMORY2 sees device allocations, not tensors), and
``sync.device_id`` from the CONTEXT records. Context records and per-process collector
statistics go into ``meta.extra``; CUPTI's dropped-record counts into
``meta.dropped_records`` as ``{"<pid>:<context id>": count}``; spool write errors (a full
disk) summed into ``meta.extra.spool_errors``/``spool_lost_rows``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace import schema
from tbdtrace.collector.spool import Spool, columns

_CUDA_TABLES = ("kernels", "memcpy", "memset", "memory", "devices")
_PID_TABLES = (
    "kernels",
    "memcpy",
    "memset",
    "memory",
    "runtime",
    "markers",
    "sync",
    "overhead",
    "devices",
)


def _plain(cols: dict[str, pa.Array]) -> dict[str, pa.Array]:
    # Each spool has its own string dictionary; plain strings concatenate safely and
    # tbdtrace.trace re-encodes them.
    return {
        k: v.cast(pa.string()) if pa.types.is_dictionary(v.type) else v for k, v in cols.items()
    }


def _process_tables(sp: Spool) -> dict[str, pa.Table]:
    out: dict[str, pa.Table] = {}
    ctx = columns(sp, "_contexts")
    ctx_dev = (
        dict(zip(ctx["context_id"].to_pylist(), ctx["device_id"].to_pylist(), strict=True))
        if ctx
        else {}
    )
    for name in _PID_TABLES:
        cols = _plain(columns(sp, name))
        if not cols:
            continue
        n = len(next(iter(cols.values())))
        if "pid" in cols:
            pid = cols["pid"].to_numpy(zero_copy_only=False)
            cols["pid"] = pa.array(
                np.where(cols["pid"].is_null().to_numpy(zero_copy_only=False), sp.pid, pid).astype(
                    np.int32
                )
            )
        else:
            cols["pid"] = pa.array(np.full(n, sp.pid, dtype=np.int32))
        if name in _CUDA_TABLES:
            cols["device_type"] = pa.array(["cuda"] * n)
        if name == "memory":
            cols["level"] = pa.array(["reserved"] * n)
        if name == "sync" and ctx_dev:
            cols["device_id"] = pa.array(
                [ctx_dev.get(c) for c in cols["context_id"].to_pylist()], type=pa.int32()
            )
        decl = schema.table(name)
        arrays = [
            cols[c.name]
            if c.name in cols
            else pa.nulls(n, pa.string() if c.type == schema.STR else c.type)
            for c in decl.columns
        ]
        out[name] = pa.Table.from_arrays(arrays, names=decl.column_names)
    return out


def merge(spools: list[Spool]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tables, meta) for tbdtrace.trace.write from the spools of one capture."""
    parts: dict[str, list[pa.Table]] = {}
    procs: list[dict[str, Any]] = []
    dropped: dict[str, int] = {}
    contexts: list[dict[str, Any]] = []
    starts = []
    counters: list[dict[str, Any]] = []
    for sp in spools:
        ptables = _process_tables(sp)
        if sp.counters and "kernels" in ptables:
            ptables["kernels"] = _counter_flops(sp, ptables["kernels"], counters)
        for name, tbl in ptables.items():
            parts.setdefault(name, []).append(tbl)
        m = dict(sp.meta or {})
        procs.append(
            {
                "pid": sp.pid,
                "chunks": sp.chunks,
                "truncated_bytes": sp.truncated_bytes,
                "clean_stop": sp.meta is not None,
                **m,
            }
        )
        for ctx_id, n in (m.get("dropped_records") or {}).items():
            dropped[f"{sp.pid}:{ctx_id}"] = int(n)
        if m.get("start_time_ns") is not None:
            starts.append(int(m["start_time_ns"]))
        ctx = columns(sp, "_contexts")
        if ctx:
            contexts += [dict(r, pid=sp.pid) for r in pa.table(ctx).to_pylist()]
    spool_errors = sum(int(p.get("spool_errors") or 0) for p in procs)
    # Which runtime/driver calls were recorded: "lite" (the calls the analysis reads, off at
    # the source for the rest), "full", or "mixed"; None for spools older than the choice.
    api_sets = {p.get("api") for p in procs if p.get("api")}
    api = api_sets.pop() if len(api_sets) == 1 else ("mixed" if api_sets else None)
    lost_rows = sum(int(p.get("spool_lost_rows") or 0) for p in procs)
    merged = {name: pa.concat_tables(ts) for name, ts in parts.items()}
    devices = merged["devices"].to_pylist() if "devices" in merged else []
    # Column mappings: tbdtrace.trace dictionary-encodes the string columns.
    tables: dict[str, Any] = {
        name: dict(zip(t.column_names, t.columns, strict=True)) for name, t in merged.items()
    }
    meta = {
        "source": "cupti",
        "clock": "CLOCK_REALTIME",  # CUPTI's default timestamps on Linux: see docs/COLLECTOR.md
        "clock_offset_ns": 0,
        "start_time_ns": min(starts) if starts else None,
        "dropped_records": dropped,
        "devices": devices,
        "extra": {
            "collector_processes": procs,
            "contexts": contexts,
            "spool_errors": spool_errors,
            "spool_lost_rows": lost_rows,
            **({"api": api} if api else {}),
            **({"counters": counters} if counters else {}),
        },
    }
    return tables, meta


def _counter_flops(sp: Spool, kernels: pa.Table, summary: list[dict[str, Any]]) -> pa.Table:
    """Fill ``kernels.flops`` from the process's hardware counter data (one image per
    context; tbdtrace.collector.flops.join_ranges), and describe each join in ``summary``."""
    from tbdtrace.collector import flops
    from tbdtrace.errors import TraceError

    flop_col: list[int | None] = kernels.column("flops").to_pylist()
    ctx_col = kernels.column("context_id").to_numpy(zero_copy_only=False)
    corr = kernels.column("correlation_id").to_numpy(zero_copy_only=False)
    names = kernels.column("name").to_pylist()
    mangled = kernels.column("mangled_name").to_pylist()
    for c in sp.counters:
        rows = np.flatnonzero(ctx_col == c["context_id"])
        rows = rows[np.argsort(corr[rows], kind="stable")]  # launch order
        entry: dict[str, Any] = {
            "pid": sp.pid,
            "context_id": c["context_id"],
            "chip": c["chip"],
            "dropped_ranges": c["dropped_ranges"],
            "kernels": len(rows),
        }
        try:
            ranges = flops.decode(c["chip"], c["image"], c["metrics"])
        except TraceError as e:
            entry.update(ranges=0, joined=False, reason=str(e))
            summary.append(entry)
            continue
        vals, why = flops.join_ranges([names[i] for i in rows], [mangled[i] for i in rows], ranges)
        entry.update(ranges=len(ranges), joined=vals is not None, reason=why)
        totals = flops.flops_from_counters(
            {m: sum(v.get(m, 0.0) for _, v in ranges) for m in c["metrics"]}
        )
        entry["flops_by_precision"] = totals
        if vals is not None:
            for r, v in zip(rows, vals, strict=True):
                flop_col[r] = round(v)
        summary.append(entry)
    i = kernels.column_names.index("flops")
    return kernels.set_column(i, "flops", pa.array(flop_col, type=pa.int64()))


def incomplete_reason(meta: dict[str, Any]) -> str | None:
    """One line saying why the merged trace misses records the collector saw, or None."""
    extra = meta.get("extra") or {}
    errors = int(extra.get("spool_errors") or 0)
    if not errors:
        return None
    first = next(
        (p["spool_error"] for p in extra.get("collector_processes", []) if p.get("spool_error")),
        "",
    )
    return (
        f"the trace is incomplete: {errors} spool write error(s), "
        f"{int(extra.get('spool_lost_rows') or 0)} rows lost ({first}); "
        "free disk space in the temporary directory (TMPDIR) and capture again"
    )


__all__ = ["incomplete_reason", "merge"]
