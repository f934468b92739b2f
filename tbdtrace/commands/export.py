"""``tbdtrace export TRACE --format perfetto|chrome -o FILE``: a timeline for viewers."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from tbdtrace.commands import _window
from tbdtrace.errors import TraceError

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
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="file to write")
    p.add_argument("--force", action="store_true", help="replace FILE if it exists")
    # The whole trace unless asked: a timeline shows what was recorded. With a window, the
    # slices, flows and counters inside it (docs/DECISIONS.md perf.5).
    _window.add_options(p, default="all")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from tbdtrace.commands._open import begin_open

    out = Path(args.output)
    if out.is_dir():
        raise TraceError(f"{out}: is a directory; give a file name for the {args.format} trace")
    if out.exists() and not args.force:
        raise TraceError(f"{out}: exists; choose another file or pass --force to replace it")
    pending = begin_open(args.trace)
    spec = _window.spec(args, "export")
    if spec is None:
        return 2
    from tbdtrace.analysis.engine import context, window
    from tbdtrace.export import export

    tr = pending.trace()
    win = window.resolve(context.of(tr), spec)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    os.close(fd)
    try:
        n = export(tr, args.format, tmp, None if win.is_all else win)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    covers = "" if win.is_all else f", {win.label()}"
    print(
        f"wrote {out} ({n:,} events{covers}, {out.stat().st_size / 2**20:.1f} MiB, {args.format})"
    )
    return 0
