"""``tbdtrace report TRACE``: the analysis report, as text or JSON."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from tbdtrace.commands import _args, _perrank, _window
from tbdtrace.commands._open import begin_open, event_rows

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
        help="exit 1 when a table file of the trace fails its check (missing, cut short, "
        "swapped, foreign: tbdtrace/trace_check.py) or, with per-rank files, when a rank "
        "file is missing, unreadable or a rank comes twice (default: name it on stderr "
        "and report the rest)",
    )
    _args.add_output(p, ("text", "json", "csv", "html", "xlsx"))
    p.add_argument(
        "--top",
        type=_args.positive_int,
        default=20,
        metavar="N",
        help="rows of per-kernel tables in the text report (default 20)",
    )
    p.add_argument(
        "--top-json", action="store_true", help="also limit the JSON per-kernel lists to --top rows"
    )
    p.add_argument(
        "--model-flops-per-sample",
        type=_args.positive_float,
        metavar="N",
        help="model FLOPs per training sample (forward + backward), for MFU in the flops section",
    )
    p.add_argument(
        "--roofline",
        action="store_true",
        help="add the roofline section: per op shape and family, achieved FLOP/s and "
        "bytes/s against the device's roofs, compute- or memory-bound (off by default: it "
        "costs a search of every kernel's launching op; always on with --format html, "
        "whose ops table shows it)",
    )
    p.add_argument(
        "--critical-path",
        action="store_true",
        help="add the critical-path section: per step, the chain of dependent CPU ops, "
        "launches, kernels, copies and syncs that set its length, by resource, and the ops "
        "on it (off by default: it walks each step's path event by event)",
    )
    _window.add_options(p)
    _perrank.add_options(p, "analyse")
    p.set_defaults(func=_run)


# The columns the default report reads first of a trace directory, in the order its
# sections ask for them (the window, kernels and API calls, their joins, the CPU ops,
# markers, launches, copies, shapes, memory): a small trace's are decoded on a second
# thread while this one loads the analysis and computes (commands/_open.py, _OpenAhead).
# A column the report no longer reads costs its decoding only; one it reads that is not
# here is read when asked, as before.
READ_AHEAD = (
    ("kernels", ("start_ns", "end_ns", "name")),
    ("runtime", ("start_ns", "end_ns", "name")),
    ("steps", ("step", "start_ns", "end_ns", "rank", "samples", "warmup", "source")),
    ("kernels", ("correlation_id", "external_id")),
    ("runtime", ("correlation_id", "tid")),
    ("memcpy", ("correlation_id", "start_ns", "end_ns", "bytes")),
    ("memset", ("correlation_id", "start_ns", "end_ns")),
    ("ops", ("start_ns", "end_ns", "tid", "name", "external_id", "category")),
    ("markers", ("start_ns", "end_ns", "name", "kind", "tid")),
    ("kernels", ("grid_x", "grid_y", "grid_z", "block_x", "block_y")),
    ("memcpy", ("device_id", "device_type", "rank", "copy_kind")),
    ("ops", ("input_shapes", "input_dtypes", "concrete_inputs", "flops")),
    (
        "memory",
        (
            "ts_ns",
            "action",
            "level",
            "bytes",
            "address",
            "device_id",
            "device_type",
            "rank",
            "pid",
            "category",
            "total_allocated_bytes",
            "total_reserved_bytes",
            "tid",
        ),
    ),
)


def _run(args: argparse.Namespace) -> int:
    usage = _args.output_usage(args, "report")
    if usage:
        print(usage, file=sys.stderr)
        return 2
    _args.check_output(args, args.trace)
    usage = _perrank.check(args, "report")
    if usage:
        print(usage, file=sys.stderr)
        return 2
    from tbdtrace.commands import _rankset

    ranks = _rankset.is_rank_set(args.trace)
    if not ranks and _perrank.requested(args):
        print(
            "tbdtrace report: --jobs, --workers and --scheduler take per-rank files (a folder, "
            "a glob or several files); one trace is reported in this process",
            file=sys.stderr,
        )
        return 2
    # A profiler file starts parsing now, on its own thread, while numpy, pyarrow and the
    # passes load (the window's options load them); its errors are raised by .trace().
    pending = None if ranks else begin_open(args.trace[0], args.strict, read_ahead=READ_AHEAD)
    win = _window.spec(args, "report")
    if win is None:
        return 2
    if pending is None:
        return _run_ranks(args, win)
    from tbdtrace.report import contents  # noqa: F401 - every section and pass, loaded now

    if getattr(pending.pending, "fmt", None) == "kineto":
        # What the tables' assembly loads, loaded while the file is parsed: ~20 ms less
        # after the parse (pyarrow loads numpy.ma on its first array from numpy).
        import numpy.ma  # noqa: F401

        from tbdtrace.importers.kineto import tables  # noqa: F401
    tr = pending.trace()
    return _emit(tr, args, win)


def _run_ranks(args: argparse.Namespace, win: Any) -> int:
    """Per-rank files imported in memory as one trace; each file left out is named in
    one line on stderr (exit 1 with --strict, else the other ranks are reported)."""
    from tbdtrace.commands import _rankset

    rs = _rankset.expand(args.trace)
    if _perrank.requested(args) or rs.has_traces:
        return _run_rank_by_rank(args, win, rs)
    tr, problems = _rankset.open_ranks(rs)
    for line in problems:
        print(f"tbdtrace report: warning: {line}", file=sys.stderr)
    if problems and args.strict:
        print("tbdtrace report: --strict: rank files missing or unreadable", file=sys.stderr)
        return 1
    return _emit(tr, args, win)


def _run_rank_by_rank(args: argparse.Namespace, win: Any, rs: Any) -> int:
    """Each rank analysed in its own task (process pool or Dask), then reduced across
    ranks: the report holds the ``ranks`` section (the other sections add up or list
    every rank's rows, which this path keeps apart)."""
    from tbdtrace.scaleout import ranks_report

    for line in rs.problems:
        print(f"tbdtrace report: warning: {line}", file=sys.stderr)
    if not rs.files:
        print("tbdtrace report: no rank files to analyse", file=sys.stderr)
        return 1
    from tbdtrace.report.documents import rank_by_rank

    with _perrank.work_dir(args.work_dir) as work:
        parts, problems = _perrank.run_tasks(args, "report", rs.files, work, window=win)
        section = ranks_report(parts)
    if (problems or rs.problems) and args.strict:
        print("tbdtrace report: --strict: rank files missing or unreadable", file=sys.stderr)
        return 1
    if section is None:
        print(
            "tbdtrace report: note: fewer than two ranks read; no cross-rank comparison",
            file=sys.stderr,
        )
    return _write(rank_by_rank(parts, section, args.trace, win, _options(args, win)), args)


def _options(args: argparse.Namespace, win: Any) -> Any:
    from tbdtrace.report import ReportOptions

    return ReportOptions(
        top=args.top,
        top_json=args.top if args.top_json else None,
        window=win,
        model_flops_per_sample=args.model_flops_per_sample,
        # the page's ops table shows shapes, FLOP/s, bytes/s and bound (docs/METRICS.md)
        roofline=args.roofline or args.format == "html",
        critical_path=args.critical_path,
    )


def _emit(tr: Trace, args: argparse.Namespace, win: Any) -> int:
    from tbdtrace import progress
    from tbdtrace.report import build
    from tbdtrace.report.build import text_sections
    from tbdtrace.report.contents import SECTIONS
    from tbdtrace.report.documents import ReportDoc

    opts = _options(args, win)
    # The text report computes only the sections it shows (not the series for plots).
    text_only = args.format == "text"
    count = len(text_sections()) if text_only else len(SECTIONS)
    big = progress.on_terminal() and progress.is_big(rows=event_rows(tr))
    with progress.task("analysing", count, "sections", big) as shown:
        done = [0]

        def on_section(key: str) -> None:
            shown.update(done[0], label=f"analysing: {key}")
            done[0] += 1

        doc = build(tr, opts, on_section if shown.shown else None, text_only)
    return _write(ReportDoc(doc, opts), args)


def _write(doc: Any, args: argparse.Namespace) -> int:
    from tbdtrace.report.emit import emit

    return emit(doc, args.format, _args.dest(args, args.trace))
