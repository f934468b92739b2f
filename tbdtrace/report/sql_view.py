"""``tbdtrace sql``: a query's result as records (JSON), CSV or a text table.

The command parses, opens and runs the query; what it prints is made here.
"""

from __future__ import annotations

import csv
import sys
from typing import Any

import pyarrow as pa

from tbdtrace.report.section_api import table_records
from tbdtrace.report.textui import Console, Table
from tbdtrace.safe_text import csv_cell

# ``sql --output FILE``: the format by the file's extension.
OUTPUT_FORMATS = {".csv": "csv", ".json": "json", ".parquet": "parquet"}


def output_format(path: str) -> str:
    """The format ``--output`` writes for ``path``; TraceError for another extension."""
    from pathlib import Path

    from tbdtrace.errors import TraceError
    from tbdtrace.safe_text import printable

    suffix = Path(path).suffix
    fmt = OUTPUT_FORMATS.get(suffix.lower())
    if fmt is None:
        raise TraceError(
            f"{printable(path)}: unknown output format {printable(suffix or '(no extension)')!r}; "
            f"name the file {', '.join('*' + s for s in OUTPUT_FORMATS)}"
        )
    return fmt


def records(result: pa.Table) -> list[dict[str, Any]]:
    """The result's rows as JSON-ready dicts (NaN as null)."""
    return table_records(result)


def write_csv(f: Any, columns: list[str], rows: list[dict[str, Any]], raw: bool = False) -> None:
    """``rows`` as CSV with a header of ``columns``; nulls as empty cells; text cells
    guarded against spreadsheet formulas unless ``raw`` (:func:`tbdtrace.safe_text.csv_cell`)."""
    w = csv.writer(f)
    w.writerow(columns if raw else [csv_cell(c) for c in columns])
    for r in rows:
        w.writerow([_cell(r[c], raw) for c in columns])


def _cell(v: Any, raw: bool) -> Any:
    if v is None:
        return ""
    return csv_cell(v) if isinstance(v, str) and not raw else v


def render_text(result: pa.Table, console: Console | None = None) -> None:
    """The result as a table titled with its row count; nulls as NULL."""
    rows = records(result)
    con = console or Console(width=None if sys.stdout.isatty() else 160)
    t = Table(title=f"{len(rows)} row{'s' if len(rows) != 1 else ''}")
    for c in result.column_names:
        t.add_column(c)
    for r in rows:
        t.add_row(*["NULL" if r[c] is None else str(r[c]) for c in result.column_names])
    con.print(t)
