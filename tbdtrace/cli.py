"""Command-line entry point: ``tbdtrace`` / ``python -m tbdtrace``.

Each subcommand lives in ``tbdtrace/commands/<name>.py`` and exposes
``register(subparsers) -> None``, which adds its parser and sets ``func`` (called with
the parsed namespace, returning an exit code). The CLI turns TraceError, OSError and the
Arrow/DuckDB errors of bad input into one line on stderr and exit code 1
(tbdtrace/cli_errors.py); argparse usage errors exit 2; anything else is a bug and
prints its traceback with a line asking for a report.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

from tbdtrace.errors import TraceError
from tbdtrace.heap import glibc

# Subcommand modules, in the order ``--help`` lists them.
COMMANDS = (
    "capture",
    "import_",
    "info",
    "report",
    "hotspots",
    "diff",
    "sql",
    "bench",
    "export",
    "upgrade",
    "recover",
    "merge",
)


class Parser(argparse.ArgumentParser):
    """argparse with usage errors in one line: ``tbdtrace CMD: error: ...; see --help``,
    exit 2 (argparse would print the whole usage block first)."""

    def error(self, message: str) -> NoReturn:
        from tbdtrace.safe_text import printable

        self.exit(2, f"{self.prog}: error: {printable(message)}; see {self.prog} --help\n")


class _Version(argparse.Action):
    """``--version``, reading the version only when asked: a command loads no module for
    it (argparse's own version action needs the string when the parser is built)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **_: Any):
        super().__init__(
            option_strings,
            dest=dest,
            default=argparse.SUPPRESS,
            nargs=0,
            help="show program's version number and exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from tbdtrace.version import __version__

        print(f"tbdtrace {__version__}")
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser; with ``only`` (a command name), just that subcommand's, so a
    command does not pay for importing every other command's dependencies."""
    p = Parser(
        prog="tbdtrace",
        description="Capture, import and analyze DNN training traces (GPU and CPU).",
    )
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        if only is not None and name.rstrip("_") != only:
            continue
        try:
            mod = importlib.import_module(f"tbdtrace.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"tbdtrace.commands.{name}":
                continue  # command not part of this build
            raise
        mod.register(sub)
    for cmd in sub.choices.values():
        cmd.add_argument(
            "--quiet",
            "-q",
            action="store_true",
            help="no progress display (shown on a terminal for long work, on stderr)",
        )
    return p


# Commands that analyze traces in this process: they get the allocator settings below.
ANALYSIS_COMMANDS = ("report", "hotspots", "diff", "sql", "info", "import", "export")
# ... and of those, the ones that end without tearing the interpreter down (:func:`run`).
QUICK_EXIT_COMMANDS = ("report", "hotspots", "diff", "info", "import", "export")
# Commands whose own process runs without pandas (tbdtrace/_pandas_gate.py): the above,
# and capture (its process only waits on the program and converts its profile to tables:
# pyarrow alone would load pandas there, 0.3-0.6 CPU s per capture). The program
# captured keeps its own imports.
NO_PANDAS_COMMANDS = (*QUICK_EXIT_COMMANDS, "capture")


# Inputs at least this large get keep_freed_memory's heap settings (smaller ones are done
# before page zeroing matters, and the heap's fragmentation would only raise their RSS).
BIG_FILE_BYTES = 32 << 20  # a profiler file (compressed or not)
BIG_TRACE_BYTES = 16 << 20  # a trace directory's Arrow files (~4M kernels)
# `export` writes ~10 bytes for each byte of a trace directory (140 MiB from the 14 MiB
# 1M-kernel trace) through column-sized arrays: a trace is big for it at 1/8 the size.
EXPORT_SCALE = 8
# `import` holds a profiler file's events three times over as it goes (the parser's
# staging rows, the assembled columns, their sorted copies written to Parquet): a file
# is big for it at 1/4 the size. On the 14 MiB fixture repeated 5 times (1.08M events),
# 40 ms less system CPU (page zeroing) and 4% less peak RSS (docs/DECISIONS.md 246).
IMPORT_SCALE = 4


def keep_freed_memory(big: bool = True) -> None:
    """Allocator settings for an analysis in this process.

    Arrow allocates through glibc (its default jemalloc pool holds on to more memory).
    For a ``big`` input, large blocks also come from glibc's heap and stay there
    (M_MMAP_MAX 0, M_TRIM_THRESHOLD at its maximum): an analysis allocates and frees
    many column-sized arrays (80 MB per 10M rows), and by default glibc maps each one
    fresh and unmaps it on free, so every new array is zero-filled again by the kernel:
    on a 10M-kernel report that page zeroing cost more system time than the analysis
    itself took user time (bench/README.md). Only the CLI does this, for analysis
    commands; a library user's process is left alone. Without glibc it sets only the
    Arrow pool.
    """
    # Read when pyarrow loads (not loaded yet: the parse of a profiler file starts
    # before it, see begin_open); an explicit choice in the environment stays.
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    if "pyarrow" in sys.modules:
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())
    libc = glibc()
    if not big or libc is None:
        return
    # numpy asks the kernel for transparent huge pages on every array of 4 MB or more
    # (madvise). Where the kernel compacts memory to find them (defrag "madvise", the
    # default), first touches of a 1.6 GB heap cost 1-2 s more system time than 4 KB
    # pages do (bench/README.md). Read when numpy loads; an explicit choice stays.
    os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
    if "numpy" in sys.modules and os.environ["NUMPY_MADVISE_HUGEPAGE"] == "0":
        _no_numpy_hugepages()
    m_trim_threshold, m_mmap_max, m_arena_max = -1, -4, -8  # malloc.h
    libc.mallopt(m_mmap_max, 0)
    libc.mallopt(m_trim_threshold, 2**31 - 1)
    # Tables are decoded on helper threads too (Trace.prefetch_tables): one arena, so
    # what they allocate comes from the heap kept above, not from per-thread arenas
    # that give freed memory back to the kernel.
    libc.mallopt(m_arena_max, 1)


def one_blas_thread() -> None:
    """No BLAS thread pool in an analysis process (nothing in tbdtrace multiplies
    matrices): numpy's OpenBLAS starts a thread per core at import, and they spin on the
    cores for a while: ~50 ms of CPU per command on 2 cores, a quarter of what starting
    Python with numpy and pyarrow costs, and on a busy machine wall time taken from the
    analysis (docs/DECISIONS.md 225). Read when numpy loads; an explicit choice in the
    environment stays. Worker processes an analysis starts inherit it; a captured
    program never does (``capture`` is not an analysis command)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _positionals(argv: list[str]) -> list[str]:
    """The command name and the paths after it (arguments not starting with -)."""
    return [a for a in argv if not a.startswith("-")]


def input_is_big(argv: list[str], scale: int = 1) -> bool:
    """Is any existing path among ``argv`` a big input (see BIG_FILE_BYTES), with the
    limits divided by ``scale``?"""
    for a in argv:
        p = Path(a)
        try:
            if p.is_file():
                if p.stat().st_size * scale >= BIG_FILE_BYTES:
                    return True
            elif p.is_dir():
                files = [f for s in (".parquet", ".arrow") for f in p.glob(f"*{s}")]
                size = sum(f.stat().st_size for f in files)
                if size * scale >= BIG_TRACE_BYTES:
                    return True
        except OSError:
            continue
    return False


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    pos = _positionals(argv)
    first = pos[0] if pos else None
    known = {c.rstrip("_") for c in COMMANDS}
    parser = build_parser(first if first in known else None)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # a usage error (exit 2) or --help/--version (0): its status
        return e.code if isinstance(e.code, int) else 1
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from tbdtrace import cli_errors, progress
    from tbdtrace.safe_text import printable

    progress.set_quiet(bool(getattr(args, "quiet", False)))
    # bench draws a progress bar on stderr (ANSI codes of its own); its names are ours
    escaped = contextlib.nullcontext() if args.command == "bench" else cli_errors.escaped_stderr()
    try:
        with cli_errors.guarded_stdout(), escaped:
            rc = int(args.func(args) or 0)
            sys.stdout.flush()  # a full or closed stdout fails here, inside the handlers
        return rc
    except TraceError as e:
        print(f"tbdtrace: {printable(str(e))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("tbdtrace: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # every other error: one line, or a bug report
        return cli_errors.handle(e, argv)


def _no_numpy_hugepages() -> None:
    """numpy's own switch for the madvise above, once numpy is loaded (the variable is
    read at import only)."""
    from numpy._core import multiarray

    switch = getattr(multiarray, "_set_madvise_hugepage", None)
    if switch is not None:
        switch(False)


def _tune_process(command: str | None, paths: list[str]) -> None:
    """Process-wide settings for the program's own process only (not for :func:`main`
    called from Python, where they would outlive the call): the glibc heap settings of
    analysis commands and the no-pandas rule (docs/DECISIONS.md 15, 17)."""
    if command in ANALYSIS_COMMANDS:
        one_blas_thread()
        scale = {"export": EXPORT_SCALE, "import": IMPORT_SCALE}.get(command, 1)
        keep_freed_memory(input_is_big(paths, scale))
    if command in NO_PANDAS_COMMANDS:
        from tbdtrace import _pandas_gate

        _pandas_gate.close()


def run() -> None:
    """The program: :func:`main`, then exit. After an analysis command, once its output
    is flushed, the process ends without tearing the interpreter down (freeing every
    array and module of a large analysis takes longer than it is worth: ~0.04 s of a
    0.4 s report); the trace it wrote, if any, is already complete on disk."""
    argv = sys.argv[1:]
    pos = _positionals(argv)
    _tune_process(pos[0] if pos else None, pos[1:])
    rc = main(argv)
    if "tbdtrace.commands._open" in sys.modules:  # temporary traces of big profiler files
        sys.modules["tbdtrace.commands._open"].remove_temporary()
    if pos and pos[0] in QUICK_EXIT_COMMANDS:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:
            pass
        os._exit(rc)
    from tbdtrace import cli_errors

    cli_errors.quiet_stdout_if_broken()
    raise SystemExit(rc)
