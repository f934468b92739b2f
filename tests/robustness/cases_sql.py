"""The hostile-SQL case table: queries `tbdtrace sql` must refuse with one line (exit 1)
without touching anything outside the trace's tables (docs/RELIABILITY.md, "SQL"), and
queries it must still answer. Run by tests/robustness/test_cases_sql.py.

``says``: words of the one line. Paths named here are written under a sentinel directory
the test creates, so a query that got through would leave a file the test finds.
"""

from __future__ import annotations

from dataclasses import dataclass

OUTSIDE = "reaches outside the trace"


@dataclass(frozen=True)
class SqlCase:
    name: str
    query: str  # {d}: the sentinel directory
    says: str  # "" for a query that must succeed


REFUSED = [
    SqlCase("read_text", "SELECT * FROM read_text('/etc/hostname')", OUTSIDE),
    SqlCase("read_text of a user file", "SELECT * FROM read_text('{d}/private.txt')", OUTSIDE),
    SqlCase("read_blob", "SELECT * FROM read_blob('/etc/passwd')", OUTSIDE),
    SqlCase("read_csv", "SELECT * FROM read_csv('/etc/passwd')", OUTSIDE),
    SqlCase("read_csv_auto", "SELECT * FROM read_csv_auto('/etc/passwd')", OUTSIDE),
    SqlCase("read_json", "SELECT * FROM read_json('{d}/x.json')", OUTSIDE),
    SqlCase("read_parquet", "SELECT * FROM read_parquet('{d}/*.parquet')", OUTSIDE),
    SqlCase("parquet_metadata", "SELECT * FROM parquet_metadata('{d}/x.parquet')", OUTSIDE),
    SqlCase("sniff_csv", "SELECT * FROM sniff_csv('/etc/passwd')", OUTSIDE),
    SqlCase("glob", "SELECT * FROM glob('/*')", OUTSIDE),
    SqlCase("glob in a subquery", "SELECT count(*) FROM (SELECT * FROM glob('{d}/*'))", OUTSIDE),
    SqlCase(
        "read_text in a CTE",
        "WITH t AS (SELECT * FROM read_text('/etc/hostname')) SELECT * FROM t",
        OUTSIDE,
    ),
    SqlCase("file path as a table", "SELECT * FROM '/etc/passwd'", "does not exist"),
    SqlCase("copy to file", "COPY kernels TO '{d}/out.csv'", "COPY statements"),
    SqlCase(
        "copy query to file",
        "COPY (SELECT 1) TO '{d}/out.parquet' (FORMAT parquet)",
        "COPY statements",
    ),
    SqlCase("copy from file", "COPY kernels FROM '{d}/x.csv'", "COPY statements"),
    SqlCase("export database", "EXPORT DATABASE '{d}/db'", "EXPORT statements"),
    SqlCase("attach", "ATTACH '{d}/x.duckdb' AS x", "ATTACH statements"),
    SqlCase("attach sqlite", "ATTACH '{d}/x.db' (TYPE sqlite)", "ATTACH statements"),
    SqlCase("install", "INSTALL httpfs", "INSTALL statements"),
    SqlCase("force install", "FORCE INSTALL httpfs", "statements are not allowed"),
    SqlCase("load", "LOAD httpfs", "LOAD statements"),
    SqlCase("set external access", "SET enable_external_access = true", "SET statements"),
    SqlCase("set via pragma", "PRAGMA enable_external_access=true", "statements are not allowed"),
    SqlCase("reset config", "RESET lock_configuration", "statements are not allowed"),
    SqlCase("drop a trace table", "DROP VIEW kernels", "DROP statements"),
    SqlCase("drop after select", "SELECT 1; DROP VIEW kernels", "DROP statements"),
    SqlCase("create table", "CREATE TABLE t AS SELECT * FROM kernels", "CREATE statements"),
    SqlCase("create macro", "CREATE MACRO m(x) AS x", "CREATE statements"),
    SqlCase("insert", "INSERT INTO kernels SELECT * FROM kernels", "INSERT statements"),
    SqlCase("update", "UPDATE kernels SET name = 'x'", "UPDATE statements"),
    SqlCase("delete", "DELETE FROM kernels", "DELETE statements"),
    SqlCase("call", "CALL pragma_version()", "statements are not allowed"),
    SqlCase("checkpoint", "CHECKPOINT", "statements are not allowed"),
    SqlCase("empty", "   ", "empty SQL"),
    SqlCase("only a comment", "-- nothing", "empty SQL"),
    SqlCase("syntax error", "SELEC 1", "SQL error"),
]

ALLOWED = [
    SqlCase("count", "SELECT count(*) AS n FROM kernels", ""),
    SqlCase("explain", "EXPLAIN SELECT * FROM kernels", ""),
    SqlCase("describe", "DESCRIBE kernels", ""),
    SqlCase("two selects", "SELECT 1; SELECT count(*) FROM ops", ""),
    SqlCase("setting readable", "SELECT current_setting('enable_external_access') AS v", ""),
]

CASES = REFUSED + ALLOWED
