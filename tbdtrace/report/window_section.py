"""The report's window line and the ``phases`` section (init / warm-up / measured /
after, per rank; docs/METRICS.md "Window and phases")."""

from __future__ import annotations

from typing import Any

from tbdtrace.analysis.engine.context import AnalysisContext
from tbdtrace.analysis.passes import phases
from tbdtrace.report.fmt import fmt_ns
from tbdtrace.report.section_api import ReportOptions, Section, table_records
from tbdtrace.report.textui import Console, Table


def window_line(win: dict[str, Any]) -> str:
    """One line saying what the report's windowed tables cover."""
    parts = []
    for r in win["ranks"]:
        who = "" if r["rank"] is None else f"rank {r['rank']}: "
        if r["first_step"] is None:
            steps = "no steps"
        elif r["first_step"] == r["last_step"]:
            steps = f"step {r['first_step']}"
        else:
            steps = f"steps {r['first_step']}-{r['last_step']} ({r['step_count']})"
        if r["start_ns"] is not None and r["end_ns"] is not None:
            length = fmt_ns(r["end_ns"] - r["start_ns"])
        elif r["end_ns"] is not None:
            length = "from the trace's start"
        elif r["start_ns"] is not None:
            length = "to the trace's end"
        else:
            length = "the whole trace"
        warm = r["warmup_steps_excluded"] if win["kind"] == "measured" else 0
        parts.append(f"{who}{steps}, {length}" + (f", {warm} warm-up excluded" if warm else ""))
    head = f"Window: {win['label']}"
    if parts and win["label"] != "whole trace":
        head += " [" + "; ".join(parts) + "]"
    notes = "".join(f"; {n}" for n in win.get("notes", []))
    return f"{head}{notes}. Tables cover this window unless their title says otherwise."


def _render(con: Console, data: list[dict[str, Any]], opts: ReportOptions) -> None:
    if not data or all(r["phase"] == "all" for r in data):
        return
    t = Table(title="Phases (whole trace)", title_justify="left")
    for c in ("Rank", "Phase", "Wall", "Steps", "Kernels", "Kernel time"):
        t.add_column(c, justify="left" if c == "Phase" else "right", no_wrap=True)
    for r in data:
        t.add_row(
            "-" if r["rank"] is None else str(r["rank"]),
            r["phase"],
            fmt_ns(r["wall_ns"]),
            str(r["step_count"]),
            f"{r['kernel_count']:,}",
            fmt_ns(r["kernel_time_ns"]),
        )
    con.print(t)


def phases_section(trace: AnalysisContext, opts: ReportOptions) -> list[dict[str, Any]]:
    return table_records(phases.run(trace))


# The sections this module declares; tbdtrace.report.contents lists them in report order.
PHASES = Section("phases", phases_section, _render, whole_trace=True)
