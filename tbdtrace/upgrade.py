"""Rewrite a trace of an older schema version in the current one, in place.

The new files are written beside the old ones (a staging folder inside the trace) and
take their place through the journaled replacement every trace write uses
(:mod:`tbdtrace.trace_write`): a process killed at any instant leaves the old trace, the
new one, or an interrupted one that ``report`` refuses and ``tbdtrace recover`` completes.
Files of the user's own in the trace directory stay where they are; the trace's own other
files (``capture.log``) are carried over. A trace of the current version whose marker
lacks the table fingerprints (written before they existed) gets them, its files as they are.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from tbdtrace import outdir, schema, tablefile, trace
from tbdtrace.errors import TraceError


def upgrade(path: str | os.PathLike[str]) -> tuple[int, int]:
    """Rewrite the trace at ``path`` in schema version ``SCHEMA_VERSION``.

    Returns (version found, version now); equal when the tables were not rewritten (the
    marker may still have gained its table fingerprints). Raises TraceError for a
    directory that is not a readable trace, or one another tbdtrace process is writing.
    """
    from tbdtrace import trace_write

    p = Path(os.path.abspath(os.fspath(path)))
    if outdir.interrupted(p) is not None:
        trace_write.finish(p)  # an interrupted upgrade (or import) is completed first
    tr = trace.open(p, strict=True)  # refuses anything that is not a sound trace
    found = int(tr.meta["schema_version"])
    # The writer lock, as claim takes it (an old trace may hold the user's files beside
    # its own, which claim would refuse as not a trace).
    with outdir.Output(p, created=False, force=True, _fd=outdir._lock(p)):
        if found == schema.SCHEMA_VERSION:
            add_manifest(tr)
            return found, found
        meta = {k: v for k, v in tr.meta.items() if k != "schema_version"}
        old = outdir.own_files(p) or _tables_and_meta(tr)
        trace_write.write(p, _Tables(tr), meta, _own_other_files(tr), old, codec=trace)
    return found, schema.SCHEMA_VERSION


def _tables_and_meta(tr: trace.Trace) -> list[str]:
    """The own files of a trace without marker: meta.json and its table files."""
    return [trace.META_FILE, *(f.name for t in schema.TABLES if (f := tr._file(t.name)))]


class _Tables(Mapping[str, pa.Table]):
    """The trace's tables, each read when the writer reaches it (one in memory at a time)."""

    def __init__(self, tr: trace.Trace):
        self._tr = tr
        self._names = [t.name for t in schema.TABLES if tr.has(t.name)]

    def __getitem__(self, name: str) -> pa.Table:
        return self._tr.table(name, cache=False)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _own_other_files(tr: trace.Trace) -> dict[str, bytes]:
    """The trace's own files besides meta and tables (those its marker lists)."""
    out = {}
    for name in outdir.own_files(tr.path) or []:
        stem, _, ext = name.rpartition(".")
        if name == trace.META_FILE or (
            f".{ext}" in trace.SUFFIXES and stem in schema.TABLES_BY_NAME
        ):
            continue
        f = tr.path / name
        if f.is_file():
            out[name] = f.read_bytes()
    return out


def add_manifest(tr: trace.Trace) -> bool:
    """Give the marker of ``tr`` (current version) each table's fingerprint, rows and
    bytes when it lacks them; True when it changed. The table files are not rewritten
    (their key-value metadata holds no write id; the marker then records none)."""
    from tbdtrace.trace_check import entry
    from tbdtrace.trace_write import _put_marker

    marker = outdir.read_marker(tr.path)
    if marker is not None and isinstance(marker.get("tables"), dict):
        return False
    tables: dict[str, Any] = {}
    for t in schema.TABLES:
        f = tr._file(t.name)
        if f is None:
            continue
        if f.suffix != tablefile.PARQUET_SUFFIX:
            raise TraceError(f"{f}: an Arrow IPC table in a version-3 trace; re-create the trace")
        footer = tablefile.footer(f)
        assert footer is not None
        e = entry(f.name, footer.schema.to_arrow_schema(), footer.num_rows, f.stat().st_size, "")
        del e["write_id"]
        tables[t.name] = e
    files = outdir.own_files(tr.path) or _tables_and_meta(tr)
    _put_marker(tr.path, outdir.marker_doc(files, tables))
    return True


__all__ = ["add_manifest", "upgrade"]
