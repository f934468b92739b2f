"""``tbdtrace export TRACE --format perfetto|chrome -o FILE``: a timeline for viewers."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import IO

from tbdtrace.commands import _args, _window

EXTENSIONS = {"perfetto": ".perfetto-trace", "chrome": ".json"}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "export",
        help="write a trace's timeline for Perfetto or chrome://tracing",
        description=(
            "Write a trace's timeline as a Perfetto protobuf trace (open it in "
            "ui.perfetto.dev) or as Chrome trace-event JSON (chrome://tracing, Perfetto): "
            "a process per device with a track per stream, a process per host process "
            "with a track per thread, launch flows, memory and host-sample counters, "
            "and the steps."
        ),
    )
    p.add_argument("trace", metavar="TRACE", help="trace directory or profiler file")
    p.add_argument("--format", choices=("perfetto", "chrome"), default="perfetto")
    _args.mark_output(
        p.add_argument("-o", "--output", required=True, metavar="FILE", help="file to write"),
        "file",
    )
    _args.add_force(p, "FILE if it exists (never a trace's files or the input)")
    # The whole trace unless asked: a timeline shows what was recorded. With a window, the
    # slices, flows and counters inside it (docs/DECISIONS.md 140).
    _window.add_options(p, default="all")
    p.add_argument(
        "--critical-path",
        action="store_true",
        help="mark each step's critical path (the chain of dependent CPU ops, launches, "
        "kernels, copies and syncs that set its length): a 'critical path' track per rank "
        "holding its segments, and the argument critical_path=1 on the slices it goes through",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from tbdtrace import output_policy
    from tbdtrace.commands._open import begin_open
    from tbdtrace.export import write
    from tbdtrace.safe_text import printable

    output_policy.file_target(args.output, args.force, [args.trace])  # before any work
    pending = begin_open(args.trace)
    spec = _window.spec(args, "export")
    if spec is None:
        return 2
    from tbdtrace.analysis.engine import context, window

    tr = pending.trace()
    win = window.resolve(context.of(tr), spec)
    target = output_policy.file_target(args.output, args.force, [args.trace])
    n = 0

    def put(f: IO[bytes]) -> None:
        nonlocal n
        n = write(tr, args.format, f, None if win.is_all else win, args.critical_path)

    output_policy.write_file(target, put)
    size = target.path.stat().st_size if not target.stream else 0
    name = printable(str(Path(args.output)))
    covers = "" if win.is_all else f", {win.label()}"
    print(f"wrote {name} ({n:,} events{covers}, {size / 2**20:.1f} MiB, {args.format})")
    return 0
