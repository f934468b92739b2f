"""``tbdtrace report TRACE``: the analysis report, as text or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from tbdtrace.commands import _window
from tbdtrace.commands._open import begin_open

if TYPE_CHECKING:
    from tbdtrace.trace import Trace


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "report",
        help="print the analysis report of a trace",
        description="Analyze a trace directory and print the report.",
    )
    p.add_argument(
        "trace",
        metavar="TRACE",
        nargs="+",
        help="trace directory, or a profiler file (Kineto JSON, ...) to import "
        "in memory and report without writing a trace; several per-rank files, a folder "
        "of them or a quoted glob are imported together as one multi-rank trace",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="with per-rank files: exit 1 when a rank file is missing or unreadable "
        "(default: name it on stderr and report the other ranks)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument(
        "--top",
        type=int,
        default=20,
        metavar="N",
        help="rows of per-kernel tables in the text report (default 20)",
    )
    p.add_argument(
        "--top-json", action="store_true", help="also limit the JSON per-kernel lists to --top rows"
    )
    _window.add_options(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.top is not None and args.top < 1:
        print("tbdtrace report: --top must be >= 1", file=sys.stderr)
        return 2
    win = _window.spec(args, "report")
    if win is None:
        return 2
    from tbdtrace.commands import _rankset

    if _rankset.is_rank_set(args.trace):
        return _run_ranks(args, win)
    pending = begin_open(args.trace[0])  # a profiler file parses while the modules load
    from tbdtrace.report import sections  # noqa: F401 - every section and pass, loaded now

    tr = pending.trace()
    _emit(tr, args, win)
    return 0


def _run_ranks(args: argparse.Namespace, win: Any) -> int:
    """Per-rank files imported in memory as one trace; each file left out is named in
    one line on stderr (exit 1 with --strict, else the other ranks are reported)."""
    from tbdtrace.commands import _rankset

    rs = _rankset.expand(args.trace)
    tr, problems = _rankset.open_ranks(rs)
    for line in problems:
        print(f"tbdtrace report: warning: {line}", file=sys.stderr)
    if problems and args.strict:
        print("tbdtrace report: --strict: rank files missing or unreadable", file=sys.stderr)
        return 1
    _emit(tr, args, win)
    return 0


def _emit(tr: Trace, args: argparse.Namespace, win: Any) -> None:
    from tbdtrace.report import ReportOptions, build
    from tbdtrace.report.text import render

    opts = ReportOptions(top=args.top, top_json=args.top if args.top_json else None, window=win)
    doc = build(tr, opts)
    if args.format == "json":
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render(doc, opts)
