"""What a report section is: its options, its declaration, and helpers the sections share.

A section module declares each section as a :class:`Section` constant (key, compute,
render); :mod:`tbdtrace.report.contents` lists them in report order and
:func:`tbdtrace.report.build.build` runs them. Nothing registers itself on import. This
module imports no section, so the section modules and the builder import it without a
circle.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tbdtrace.analysis.engine.context import AnalysisContext


@dataclass(frozen=True)
class ReportOptions:
    top: int | None = 20  # rows of per-kernel tables shown in text; None = all
    top_json: int | None = None  # rows of per-kernel lists in JSON; None = all
    # The window the sections cover (tbdtrace.analysis.engine.window.WindowSpec); None = the
    # measured steps (the whole trace when it has no steps).
    window: Any = None
    # What the windowed sections cover, for text titles (set from the document's window).
    covers: str = ""
    ranks: int = 1  # ranks in the report, for titles of tables that pool them
    model_flops_per_sample: float | None = None  # for MFU in the flops section; None = unknown
    # The roofline section (``report --roofline``): off by default, as it searches every
    # kernel's launching op and models every op's bytes (docs/METRICS.md, roofline).
    roofline: bool = False
    # The critical-path section (``report --critical-path``): off by default, as it walks
    # each step's dependency chain event by event (docs/METRICS.md, critical_path).
    critical_path: bool = False


@dataclass(frozen=True)
class Section:
    """One section of the report: the document's ``key``, ``compute(trace, opts)`` (JSON-ready
    data from the report's window of the trace, or from the whole trace with
    ``whole_trace``) and ``render_text(console, data, opts)`` (None: JSON, CSV and HTML
    only). A section module declares its sections as module constants; the report holds
    those listed in :data:`tbdtrace.report.contents.SECTIONS`, in that order."""

    key: str
    compute: Callable[[AnalysisContext, ReportOptions], Any]
    render_text: Callable[[Any, Any, ReportOptions], None] | None
    # Computed on the whole trace, not the window: the memory peak is the process's, and
    # allocations made before a window would be missing from it; phases place the window.
    whole_trace: bool = False


def table_records(tbl: pa.Table) -> list[dict[str, Any]]:
    """Arrow table -> list of JSON-ready dicts (NaN becomes null)."""
    # Column by column: only float columns can hold NaN or infinity, so only they are
    # looked at (a check of every value cost a quarter of the fixture's section time).
    cols = []
    for i, f in enumerate(tbl.schema):
        values = pylist(tbl.column(i))
        if pa.types.is_floating(f.type):
            values = [None if v is not None and not math.isfinite(v) else v for v in values]
        cols.append(values)
    names = tbl.column_names
    return [dict(zip(names, row, strict=True)) for row in zip(*cols, strict=True)]


def pylist(col: pa.Array | pa.ChunkedArray) -> list[Any]:
    """``col.to_pylist()``, faster for dictionary columns: their distinct values are made
    once and each row takes its index (pyarrow converts a dictionary array row by row at
    ~5 us a row, 150x the cost of this; the strings are also shared, not one per row)."""
    if not pa.types.is_dictionary(col.type):
        return col.to_pylist()
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    out: list[Any] = []
    for c in chunks:
        values = c.dictionary.to_pylist()
        out.extend(None if i is None else values[i] for i in c.indices.to_pylist())
    return out


def titled(title: str, opts: ReportOptions, pooled: bool = False) -> str:
    """``title`` with what the table covers, e.g. "Top kernels (measured steps)";
    ``pooled``: the table adds up the rows of every rank, which it then says."""
    parts = [opts.covers] if opts.covers else []
    if pooled and opts.ranks > 1:
        parts.append(f"{opts.ranks} ranks pooled")
    return f"{title} ({', '.join(parts)})" if parts else title
