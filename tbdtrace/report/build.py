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


@dataclass(frozen=True)
class Section:
    key: str
    compute: Callable[[Trace, ReportOptions], Any]
    render_text: Callable[[Any, Any, ReportOptions], None] | None


SECTIONS: list[Section] = []


def section(
    key: str, render_text: Callable[[Any, Any, ReportOptions], None] | None = None
) -> Callable[[Callable[[Trace, ReportOptions], Any]], Callable[[Trace, ReportOptions], Any]]:
    """Decorator registering ``compute`` as report section ``key``."""

    def deco(fn: Callable[[Trace, ReportOptions], Any]) -> Callable[[Trace, ReportOptions], Any]:
        SECTIONS.append(Section(key, fn, render_text))
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
    """The report document: meta first, then each registered section."""
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
    for s in SECTIONS:
        doc[s.key] = s.compute(trace, opts)
    return doc


# Columns most sections read, fetched together so their decompression runs in parallel.
PREFETCH = (
    ("kernels", ("start_ns", "end_ns", "name")),
    ("runtime", ("start_ns", "end_ns", "name")),
)
