"""``tbdtrace hotspots TRACE``: top kernels, ops or categories with who launched them."""

from __future__ import annotations

import argparse
import json
import sys

from tbdtrace.commands import _window
from tbdtrace.commands._open import begin_open

BY = ("kernel", "op", "category")  # tbdtrace.analysis.passes.hotspots.BY, without loading the pass


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "hotspots",
        help="top kernels, ops or categories by device time",
        description="List the top kernels (with their launch configuration "
        "and launching op, module and annotation range), ops or categories.",
    )
    p.add_argument(
        "trace", metavar="TRACE", help="trace directory, or a profiler file to import in memory"
    )
    p.add_argument("--top", type=int, default=20, metavar="N", help="rows to show (default 20)")
    p.add_argument("--by", choices=BY, default="kernel")
    p.add_argument("--format", choices=("text", "json", "csv"), default="text")
    _window.add_options(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.top < 1:
        print("tbdtrace hotspots: --top must be >= 1", file=sys.stderr)
        return 2
    # A profiler file parses while the passes load (the window's options load them); its
    # errors are raised by .trace().
    pending = begin_open(args.trace)
    spec = _window.spec(args, "hotspots")
    if spec is None:
        return 2
    from tbdtrace.report import hotspots_view

    doc = hotspots_view.document(pending.trace(), spec, args.top, args.by)
    if args.format == "json":
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.format == "csv":
        hotspots_view.write_csv(doc, sys.stdout)
    else:
        hotspots_view.render_text(doc, args.by, args.trace)
    return 0
