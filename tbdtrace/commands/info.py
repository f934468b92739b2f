"""``tbdtrace info TRACE``: meta.json and row counts."""

from __future__ import annotations

import argparse

from tbdtrace import schema
from tbdtrace.commands._open import open_or_import


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "info",
        help="show a trace's metadata and table sizes",
        description="Show a trace directory's metadata and row counts.",
    )
    p.add_argument("trace", metavar="TRACE", help="trace directory or profiler file")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from tbdtrace.report.documents import InfoDoc
    from tbdtrace.report.emit import Dest, emit

    tr = open_or_import(args.trace)
    counts = {t.name: tr.num_rows(t.name) for t in schema.TABLES}
    return emit(InfoDoc(str(tr.path), tr.meta, counts), args.format, Dest())
