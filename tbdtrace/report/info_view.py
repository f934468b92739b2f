"""``tbdtrace info``: a trace's meta.json and row counts as text (its JSON is the data)."""

from __future__ import annotations

from typing import Any

from tbdtrace.report.textui import Console, Table


def render_text(path: str, m: dict[str, Any], counts: dict[str, int], con: Console) -> None:
    """The trace's path and schema version, its standard meta fields, then its tables."""
    con.print(f"[bold]{path}[/bold]  schema v{m.get('schema_version')}")
    for k in ("source", "backend", "framework", "workload", "host", "clock", "start_time_ns"):
        if m.get(k) is not None:
            con.print(f"  {k}: {m[k]}")
    if m.get("partial"):
        con.print(f"  partial: {(m.get('extra') or {}).get('partial') or 'yes'}")
    if m.get("command"):
        con.print(f"  command: {' '.join(m['command'])}")
    if m.get("source_files"):
        con.print(f"  source files: {', '.join(m['source_files'])}")
    if m.get("ranks"):
        con.print(f"  ranks: {', '.join(map(str, m['ranks']))}")
    if m.get("skipped_events"):
        from tbdtrace.importers.validate import summary

        con.print(f"  skipped at import: {summary(m['skipped_events'])}")
    t = Table(title="Tables")
    t.add_column("table")
    t.add_column("rows", justify="right")
    for name, n in counts.items():
        if n:
            t.add_row(name, f"{n:,}")
    con.print(t)
