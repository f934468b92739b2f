"""Per-device busy time, span and utilization; the trace-wide summary.

Definitions (docs/METRICS.md): per device, ``span_ns`` = last end - first start over its
kernel, memcpy and memset rows; ``busy_ns`` = length of the union of those intervals;
``compute_busy_ns`` = length of the union of kernel intervals only; ``utilization`` =
busy / span; ``compute_utilization`` = compute_busy / span. :func:`by_rank` is the
report's summary, per rank (never summed across ranks); :func:`summarize` adds up every
device (one rank's devices, or a caller that wants the pooled totals).
``kernel_time_ns`` is the plain sum of kernel durations.
A device is identified by (rank, device_type, device_id).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace.analysis.engine import outputs, shared_arrays, summaries
from tbdtrace.analysis.engine.cache import Entry
from tbdtrace.analysis.engine.context import AnalysisContext, Source, of
from tbdtrace.analysis.engine.grouping import decode_device_key

SUMMARY: Entry[pa.Table] = Entry("summary.table", "the summary pass's table")


def run(ctx: Source, config: None = None) -> pa.Table:
    """Per-device table.

    Columns: rank, device_type, device_id, kernel_count, kernel_time_ns, memcpy_count,
    memcpy_bytes, memset_count, span_ns, busy_ns, compute_busy_ns (ns), utilization,
    compute_utilization (ratio 0..1; null when the span is 0).
    """
    ctx = of(ctx)
    return ctx.cache.get(SUMMARY, lambda: _run(ctx), config)


def _run(ctx: AnalysisContext) -> pa.Table:
    rows: dict[str, list[Any]] = {c: [] for c in _SCHEMA.names}
    cbytes = shared_arrays.ints(ctx, "memcpy", "bytes", 0)
    for key in shared_arrays.device_keys_of(ctx):
        ks, _ = shared_arrays.spans(ctx, "kernels", key)
        cs, _ = shared_arrays.spans(ctx, "memcpy", key)
        ms, _ = shared_arrays.spans(ctx, "memset", key)
        crow = shared_arrays.rows_of(ctx, "memcpy", key)
        krow = shared_arrays.rows_of(ctx, "kernels", key)
        first_last = shared_arrays.device_span(ctx, key)
        span = first_last[1] - first_last[0] if first_last else 0
        busy = _length(shared_arrays.merged(ctx, key, "all"))
        compute = _length(shared_arrays.merged(ctx, key, "kernels"))
        rank, dtype, dev = decode_device_key(int(key))
        vals = {
            "rank": rank,
            "device_type": dtype,
            "device_id": dev,
            "kernel_count": int(ks.size),
            "kernel_time_ns": int(shared_arrays.durations(ctx, "kernels")[krow].sum())
            if krow is not None
            else 0,
            "memcpy_count": int(cs.size),
            "memcpy_bytes": int(cbytes[crow].sum()) if crow is not None else 0,
            "memset_count": int(ms.size),
            "span_ns": span,
            "busy_ns": busy,
            "compute_busy_ns": compute,
            "utilization": busy / span if span else None,
            "compute_utilization": compute / span if span else None,
        }
        for c, v in vals.items():
            rows[c].append(v)
    return pa.table(rows, schema=_SCHEMA)


def _length(m: tuple[np.ndarray, np.ndarray]) -> int:
    return int((m[1] - m[0]).sum())


_SCHEMA = outputs.SUMMARY.arrow_schema()  # declared in analysis/engine/outputs.py


def summarize(devices: pa.Table) -> dict[str, Any]:
    """Totals over every device of the per-device table of :func:`run` (spans and busy
    times added up: meaningful for one rank's devices; the report uses :func:`by_rank`)."""

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


def by_rank(ctx: Source) -> list[dict[str, Any]]:
    """The summary of each rank: ``engine.summaries.device_summary_by_rank`` of this
    pass's table."""
    ctx = of(ctx)
    return summaries.device_summary_by_rank(ctx, run(ctx))
