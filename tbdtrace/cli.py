"""Command-line entry point: ``tbdtrace`` / ``python -m tbdtrace``.

Each subcommand lives in ``tbdtrace/commands/<name>.py`` and exposes
``register(subparsers) -> None``, which adds its parser and sets ``func`` (called with
the parsed namespace, returning an exit code). The CLI turns TraceError into one line on
stderr and exit code 1; argparse usage errors exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from tbdtrace.errors import TraceError

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
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser; with ``only`` (a command name), just that subcommand's, so a
    command does not pay for importing every other command's dependencies."""
    from tbdtrace import __version__

    p = argparse.ArgumentParser(
        prog="tbdtrace",
        description="Capture, import and analyze DNN training traces (GPU and CPU).",
    )
    p.add_argument("--version", action="version", version=f"tbdtrace {__version__}")
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
    return p


# Commands that analyze traces in this process: they get the allocator settings below.
ANALYSIS_COMMANDS = ("report", "hotspots", "diff", "sql", "info", "import")


def keep_freed_memory() -> None:
    """Make this process reuse the memory it frees instead of handing it back.

    An analysis allocates and frees many column-sized arrays (80 MB per 10M rows). By
    default glibc maps each one fresh and unmaps it on free, and Arrow's allocator purges
    freed pages, so every new array is zero-filled again by the kernel: on a 10M-kernel
    report that page zeroing cost more system time than the analysis itself took user
    time (bench/README.md). Here large blocks come from glibc's heap and stay there
    (M_MMAP_MAX 0, M_TRIM_THRESHOLD at its maximum), and Arrow allocates through glibc
    too. Only the CLI does this, for analysis commands; a library user's process is left
    alone. Without glibc (no mallopt) it does nothing.
    """
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_max = -1, -4  # malloc.h
    if mallopt(m_mmap_max, 0) and mallopt(m_trim_threshold, 2**31 - 1):
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    first = next((a for a in argv if not a.startswith("-")), None)
    if first in ANALYSIS_COMMANDS:
        keep_freed_memory()
    known = {c.rstrip("_") for c in COMMANDS}
    parser = build_parser(first if first in known else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except TraceError as e:
        print(f"tbdtrace: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("tbdtrace: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
