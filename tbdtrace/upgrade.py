"""Rewrite a trace of an older schema version in the current one, in place.

The new trace is written beside the old one (a hidden sibling directory), table by
table, and takes the old one's place only once complete; the old directory is deleted
after that. A failure at any point leaves the old trace as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from tbdtrace import schema, tablefile, trace
from tbdtrace.errors import TraceError


def upgrade(path: str | os.PathLike[str]) -> tuple[int, int]:
    """Rewrite the trace at ``path`` in schema version ``SCHEMA_VERSION``.

    Returns (version found, version now); equal when there was nothing to do. Raises
    TraceError for a directory that is not a readable trace.
    """
    tr = trace.open(path)  # refuses anything that is not a trace directory
    found = int(tr.meta["schema_version"])
    if found == schema.SCHEMA_VERSION:
        return found, found
    p = tr.path
    work = Path(tempfile.mkdtemp(prefix=f".{p.name}.upgrade.", dir=p.parent))
    try:
        new = work / p.name
        new.mkdir()
        os.chmod(new, p.stat().st_mode & 0o7777)
        _write_current(tr, new)
        _swap(p, new, work / "old")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return found, schema.SCHEMA_VERSION


def _write_current(tr: trace.Trace, new: Path) -> None:
    """Every table of ``tr`` and its meta (new version), plus any other file the trace
    directory holds, into the empty directory ``new``."""
    for decl in schema.TABLES:
        if not tr.has(decl.name):
            continue
        tbl = tr.table(decl.name, cache=False)
        tablefile.write(new / f"{decl.name}{trace.TABLE_SUFFIX}", decl, trace.stored(decl, tbl))
    meta = {k: v for k, v in tr.meta.items() if k != "schema_version"}
    text = json.dumps(trace._full_meta(meta), indent=2, sort_keys=True) + "\n"
    (new / trace.META_FILE).write_text(text)
    for f in tr.path.iterdir():
        if f.name == trace.META_FILE or (f.suffix in trace.SUFFIXES and f.is_file()):
            continue
        dst = new / f.name
        if f.is_dir():
            shutil.copytree(f, dst, symlinks=True)
        else:
            shutil.copy2(f, dst, follow_symlinks=False)


def _swap(target: Path, new: Path, aside: Path) -> None:
    """Put ``new`` at ``target``; the old ``target`` goes to ``aside`` (deleted by the
    caller) and comes back if the second rename fails."""
    target.rename(aside)
    try:
        new.rename(target)
    except OSError as e:
        aside.rename(target)
        raise TraceError(f"{target}: could not replace it ({e}); the trace is unchanged") from e
