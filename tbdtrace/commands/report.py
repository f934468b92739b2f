"""``tbdtrace report TRACE``: the analysis report, as text or JSON."""

from __future__ import annotations

import argparse
import sys

from tbdtrace.commands import _output, _window
from tbdtrace.commands._open import begin_open


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "report",
        help="print the analysis report of a trace",
        description="Analyze a trace directory and print the report.",
    )
    p.add_argument(
        "trace",
        metavar="TRACE",
        help="trace directory, or a profiler file (Kineto JSON, ...) to import "
        "in memory and report without writing a trace",
    )
    _output.add_arguments(p, ("text", "json", "csv", "html"))
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
    p.add_argument(
        "--model-flops-per-sample",
        type=float,
        metavar="N",
        help="model FLOPs per training sample (forward + backward), for MFU in the flops section",
    )
    _window.add_options(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.top is not None and args.top < 1:
        print("tbdtrace report: --top must be >= 1", file=sys.stderr)
        return 2
    if args.model_flops_per_sample is not None and not args.model_flops_per_sample > 0:
        print("tbdtrace report: --model-flops-per-sample must be > 0", file=sys.stderr)
        return 2
    usage = _output.check(args, "report")
    if usage:
        print(usage, file=sys.stderr)
        return 2
    win = _window.spec(args, "report")
    if win is None:
        return 2
    pending = begin_open(args.trace)  # a profiler file parses while the modules load
    from tbdtrace.report import (
        ReportOptions,
        build,
        sections,  # noqa: F401 - every section and pass, loaded now
    )
    from tbdtrace.report.text import render

    tr = pending.trace()
    opts = ReportOptions(
        top=args.top,
        top_json=args.top if args.top_json else None,
        window=win,
        model_flops_per_sample=args.model_flops_per_sample,
    )
    doc = build(tr, opts)
    if args.format in ("json", "csv"):
        return _output.emit_tables(doc, args, "report")
    if args.format == "html":
        try:
            import matplotlib  # noqa: F401 - the plots' library, a dependency of tbdtrace
        except ImportError:
            print(
                "tbdtrace report: --format html needs matplotlib (pip install "
                "matplotlib); --format json and csv do not",
                file=sys.stderr,
            )
            return 1
        from tbdtrace.report import html

        return _output.write_text(html.render(doc), args, "report")
    if args.output:
        import io

        from tbdtrace.report.textui import Console

        buf = io.StringIO()
        render(doc, opts, Console(file=buf, width=200))
        return _output.write_text(buf.getvalue(), args, "report")
    render(doc, opts)
    return 0
