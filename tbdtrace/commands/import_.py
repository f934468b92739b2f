"""``tbdtrace import FILE... --out DIR``: other profilers' files into a trace directory."""

from __future__ import annotations

import argparse
import sys

from tbdtrace import importers, outdir, trace


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "import",
        help="import profiler files (PyTorch/Kineto JSON, ...) into a trace directory",
        description="Import one or more profiler files into one tbdtrace trace directory. "
        "The format is detected from each file's content. Several Kineto files (one per "
        "rank) become one trace with a rank column.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="input files (.json, .json.gz, ...)")
    p.add_argument("--out", "-o", required=True, metavar="DIR", help="trace directory to write")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing trace at --out (only tbdtrace's own files in it)",
    )
    p.add_argument(
        "--format",
        choices=sorted(importers.FORMATS),
        default=None,
        help="skip detection and read the files as this format",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="fail (exit 1, nothing written) when any event has to be skipped "
        "for an unusable value (see docs/IMPORTERS.md, 'Skipped events')",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from tbdtrace.importers import validate

    with outdir.claim(args.out, force=args.force) as claimed:
        tables, meta = importers.import_files(args.files, args.format)
        skipped = validate.summary(meta.get("skipped_events") or {})
        if skipped and args.strict:
            print(
                f"tbdtrace: {', '.join(args.files)}: {skipped}; nothing written (--strict); "
                "drop --strict to import the rest",
                file=sys.stderr,
            )
            return 1
        out = trace.write(claimed.path, tables, meta)
    counts = ", ".join(f"{n} {t}" for t, n in _counts(tables).items())
    print(f"wrote {out} ({counts or 'no events'})", file=sys.stderr)
    if skipped:
        print(f"tbdtrace: {skipped}; see skipped_events in {out}/meta.json", file=sys.stderr)
    return 0


def _counts(tables: dict) -> dict[str, int]:  # type: ignore[type-arg]
    out = {}
    for name, cols in tables.items():
        n = (
            cols.num_rows
            if hasattr(cols, "num_rows")
            else max((len(v) for v in cols.values()), default=0)
        )
        if n:
            out[name] = n
    return out
