"""``tbdtrace hotspots TRACE``: top kernels, ops or categories with who launched them."""

from __future__ import annotations

import argparse

from tbdtrace.commands import _args, _window
from tbdtrace.commands._open import begin_open

BY = (
    "kernel",
    "op",
    "category",
    "source",
)  # tbdtrace.analysis.passes.hotspots.BY, without loading the pass


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
    p.add_argument(
        "--top", type=_args.positive_int, default=20, metavar="N", help="rows to show (default 20)"
    )
    p.add_argument(
        "--by",
        choices=BY,
        default="kernel",
        help="kernel (default), op (the launching op), category, or source (the user's "
        "Python line that launched the kernels: needs a trace with Python stacks, "
        "`capture --with-stack` or torch.profiler(with_stack=True))",
    )
    _args.add_output(p, folder_csv=False, section=False)
    _window.add_options(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    # A profiler file parses while the passes load (the window's options load them); its
    # errors are raised by .trace().
    _args.check_output(args, [args.trace], one_table=True)
    pending = begin_open(args.trace)
    spec = _window.spec(args, "hotspots")
    if spec is None:
        return 2
    from tbdtrace.report import hotspots_view
    from tbdtrace.report.documents import HotspotsDoc
    from tbdtrace.report.emit import emit

    doc = hotspots_view.document(pending.trace(), spec, args.top, args.by, args.trace)
    return emit(HotspotsDoc(doc, args.by, args.trace), args.format, _args.dest(args, [args.trace]))
