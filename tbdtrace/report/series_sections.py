"""Report sections that carry series for plots: ``memory_timeline`` (memory over time per
device and category, thinned) and ``step_timeline`` (one measured step, event by event).
They have no text rendering; the HTML report draws them and CSV/JSON carry them."""

from __future__ import annotations

from typing import Any

from tbdtrace.passes import memory_series, step_timeline
from tbdtrace.report.build import ReportOptions, section, table_records
from tbdtrace.trace import Trace


@section("memory_timeline")
def memory_timeline_section(trace: Trace, opts: ReportOptions) -> list[dict[str, Any]]:
    """Rows of :func:`tbdtrace.passes.memory_series.run`."""
    return table_records(memory_series.run(trace))


@section("step_timeline")
def step_timeline_section(trace: Trace, opts: ReportOptions) -> dict[str, Any]:
    """step (the step number shown, null without measured steps), windows (rank,
    start_ns, end_ns per rank), event_count (events overlapping the windows), shown
    (events listed), events (rows of :func:`tbdtrace.passes.step_timeline.run`)."""
    cfg = step_timeline.StepTimelineConfig()
    tbl, total = step_timeline.events(trace, cfg)
    win = step_timeline.windows(trace, cfg)
    return {
        "step": int(win.column("step")[0].as_py()) if win.num_rows else None,
        "windows": table_records(win.select(["rank", "start_ns", "end_ns"])),
        "event_count": total,
        "shown": tbl.num_rows,
        "events": table_records(tbl),
    }
