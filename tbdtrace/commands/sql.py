"""``tbdtrace sql TRACE "SELECT ..."``: DuckDB SQL over the trace's tables."""

from __future__ import annotations

import argparse
import csv
import json
import sys

from tbdtrace.commands._open import open_or_import
from tbdtrace.passes import sql
from tbdtrace.report.build import table_records
from tbdtrace.report.textui import Console, Table


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "sql",
        help="run a SQL query over a trace (DuckDB)",
        description="Run a DuckDB SQL query over a trace. Every table "
        "(kernels, memcpy, memset, memory, runtime, ops, markers, steps, "
        "devices, sync, overhead, host_samples) is registered under its name.",
    )
    p.add_argument("trace", metavar="TRACE", help="trace directory or profiler file")
    p.add_argument("query", metavar="SQL", help='the query, e.g. "SELECT count(*) FROM kernels"')
    p.add_argument("--format", choices=("text", "csv", "json"), default="text")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    tr = open_or_import(args.trace)
    res = sql.query(tr, args.query)
    rows = table_records(res)
    if args.format == "json":
        json.dump(rows, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    elif args.format == "csv":
        w = csv.writer(sys.stdout)
        w.writerow(res.column_names)
        for r in rows:
            w.writerow(["" if r[c] is None else r[c] for c in res.column_names])
    else:
        con = Console(width=None if sys.stdout.isatty() else 160)
        t = Table(title=f"{len(rows)} row{'s' if len(rows) != 1 else ''}", title_justify="left")
        for c in res.column_names:
            t.add_column(c, no_wrap=True)
        for r in rows:
            t.add_row(*["NULL" if r[c] is None else str(r[c]) for c in res.column_names])
        con.print(t)
    return 0
