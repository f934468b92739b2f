"""Text rendering of a report document (tbdtrace.report.textui)."""

from __future__ import annotations

from typing import Any

from tbdtrace.report.build import SECTIONS, ReportOptions
from tbdtrace.report.textui import Console


def render(doc: dict[str, Any], opts: ReportOptions, console: Console | None = None) -> None:
    # Pipes and CI logs get a wide fixed width so tables keep their columns.
    con = console or Console()
    tr = doc["trace"]
    bits = [f"{k}={tr[k]}" for k in ("source", "backend", "framework", "workload") if tr.get(k)]
    con.print(f"[bold]tbdtrace report[/bold]: {tr['path']}  ({', '.join(bits)})")
    if tr.get("skipped_events"):
        from tbdtrace.importers.validate import summary

        con.print(f"Caveat: {summary(tr['skipped_events'])} at import; no figure counts them.")
    for s in SECTIONS:
        if s.render_text is not None and s.key in doc:
            s.render_text(con, doc[s.key], opts)
