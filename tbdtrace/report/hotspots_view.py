"""``tbdtrace hotspots``: its document (the window and the top rows) and its text table.

The command parses and opens; what it prints is made here, as the report's sections are.
Importing this module loads the passes it runs (the command imports it while a profiler
file parses).
"""

from __future__ import annotations

import sys
from typing import Any

from tbdtrace.analysis.engine import context, source_lines, window
from tbdtrace.analysis.passes import hotspots
from tbdtrace.errors import TraceError
from tbdtrace.report.fmt import clip, fmt_ns, tail
from tbdtrace.report.section_api import table_records
from tbdtrace.report.textui import Console, Table
from tbdtrace.trace import Trace


def document(trace: Trace, spec: Any, top: int, by: str, name: str | None = None) -> dict[str, Any]:
    """``{"window": ..., "rows": [...]}``: the top ``top`` rows by ``by`` (kernel, op,
    category, source) over the window ``spec`` (a ``WindowSpec``). by=source on a trace
    without Python stacks: TraceError naming the trace (``name``, else its path)."""
    ctx = context.of(trace)
    win = window.resolve(ctx, spec)
    wctx = ctx.windowed(win)
    if by == "source" and wctx.num_rows("kernels") and not source_lines.attribute(wctx).has_stacks:
        raise TraceError(
            f"{name or trace.path}: no Python stacks in this trace, so no source lines; capture "
            "with `tbdtrace capture --backend torch --with-stack` or "
            "torch.profiler.profile(with_stack=True)"
        )
    rows = table_records(hotspots.run(wctx, hotspots.HotspotsConfig(top, by)))
    return {"window": win.to_json(), "rows": rows}


def render_text(doc: dict[str, Any], by: str, source: str, console: Console | None = None) -> None:
    """The rows as a table titled with what they cover; ``source`` names the trace."""
    con = console or Console(width=None if sys.stdout.isatty() else 200)
    rows, win = doc["rows"], doc["window"]
    if not rows:
        con.print(f"{source}: no kernels in this trace.")
        return
    name_col = {"kernel": "name", "op": "op", "category": "category", "source": "source"}[by]
    pooled = f", {len(win['ranks'])} ranks pooled" if len(win["ranks"]) > 1 else ""
    title = f"Hotspots by {by} (top {len(rows)}, {win['label']}{pooled})"
    t = Table(title=title)
    extra = {
        "kernel": ("Instances", "Category", "Grid x block", "Op", "Marker", "Source"),
        "op": ("Kernels", "Distinct", "Top kernel"),
        "source": ("Kernels", "Distinct", "Function", "Line is", "Top kernel"),
        "category": ("Count",),
    }[by]
    for c in ("Time %", "Total", *extra, name_col.capitalize()):
        t.add_column(
            c,
            justify="right"
            if c in ("Time %", "Total", "Instances", "Kernels", "Distinct", "Count")
            else "left",
        )
    for r in rows:
        t.add_row(
            f"{100 * r['share']:.1f}",
            fmt_ns(r["total_ns"]),
            *_extra(by, r),
            (tail if by == "source" else clip)(
                r[name_col], 48 if by in ("kernel", "source") else 70
            ),
        )
    con.print(t)


def _extra(by: str, r: dict[str, Any]) -> list[str]:
    if by == "kernel":
        launch = (r["launch"] or "-").replace("grid=", "").replace(" block=", "x")
        return [
            f"{r['count']:,}",
            r["category"],
            launch,
            clip(r["op"], 24),
            clip(r["marker"], 24),
            tail(r["source"], 32),
        ]
    if by == "source":
        return [
            f"{r['kernel_count']:,}",
            str(r["distinct_kernels"]),
            clip(r["function"], 24),
            r["line_kind"] or "-",
            clip(r["top_kernel"], 50),
        ]
    if by == "op":
        return [f"{r['kernel_count']:,}", str(r["distinct_kernels"]), clip(r["top_kernel"], 50)]
    return [f"{r['count']:,}"]
