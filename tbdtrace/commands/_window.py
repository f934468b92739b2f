"""``--window`` and ``--steps``: the options that choose the time an analysis covers."""

from __future__ import annotations

import argparse
import sys
from typing import Any

# tbdtrace.analysis.engine.window.KINDS, without loading the passes.
KINDS = ("measured", "steps", "warmup", "init", "after", "all")


def add_options(p: argparse.ArgumentParser, default: str = "measured") -> None:
    """``--window`` (``default``: measured, or all for commands that show the trace as
    recorded) and ``--steps``."""
    p.add_argument(
        "--window",
        choices=KINDS,
        default=default,
        help="time covered, per rank from its own steps: measured (the steps minus "
        "warm-up; the whole trace without steps), steps (every step), warmup, init "
        "(before the first step), after (after the last measured step), all (whole "
        f"trace); default {default}",
    )
    p.add_argument(
        "--steps",
        metavar="A:B",
        help="cover the steps numbered A to B, inclusive ('A:' and ':B' are open); "
        "overrides --window",
    )


def spec(args: argparse.Namespace, command: str) -> Any:
    """The WindowSpec of the parsed options, or None after printing a usage error (the
    command then exits 2)."""
    from tbdtrace.analysis.engine.window import WindowSpec, parse_steps

    if args.steps is None:
        return WindowSpec(args.window)
    try:
        return WindowSpec(args.window, parse_steps(args.steps))
    except ValueError as e:
        print(f"tbdtrace {command}: {e}", file=sys.stderr)
        return None
