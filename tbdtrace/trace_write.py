"""Writing a trace directory so that a crash at any instant leaves the old trace or the new
one (docs/RELIABILITY.md, "Replacing a trace"; :func:`tbdtrace.trace.write` calls here).

Every file is written to a staging folder first: a hidden sibling when the output is
absent (renamed into place at once), else ``.tbdtrace-staging-*`` inside it. Replacing
the files of an existing directory (empty, or a trace: ``import``/``capture --force``,
``upgrade`` in place) is journaled in the trace's marker (``.tbdtrace-trace.json``):

1. the marker is replaced, in one rename, by a *journal* (``"state": "installing"``,
   the staging folder, the new files, the old ones to remove): from here the directory
   is a clearly interrupted trace that readers refuse;
2. the old files the new trace lacks are removed and the new ones renamed in, one by one;
3. the new marker (complete: each table's fingerprint, rows, bytes) replaces the journal.

A process killed before step 1 leaves the old trace (and a stale staging folder, which
the next writer removes); between 1 and 3 a trace that ``report`` refuses and
:func:`finish` (``tbdtrace recover TRACE``) completes from the journal; after 3 the new
trace. Only files the old marker lists are ever removed or replaced: the user's files in
a trace directory stay. The guarantee is against a process being killed, not against the
machine losing power (nothing is fsynced: a trace is data to analyse again, not a
database).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from tbdtrace import meta as meta_io
from tbdtrace import outdir, schema, tablefile
from tbdtrace.errors import TraceError
from tbdtrace.safe_text import printable


def write(
    path: str | os.PathLike[str],
    tables: Mapping[str, Any],
    meta: Mapping[str, Any],
    files: Mapping[str, bytes] | None = None,
    old_files: list[str] | None = None,
    *,
    codec: Any,
    compression: Any = tablefile.COMPRESSION,
) -> Path:
    """See :func:`tbdtrace.trace.write`. ``codec``: the module ``tbdtrace.trace``, whose
    table conversions the files are written with (passed in, so storage's writer does not
    import its caller back). ``old_files``: the files of the trace at ``path``
    (replaced or removed), for a trace whose own files its marker does not list (an old
    trace of the user's files and tbdtrace's, rewritten in place by ``upgrade``)."""
    out = Path(os.path.abspath(os.fspath(path)))
    st = "trace" if old_files is not None else outdir.state(out)
    if st in ("file", "other"):
        raise TraceError(
            f"{printable(str(out))}: exists and is not a tbdtrace trace; choose another "
            "output directory"
        )
    if st == "absent":
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    else:
        remove_stale_staging(out)
        tmp = Path(tempfile.mkdtemp(prefix=outdir.STAGING_PREFIX, dir=out))
    try:
        try:
            names, manifest = _write_files(tmp, tables, meta, files or {}, codec, compression)
        except OSError as e:
            kept = "; the trace there is unchanged" if st == "trace" else ""
            raise TraceError(
                f"{printable(str(out))}: cannot write the trace "
                f"({outdir.describe_os_error(e)}){kept}"
            ) from None
        if st == "absent":
            os.chmod(tmp, outdir.dir_mode())
            tmp.rename(out)
        else:
            install(tmp, out, names, manifest, old_files)
    except BaseException:
        # Past the journal (install), the staging folder is what recover finishes from.
        if outdir.interrupted(out) is None or st == "absent":
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _write_files(
    tmp: Path,
    tables: Mapping[str, Any],
    meta: Mapping[str, Any],
    files: Mapping[str, bytes],
    trace_io: Any,
    compression: Any = tablefile.COMPRESSION,
) -> tuple[list[str], dict[str, Any]]:
    """The trace's files in ``tmp`` (the complete marker last); returns their names (the
    marker included) and the marker's table manifest."""
    from tbdtrace.trace_check import entry

    write_id = uuid.uuid4().hex
    names: list[str] = []
    manifest: dict[str, Any] = {}

    def one(name: str, data: Any) -> tuple[str, dict[str, Any]]:
        decl = schema.table(name)
        want = decl.arrow_schema()
        file = f"{name}{trace_io.TABLE_SUFFIX}"
        if isinstance(data, trace_io.Streamed):  # batches in storage order, one group held
            if data.schema != want:
                raise ValueError(f"{name}: streamed batches do not have the table's schema")
            rows = tablefile.write_batches(tmp / file, decl, data.batches(), write_id, compression)
            return file, entry(file, want, rows, (tmp / file).stat().st_size, write_id)
        counted = None
        if isinstance(data, trace_io.Counted):
            counted, data = data.written, data.data
        tbl = data if isinstance(data, pa.Table) else trace_io.to_table(name, data)
        if tbl.schema != want:
            tbl = trace_io._conform(tbl, want, tmp / name)
        tbl = trace_io.stored(decl, tbl)
        tablefile.write(tmp / file, decl, tbl, write_id, compression)
        if counted is not None:
            counted(tbl.num_rows)
        return file, entry(file, want, tbl.num_rows, (tmp / file).stat().st_size, write_id)

    calls = [lambda n=n, d=d: one(n, d) for n, d in tables.items()]
    if any(isinstance(d, trace_io.Streamed) for d in tables.values()):
        written = [c() for c in calls]  # merges read spool files: one table at a time
    else:
        # Tables held in memory (an in-memory import): sorted and encoded side by side,
        # a thread each (Arrow's sort and Parquet's encoder release the GIL); the same
        # files, listed in the same order.
        written = trace_io._concurrently(calls)
    for name, (file, got) in zip(tables, written, strict=True):
        manifest[name] = got
        names.append(file)
    for name, content in files.items():
        if "/" in name or name in (trace_io.META_FILE, outdir.MARKER) or outdir.is_private(name):
            raise ValueError(f"{name!r} cannot be an extra file of a trace")
        (tmp / name).write_bytes(content)
        names.append(name)
    text = meta_io.dumps(trace_io._full_meta(meta))
    (tmp / trace_io.META_FILE).write_text(text)
    names.append(trace_io.META_FILE)
    (tmp / outdir.MARKER).write_text(outdir.marker_text(names, manifest))
    return [*names, outdir.MARKER], manifest


def remove_stale_staging(out: Path) -> None:
    """Remove staging folders a killed writer left in ``out`` (the caller holds the
    writer lock, so no other writer is using one), but never the one an interrupted
    replacement's journal names: that one holds the new trace's files."""
    journal = outdir.interrupted(out)
    keep = journal.get("staging") if journal else None
    for entry in os.scandir(out):
        if not entry.name.startswith(outdir.STAGING_PREFIX) or entry.name == keep:
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)


def _put_marker(out: Path, doc: dict[str, Any]) -> None:
    """Replace ``out``'s marker by ``doc`` in one rename."""
    tmp = out / f"{outdir.STAGING_PREFIX}marker-{os.getpid()}"
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, out / outdir.MARKER)


def install(
    tmp: Path,
    out: Path,
    names: list[str],
    manifest: dict[str, Any],
    old_files: list[str] | None = None,
) -> None:
    """Move the staged files ``names`` into the existing directory ``out`` (empty or a
    trace, whose own files are ``old_files`` when given) through the journal (see the
    module docstring)."""
    old = set(old_files if old_files is not None else outdir.own_files(out) or [])
    for n in names:
        if n not in old and n != outdir.MARKER and os.path.lexists(out / n):
            raise TraceError(
                f"{printable(str(out / n))}: is not a file tbdtrace wrote, and the new trace "
                "has a file of that name; move it away and run again"
            )
    new = [n for n in names if n != outdir.MARKER]
    journal = {
        **outdir.marker_doc(new, manifest),
        "state": outdir.INSTALLING,
        "staging": tmp.name,
        "remove": sorted(old - set(names)),
    }
    _put_marker(out, journal)
    finish(out)
    remove_stale_staging(out)  # one an earlier interrupted write left


def finish(out: Path) -> Path:
    """Complete the interrupted replacement of the trace ``out`` from its journal (the
    old files it lists removed, the staged new files moved in, the complete marker
    last); ``out`` unchanged when nothing was interrupted. TraceError (one line) when the
    staged files are gone, so the new trace cannot be completed."""
    journal = outdir.interrupted(out)
    if journal is None:
        return out
    staging = out / str(journal.get("staging") or "")
    files = outdir._names(journal, "files")
    lost = [n for n in files if not (staging / n).is_file() and not os.path.lexists(out / n)]
    if lost or not journal.get("staging"):
        raise TraceError(
            f"{printable(str(out))}: an interrupted write cannot be completed: "
            f"{', '.join(lost[:3]) or 'the staging folder'} is gone; write the trace again "
            "(import, capture or upgrade with --force)"
        )
    for n in outdir._names(journal, "remove"):
        if n not in files:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                (out / n).unlink()
    for n in files:
        if (staging / n).is_file():
            os.replace(staging / n, out / n)
    complete = {k: v for k, v in journal.items() if k not in ("state", "staging", "remove")}
    if (staging / outdir.MARKER).is_file():
        os.replace(staging / outdir.MARKER, out / outdir.MARKER)
    else:
        _put_marker(out, complete)
    shutil.rmtree(staging, ignore_errors=True)
    return out


__all__ = ["finish", "install", "remove_stale_staging", "write"]
