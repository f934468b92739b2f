"""Per-device busy time, span and utilization; the trace-wide summary.

Definitions (docs/METRICS.md): per device, ``span_ns`` = last end - first start over its
kernel, memcpy and memset rows; ``busy_ns`` = length of the union of those intervals;
``compute_busy_ns`` = length of the union of kernel intervals only; ``utilization`` =
busy / span; ``compute_utilization`` = compute_busy / span. The summary sums busy and
span over devices and divides. ``kernel_time_ns`` is the plain sum of kernel durations.
A device is identified by (rank, device_type, device_id).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace import intervals
from tbdtrace.passes._util import decode_device_key, device_keys, int_column
from tbdtrace.trace import Trace

_COLS = ["start_ns", "end_ns", "device_id", "device_type", "rank"]


def _events(trace: Trace, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    tbl = trace.table(name, _COLS)
    return device_keys(tbl), int_column(tbl, "start_ns"), int_column(tbl, "end_ns")


def run(trace: Trace, config: Any = None) -> pa.Table:
    """Per-device table.

    Columns: rank, device_type, device_id, kernel_count, kernel_time_ns, memcpy_count,
    memcpy_bytes, memset_count, span_ns, busy_ns, compute_busy_ns (ns), utilization,
    compute_utilization (ratio 0..1; null when the span is 0).
    """
    kk, ks, ke = _events(trace, "kernels")
    ck, cs, ce = _events(trace, "memcpy")
    mk, ms, me = _events(trace, "memset")
    cbytes = int_column(trace.table("memcpy", ["bytes"]), "bytes", 0)
    rows: dict[str, list[Any]] = {c: [] for c in (
        "rank", "device_type", "device_id", "kernel_count", "kernel_time_ns", "memcpy_count",
        "memcpy_bytes", "memset_count", "span_ns", "busy_ns", "compute_busy_ns",
        "utilization", "compute_utilization")}
    for key in np.unique(np.concatenate([kk, ck, mk])):
        ksel, csel, msel = kk == key, ck == key, mk == key
        s_all = np.concatenate([ks[ksel], cs[csel], ms[msel]])
        e_all = np.concatenate([ke[ksel], ce[csel], me[msel]])
        span = intervals.span(s_all, e_all)
        busy = intervals.union_length(s_all, e_all)
        compute = intervals.union_length(ks[ksel], ke[ksel])
        rank, dtype, dev = decode_device_key(int(key))
        rows["rank"].append(rank)
        rows["device_type"].append(dtype)
        rows["device_id"].append(dev)
        rows["kernel_count"].append(int(ksel.sum()))
        rows["kernel_time_ns"].append(int((ke[ksel] - ks[ksel]).sum()))
        rows["memcpy_count"].append(int(csel.sum()))
        rows["memcpy_bytes"].append(int(cbytes[csel].sum()))
        rows["memset_count"].append(int(msel.sum()))
        rows["span_ns"].append(span)
        rows["busy_ns"].append(busy)
        rows["compute_busy_ns"].append(compute)
        rows["utilization"].append(busy / span if span else None)
        rows["compute_utilization"].append(compute / span if span else None)
    return pa.table(rows, schema=_SCHEMA)


_SCHEMA = pa.schema([
    ("rank", pa.int32()), ("device_type", pa.string()), ("device_id", pa.int32()),
    ("kernel_count", pa.int64()), ("kernel_time_ns", pa.int64()), ("memcpy_count", pa.int64()),
    ("memcpy_bytes", pa.int64()), ("memset_count", pa.int64()), ("span_ns", pa.int64()),
    ("busy_ns", pa.int64()), ("compute_busy_ns", pa.int64()), ("utilization", pa.float64()),
    ("compute_utilization", pa.float64()),
])


def summarize(devices: pa.Table) -> dict[str, Any]:
    """The trace-wide summary from the per-device table of :func:`run`."""
    def total(c: str) -> int:
        return int(sum(devices.column(c).to_pylist()))

    span, busy = total("span_ns"), total("busy_ns")
    return {
        "kernel_count": total("kernel_count"),
        "kernel_time_ns": total("kernel_time_ns"),
        "memcpy_count": total("memcpy_count"),
        "memcpy_bytes": total("memcpy_bytes"),
        "memset_count": total("memset_count"),
        "span_ns": span,
        "gpu_busy_ns": busy,
        "gpu_utilization": busy / span if span else None,
    }
