"""``tbdtrace diff A B``: two traces side by side."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tbdtrace.commands import _args, _rankset, _window
from tbdtrace.commands._open import open_or_import


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "diff",
        help="compare two traces",
        description="Compare two traces (frameworks, batch sizes, versions): "
        "throughput, utilization, per-category and per-kernel deltas (B - A).",
    )
    p.add_argument(
        "a",
        metavar="A",
        help="baseline trace directory or profiler file (or a folder or quoted glob of "
        "per-rank files, with --rank)",
    )
    p.add_argument(
        "b",
        metavar="B",
        nargs="?",
        help="trace compared with A; leave it out to compare two ranks of A (--rank R1 --rank R2)",
    )
    p.add_argument(
        "--rank",
        type=_args.nonnegative_int,
        action="append",
        metavar="R",
        help="compare ranks, not whole traces: A --rank R1 --rank R2 compares two ranks of "
        "A; A B --rank R compares rank R of both runs (A B --rank R1 --rank R2: R1 of A "
        "with R2 of B)",
    )
    p.add_argument(
        "--top",
        type=_args.positive_int,
        default=20,
        metavar="N",
        help="kernels listed, largest |delta| first (default 20)",
    )
    _args.add_output(p)
    _window.add_options(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    usage = _args.output_usage(args, "diff")
    if usage:
        print(usage, file=sys.stderr)
        return 2
    spec = _window.spec(args, "diff")
    if spec is None:
        return 2
    usage = _rank_usage(args)
    if usage:
        print(usage, file=sys.stderr)
        return 2
    inputs = [args.a] + ([args.b] if args.b else [])
    _args.check_output(args, inputs)
    from tbdtrace.report import diff_view
    from tbdtrace.report.documents import DiffDoc
    from tbdtrace.report.emit import emit

    a, b = _sides(args)
    doc = diff_view.document(a, b, spec, args.top)
    return emit(DiffDoc(doc), args.format, _args.dest(args, inputs))


def _rank_usage(args: argparse.Namespace) -> str | None:
    n = len(args.rank or [])
    if args.b is None and n != 2:
        return "tbdtrace diff: give B, or two ranks of A (--rank R1 --rank R2)"
    if n > 2:
        return "tbdtrace diff: --rank at most twice (one rank per side)"
    return None


def _sides(args: argparse.Namespace) -> tuple[Any, Any]:
    """The two traces compared: whole traces, or the ranks --rank picks."""
    ranks = args.rank or []
    a = _open(args.a) if ranks else open_or_import(args.a)
    if args.b is None:
        return _rankset.one_rank(a, ranks[0]), _rankset.one_rank(a, ranks[1])
    b = _open(args.b) if ranks else open_or_import(args.b)
    if not ranks:
        return a, b
    return _rankset.one_rank(a, ranks[0]), _rankset.one_rank(b, ranks[-1])


def _open(arg: str) -> Any:
    """A trace, a profiler file, or a set of per-rank files (imported as one trace)."""
    if not _rankset.is_rank_set([arg]):
        return open_or_import(arg)
    tr, problems = _rankset.open_ranks(_rankset.expand([arg]))
    for line in problems:
        print(f"tbdtrace diff: warning: {line}", file=sys.stderr)
    return tr
