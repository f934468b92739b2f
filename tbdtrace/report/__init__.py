"""Reports: the passes' outputs rendered as JSON (for scripts) and text (for people).

``build(trace)`` returns the JSON document: one top-level key per section. Each section
is registered in ``SECTIONS`` as (key, compute, render_text): ``compute(trace, opts)``
returns JSON-ready data, ``render_text(console, data, opts)`` prints it (tbdtrace.report.textui).
"""

from __future__ import annotations

from tbdtrace.report.build import SECTIONS, ReportOptions, build, section

__all__ = ["SECTIONS", "ReportOptions", "build", "section"]
