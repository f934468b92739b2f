"""Report sections that carry series for plots: ``memory_timeline`` (memory over time per
device and category, thinned), ``step_timeline`` (one measured step, event by event) and
``collective_skew`` (how far apart ranks start the same collective). The HTML report draws
them and CSV/JSON carry them; only the skew's summary has a text table (the series are
for plots)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace.analysis.engine import step_events, summaries
from tbdtrace.analysis.engine.context import AnalysisContext
from tbdtrace.analysis.passes import collective_skew, memory_series, step_timeline, steps
from tbdtrace.report.fmt import clip, fmt_ns
from tbdtrace.report.section_api import ReportOptions, Section, table_records
from tbdtrace.report.textui import Console, Table


def memory_timeline_section(trace: AnalysisContext, opts: ReportOptions) -> list[dict[str, Any]]:
    """Rows of :func:`tbdtrace.analysis.passes.memory_series.run`."""
    return table_records(memory_series.run(trace))


def step_timeline_section(trace: AnalysisContext, opts: ReportOptions) -> dict[str, Any]:
    """step (the step number shown, null without measured steps), windows (rank,
    start_ns, end_ns per rank), event_count (events overlapping the windows), shown
    (events listed), events (rows of :func:`tbdtrace.analysis.passes.step_timeline.run`)."""
    cfg = step_timeline.StepTimelineConfig()
    st = steps.run(trace, cfg.steps)
    tbl, total = step_events.events(trace, st, cfg.max_events)
    win = step_events.windows(st)
    return {
        "step": int(win.column("step")[0].as_py()) if win.num_rows else None,
        "windows": table_records(win.select(["rank", "start_ns", "end_ns"])),
        "event_count": total,
        "shown": tbl.num_rows,
        "events": table_records(tbl),
    }


# Instances listed at most (the largest skews); the summary covers all of them.
SKEW_INSTANCES = 2000


def _render_skew(con: Console, data: dict[str, Any], opts: ReportOptions) -> None:
    rows = data["summary"] if opts.top is None else data["summary"][: opts.top]
    if not rows:
        return
    t = Table(title="Collective skew across ranks (last start - first start)")
    for c in ("Instances", "Median", "P99", "Max", "Most often last", "Name"):
        t.add_column(c, justify="left" if c == "Name" else "right")
    for r in rows:
        name = r["name"] or "-"
        t.add_row(
            f"{r['instances']:,}",
            fmt_ns(r["skew_median_ns"]),
            fmt_ns(r["skew_p99_ns"]),
            fmt_ns(r["skew_max_ns"]),
            f"rank {r['most_often_last_rank']} ({100 * r['last_rank_share']:.0f}%)",
            clip(name, 60, blank=""),
        )
    con.print(t)
    con.print(
        "Starts are compared on the ranks' clocks as recorded: traces from different hosts "
        "are only as aligned as the hosts' clocks."
    )


def collective_skew_section(trace: AnalysisContext, opts: ReportOptions) -> dict[str, Any]:
    """summary (per collective name,
    :func:`tbdtrace.analysis.engine.summaries.collective_skew_summary`),
    instance_count, instances (rows of its ``run``, the largest skews when more than
    SKEW_INSTANCES, in time order). Empty with fewer than two ranks."""
    tbl = collective_skew.run(trace)
    shown = tbl
    if tbl.num_rows > SKEW_INSTANCES:
        keep = np.sort(
            np.argsort(-tbl.column("skew_ns").to_numpy(), kind="stable")[:SKEW_INSTANCES]
        )
        shown = tbl.take(pa.array(keep))
    return {
        "summary": summaries.collective_skew_summary(tbl),
        "instance_count": tbl.num_rows,
        "instances": table_records(shown),
    }


# The sections this module declares; tbdtrace.report.contents lists them in report order.
MEMORY_TIMELINE = Section("memory_timeline", memory_timeline_section, None)
STEP_TIMELINE = Section("step_timeline", step_timeline_section, None)
COLLECTIVE_SKEW = Section("collective_skew", collective_skew_section, _render_skew)
