"""``tbdtrace sql TRACE "SELECT ..."``: DuckDB SQL over the trace's tables."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from typing import Any

from tbdtrace.commands._open import open_or_import
from tbdtrace.passes import sql
from tbdtrace.report.build import table_records
from tbdtrace.report.textui import Console, Table


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "sql",
        help="run a SQL query over a trace (DuckDB)",
        description="Run a read-only DuckDB SQL query over a trace. Every table "
        "(kernels, memcpy, memset, memory, runtime, ops, markers, steps, "
        "devices, sync, overhead, host_samples) is registered under its name. The query "
        "is sandboxed: no file, network or extension access, SELECT/EXPLAIN only.",
    )
    p.add_argument("trace", metavar="TRACE", help="trace directory or profiler file")
    p.add_argument("query", metavar="SQL", help='the query, e.g. "SELECT count(*) FROM kernels"')
    p.add_argument("--format", choices=("text", "csv", "json"), default="text")
    p.add_argument(
        "--output",
        metavar="FILE",
        default=None,
        help="write the result to FILE instead of stdout, as CSV, JSON or Parquet by its "
        "extension (.csv, .json, .parquet); never inside the trace",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from tbdtrace.commands import sql_output

    out = sql_output.check(args.output, args.trace) if args.output else None
    tr = open_or_import(args.trace)
    res = sql.query(tr, args.query)
    if out is not None:
        sql_output.write(res, out)
        print(f"wrote {out} ({res.num_rows} rows)", file=sys.stderr)
        return 0
    rows = table_records(res)
    if args.format == "json":
        json.dump(rows, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    elif args.format == "csv":
        write_csv(sys.stdout, res.column_names, rows)
    else:
        con = Console(width=None if sys.stdout.isatty() else 160)
        t = Table(title=f"{len(rows)} row{'s' if len(rows) != 1 else ''}", title_justify="left")
        for c in res.column_names:
            t.add_column(c, no_wrap=True)
        for r in rows:
            t.add_row(*["NULL" if r[c] is None else str(r[c]) for c in res.column_names])
        con.print(t)
    return 0


def write_csv(f: Any, columns: list[str], rows: list[dict[str, Any]]) -> None:
    w = csv.writer(f)
    w.writerow(columns)
    for r in rows:
        w.writerow(["" if r[c] is None else r[c] for c in columns])
