"""``tbdtrace diff A B``: two traces side by side, and a regression gate for CI."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tbdtrace.commands import _args, _rankset, _window
from tbdtrace.commands._open import open_or_import

FORMATS = ("text", "json", "csv", "markdown", "html", "xlsx")

EPILOG = """\
Times are compared per measured step (each side's window total / its measured steps).

Regression gate: --fail-above METRIC=PCT[,METRIC=PCT...] fails when B is worse than A by
more than PCT: higher for times and sizes, lower for throughput and utilization. Metrics:
{metrics}.
A metric measured in neither or only one trace fails as "missing".

Exit status: 0 compared (every gate passed); {regression} a gate failed (regression); 1 bad
input; 2 usage."""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from tbdtrace.analysis import gate as diff_gate

    p = sub.add_parser(
        "diff",
        help="compare two traces; gate CI on regressions",
        description="Compare two traces (frameworks, batch sizes, versions): "
        "throughput, utilization, per-category, per-kernel and per-op deltas (B - A), "
        "per measured step.",
        epilog=EPILOG.format(
            metrics=", ".join(m.name for m in diff_gate.METRICS),
            regression=diff_gate.REGRESSION_EXIT,
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
        help="kernels and ops listed, largest |change per step| first (default 20)",
    )
    p.add_argument(
        "--fail-above",
        action="append",
        metavar="METRIC=PCT,...",
        help="regression gate, e.g. step_time=5%%,kernel:gemm=10%%,memory.peak=3%% (see "
        f"below); exit status {diff_gate.REGRESSION_EXIT} when B is worse beyond a limit",
    )
    _args.mark_output(
        p.add_argument(
            "--summary",
            metavar="FILE",
            help="append a short Markdown summary (verdict, gates, largest changes) to FILE, "
            "e.g. $GITHUB_STEP_SUMMARY; --format markdown prints it instead",
        ),
        "append",
    )
    _args.add_output(p, FORMATS)
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
    thresholds = _thresholds(args)
    if isinstance(thresholds, str):
        print(thresholds, file=sys.stderr)
        return 2
    inputs = [args.a] + ([args.b] if args.b else [])
    _args.check_output(args, inputs)
    if args.summary:
        from tbdtrace import output_policy

        output_policy.append_target(args.summary, inputs)
    from tbdtrace.report import diff_view
    from tbdtrace.report.documents import DiffDoc
    from tbdtrace.report.emit import emit

    a, b = _sides(args)
    doc = diff_view.document(a, b, spec, args.top, thresholds)
    rc = emit(DiffDoc(doc, args.top), args.format, _args.dest(args, inputs))
    if rc == 0 and args.summary:
        from tbdtrace import output_policy

        output_policy.append_text(
            output_policy.append_target(args.summary, inputs), diff_view.markdown(doc)
        )
    if rc == 0 and "gate" in doc:
        if args.format != "text":  # the text output ends with it already
            print(f"tbdtrace diff: {diff_view.verdict(doc)}", file=sys.stderr)
        return int(doc["gate"]["exit_code"])
    return rc


def _thresholds(args: argparse.Namespace) -> list[Any] | str | None:
    """The parsed --fail-above thresholds, None without any, or the usage line."""
    if not args.fail_above:
        return None
    from tbdtrace.analysis import gate as diff_gate
    from tbdtrace.analysis.engine import categories

    try:
        return diff_gate.parse(args.fail_above, categories.CATEGORIES)
    except diff_gate.GateUsageError as e:
        return f"tbdtrace diff: {e}"


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
