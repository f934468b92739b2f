"""The "cpu_activity" report section: profiled CPU ops per thread (passes/cpu_activity)."""

from __future__ import annotations

from typing import Any

from tbdtrace.analysis.engine import shared_arrays
from tbdtrace.analysis.engine.context import AnalysisContext
from tbdtrace.analysis.passes import cpu_activity
from tbdtrace.report.fmt import fmt_ns, fmt_pct
from tbdtrace.report.section_api import ReportOptions, Section, table_records
from tbdtrace.report.textui import Console, Table

SHOWN_THREADS = 10


def _where(opts: ReportOptions) -> str:
    """What the figures cover: the trace, or the report's window of it."""
    covers = opts.covers or "whole trace"
    return (
        "this trace"
        if covers == "whole trace"
        else f"this window ({covers}; --window all: the whole trace)"
    )


def _render(con: Console, data: dict[str, Any], opts: ReportOptions) -> None:
    threads = data["threads"]
    if not data["device_activity"]:
        con.print(
            f"No GPU activity in {_where(opts)}: it holds CPU activity only."
            if threads
            else f"No device or CPU activity in {_where(opts)}."
        )
    if not threads:
        return
    shown = threads[:SHOWN_THREADS]
    more = f" ({len(shown)} of {len(threads)} threads)" if len(shown) < len(threads) else ""
    t = Table(title=f"CPU activity (profiled ops, by thread){more}")
    for c in ("Rank", "PID", "TID", "Ops", "Span", "Busy", "Busy %"):
        t.add_column(c, justify="right")
    for r in shown:
        t.add_row(
            "-" if r["rank"] is None else str(r["rank"]),
            "-" if r["pid"] is None else str(r["pid"]),
            "-" if r["tid"] is None else str(r["tid"]),
            f"{r['op_count']:,}",
            fmt_ns(r["span_ns"]),
            fmt_ns(r["busy_ns"]),
            fmt_pct(r["busy_ratio"]),
        )
    con.print(t)


def cpu_activity_section(trace: AnalysisContext, opts: ReportOptions) -> dict[str, Any]:
    return {
        # The summary has a row per device with event rows: whether it has any, without
        # computing it (its busy intervals: 10M kernels, 0.15 GB made here otherwise)
        "device_activity": bool(shared_arrays.device_keys_of(trace)),
        "threads": table_records(cpu_activity.run(trace)),
    }


# The sections this module declares; tbdtrace.report.contents lists them in report order.
CPU_ACTIVITY = Section("cpu_activity", cpu_activity_section, _render)
