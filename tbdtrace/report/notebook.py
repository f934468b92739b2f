"""Notebook use: a trace's summary as HTML (``TraceAnalysis._repr_html_``) and the
report's plots as matplotlib Figures, which Jupyter draws inline.

    a = tbdtrace.analyze("out/run")    # shows the trace's source and tables
    doc = a.report()                   # the report document (a dict)
    figs = notebook.plots(doc)         # {"steps": Figure, "memory": Figure, ...}
    figs["memory"]                     # drawn inline
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from tbdtrace import schema

if TYPE_CHECKING:
    from tbdtrace.trace import Trace


def trace_html(trace: Trace) -> str:
    """A small HTML table: the trace's path and meta, and each table's row count (read
    from the file footers: nothing is decoded, no pass runs)."""
    m = trace.meta
    meta = [(k, m.get(k)) for k in ("source", "backend", "framework", "workload", "schema_version")]
    rows = "".join(
        f"<tr><td>{html.escape(k)}</td><td>{html.escape(str(v))}</td></tr>"
        for k, v in meta
        if v is not None
    )
    counts = "".join(
        f"<tr><td>{t.name}</td><td style='text-align:right'>{trace.num_rows(t.name):,}</td></tr>"
        for t in schema.TABLES
        if trace.num_rows(t.name)
    )
    return (
        f"<div><b>tbdtrace trace</b> <code>{html.escape(str(trace.path))}</code>"
        f"<table>{rows}</table><table><tr><th>table</th><th>rows</th></tr>{counts}</table>"
        "<small>tbdtrace.analyze(tr).report() gives the report document; "
        "tbdtrace.report.notebook.plots(doc) its plots.</small></div>"
    )


def plots(doc: dict[str, Any]) -> dict[str, Any]:
    """The report's plots for ``doc`` (a report document): key -> matplotlib Figure, for
    the plots the document has data for (the same as the HTML report's)."""
    from tbdtrace.report import html as report_html

    return dict(report_html.figures(doc)[0])
