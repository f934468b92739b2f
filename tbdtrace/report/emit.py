"""The output floor: every command's document rendered and written in one place.

A command builds a document (:mod:`tbdtrace.report.documents`: the report, the
rank-by-rank report, a diff, hotspots, a SQL result, a trace's info) and calls
``emit(doc, format, dest)``. Here the format is rendered (text, JSON, CSV, HTML,
Parquet, an Excel workbook) and written to the standard output, a file or a folder of CSV
files, through the output policy (:mod:`tbdtrace.output_policy`: nothing existing is
replaced without ``--force``; a trace's own files and the command's inputs never are).

Names are escaped for the terminal in text (:mod:`tbdtrace.report.textui`) and CSV cells
neutralised against formulas (:mod:`tbdtrace.report.csvout`) unless ``raw_csv``; JSON,
HTML, Markdown, Parquet and the workbook (text cells, never formulas) keep them exact.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from tbdtrace import output_policy
from tbdtrace.errors import TraceError
from tbdtrace.report.tabular import Tab
from tbdtrace.report.textui import Console
from tbdtrace.safe_text import printable

# Width of text written to a file: wide, so tables keep their columns.
FILE_WIDTH = 200


@dataclass(frozen=True)
class Dest:
    """Where a document goes: the standard output (``path`` None), a file, or with CSV of
    several tables a folder (one ``<table>.csv`` each)."""

    path: str | None = None
    force: bool = False  # replace an existing file (folder: the files of the same names)
    inputs: tuple[str, ...] = ()  # the command's inputs: never written over
    section: str | None = None  # JSON or CSV: only this table or section
    raw_csv: bool = False  # CSV cells exactly as they are (no formula guard)


class UnknownSection(Exception):
    """``--section`` names nothing in the document: a usage error (exit 2)."""

    def __init__(self, name: str, choices: list[str]):
        super().__init__(f"no table or section {name!r}; choose from: {', '.join(choices)}")


class Document(Protocol):
    """What :func:`emit` needs of a document (:mod:`tbdtrace.report.documents`)."""

    prog: str  # the command, for messages
    formats: tuple[str, ...]  # the formats it can be rendered in
    text_width: int  # columns of its text on a standard output that is not a terminal
    one_table: bool  # CSV is one table (to the standard output or a file), not a folder

    def json_value(self, section: str | None) -> Any: ...

    def json_text(self, value: Any) -> str: ...

    def tables(self) -> list[Tab]: ...

    def csv_text(self, tab: Tab, raw: bool) -> str: ...

    def render_text(self, console: Console) -> None: ...


def emit(doc: Document, fmt: str, dest: Dest) -> int:
    """Render ``doc`` as ``fmt`` and write it to ``dest``; returns the exit status (2 for
    an unknown ``--section``, with one line). Output errors raise TraceError (one line)."""
    if fmt not in doc.formats:
        raise ValueError(f"{doc.prog}: format {fmt!r} not one of {doc.formats}")
    try:
        if fmt == "json":
            return _out(doc.json_text(doc.json_value(dest.section)), dest)
        if fmt == "csv":
            return _csv(doc, dest)
    except UnknownSection as e:
        print(f"tbdtrace {doc.prog}: {printable(str(e))}", file=sys.stderr)
        return 2
    if fmt == "html":
        return _out(_html(doc), dest)
    if fmt == "markdown":
        return _out(_rendered(doc, "render_markdown"), dest)
    if fmt == "parquet":
        return _parquet(doc, dest)
    if fmt == "xlsx":
        return _xlsx(doc, dest)
    if dest.path is None:
        doc.render_text(Console(width=None if sys.stdout.isatty() else doc.text_width))
        return 0
    buf = io.StringIO()
    doc.render_text(Console(file=buf, width=FILE_WIDTH))
    return _out(buf.getvalue(), dest)


def _target(dest: Dest) -> output_policy.Target:
    assert dest.path is not None
    return output_policy.file_target(dest.path, dest.force, dest.inputs)


def _out(text: str, dest: Dest) -> int:
    """``text`` to the standard output or the file ``dest.path``."""
    if dest.path is None:
        # CSV on a terminal (JSON escapes controls itself): names shown, not obeyed
        sys.stdout.write(printable(text, keep_newlines=True) if sys.stdout.isatty() else text)
        return 0
    output_policy.write_text(_target(dest), text)
    return 0


def _csv(doc: Document, dest: Dest) -> int:
    tabs = doc.tables()
    if dest.section or doc.one_table:
        if doc.one_table and not dest.section:
            return _out(doc.csv_text(tabs[0], dest.raw_csv), dest)
        picked = [t for t in tabs if t.name == dest.section]
        if not picked:
            in_section = [t.name for t in tabs if t.name.split(".")[0] == dest.section]
            raise UnknownSection(str(dest.section), in_section or [t.name for t in tabs])
        return _out(doc.csv_text(picked[0], dest.raw_csv), dest)
    assert dest.path is not None  # the command asks for -o DIR or --section
    target = output_policy.folder_target(
        dest.path, dest.force, dest.inputs, what="-o with --format csv"
    )
    with output_policy.folder_writer(target) as put:
        for t in tabs:
            put(f"{t.name}.csv", _bytes_writer(doc.csv_text(t, dest.raw_csv).encode("utf-8")))
    print(f"{len(tabs)} tables written to {printable(str(Path(dest.path)))}/", file=sys.stderr)
    return 0


def _bytes_writer(data: bytes) -> Callable[[IO[bytes]], object]:
    return lambda f: f.write(data)


def _html(doc: Document) -> str:
    try:
        import matplotlib  # noqa: F401 - the plots' library, a dependency of tbdtrace
    except ImportError:
        raise TraceError(
            f"{doc.prog} --format html needs matplotlib (pip install matplotlib); "
            "--format json and csv do not"
        ) from None
    return _rendered(doc, "render_html")


def _rendered(doc: Document, method: str) -> str:
    """The text of a rendering only some documents have (HTML, Markdown)."""
    render = getattr(doc, method, None)
    if render is None:
        raise ValueError(f"{doc.prog}: no {method}")
    return str(render())


def _parquet(doc: Document, dest: Dest) -> int:
    import pyarrow.parquet as pq

    table = getattr(doc, "arrow", None)
    if table is None or dest.path is None:
        raise ValueError(f"{doc.prog}: Parquet is for an Arrow result written to a file")
    output_policy.write_file(_target(dest), lambda f: pq.write_table(table, f))
    return 0


def _xlsx(doc: Document, dest: Dest) -> int:
    """One workbook, a sheet per table (:mod:`tbdtrace.report.xlsx`), to the file
    ``dest.path`` (the command asks for -o: a workbook is no terminal output)."""
    from tbdtrace.report import xlsx

    if dest.path is None:
        raise ValueError(f"{doc.prog}: xlsx is written to a file")
    xlsx_tables = getattr(doc, "xlsx_tables", None)
    tabs = xlsx_tables() if xlsx_tables is not None else doc.tables()
    output_policy.write_file(_target(dest), lambda f: xlsx.write(tabs, f))
    return 0


def json_text(value: Any, **kw: Any) -> str:
    """The JSON text every document writes: indented by 2, one newline at the end."""
    return json.dumps(value, indent=2, **kw) + "\n"


__all__ = ["FILE_WIDTH", "Dest", "Document", "UnknownSection", "emit", "json_text"]
