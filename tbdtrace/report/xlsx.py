"""Tables (:mod:`tbdtrace.report.tabular`) as one Excel workbook: one sheet per table.

The first sheet, ``contents``, lists every other sheet: its name, the table it holds (a
sheet name has at most 31 characters, none of ``[]:*?/\\``), its row count, and a note
where a table has more rows than a sheet can hold (Excel's 1,048,576: the first ones are
written). Each table's sheet has a header row (frozen, with a filter) and one row per
record.

Cells hold the document's values as they are, in the units their column names say (ns,
bytes, ratios 0..1): numbers as numbers, booleans as booleans, null as an empty cell, text
as text. Text is never turned into a formula, a link or a number (``=SUM(A1)`` stays the
text ``=SUM(A1)``), so no formula guard is needed here, unlike CSV. Two values Excel
cannot hold are written as text: an integer beyond 2**53 (a double would lose its last
digits: absolute times in ns) as its decimal digits, and a float that is not finite as
``nan``/``inf``/``-inf``. Text longer than Excel's cell limit (32,767 characters) is cut
there; the JSON and CSV outputs keep it whole.

xlsxwriter is imported here only, when ``--format xlsx`` is asked for (the import budget,
tests/perf/test_import_budget.py).
"""

from __future__ import annotations

import io
import math
import re
from typing import IO, Any

from tbdtrace.errors import TraceError
from tbdtrace.report.tabular import Tab

SHEET_NAME_MAX = 31
CELL_TEXT_MAX = 32767
EXACT_INT_MAX = 2**53  # larger integers are written as text (a double cannot hold them)
CONTENTS = "contents"
ROWS_MAX = 1_048_575  # data rows of a sheet: Excel's 1,048,576 less the header
_BAD_SHEET_CHARS = re.compile(r"[\[\]:*?/\\\x00-\x1f]")
WIDTH_MAX = 60  # characters of the widest column


def sheet_names(names: list[str]) -> list[str]:
    """A valid, unique (case-insensitively) sheet name for each table name, in order:
    forbidden characters become ``_``, long names are cut to 31 characters, and a name
    already taken gets ``~2``, ``~3``, ... (cut to fit)."""
    taken = {CONTENTS.lower(), "history"}
    out = []
    for name in names:
        base = _BAD_SHEET_CHARS.sub("_", name).strip("'") or "table"
        cand = base[:SHEET_NAME_MAX]
        n = 1
        while cand.lower() in taken:
            n += 1
            tag = f"~{n}"
            cand = base[: SHEET_NAME_MAX - len(tag)] + tag
        taken.add(cand.lower())
        out.append(cand)
    return out


def cell_value(v: Any) -> Any:
    """What a cell holds for the document value ``v`` (see the module docstring)."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int):
        return v if abs(v) <= EXACT_INT_MAX else str(v)
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, str):
        return v[:CELL_TEXT_MAX]
    return str(v)[:CELL_TEXT_MAX]


def write(tabs: list[Tab], f: IO[bytes]) -> None:
    """The workbook of ``tabs`` to the binary file ``f``: made in memory (its zip is
    compressed: a small part of the tables' text), then written in one call, so a write
    error is the file's OSError and nothing of xlsxwriter is left holding ``f``."""
    try:
        import xlsxwriter
        from xlsxwriter.exceptions import XlsxWriterException
    except ImportError:
        raise TraceError(
            "--format xlsx needs xlsxwriter (pip install xlsxwriter); --format csv does not"
        ) from None
    buf = io.BytesIO()
    try:
        _workbook(xlsxwriter, tabs, buf)
    except (XlsxWriterException, OSError) as e:
        raise TraceError(f"cannot make the workbook ({e})") from None
    f.write(buf.getbuffer())


def _workbook(xlsxwriter: Any, tabs: list[Tab], buf: io.BytesIO) -> None:
    wb = xlsxwriter.Workbook(
        buf,
        {
            "constant_memory": True,  # rows streamed to disk as written
            "strings_to_formulas": False,
            "strings_to_urls": False,
            "strings_to_numbers": False,
        },
    )
    bold = wb.add_format({"bold": True})
    names = sheet_names([t.name for t in tabs])
    index = wb.add_worksheet(CONTENTS)
    for c, h in enumerate(("sheet", "table", "rows", "note")):
        index.write_string(0, c, h, bold)
    for r, (sheet, t) in enumerate(zip(names, tabs, strict=True), start=1):
        index.write_string(r, 0, sheet)
        index.write_string(r, 1, t.name)
        index.write_number(r, 2, len(t.rows))
        if len(t.rows) > ROWS_MAX:
            index.write_string(
                r,
                3,
                f"the sheet holds the first {ROWS_MAX:,} rows (Excel's limit); "
                "--format csv or json has them all",
            )
    index.set_column(0, 1, min(WIDTH_MAX, max([len(t.name) for t in tabs] + [12]) + 2))
    for sheet, t in zip(names, tabs, strict=True):
        _sheet(wb.add_worksheet(sheet), t, bold)
    wb.close()


def _sheet(ws: Any, t: Tab, bold: Any) -> None:
    widths = [min(WIDTH_MAX, len(c) + 2) for c in t.columns]
    # set before any row: constant_memory writes rows as they come
    for c, w in enumerate(widths):
        ws.set_column(c, c, max(w, 10))
    for c, h in enumerate(t.columns):
        ws.write_string(0, c, h[:CELL_TEXT_MAX], bold)
    for r, row in enumerate(t.rows[:ROWS_MAX], start=1):
        for c, v in enumerate(row):
            _write(ws, r, c, cell_value(v))
    if t.columns:
        ws.freeze_panes(1, 0)
        ws.autofilter(0, 0, max(min(len(t.rows), ROWS_MAX), 1), len(t.columns) - 1)


def _write(ws: Any, r: int, c: int, v: Any) -> None:
    if v is None:
        return
    if isinstance(v, bool):
        ws.write_boolean(r, c, v)
    elif isinstance(v, int | float):
        ws.write_number(r, c, v)
    else:
        ws.write_string(r, c, v)
