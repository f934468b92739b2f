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


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    first = next((a for a in argv if not a.startswith("-")), None)
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
