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


def records(result: pa.Table) -> list[dict[str, Any]]:
    """The result's rows as JSON-ready dicts (NaN as null)."""
    return table_records(result)


def write_csv(f: Any, columns: list[str], rows: list[dict[str, Any]]) -> None:
    """``rows`` as CSV with a header of ``columns``; nulls as empty cells."""
    w = csv.writer(f)
    w.writerow(columns)
    for r in rows:
        w.writerow(["" if r[c] is None else r[c] for c in columns])


def render_text(result: pa.Table, console: Console | None = None) -> None:
    """The result as a table titled with its row count; nulls as NULL."""
    rows = records(result)
    con = console or Console(width=None if sys.stdout.isatty() else 160)
    t = Table(title=f"{len(rows)} row{'s' if len(rows) != 1 else ''}", title_justify="left")
    for c in result.column_names:
        t.add_column(c, no_wrap=True)
    for r in rows:
        t.add_row(*["NULL" if r[c] is None else str(r[c]) for c in result.column_names])
    con.print(t)
