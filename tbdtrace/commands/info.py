"""``tbdtrace info TRACE``: meta.json and row counts."""

from __future__ import annotations

import argparse
import json

from tbdtrace import schema
from tbdtrace.commands._open import open_or_import
from tbdtrace.report.textui import Console, Table


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "info",
        help="show a trace's metadata and table sizes",
        description="Show a trace directory's metadata and row counts.",
    )
    p.add_argument("trace", metavar="TRACE", help="trace directory or profiler file")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    tr = open_or_import(args.trace)
    counts = {t.name: tr.num_rows(t.name) for t in schema.TABLES}
    if args.format == "json":
        print(json.dumps({"meta": tr.meta, "rows": counts}, indent=2, sort_keys=True))
        return 0
    con = Console()
    m = tr.meta
    con.print(f"[bold]{tr.path}[/bold]  schema v{m.get('schema_version')}")
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
    t = Table(title="Tables", title_justify="left")
    t.add_column("table")
    t.add_column("rows", justify="right")
    for name, n in counts.items():
        if n:
            t.add_row(name, f"{n:,}")
    con.print(t)
    return 0
