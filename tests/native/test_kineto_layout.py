"""The Kineto parser's staging columns (csrc/kineto/staging_tables.h) against tbdtrace/schema.py,
and its dictionary recoding."""

from __future__ import annotations

import numpy as np

from tbdtrace import _native
from tbdtrace.importers.kineto import vocab


def test_staging_columns_are_typed_like_the_schema() -> None:
    from tbdtrace import schema

    targets = {
        "kernels": ["kernels"],
        "memcpy": ["memcpy"],
        "memset": ["memset"],
        "runtime": ["runtime"],
        "sync": ["sync"],
        "ops": ["ops"],
        "markers": ["markers", "steps"],
        "memory": ["memory"],
    }
    native_type = {"int32": "int32", "int64": "int64", "uint64": "uint64", "string": "dict"}
    checked = 0
    for table, cols in _native.kineto_layout():
        for name, typ in cols:
            for target in targets[table]:
                decl = schema.table(target)
                if name in decl.column_names:
                    t = decl.column(name).type
                    assert native_type[typ] == ("dict" if t == schema.STR else str(t)), name
                    checked += 1
    assert checked > 50
    assert [t for t, _ in _native.kineto_layout()] == list(vocab._ROUTE_IDS) + ["memory"]


def test_recode_numbers_strings_in_order_of_appearance() -> None:
    codes = np.array([5, 2, 5, 9, 2, 0], np.int32)
    valid = np.packbits(np.array([1, 1, 1, 0, 1, 1], bool), bitorder="little")
    new, used = _native.kineto_recode(codes, valid, 10)
    assert used.tolist() == [5, 2, 0]
    assert [new[i] for i in (0, 1, 2, 4, 5)] == [0, 1, 0, 1, 2]
