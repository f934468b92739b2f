"""The collector's C++ column layout (csrc/collector/collector_tables.h) against
tbdtrace/schema.py."""

from __future__ import annotations

import pyarrow as pa

from tbdtrace import _native_testing, schema

_ARROW = {"int32": pa.int32(), "int64": pa.int64(), "uint64": pa.uint64(), "string": schema.STR}


def test_every_native_column_is_a_schema_column_of_the_same_type() -> None:
    seen = set()
    for table, _table_id, cols in _native_testing.layout():
        seen.add(table)
        if table.startswith("_"):  # meta-only tables (contexts)
            continue
        decl = schema.table(table)
        for name, typ in cols:
            assert decl.column(name).type == _ARROW[typ], f"{table}.{name}"
        assert len({n for n, _ in cols}) == len(cols), f"{table}: duplicate columns"
    assert seen == {
        "kernels",
        "memcpy",
        "memset",
        "memory",
        "runtime",
        "markers",
        "sync",
        "overhead",
        "devices",
        "_contexts",
    }


def test_table_ids_match_the_spool_reader() -> None:
    from tbdtrace.collector.spool import TABLE_NAMES

    assert {tid: name for name, tid, _ in _native_testing.layout()} == TABLE_NAMES


def test_record_sizes_are_the_13_0_strides() -> None:
    # Strides cuptiActivityGetNextRecord uses on libcupti 13.0.85 (shared/reference/cupti.md).
    want = {
        "kernel": 216,
        "memcpy": 96,
        "memcpy2": 96,
        "memset": 88,
        "memory": 128,
        "runtime": 40,
        "marker": 56,
        "sync": 56,
        "overhead": 56,
        "device": 184,
        "context": 32,
    }
    assert {k: _native_testing.record_size(k) for k in want} == want
