"""Where the time of `tbdtrace report FILE` goes: a timeline of one run, in this process.

``.venv/bin/python bench/report_timeline.py FILE [report options]``, e.g.
``bench/report_timeline.py out/bench/synthetic_1000000.json.gz --format json``

Runs the report command as the CLI does (the same process settings: heap, BLAS threads,
no pandas), its output thrown away, and prints on stderr, for each step, when it ended
(seconds since the start) and what it cost, wall and CPU (the whole process: every
thread). The steps: the command's modules loaded (the parse already running on its own
threads), the parse's end, the tables' assembly, the trace opened, each section of the
report, and the output written. Then the CPU each thread of the parse used (from
/proc, read while it runs): the parse thread and the gzip thread run side by side, so the
slower of the two ends the first phase, and after it only the main thread works.

The timeline patches functions of the running package (the open, the Kineto tables'
assembly, the report's build), so it follows their names; a file imported through a
temporary trace (a big one, see ``tbdtrace/commands/_open.py``) shows no assembly step.
Compare two checkouts by running each one's copy of this script, alternately: each
imports the checkout it belongs to.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

T0 = time.perf_counter()
C0 = time.process_time()
MARKS: list[tuple[float, float, str]] = []


def mark(what: str) -> None:
    MARKS.append((time.perf_counter() - T0, time.process_time() - C0, what))


class ThreadCpu:
    """Each thread's user and system CPU seconds, sampled from /proc while it lives."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[str, float, float]] = {}
        self.stop = threading.Event()
        self.tick = os.sysconf("SC_CLK_TCK")
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(0.02)

    def sample(self) -> None:
        try:
            tasks = os.listdir("/proc/self/task")
        except OSError:  # not Linux: no per-thread figures
            return
        for t in tasks:
            try:
                with open(f"/proc/self/task/{t}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2 :].split()
            self.seen[t] = (name, int(fields[11]) / self.tick, int(fields[12]) / self.tick)


def patch() -> None:
    """Marks at the parse's end, after the assembly, after the open and per section."""
    import importlib

    from tbdtrace.commands import _open
    from tbdtrace.importers.kineto import tables

    opened = _open.PendingOpen.trace

    def trace(self: Any) -> Any:
        mark("modules loaded, waiting for the parse")
        tr = opened(self)
        mark("trace opened (tables assembled)")
        return tr

    _open.PendingOpen.trace = trace  # type: ignore[method-assign]
    assembled = tables._tables

    def _tables(files: Any, job: Any, batch: Any = None) -> Any:
        mark("parse ended")
        out = assembled(files, job, batch)
        mark("tables assembled")
        return out

    tables._tables = _tables  # type: ignore[assignment]
    build_module = importlib.import_module("tbdtrace.report.build")
    built = build_module.build

    def build(trace: Any, opts: Any = None, on_section: Any = None, text_only: bool = False) -> Any:
        names: list[str] = []

        def on(key: str) -> None:
            mark(f"section {names[-1]}" if names else "window resolved")
            names.append(key)
            if on_section is not None:
                on_section(key)

        doc = built(trace, opts, on, text_only)
        if names:
            mark(f"section {names[-1]}")
        return doc

    build_module.build = build  # type: ignore[attr-defined]
    import tbdtrace.report

    tbdtrace.report.build = build  # type: ignore[attr-defined]


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print("usage: report_timeline.py FILE [report options]", file=sys.stderr)
        return 2
    from tbdtrace import cli

    args = ["report", *argv]
    cli._tune_process("report", argv)
    threads = ThreadCpu()
    threads.thread.start()
    patch()
    devnull = open(os.devnull, "w")  # noqa: SIM115 - the report's output, thrown away
    out, sys.stdout = sys.stdout, devnull
    try:
        rc = cli.main(args)
    finally:
        sys.stdout = out
        devnull.close()
        threads.stop.set()
        threads.thread.join()
    mark("report written")
    prev = (0.0, 0.0)
    print("    at s  (wall s / CPU s)  step", file=sys.stderr)
    for t, c, what in MARKS:
        print(f"{t:8.3f}  (+{t - prev[0]:.3f} / +{c - prev[1]:.3f})  {what}", file=sys.stderr)
        prev = (t, c)
    parsed = [m for m in MARKS if m[2] == "parse ended"]
    if parsed:
        t, c = parsed[0][0], parsed[0][1]
        print(
            f"after the parse: {MARKS[-1][0] - t:.3f} s wall, {MARKS[-1][1] - c:.3f} CPU s; "
            f"load average {os.getloadavg()[0]:.2f}",
            file=sys.stderr,
        )
    print("threads (CPU s, user + system):", file=sys.stderr)
    for tid, (name, user, system) in sorted(threads.seen.items(), key=lambda x: int(x[0])):
        print(f"  {tid:>8} {name:16s} {user:.2f} + {system:.2f}", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
