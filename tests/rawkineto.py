"""A deliberately small, independent reader of Kineto JSON for tests.

It shares no code with tbdtrace's importer: it uses Decimal on the raw text for times
and reads categories straight from the events, so tests can compare the importer's
tables and the report's figures against it.
"""

from __future__ import annotations

import functools
import gzip
import json
import statistics
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

KERNEL = {"kernel", "Kernel"}
MEMCPY = {"gpu_memcpy", "Memcpy"}
MEMSET = {"gpu_memset", "Memset"}
RUNTIME = {"cuda_runtime", "Runtime", "cuda_driver"}


def load(path: Path) -> dict[str, Any]:
    """The parsed file. The last few files read are kept (tests of one fixture file run one
    after another and many read it), so callers must not modify what they are given."""
    st = path.stat()
    return _load(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _load(path: str, _size: int, _mtime_ns: int) -> dict[str, Any]:
    doc = json.loads(
        gzip.decompress(Path(path).read_bytes()).decode("utf-8", "replace"), parse_float=Decimal
    )
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


def ns(v: Any) -> int:
    return int(Decimal(v) * 1000)


def device_events(path: Path) -> dict[str, list[tuple[int, int, int, Any]]]:
    """cat group -> [(start_ns, end_ns, device, event)] for X events (relative times)."""
    doc = load(path)
    out: dict[str, list[tuple[int, int, int, Any]]] = defaultdict(list)
    for e in doc["traceEvents"]:
        if e.get("ph") != "X":
            continue
        c = e.get("cat")
        group = (
            "kernels"
            if c in KERNEL
            else "memcpy"
            if c in MEMCPY
            else "memset"
            if c in MEMSET
            else "runtime"
            if c in RUNTIME
            else None
        )
        if group is None:
            continue
        s = ns(e["ts"])
        dev = (e.get("args") or {}).get("device", e.get("pid"))
        out[group].append((s, s + ns(e.get("dur", 0)), dev, e))
    return out


def union(iv: list[tuple[int, int]]) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(iv):
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def expected_report(path: Path) -> dict[str, Any]:
    ev = device_events(path)
    by_dev: dict[Any, dict[str, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
    for group in ("kernels", "memcpy", "memset"):
        for s, e, d, _ in ev[group]:
            by_dev[d][group].append((s, e))
    devices = {}
    for d, g in by_dev.items():
        every = g["kernels"] + g["memcpy"] + g["memset"]
        # Zero-duration events occupy no time and do not extend the span (METRICS.md).
        timed = [(s, e) for s, e in every if e > s] or every
        span = max(e for _, e in timed) - min(s for s, _ in timed)
        devices[d] = {
            "kernel_count": len(g["kernels"]),
            "kernel_time_ns": sum(e - s for s, e in g["kernels"]),
            "span_ns": span,
            "busy_ns": union(every),
            "compute_busy_ns": union(g["kernels"]),
        }
    kernels: dict[str, list[int]] = defaultdict(list)
    for s, e, _, x in ev["kernels"]:
        kernels[x["name"]].append(e - s)
    kstats = {
        n: {
            "count": len(v),
            "total_ns": sum(v),
            "min_ns": min(v),
            "max_ns": max(v),
            "median_ns": statistics.median(v),
            "std_ns": statistics.stdev(v) if len(v) > 1 else 0.0,
        }
        for n, v in kernels.items()
    }
    every = [(s, e) for g in ("kernels", "memcpy", "memset") for s, e, _, _ in ev[g]]
    timed = [(s, e) for s, e in every if e > s] or every
    return {
        # One file is one rank: its span over all its devices, and the union of their
        # busy time (time some device of the rank was busy).
        "rank_span_ns": max(e for _, e in timed) - min(s for s, _ in timed) if timed else 0,
        "rank_busy_ns": union(every),
        "kernel_count": len(ev["kernels"]),
        "kernel_time_ns": sum(e - s for s, e, _, _ in ev["kernels"]),
        "memcpy_count": len(ev["memcpy"]),
        "memcpy_bytes": sum(int(x["args"].get("bytes", 0)) for *_, x in ev["memcpy"]),
        "memset_count": len(ev["memset"]),
        "runtime_count": len(ev["runtime"]),
        "devices": devices,
        "kernels": kstats,
    }


# ---- Every table's rows, from the raw JSON (the oracle of the C++ parser's tests) ----------
#
# Written from docs/IMPORTERS.md, not from the importer: JSON through the standard library
# (decimals kept as their text, as Kineto wrote them), times through exact Decimal
# arithmetic, integers by the documented reading, column ranges from the trace schema.

_INT_RANGE = {"int32": 31, "int64": 63}
_MEMORY_KINDS = {"Pageable", "Pinned", "Device", "Array", "Managed"}
_SYNC = {
    "Event Sync": "event",
    "Stream Sync": "stream",
    "Context Sync": "context",
    "Stream Wait Event": "stream_wait_event",
}
_TABLES = ("kernels", "memcpy", "memset", "memory", "runtime", "ops", "markers", "steps", "sync")


def load_text(path: Path) -> Any:
    """The document with decimals as text (invalid UTF-8 read as U+FFFD)."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw.decode("utf-8", "replace"), parse_float=str)


def _integer(v: Any) -> int | None:
    """An integer as Kineto writes them: a JSON integer or bool, or text of digits (a
    leading minus, surrounding blanks, an optional "stream " prefix)."""
    if isinstance(v, bool | int):
        return int(v)
    if not isinstance(v, str):
        return None
    s = v.strip()
    if s.startswith("stream "):
        return _integer(s[len("stream ") :])
    digits = s[1:] if s.startswith("-") else s
    return int(s) if digits.isdigit() else None


def _fit(v: int | None, typ: str) -> int | None:
    if v is None:
        return None
    if typ == "uint64":
        return v if 0 <= v < 1 << 64 else None
    bits = _INT_RANGE[typ]
    return v if -(1 << bits) <= v < 1 << bits else None


def _time_ns(v: Any) -> int | str:
    """Microseconds -> ns (exact, half to even), or the documented skip reason."""
    import decimal

    if isinstance(v, float):  # NaN and Infinity literals
        return "time_not_finite"
    if isinstance(v, bool | int):
        d = Decimal(int(v))
    elif isinstance(v, str):
        try:
            d = Decimal(v.strip())
        except decimal.InvalidOperation:
            return "time_not_a_number"
    else:
        return "time_not_a_number"
    if d.is_nan():
        return "time_not_a_number"
    if d.is_infinite():
        return "time_not_finite"
    if d != 0 and d.adjusted() > 30:
        return "time_out_of_range"
    with decimal.localcontext() as ctx:
        ctx.prec, ctx.Emin, ctx.Emax = 100, decimal.MIN_EMIN, decimal.MAX_EMAX
        ns = int((d * 1000).quantize(Decimal(1), rounding=decimal.ROUND_HALF_EVEN))
    return ns if -(1 << 63) <= ns < 1 << 63 else "time_out_of_range"


def _utf8(s: str) -> bool:
    """Can ``s`` be stored as UTF-8 (no unpaired surrogate from a JSON escape)?"""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _compact(v: Any) -> str | None:
    return None if v is None else json.dumps(v, separators=(",", ":"))


def expected_tables(paths: list[Path]) -> tuple[dict[str, dict[str, list[Any]]], dict[str, int]]:
    """(table -> column -> values in file order, skipped events by reason) of the files,
    for the tables the importer fills from events (not devices, not collectives)."""
    from tbdtrace import schema  # the trace's declared columns and types

    types = {t: {f.name: str(f.type) for f in schema.table(t).arrow_schema()} for t in _TABLES}
    rows: dict[str, list[dict[str, Any]]] = {t: [] for t in _TABLES}
    skipped: dict[str, int] = defaultdict(int)
    for i, path in enumerate(paths):
        doc = load_text(path)
        head = doc if isinstance(doc, dict) else {}
        events = doc if isinstance(doc, list) else doc["traceEvents"]
        dist = head.get("distributedInfo")
        rank = _fit(_integer(dist.get("rank")), "int64") if isinstance(dist, dict) else None
        if rank is None and len(paths) > 1:
            rank = i
        base = _fit(_integer(head.get("baseTimeNanoseconds")), "int64") or 0
        props = head.get("deviceProperties") or []
        rocm = any(isinstance(d, dict) and "AMD" in str(d.get("name", "")) for d in props)
        for ev in events:
            if not isinstance(ev, dict):
                continue
            for table, row in _rows(ev, base, rank, "rocm" if rocm else "cuda", skipped):
                rows[table].append(row)
    out: dict[str, dict[str, list[Any]]] = {}
    for table, rs in rows.items():
        if not rs:
            continue
        cols: dict[str, list[Any]] = {}
        for name in rs[0]:
            values = [r[name] for r in rs]
            typ = types[table][name]
            if typ in ("int32", "int64", "uint64"):
                values = [_fit(v, typ) for v in values]
            cols[name] = values
        out[table] = cols
    return out, dict(skipped)


def _rows(
    ev: dict[str, Any], base: int, rank: int | None, device_type: str, skipped: dict[str, int]
) -> list[tuple[str, dict[str, Any]]]:
    """The rows one event gives (none, one, or a marker and a step)."""
    import re

    ph, cat, name = ev.get("ph"), ev.get("cat"), ev.get("name")
    args = ev.get("args") or {}
    pid, tid = _integer(ev.get("pid")), _integer(ev.get("tid"))
    if ph == "i" and name == "[memory]":
        if not isinstance(args, dict):
            skipped["args_not_an_object"] += 1
            return []
        nbytes = _fit(_integer(args.get("Bytes")), "int64")
        if nbytes is None or "ts" not in ev:
            return []
        ts = _time_ns(ev["ts"])
        if isinstance(ts, int) and not -(1 << 63) <= base + ts < 1 << 63:
            ts = "time_out_of_range"
        if isinstance(ts, str):
            skipped[ts] += 1
            return []
        c10 = _fit(_integer(args.get("Device Type")), "int64") or 0
        kind = {0: "cpu", 1: "cuda", 6: "rocm"}.get(c10)
        return [
            (
                "memory",
                {
                    "ts_ns": base + ts,
                    "action": "alloc" if nbytes >= 0 else "free",
                    "level": "allocated",
                    "bytes": abs(nbytes),
                    "address": _integer(args.get("Addr")),
                    "device_id": _integer(args.get("Device Id")),
                    "device_type": kind or "cuda",
                    "pid": pid,
                    "tid": tid,
                    "rank": rank,
                    "total_allocated_bytes": _integer(args.get("Total Allocated")),
                    "total_reserved_bytes": _integer(args.get("Total Reserved")),
                },
            )
        ]
    cats = KERNEL | MEMCPY | MEMSET | RUNTIME | {"cuda_sync", "cpu_op", "Operator"}
    cats |= {"python_function", "user_annotation", "gpu_user_annotation"}
    if ph != "X" or "ts" not in ev or not isinstance(cat, str) or cat not in cats:
        return []
    ts = _time_ns(ev["ts"])
    dur = _time_ns(ev["dur"]) if "dur" in ev else 0
    why = ts if isinstance(ts, str) else dur if isinstance(dur, str) else None
    if why is None:
        assert isinstance(ts, int) and isinstance(dur, int)
        if dur < 0:
            why = "negative_duration"
        elif not all(-(1 << 63) <= x < 1 << 63 for x in (ts + dur, base + ts, base + ts + dur)):
            why = "time_out_of_range"
        elif not isinstance(args, dict):
            why = "args_not_an_object"
    if why is not None:
        skipped[why] += 1
        return []
    assert isinstance(ts, int) and isinstance(dur, int)
    start, end = base + ts, base + ts + dur
    ext = _integer(args.get("External id", args.get("external id")))
    text = str(name)
    ids = {
        "device_id": _integer(args.get("device", ev.get("pid"))),
        "device_type": device_type,
        "stream_id": _integer(args.get("stream", ev.get("tid"))),
        "context_id": _integer(args.get("context")),
        "correlation_id": _integer(args.get("correlation")),
        "external_id": ext,
        "rank": rank,
    }
    timed = {"start_ns": start, "end_ns": end}
    if cat in KERNEL:
        dims = {}
        for key in ("grid", "block"):
            v = args.get(key)
            xyz = v if isinstance(v, list) and len(v) == 3 else [None] * 3
            dims.update({f"{key}_{a}": _integer(x) for a, x in zip("xyz", xyz, strict=True)})
        row = {**timed, **ids, "name": text, **dims}
        row["registers_per_thread"] = _integer(args.get("registers per thread"))
        row["static_shared_bytes"] = _integer(args.get("shared memory"))
        return [("kernels", row)]
    if cat in MEMCPY or cat in MEMSET:
        row = {**timed, **ids, "bytes": _fit(_integer(args.get("bytes")), "int64") or 0}
        if cat in MEMCPY:
            m = re.match(r"Memcpy (\w+) \((\w+) -> (\w+)\)", text)
            row["copy_kind"] = m[1] if m else None
            for k, g in (("src_kind", 2), ("dst_kind", 3)):
                row[k] = (m[g].lower() if m[g] in _MEMORY_KINDS else "unknown") if m else None
            return [("memcpy", row)]
        m = re.match(r"Memset \((\w+)\)", text)
        row["memory_kind"] = (m[1].lower() if m[1] in _MEMORY_KINDS else "unknown") if m else None
        return [("memset", row)]
    host = {"pid": pid, "tid": tid, "rank": rank}
    if cat in RUNTIME:
        row = {**timed, **host, "correlation_id": ids["correlation_id"], "external_id": ext}
        row |= {"name": text, "api": "driver" if cat == "cuda_driver" else "runtime"}
        return [("runtime", {**row, "cbid": _integer(args.get("cbid"))})]
    if cat == "cuda_sync":
        kind = _SYNC.get(str(args.get("cuda_sync_kind", name)), "unknown")
        row = {**timed, "device_id": _integer(args.get("device"))}
        row["stream_id"] = _integer(args.get("stream"))
        for k in ("context_id", "correlation_id"):
            row[k] = ids[k]
        return [("sync", {**row, **host, "sync_kind": kind})]
    step = re.fullmatch(r"ProfilerStep#(\d+)\n?", text)
    on_gpu = cat == "gpu_user_annotation"
    out: list[tuple[str, dict[str, Any]]] = []
    if step and not on_gpu:
        row = {"step": int(step[1]), **timed, "pid": pid, "rank": rank}
        out.append(("steps", {**row, "source": "profiler_step"}))
    if step or cat in ("user_annotation", "gpu_user_annotation"):
        device = _integer(args.get("device", ev.get("pid"))) if on_gpu else None
        row = {**timed, **host, "device_id": device, "name": text, "domain": cat}
        return [*out, ("markers", {**row, "kind": "range", "marker_id": ext})]
    row = {**timed, **host, "external_id": ext, "name": text, "category": cat}
    row["sequence_number"] = _integer(args.get("Sequence number"))
    row["input_shapes"] = _compact(args.get("Input Dims"))
    row["input_dtypes"] = _compact(args.get("Input type"))
    row["concrete_inputs"] = _compact(args.get("Concrete Inputs"))
    call_from = args.get("CallFrom")  # python_function: the caller's "file:line"
    row["flops"] = _integer(args.get("flops"))
    row["call_from"] = call_from if isinstance(call_from, str) and _utf8(call_from) else None
    return [("ops", row)]
