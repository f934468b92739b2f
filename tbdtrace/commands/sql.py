"""``tbdtrace sql TRACE "SELECT ..."``: DuckDB SQL over the trace's tables."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tbdtrace.analysis import sql
from tbdtrace.commands import _perrank
from tbdtrace.commands._open import open_or_import
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
    p.add_argument(
        "trace",
        metavar="TRACE",
        help="trace directory or profiler file; a folder of per-rank files or trace "
        "directories, or a quoted glob, is queried as one set of ranks (each rank "
        "imported in its own task; the tables hold every rank's rows)",
    )
    p.add_argument("query", metavar="SQL", help='the query, e.g. "SELECT count(*) FROM kernels"')
    p.add_argument("--format", choices=("text", "csv", "json"), default="text")
    p.add_argument(
        "--output",
        metavar="FILE",
        default=None,
        help="write the result to FILE instead of stdout, as CSV, JSON or Parquet by its "
        "extension (.csv, .json, .parquet); never inside the trace",
    )
    _perrank.add_options(p, "import")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from tbdtrace.commands import _rankset, sql_output

    usage = _perrank.check(args, "sql")
    if usage:
        print(usage, file=sys.stderr)
        return 2
    out = sql_output.check(args.output, args.trace) if args.output else None
    if _rankset.is_rank_set([args.trace]):
        return _run_ranks(args, out)
    if _perrank.requested(args):
        print(
            "tbdtrace sql: --jobs, --workers and --scheduler take per-rank files (a folder "
            "or a quoted glob); one trace is queried in this process",
            file=sys.stderr,
        )
        return 2
    tr = open_or_import(args.trace)
    return _print(sql.query(tr, args.query), args, out)


def _run_ranks(args: argparse.Namespace, out: Any) -> int:
    """Each rank imported to Parquet in its own task; the query then scans every rank's
    files (DuckDB over Arrow datasets), never all ranks' tables loaded at once."""
    from tbdtrace.commands import _rankset
    from tbdtrace.scaleout.rankwork import rank_datasets

    rs = _rankset.expand([args.trace])
    for line in rs.problems:
        print(f"tbdtrace sql: warning: {line}", file=sys.stderr)
    if not rs.files:
        print("tbdtrace sql: no rank files to query", file=sys.stderr)
        return 1
    with _perrank.work_dir(args.work_dir) as work:
        parts, _ = _perrank.run_tasks(args, "sql", rs.files, work, keep_trace=True)
        con = sql.connect_tables(rank_datasets(parts))
        return _print(sql.query_on(con, args.query, args.trace), args, out)


def _print(res: Any, args: argparse.Namespace, out: Any) -> int:
    from tbdtrace.commands import sql_output

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
