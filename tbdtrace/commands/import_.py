"""``tbdtrace import FILE... --out DIR``: other profilers' files into a trace directory."""

from __future__ import annotations

import argparse
import errno
import shutil
import sys
import tempfile
from pathlib import Path

from tbdtrace import importers, outdir, output_policy
from tbdtrace.commands import _args, _open, _perrank
from tbdtrace.errors import TraceError
from tbdtrace.safe_text import printable


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "import",
        help="import profiler files (PyTorch/Kineto JSON, ...) into a trace directory",
        description="Import one or more profiler files into one tbdtrace trace directory. "
        "The format is detected from each file's content. Several Kineto files (one per "
        "rank) become one trace with a rank column.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="input files (.json, .json.gz, ...)")
    _args.mark_output(
        p.add_argument(
            "--out", "-o", required=True, metavar="DIR", help="trace directory to write"
        ),
        "trace",
    )
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
        "for an unusable value (see docs/IMPORTERS.md, 'Skipped events'); rank by rank: "
        "when any rank file cannot be read",
    )
    _perrank.add_options(p, "import")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from tbdtrace.importers import validate

    usage = _perrank.check(args, "import")
    if usage:
        print(usage, file=sys.stderr)
        return 2
    if _perrank.requested(args):
        if args.format is not None:
            print(
                "tbdtrace import: rank by rank detects each file's format; drop --format",
                file=sys.stderr,
            )
            return 2
        return _run_rank_by_rank(args)

    with output_policy.trace_target(args.out, args.force, args.files) as claimed:
        from tbdtrace.commands._rankset import repeated_ranks

        # The parse starts at once, in batches: a Kineto file of any size goes through a
        # spool in the output folder and its tables are written row group by row group
        # (tbdtrace/importers/kineto/stream.py); memory holds a bounded window of rows.
        # One file whose events all come in the first batch (_open.IN_MEMORY_ROWS, as
        # `report FILE`) is written from memory instead, without the spool: the same
        # tables (docs/DECISIONS.md 226). numpy and pyarrow are loaded after the parse has
        # started (on its own thread).
        files = list(args.files)
        spool = None
        try:
            while True:
                small = len(files) == 1 and not _open.is_big(Path(files[0]))
                pending = importers.begin_import(
                    files,
                    args.format,
                    streamed=True,
                    batch_rows=_open.IN_MEMORY_ROWS if small else 0,
                )
                reading = _open.show_reading(pending, [Path(f) for f in files])
                try:
                    got = None
                    if small and pending.fmt == "kineto" and pending.job is not None:
                        _load_writer()
                        got = pending.in_memory_or_none()
                    if got is not None:
                        tables, meta = got
                        rows = {t: n for t in tables if (n := importers.table_rows(tables[t]))}
                    else:
                        spool = Path(tempfile.mkdtemp(prefix=outdir.SPOOL_PREFIX, dir=claimed.path))
                        tables, meta, rows = pending.streamed(spool)
                except OSError as e:
                    if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                        raise
                    # the spool is in the output folder: its disk is the trace's
                    raise TraceError(
                        f"{printable(str(claimed.path))}: cannot write the trace "
                        f"({outdir.describe_os_error(e)})"
                    ) from None
                finally:
                    reading.close()
                # A file whose rank an earlier file holds is left out, and the rest
                # imported again: no rank counted twice.
                again = repeated_ranks(meta)
                if not again:
                    break
                for _, line in again:
                    print(f"tbdtrace import: warning: {line}", file=sys.stderr)
                if args.strict:
                    print(
                        "tbdtrace import: --strict: a rank comes twice; nothing written",
                        file=sys.stderr,
                    )
                    return 1
                drop = {src for src, _ in again}
                files = [f for f in files if str(f) not in drop]
                if spool is not None:
                    shutil.rmtree(spool, ignore_errors=True)
                    spool = None
            skipped = validate.summary(meta.get("skipped_events") or {})
            if skipped and args.strict:
                print(
                    f"tbdtrace: {', '.join(args.files)}: {skipped}; nothing written "
                    "(--strict); drop --strict to import the rest",
                    file=sys.stderr,
                )
                return 1
            from tbdtrace import trace  # numpy and pyarrow, loaded while the file parsed

            with _open.show_writing(tables, rows, "writing the trace") as shown:
                out = trace.write(claimed.path, shown, meta)
        finally:
            if spool is not None:
                shutil.rmtree(spool, ignore_errors=True)
    counts = ", ".join(f"{n} {t}" for t, n in rows.items())
    print(f"wrote {out} ({counts or 'no events'})", file=sys.stderr)
    if skipped:
        print(f"tbdtrace: {skipped}; see skipped_events in {out}/meta.json", file=sys.stderr)
    return 0


def _load_writer() -> None:
    """Load the trace writer's modules (Parquet's among them) now, while the file is
    parsed on other threads and this one would only wait: after the parse they would
    delay the write (~12 ms; docs/DECISIONS.md 241)."""
    import concurrent.futures  # noqa: F401 - the writer's thread pool

    from tbdtrace import tablefile, trace, trace_check, trace_write  # noqa: F401

    tablefile.load_parquet()


def _run_rank_by_rank(args: argparse.Namespace) -> int:
    """One trace directory per rank under --out (``rank-00000``, ...), each imported in
    its own task; ``tbdtrace report`` and ``sql`` read the folder as a rank set."""
    from tbdtrace.commands import _rankset

    rs = _rankset.expand(args.files)
    for line in rs.problems:
        print(f"tbdtrace import: warning: {line}", file=sys.stderr)
    out = Path(args.out)
    # A new or empty folder only, --force or not: rank traces are moved in by name.
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        print(
            f"tbdtrace import: {out}: exists and is not an empty folder; rank by rank, --out "
            "names a new folder for the ranks' trace directories",
            file=sys.stderr,
        )
        return 1
    output_policy.folder_target(out, False, args.files, "--out")
    if not rs.files:
        print("tbdtrace import: no rank files to import", file=sys.stderr)
        return 1
    if rs.has_traces:
        d = next(f for f in rs.files if f.is_dir())
        print(
            f"tbdtrace import: {d}: already a trace directory; import profiler files only "
            "(report and sql read trace directories as they are)",
            file=sys.stderr,
        )
        return 1
    made = not out.exists()
    names: list[str] = []
    out.mkdir(parents=True, exist_ok=True)
    work = args.work_dir or str(out / ".tbdtrace-parts")  # same file system: renames
    try:
        with _perrank.work_dir(work) as wd:
            parts, problems = _perrank.run_tasks(args, "import", rs.files, wd, keep_trace=True)
            if (problems or rs.problems) and args.strict:
                raise _Strict
            for p in parts:
                one = len(p.ranks) == 1
                name = f"rank-{p.ranks[0]:05d}" if one else f"input-{p.index:05d}"
                names.append(name)
                shutil.move(p.trace_dir or "", out / name)
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    except BaseException as e:
        # Nothing half-written is left: the folder is removed when this command made it.
        for d in [out] if made else [Path(work), *(out / n for n in names)]:
            shutil.rmtree(d, ignore_errors=True)
        if isinstance(e, _Strict):
            print(
                "tbdtrace import: --strict: rank files unreadable; nothing written", file=sys.stderr
            )
            return 1
        raise
    print(f"wrote {out} ({len(names)} rank trace directories: {names[0]} ...)", file=sys.stderr)
    return 0


class _Strict(Exception):
    """--strict met a rank file left out."""
