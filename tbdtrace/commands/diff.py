"""``tbdtrace diff A B``: two traces side by side."""

from __future__ import annotations

import argparse
import json
import sys

from tbdtrace.commands import _output, _window
from tbdtrace.commands._open import open_or_import


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "diff",
        help="compare two traces",
        description="Compare two traces (frameworks, batch sizes, versions): "
        "throughput, utilization, per-category and per-kernel deltas (B - A).",
    )
    p.add_argument("a", metavar="A", help="baseline trace directory or profiler file")
    p.add_argument("b", metavar="B", help="trace directory or profiler file compared with A")
    p.add_argument(
        "--top",
        type=int,
        default=20,
        metavar="N",
        help="kernels listed, largest |delta| first (default 20)",
    )
    _output.add_arguments(p)
    _window.add_options(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.top < 1:
        print("tbdtrace diff: --top must be >= 1", file=sys.stderr)
        return 2
    usage = _output.check(args, "diff")
    if usage:
        print(usage, file=sys.stderr)
        return 2
    spec = _window.spec(args, "diff")
    if spec is None:
        return 2
    from tbdtrace.report import diff_view

    doc = diff_view.document(open_or_import(args.a), open_or_import(args.b), spec, args.top)
    if args.format == "json" and not args.section:
        return _output.write_text(json.dumps(doc, indent=2) + "\n", args, "diff")
    if args.format in ("json", "csv"):
        return _output.emit_tables(diff_view.tables(doc), args, "diff")
    diff_view.render_text(doc)
    return 0
