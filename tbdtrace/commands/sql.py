"""``tbdtrace sql TRACE "SELECT ..."``: DuckDB SQL over the trace's tables."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from tbdtrace.analysis import sql
from tbdtrace.commands import _args, _perrank
from tbdtrace.commands._open import open_or_import


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
    _args.mark_output(
        p.add_argument(
            "--output",
            "-o",
            metavar="FILE",
            default=None,
            help="write the result to FILE instead of stdout, as CSV, JSON or Parquet by its "
            "extension (.csv, .json, .parquet); an existing FILE is replaced only with "
            "--force, never inside the trace",
        ),
        "file",
    )
    _args.add_force(p, "an existing --output FILE")
    p.add_argument(
        "--raw-csv",
        action="store_true",
        help="CSV cells exactly as they are: without it, a text cell starting with "
        "= + - @ TAB or CR gets a leading ' so spreadsheets do not run it as a formula",
    )
    _perrank.add_options(p, "import")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from tbdtrace.commands import _rankset
    from tbdtrace.report.sql_view import output_format

    usage = _perrank.check(args, "sql")
    if usage:
        print(usage, file=sys.stderr)
        return 2
    if args.output:
        args.format = output_format(args.output)
        _args.check_output(args, [args.trace], one_table=True)
    if _rankset.is_rank_set([args.trace]):
        return _run_ranks(args)
    if _perrank.requested(args):
        print(
            "tbdtrace sql: --jobs, --workers and --scheduler take per-rank files (a folder "
            "or a quoted glob); one trace is queried in this process",
            file=sys.stderr,
        )
        return 2
    tr = open_or_import(args.trace)
    return _print(interruptible(sql.connect(tr), args.query, tr.path), args)


def _run_ranks(args: argparse.Namespace) -> int:
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
        return _print(interruptible(con, args.query, args.trace), args)


def interruptible(con: Any, query: str, where: Any) -> Any:
    """:func:`tbdtrace.passes.sql.query_on` on a thread of its own, so that Ctrl-C stops
    it: the main thread waits in steps of 0.1 s (a signal reaches Python there, not inside
    DuckDB), interrupts the query on the first Ctrl-C and ends the command with
    ``tbdtrace: interrupted`` (exit 130) within a second; a second Ctrl-C gets the
    default action (the process ends at once)."""
    import contextlib
    import signal
    import threading

    out: dict[str, Any] = {}

    def work() -> None:
        try:
            out["result"] = sql.query_on(con, query, where)
        except BaseException as e:  # handed to the main thread
            out["error"] = e

    t = threading.Thread(target=work, name="tbdtrace-sql", daemon=True)
    t.start()
    try:
        while t.is_alive():
            t.join(0.1)
    except KeyboardInterrupt:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_DFL)
        with contextlib.suppress(Exception):  # closed meanwhile: the query has ended
            con.interrupt()
        t.join(0.5)  # DuckDB stops within a few ms
        if threading.current_thread() is not threading.main_thread():
            raise
        # Ending the interpreter while DuckDB's threads wind down aborts the process
        # ("terminate called ..."): end it here instead, as the CLI would, with its
        # line and status.
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        print("tbdtrace: interrupted", file=sys.stderr, flush=True)
        os._exit(130)
    if "error" in out:
        raise out["error"]
    return out["result"]


def _print(res: Any, args: argparse.Namespace) -> int:
    from tbdtrace.report.documents import SqlDoc
    from tbdtrace.report.emit import emit
    from tbdtrace.safe_text import printable

    rc = emit(SqlDoc(res), args.format, _args.dest(args, [args.trace]))
    if args.output:
        print(f"wrote {printable(args.output)} ({res.num_rows} rows)", file=sys.stderr)
    return rc
