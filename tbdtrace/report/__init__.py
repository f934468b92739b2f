"""Reports: the passes' outputs rendered as JSON (for scripts) and text (for people).

``build(trace)`` returns the JSON document: one top-level key per section. Each section
is a ``Section`` (key, compute, render_text) declared in its module and listed in report
order in ``tbdtrace.report.contents.SECTIONS``: ``compute(trace, opts)``
returns JSON-ready data, ``render_text(console, data, opts)`` prints it (tbdtrace.report.textui).
"""

from __future__ import annotations

from tbdtrace.report.build import build
from tbdtrace.report.section_api import ReportOptions, Section

__all__ = ["ReportOptions", "Section", "build"]
