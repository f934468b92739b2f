"""What a report section is: its options, its declaration, and helpers the sections share.

A section module declares each section with :func:`section` on its ``compute`` function;
:mod:`tbdtrace.report.contents` lists the sections in report order and
:func:`tbdtrace.report.build.build` runs them. This module imports no section, so the
section modules and the builder import it without a circle.
"""

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


# Sections that cover the whole trace whatever the window: the memory peak is the
# process's, and allocations made before a window would be missing from it.
WHOLE_TRACE = ("memory",)

Compute = Callable[[Trace, ReportOptions], Any]


def section(
    key: str,
    render_text: Callable[[Any, Any, ReportOptions], None] | None = None,
    whole_trace: bool = False,
) -> Callable[[Compute], Compute]:
    """Decorator declaring ``compute`` as report section ``key`` (read back with
    :func:`section_of`); it gets the report's window of the trace (a windowed view), or
    the whole trace with ``whole_trace``. The section is in the report once it is listed
    in :data:`tbdtrace.report.contents.SECTIONS`."""

    def deco(fn: Compute) -> Compute:
        setattr(fn, _ATTR, Section(key, fn, render_text, whole_trace or key in WHOLE_TRACE))
        return fn

    return deco


_ATTR = "report_section"


def section_of(compute: Compute) -> Section:
    """The section that :func:`section` declared on ``compute``."""
    s = getattr(compute, _ATTR, None)
    if not isinstance(s, Section):
        raise TypeError(f"{compute!r} is not declared with @section")
    return s


def table_records(tbl: pa.Table) -> list[dict[str, Any]]:
    """Arrow table -> list of JSON-ready dicts (NaN becomes null)."""
    rows = tbl.to_pylist()
    for r in rows:
        for k, v in r.items():
            if isinstance(v, float) and not math.isfinite(v):
                r[k] = None
    return rows


def titled(title: str, opts: ReportOptions, pooled: bool = False) -> str:
    """``title`` with what the table covers, e.g. "Top kernels (measured steps)";
    ``pooled``: the table adds up the rows of every rank, which it then says."""
    parts = [opts.covers] if opts.covers else []
    if pooled and opts.ranks > 1:
        parts.append(f"{opts.ranks} ranks pooled")
    return f"{title} ({', '.join(parts)})" if parts else title
