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
