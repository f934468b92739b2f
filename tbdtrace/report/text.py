"""Text rendering of a report document (tbdtrace.report.textui)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tbdtrace.report.contents import SECTIONS
from tbdtrace.report.section_api import ReportOptions
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
    win = doc.get("window")
    if win is not None:
        from tbdtrace.report.window_section import window_line

        con.print(window_line(win))
        opts = replace(opts, covers=win["label"], ranks=max(1, len(win["ranks"])))
    for s in SECTIONS:
        if s.render_text is not None and s.key in doc:
            out: Any = con
            if s.whole_trace and s.key != "phases" and opts.covers != "whole trace":
                out = _Headed(con, f"{s.key.capitalize()} over the whole trace:")
            s.render_text(out, doc[s.key], opts)


class _Headed:
    """A console that prints ``head`` before the first thing printed to it (so a section
    that prints nothing prints no heading either)."""

    def __init__(self, con: Console, head: str):
        self._con, self._head = con, head

    def print(self, obj: Any = "", end: str = "\n") -> None:
        if self._head:
            self._con.print(self._head)
            self._head = ""
        self._con.print(obj, end)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)
