"""Assemble the report from registered sections."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tbdtrace.trace import Trace


@dataclass(frozen=True)
class ReportOptions:
    top: int | None = 20  # rows of per-kernel tables shown in text; None = all
    top_json: int | None = None  # rows of per-kernel lists in JSON; None = all
    # The window the sections cover (tbdtrace.passes.window.WindowSpec); None = the
    # measured steps (the whole trace when it has no steps).
    window: Any = None
    # What the windowed sections cover, for text titles (set from the document's window).
    covers: str = ""
    ranks: int = 1  # ranks in the report, for titles of tables that pool them
    model_flops_per_sample: float | None = None  # for MFU in the flops section; None = unknown


@dataclass(frozen=True)
class Section:
    key: str
    compute: Callable[[Trace, ReportOptions], Any]
    render_text: Callable[[Any, Any, ReportOptions], None] | None
    whole_trace: bool = False  # computed on the whole trace, not the window


SECTIONS: list[Section] = []
# Sections that cover the whole trace whatever the window: the memory peak is the
# process's, and allocations made before a window would be missing from it.
WHOLE_TRACE = ("memory",)
# Sections whose tables add up the rows of every rank (per-name and per-category sums).
POOLED = ("kernels", "categories", "hotspots")


def section(
    key: str,
    render_text: Callable[[Any, Any, ReportOptions], None] | None = None,
    whole_trace: bool = False,
) -> Callable[[Callable[[Trace, ReportOptions], Any]], Callable[[Trace, ReportOptions], Any]]:
    """Decorator registering ``compute`` as report section ``key``; it gets the report's
    window of the trace (a windowed view), or the whole trace with ``whole_trace``."""

    def deco(fn: Callable[[Trace, ReportOptions], Any]) -> Callable[[Trace, ReportOptions], Any]:
        SECTIONS.append(Section(key, fn, render_text, whole_trace or key in WHOLE_TRACE))
        return fn

    return deco


def table_records(tbl: pa.Table) -> list[dict[str, Any]]:
    """Arrow table -> list of JSON-ready dicts (NaN becomes null)."""
    rows = tbl.to_pylist()
    for r in rows:
        for k, v in r.items():
            if isinstance(v, float) and not math.isfinite(v):
                r[k] = None
    return rows


def build(trace: Trace, opts: ReportOptions | None = None) -> dict[str, Any]:
    """The report document: meta and window first, then each registered section."""
    from tbdtrace.passes import window
    from tbdtrace.report import sections  # noqa: F401 - registers the sections

    opts = opts or ReportOptions()
    doc: dict[str, Any] = {
        "trace": {
            "path": str(trace.path),
            "source": trace.meta.get("source"),
            "backend": trace.meta.get("backend"),
            "framework": trace.meta.get("framework"),
            "workload": trace.meta.get("workload"),
            # events the import left out for unusable values (importers/validate.py)
            "skipped_events": dict(trace.meta.get("skipped_events") or {}),
        }
    }
    for table, cols in PREFETCH:
        trace.prefetch(table, cols)
    win = window.resolve(trace, opts.window)
    view = window.view(trace, win)
    doc["window"] = {
        **win.to_json(),
        "sections": {s.key: "whole trace" if s.whole_trace else win.label() for s in SECTIONS},
        # Sections whose rows add up every rank's (the others are per rank or per device).
        "pooled_ranks": [k for k in POOLED if any(s.key == k for s in SECTIONS)],
    }
    for s in SECTIONS:
        doc[s.key] = s.compute(trace if s.whole_trace else view, opts)
    return doc


# Columns most sections read, fetched together so their decompression runs in parallel.
PREFETCH = (
    ("kernels", ("start_ns", "end_ns", "name")),
    ("runtime", ("start_ns", "end_ns", "name")),
)


def titled(title: str, opts: ReportOptions, pooled: bool = False) -> str:
    """``title`` with what the table covers, e.g. "Top kernels (measured steps)";
    ``pooled``: the table adds up the rows of every rank, which it then says."""
    parts = [opts.covers] if opts.covers else []
    if pooled and opts.ranks > 1:
        parts.append(f"{opts.ranks} ranks pooled")
    return f"{title} ({', '.join(parts)})" if parts else title
