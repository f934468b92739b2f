"""``tbdtrace upgrade TRACE``: rewrite an older trace in the current schema version."""

from __future__ import annotations

import argparse

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
    from tbdtrace.upgrade import upgrade

    found, now = upgrade(args.trace)
    if found == now:
        print(f"{args.trace}: already schema version {now}; nothing to do")
    else:
        print(f"{args.trace}: upgraded from schema version {found} to {now}")
    return 0
