"""Output options shared by analysis commands: ``--format``, ``-o``, ``--section``."""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path
from typing import Any

FORMATS = ("text", "json", "csv")


def add_arguments(p: argparse.ArgumentParser, formats: tuple[str, ...] = FORMATS) -> None:
    p.add_argument("--format", choices=formats, default="text")
    p.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        help="write to PATH instead of stdout (with --format csv: a directory, one "
        "<table>.csv per table)",
    )
    p.add_argument(
        "--section",
        metavar="NAME",
        help="with --format csv or json: only this table (e.g. kernels, hotspots.ops) or section",
    )


def check(args: argparse.Namespace, prog: str) -> str | None:
    """A usage error line for impossible combinations, else None."""
    if args.section and args.format not in ("csv", "json"):
        return f"tbdtrace {prog}: --section needs --format csv or json"
    if args.format == "csv" and not (args.output or args.section):
        return (
            f"tbdtrace {prog}: --format csv needs -o DIR (one file per table) or "
            "--section NAME (one table to stdout)"
        )
    return None


def emit_tables(doc: dict[str, Any], args: argparse.Namespace, prog: str) -> int:
    """``doc`` as JSON or CSV per ``args``; exit status (2 for an unknown --section)."""
    if args.format == "json" and args.section:
        if args.section not in doc:
            return _unknown(prog, args.section, list(doc))
        return write_text(json.dumps(doc[args.section], indent=2) + "\n", args, prog)
    if args.format == "json":  # the tables are for CSV only (~30 ms on a 20k-kernel report)
        return write_text(json.dumps(doc, indent=2) + "\n", args, prog)
    from tbdtrace.report import csvout, tabular

    tabs = tabular.all_tables(doc)
    if args.section:
        picked = [t for t in tabs if t.name == args.section]
        if not picked:
            in_section = [t.name for t in tabs if t.name.split(".")[0] == args.section]
            return _unknown(prog, args.section, in_section or [t.name for t in tabs])
        out = io.StringIO()
        csvout.write(picked[0], out)
        return write_text(out.getvalue(), args, prog)
    target = Path(args.output)
    if target.exists() and not target.is_dir():
        print(
            f"tbdtrace {prog}: {target} is a file; -o with --format csv takes a directory",
            file=sys.stderr,
        )
        return 1
    try:
        paths = csvout.write_dir(tabs, target)
    except OSError as e:
        print(f"tbdtrace {prog}: cannot write {target}: {e.strerror or e}", file=sys.stderr)
        return 1
    print(f"{len(paths)} tables written to {target}/", file=sys.stderr)
    return 0


def write_text(text: str, args: argparse.Namespace, prog: str) -> int:
    """``text`` to ``args.output`` (a file) or stdout; 1 with one line when it cannot."""
    if not args.output:
        sys.stdout.write(text)
        return 0
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as e:
        print(f"tbdtrace {prog}: cannot write {args.output}: {e.strerror or e}", file=sys.stderr)
        return 1
    return 0


def _unknown(prog: str, name: str, names: list[str]) -> int:
    print(
        f"tbdtrace {prog}: no table or section {name!r}; choose from: {', '.join(names)}",
        file=sys.stderr,
    )
    return 2
