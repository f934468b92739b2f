"""``tbdtrace sql TRACE "SELECT ..."``: DuckDB SQL over the trace's tables."""

from __future__ import annotations

import argparse
import json
import sys

from tbdtrace.commands._open import open_or_import
from tbdtrace.passes import sql
from tbdtrace.report import sql_view


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
    if args.format == "json":
        json.dump(sql_view.records(res), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    elif args.format == "csv":
        sql_view.write_csv(sys.stdout, res.column_names, sql_view.records(res))
    else:
        sql_view.render_text(res)
    return 0
