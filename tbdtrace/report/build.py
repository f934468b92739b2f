"""Assemble the report document from the sections listed in :mod:`tbdtrace.report.contents`."""

from __future__ import annotations

from typing import Any

from tbdtrace.report.section_api import (  # noqa: F401 - re-exported for section modules
    ReportOptions,
    Section,
    table_records,
    titled,
)
from tbdtrace.trace import Trace

# Sections whose tables add up the rows of every rank (per-name and per-category sums).
POOLED = ("kernels", "categories", "hotspots")


def build(
    trace: Trace,
    opts: ReportOptions | None = None,
    on_section: Any = None,
    text_only: bool = False,
) -> dict[str, Any]:
    """The report document: meta and window first, then each section in report order;
    ``on_section(key)`` is called as each section starts (a progress display).
    ``text_only``: the document is for the text report, which leaves out the sections
    that have no text (the series for plots: :func:`text_sections`)."""
    from tbdtrace.analysis.engine import context, window
    from tbdtrace.report.contents import OPS_DERIVED, OPS_READERS, RELEASE_AFTER, SECTIONS

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
    whole = context.of(trace)
    whole.prefetch_tables(PREFETCH)
    win = window.resolve(whole, opts.window)
    view = whole.windowed(win)
    doc["window"] = {
        **win.to_json(),
        "sections": {s.key: "whole trace" if s.whole_trace else win.label() for s in SECTIONS},
        # Sections whose rows add up every rank's (the others are per rank or per device).
        "pooled_ranks": [k for k in POOLED if any(s.key == k for s in SECTIONS)],
    }
    sections = text_sections() if text_only else SECTIONS
    early: dict[str, Any] = {}
    if view.window is not None:
        # The whole-trace sections first, while the whole trace holds its columns; then
        # it lets go of those the window holds copies of (10M kernels: 0.19 GiB), which
        # no later section reads from it (context.release_copied).
        early = {s.key: s.compute(whole, opts) for s in sections if s.whole_trace}
        view.prefetch_tables(PREFETCH)
        context.release_copied(view, PREFETCH)
    # The sections that read the ops table first, then the others (contents.OPS_READERS);
    # the document in report order.
    by_key = {s.key: s for s in sections}
    first = [by_key[k] for k in OPS_READERS if k in by_key]
    rest = [s for s in sections if s.key not in OPS_READERS]
    done: dict[str, Any] = {}
    for s in first + rest:
        if on_section is not None:
            on_section(s.key)
        if s.key in early:
            done[s.key] = early.pop(s.key)
        else:
            done[s.key] = s.compute(whole if s.whole_trace else view, opts)
        if s.key in RELEASE_AFTER:  # no later section reads these (contents.py)
            view.cache.forget(RELEASE_AFTER[s.key])
        if first and s is first[-1]:
            context.release_table(view, "ops", OPS_DERIVED)
    doc.update((s.key, done[s.key]) for s in sections)
    return doc


def text_sections() -> list[Section]:
    """The sections the text report shows, in report order (those with a text view)."""
    from tbdtrace.report.contents import SECTIONS

    return [s for s in SECTIONS if s.render_text is not None]


# Columns most sections read, fetched together: the two files are decoded side by side.
PREFETCH = (
    ("kernels", ("start_ns", "end_ns", "name")),
    ("runtime", ("start_ns",)),
)
