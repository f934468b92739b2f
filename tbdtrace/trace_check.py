"""Verify a trace directory before believing it (docs/RELIABILITY.md, "Reading a trace").

The marker (``.tbdtrace-trace.json``) of a trace written by this version lists, per
table, the file, its schema's fingerprint, its rows, its bytes and the id of the write it
came from (also in the file's key-value metadata). :func:`check` holds every table file
against that before anything reads it:

* a table file that is missing, not a regular file (a FIFO, a device, a folder, a loop
  of links), of another size, of other rows, of another table's (or no table's) columns,
  or from another write, is named in one line and left out (it reads as absent); with
  ``strict`` the first such problem is a TraceError instead;
* a file named like a table that the marker does not list, and an unknown ``*.parquet``
  or ``*.arrow`` file, are named in one warning and ignored;
* a trace whose replacement was interrupted (the marker is a journal) is refused.

Traces from before these fields (a marker with only ``files``, or no marker) still open:
their table files are checked for being regular files and for holding only columns of
their table; ``tbdtrace upgrade`` adds the fields.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from tbdtrace import outdir, schema, tablefile
from tbdtrace.errors import TraceError
from tbdtrace.safe_text import printable

SUFFIXES = (tablefile.PARQUET_SUFFIX, tablefile.ARROW_SUFFIX)


def fingerprint(s: pa.Schema) -> str:
    """A short hash of a table schema's column names and types (not its metadata)."""
    text = ";".join(f"{f.name}:{f.type}" for f in s)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def entry(file: str, s: pa.Schema, rows: int, nbytes: int, write_id: str) -> dict[str, Any]:
    """A table's entry in the marker."""
    return {
        "file": file,
        "fingerprint": fingerprint(s),
        "rows": rows,
        "bytes": nbytes,
        "write_id": write_id,
    }


@dataclass
class Checked:
    """What :func:`check` found: the table files to read and the problems (one line each)."""

    files: dict[str, Path] = field(default_factory=dict)  # table -> its file, checked
    footers: dict[str, Any] = field(default_factory=dict)  # table -> Parquet footer
    problems: list[str] = field(default_factory=list)  # tables left out
    warnings: list[str] = field(default_factory=list)  # extra files ignored


_FINGERPRINTS: dict[str, str] = {}


def _known(fp: str) -> str | None:
    """The table whose declared schema has fingerprint ``fp``."""
    if not _FINGERPRINTS:
        _FINGERPRINTS.update({fingerprint(t.arrow_schema()): t.name for t in schema.TABLES})
    return _FINGERPRINTS.get(fp)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _stat(f: Path) -> tuple[os.stat_result | None, str | None]:
    """(stat, None) for a regular file, else (None, what is wrong)."""
    try:
        st = os.stat(f)
    except FileNotFoundError:
        return None, "missing" if not os.path.islink(f) else "a link to nothing"
    except OSError as e:
        if e.errno == errno.ELOOP:
            return None, "a loop of symbolic links"
        return None, f"unreadable ({e.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return None, f"{_kind(st.st_mode)}, not a table file"
    return st, None


def _footer(f: Path) -> tuple[Any, str | None]:
    try:
        return tablefile.footer(f), None
    except TraceError:
        return None, "not a readable Parquet file (cut short or damaged)"


def _columns_problem(table: str, footer: Any) -> str | None:
    """Why the Parquet footer's columns are not ``table``'s (a legacy trace), or None."""
    names = set(footer.schema.to_arrow_schema().names)
    decl = schema.table(table)
    allowed = {c.name for c in decl.columns} | {c.disk_name for c in decl.columns}
    foreign = names - allowed
    if not foreign:
        return None
    fp = _known(fingerprint(footer.schema.to_arrow_schema()))
    if fp is not None:
        return f"holds the {fp} table, not {table}"
    return f"holds columns no {table} table has ({', '.join(sorted(foreign)[:3])})"


def _against(table: str, e: Any, path: Path) -> tuple[Path | None, Any, str | None]:
    """Check one marker entry: (file, footer, None) when it holds, else the problem."""
    if not isinstance(e, dict) or not isinstance(e.get("file"), str) or "/" in e["file"]:
        return None, None, f"{path}: the marker's entry for {table} is malformed"
    f = path / e["file"]
    st, why = _stat(f)
    if why is not None or st is None:
        return None, None, f"{f}: {why} (the trace's marker lists it)"
    if isinstance(e.get("bytes"), int) and st.st_size != e["bytes"]:
        return (
            None,
            None,
            (
                f"{f}: {st.st_size:,} bytes, the trace's marker says {e['bytes']:,} "
                "(cut short or replaced)"
            ),
        )
    if f.suffix != tablefile.PARQUET_SUFFIX:
        return f, None, None
    footer, why = _footer(f)
    if why is not None:
        return None, None, f"{f}: {why}"
    got = fingerprint(footer.schema.to_arrow_schema())
    if isinstance(e.get("fingerprint"), str) and got != e["fingerprint"]:
        other = _known(got)
        what = f"the {other} table" if other else "columns of no tbdtrace table"
        return None, None, f"{f}: holds {what}, not {table} (swapped or replaced)"
    if isinstance(e.get("rows"), int) and footer.num_rows != e["rows"]:
        return (
            None,
            None,
            (f"{f}: {footer.num_rows:,} rows, the trace's marker says {e['rows']:,} (replaced)"),
        )
    wid = (footer.metadata or {}).get(tablefile.WRITE_ID_KEY)
    if isinstance(e.get("write_id"), str) and wid is not None and wid.decode() != e["write_id"]:
        return (
            None,
            None,
            (
                f"{f}: from another write of this trace (replaced while being read, or copied "
                "in from another trace)"
            ),
        )
    return f, footer, None


def refuse_interrupted(path: Path) -> None:
    """Raise the one line for a trace whose replacement was interrupted."""
    name = printable(str(path))
    raise TraceError(
        f"{name}: a write into this trace was interrupted (a tbdtrace process stopped "
        f"while replacing it); run `tbdtrace recover {name}` to finish it"
    )


def check(path: Path, strict: bool = False) -> Checked:
    """Check the table files of the trace directory ``path`` (see the module docstring)."""
    marker = outdir.read_marker(path)
    if marker is not None and marker.get("state") == outdir.INSTALLING:
        refuse_interrupted(path)
    manifest = marker.get("tables") if marker is not None else None
    out = Checked()
    on_disk: dict[str, str] = {}  # table -> file name present
    for name in sorted(os.listdir(path)):
        stem, dot, ext = name.rpartition(".")
        if not dot or f".{ext}" not in SUFFIXES:
            continue
        if stem not in schema.TABLES_BY_NAME:
            out.warnings.append(f"{path / name}: not a table tbdtrace knows; ignored")
            continue
        if stem in on_disk:  # both <t>.parquet and <t>.arrow: the Parquet file is read
            continue
        on_disk[stem] = name
    if isinstance(manifest, dict):
        for table, e in manifest.items():
            if table not in schema.TABLES_BY_NAME:
                out.warnings.append(
                    f"{path}: the marker lists a table {table!r} this tbdtrace "
                    "does not know; ignored"
                )
                continue
            f, footer, why = _against(table, e, path)
            if why is not None:
                out.problems.append(printable(why))
                continue
            assert f is not None
            out.files[table] = f
            if footer is not None:
                out.footers[table] = footer
        listed = {e.get("file") for e in manifest.values() if isinstance(e, dict)}
        for table, name in on_disk.items():
            if name not in listed and table not in out.files:
                out.warnings.append(f"{path / name}: not listed in the trace's marker; ignored")
    else:
        for table, name in on_disk.items():
            f = path / name
            _, why = _stat(f)
            footer = None
            if why is None and f.suffix == tablefile.PARQUET_SUFFIX:
                footer, why = _footer(f)
                if why is None:
                    why = _columns_problem(table, footer)
            if why is not None:
                out.problems.append(printable(f"{f}: {why}"))
                continue
            out.files[table] = f
            if footer is not None:
                out.footers[table] = footer
    out.warnings = [printable(w) for w in out.warnings]
    if out.problems and marker is not None and outdir.read_marker(path) != marker:
        # Another process rewrote the trace while its files were checked: the mismatches
        # are that write's, not damage; one line, as a table replaced mid-read says.
        raise tablefile.replaced(printable(str(path)))
    if strict and out.problems:
        more = f" (and {len(out.problems) - 1} more)" if len(out.problems) > 1 else ""
        raise TraceError(f"{out.problems[0]}{more}; --strict: the trace is refused")
    return out


__all__ = ["Checked", "check", "entry", "fingerprint"]
