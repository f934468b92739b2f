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
import re
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
    """The JSON text every document writes: ``json.dumps(value, indent=2)``, byte for
    byte, and one newline at the end. Written by the extension
    (``_native.json_dumps_indent2``, ~5x faster than :func:`_indented` on the largest
    fixture's report: 5 against 26-39 ms) where it is built and the value is made of
    the plain types a document holds; else by :func:`_indented`."""
    if kw:
        return json.dumps(value, indent=2, **kw) + "\n"
    native = _native_json()
    text = native(value) if native is not None else None
    return (text if text is not None else _indented(value)) + "\n"


def _native_json() -> Any:
    """``_native.json_dumps_indent2``; None where the extension is missing or older."""
    try:
        from tbdtrace import _native
    except ImportError:
        return None
    return getattr(_native, "json_dumps_indent2", None)


# Values of a flat record (a dict of str keys and these values); exact types, as json
# encodes them, so anything else (numpy scalars, subclasses) takes json's own path.
_SCALARS = frozenset({str, int, float, bool, type(None)})
_PLACEHOLDER = re.compile(r'"\\u0000(\d+)"')


def _indented(value: Any) -> str:
    """``json.dumps(value, indent=2)``, the same text, ~4x faster on a report: Python's
    json indents in pure Python (its C encoder does not indent before Python 3.13), and a
    report is mostly lists of flat records (table rows), which are encoded here by the C
    encoder, one call per list, then indented. The rest of the document, with a
    placeholder for each such list, goes through ``json.dumps``."""
    blocks: list[str] = []
    skeleton = _swap(value, 0, blocks)
    if not blocks:
        return json.dumps(value, indent=2)
    parts = _PLACEHOLDER.split(json.dumps(skeleton, indent=2))
    if len(parts) != 2 * len(blocks) + 1:  # a string of the document looks like one
        return json.dumps(value, indent=2)
    parts[1::2] = [blocks[int(i)] for i in parts[1::2]]
    return "".join(parts)


def _swap(o: Any, level: int, blocks: list[str]) -> Any:
    """``o`` with each list of flat records replaced by a placeholder string, its
    indented text (at nesting ``level``) appended to ``blocks``."""
    if type(o) is dict:
        return {k: _swap(v, level + 1, blocks) for k, v in o.items()}
    if type(o) is list or type(o) is tuple:
        if o and all(
            type(r) is dict
            and r
            and all(type(k) is str for k in r)
            and all(type(v) in _SCALARS for v in r.values())
            for r in o
        ):
            blocks.append(_records(o, level))
            return f"\x00{len(blocks) - 1}"
        return [_swap(v, level + 1, blocks) for v in o]
    return o


def _records(rows: list[dict[str, Any]] | tuple[dict[str, Any], ...], level: int) -> str:
    """A non-empty list of non-empty flat records at nesting ``level``, as ``json.dumps``
    indents it. Encoded compactly with each item separator a newline and the records'
    keys' indent; a newline is only ever a separator (strings escape theirs), and one
    followed by ``{`` is between two records, which get their own indent and braces."""
    row_ind, key_ind = "  " * (level + 1), "  " * (level + 2)
    enc = json.JSONEncoder(separators=(",\n" + key_ind, ": "))
    body = enc.encode(list(rows))[2:-2]  # without the outer "[{" and "}]"
    sep = "\n" + row_ind + "},\n" + row_ind + "{\n" + key_ind
    body = body.replace("},\n" + key_ind + "{", sep)
    return f"[\n{row_ind}{{\n{key_ind}{body}\n{row_ind}}}\n{'  ' * level}]"


__all__ = ["FILE_WIDTH", "Dest", "Document", "UnknownSection", "emit", "json_text"]
