"""``tbdtrace upgrade TRACE``: rewrite an older trace in the current schema version."""

from __future__ import annotations

import argparse
from pathlib import Path

from tbdtrace import schema


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "upgrade",
        help="rewrite an older trace in the current format, in place",
        description=(
            "Rewrite a trace directory written by an older tbdtrace (schema version "
            f"{', '.join(map(str, schema.READABLE_VERSIONS[:-1]))}) in schema version "
            f"{schema.SCHEMA_VERSION}, in place: the new trace replaces the old one only "
            "once complete. Older traces also open as they are; upgrading makes their "
            "table files readable by any Parquet reader."
        ),
    )
    p.add_argument("trace", metavar="TRACE", help="trace directory")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from tbdtrace import outdir
    from tbdtrace.safe_text import printable
    from tbdtrace.upgrade import upgrade

    had = outdir.read_marker(Path(args.trace)) or {}
    found, now = upgrade(args.trace)
    name = printable(args.trace)
    if found != now:
        print(f"{name}: upgraded from schema version {found} to {now}")
    elif not isinstance(had.get("tables"), dict):
        print(
            f"{name}: schema version {now}; added each table's fingerprint, rows and bytes "
            "to its marker"
        )
    else:
        print(f"{name}: already schema version {now}; nothing to do")
    return 0
