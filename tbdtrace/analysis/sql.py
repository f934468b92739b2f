"""SQL over a trace with DuckDB: every schema table registered under its own name.

All tables are registered, including empty and absent ones (empty, with the declared
columns), so a query's validity does not depend on what a source recorded.

The query runs sandboxed (docs/RELIABILITY.md, "SQL"): the connection is in memory with
external access disabled (no file, directory or network access: ``read_text``,
``read_csv``, ``glob``, ``COPY``, ``ATTACH``...), no extension installed or loaded, no
spilling to a temporary directory, and its configuration locked so the query cannot
undo any of that. Only ``SELECT`` (and ``EXPLAIN``) statements run, so the registered
tables cannot be dropped or replaced; results are written to files by the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from tbdtrace import schema
from tbdtrace.errors import TraceError

if TYPE_CHECKING:
    from tbdtrace.analysis.engine.context import Source

# Applied when the connection opens; lock_configuration keeps a query's SET/PRAGMA from
# changing them afterwards.
SANDBOX_CONFIG: dict[str, Any] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "temp_directory": "",
    "lock_configuration": True,
}
# Statement types a query may hold (duckdb.StatementType names).
ALLOWED_STATEMENTS = ("SELECT", "EXPLAIN")


def connect(trace: Source) -> Any:
    """A sandboxed in-memory DuckDB connection with the trace's tables registered."""
    return connect_tables({t.name: trace.table(t.name) for t in schema.TABLES})


def connect_tables(tables: Mapping[str, Any]) -> Any:
    """The sandboxed connection over ``tables`` (name -> Arrow table, or a
    ``pyarrow.dataset`` that DuckDB scans file by file, as for the ranks of a rank set)."""
    con = duckdb.connect(":memory:", config=SANDBOX_CONFIG)
    for name, tbl in tables.items():
        con.register(name, tbl)
    return con


def check_statements(con: Any, sql: str) -> list[Any]:
    """The statements of ``sql``; raises TraceError for one that is not a query."""
    statements = con.extract_statements(sql)
    if not statements:
        raise TraceError('empty SQL; give a query such as "SELECT count(*) FROM kernels"')
    for st in statements:
        kind = st.type.name
        if kind not in ALLOWED_STATEMENTS:
            word = st.query.split(None, 1)[0].upper() if st.query.split() else kind
            raise TraceError(
                f"SQL refused: {word} statements are not allowed (tbdtrace sql runs "
                "read-only queries: SELECT or EXPLAIN over the trace's tables; write "
                "results with --output FILE)"
            )
    return statements


def query(trace: Source, sql: str) -> pa.Table:
    """Run ``sql`` and return the result as an Arrow table; bad or refused SQL raises
    TraceError (one line)."""
    return query_on(connect(trace), sql, trace.path)


def query_on(con: Any, sql: str, where: Any) -> pa.Table:
    """:func:`query` on an open connection (closed afterwards); ``where`` names the data
    in error lines."""
    try:
        try:
            statements = check_statements(con, sql)
        except TraceError as e:
            raise TraceError(f"{where}: {e}") from None
        rel = None
        for st in statements:
            rel = con.sql(st.query)
        return pa.table({}) if rel is None else rel.to_arrow_table()
    except duckdb.PermissionException as e:
        raise TraceError(
            f"{where}: SQL refused: the query reaches outside the trace "
            f"({_one_line(e)}); tbdtrace sql reads only the trace's tables"
        ) from e
    except duckdb.Error as e:
        raise TraceError(
            f"{where}: SQL error: {_one_line(e)}; "
            f"tables: {', '.join(t.name for t in schema.TABLES)}"
        ) from e
    finally:
        con.close()


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def run(trace: Source, config: str) -> pa.Table:
    """The pass-shaped entry point: ``config`` is the SQL text (see :func:`query`)."""
    return query(trace, config)
