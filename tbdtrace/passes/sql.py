"""SQL over a trace with DuckDB: every schema table registered under its own name.

All tables are registered, including empty and absent ones (empty, with the declared
columns), so a query's validity does not depend on what a source recorded.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa

from tbdtrace import schema
from tbdtrace.errors import TraceError
from tbdtrace.trace import Trace


def connect(trace: Trace) -> Any:
    """An in-memory DuckDB connection with the trace's tables registered as views."""
    con = duckdb.connect()
    for t in schema.TABLES:
        con.register(t.name, trace.table(t.name))
    return con


def query(trace: Trace, sql: str) -> pa.Table:
    """Run ``sql`` and return the result as an Arrow table; bad SQL raises TraceError."""
    con = connect(trace)
    try:
        rel = con.sql(sql)
        return pa.table({}) if rel is None else _arrow(rel)
    except duckdb.Error as e:
        msg = " ".join(str(e).split())
        raise TraceError(
            f"{trace.path}: SQL error: {msg}; tables: {', '.join(t.name for t in schema.TABLES)}"
        ) from e
    finally:
        con.close()


def _arrow(rel: Any) -> pa.Table:
    # DuckDB 2 names it to_arrow_table; older releases call it arrow.
    fn = getattr(rel, "to_arrow_table", None) or rel.arrow
    tbl = fn()
    return tbl if isinstance(tbl, pa.Table) else tbl.read_all()


def run(trace: Trace, config: str) -> pa.Table:
    """The pass-shaped entry point: ``config`` is the SQL text (see :func:`query`)."""
    return query(trace, config)
