"""Row-at-a-time column builders for importers written in Python."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace import schema

# Range of each integer column type; a value outside it is stored as null.
INT_RANGES = {
    pa.int32(): (-(1 << 31), (1 << 31) - 1),
    pa.int64(): (-(1 << 63), (1 << 63) - 1),
    pa.uint64(): (0, (1 << 64) - 1),
}

_NUMPY = {pa.int32(): np.int32, pa.int64(): np.int64, pa.uint64(): np.uint64}

# Arrow arrays are built from buffers here, not with pa.array(): pa.array() imports pandas
# (about a second of a cold CLI start) to ask whether its argument is a pandas object.


def int_array(values: Any, typ: pa.DataType, null: np.ndarray | None = None) -> pa.Array:
    """Arrow integer array over `values` (numpy or a sequence of ints; no copy when the
    dtype already matches); rows where `null` is True are null."""
    data = np.ascontiguousarray(values, dtype=_NUMPY[typ])
    bits, nulls = None, 0
    if null is not None and null.any():
        bits, nulls = pa.py_buffer(np.packbits(~null, bitorder="little")), int(null.sum())
    return pa.Array.from_buffers(typ, len(data), [bits, pa.py_buffer(data)], nulls)


def bool_array(values: np.ndarray) -> pa.Array:
    bits = np.packbits(np.asarray(values, bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])


def str_array(values: Sequence[str | None]) -> pa.Array:
    """Arrow string array; None is null. Raises UnicodeEncodeError for lone surrogates."""
    raw = [v.encode() if v is not None else b"" for v in values]
    offsets = np.zeros(len(raw) + 1, np.int64)
    np.cumsum([len(b) for b in raw], out=offsets[1:])
    big = offsets[-1] >= 1 << 31
    typ = pa.large_string() if big else pa.string()
    null = np.array([v is None for v in values], bool)
    bits, nulls = None, 0
    if null.any():
        bits, nulls = pa.py_buffer(np.packbits(~null, bitorder="little")), int(null.sum())
    buffers = [
        bits,
        pa.py_buffer(offsets if big else offsets.astype(np.int32)),
        pa.py_buffer(b"".join(raw)),
    ]
    arr = pa.Array.from_buffers(typ, len(raw), buffers, nulls)
    return arr.cast(pa.string()) if big else arr


class TableBuilder:
    """Collects rows of one schema table as Python lists, one list per column.

    ``append(**values)`` takes column names; omitted columns are null. ``columns()``
    gives the mapping that ``tbdtrace.trace.write`` accepts.
    """

    def __init__(self, table: str):
        self.table = schema.table(table)
        self.names = tuple(self.table.column_names)
        self._cols: dict[str, list[Any]] = {n: [] for n in self.names}
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def append(self, **values: Any) -> None:
        for k in values:
            if k not in self._cols:
                raise KeyError(f"table {self.table.name!r} has no column {k!r}")
        for n, col in self._cols.items():
            col.append(values.get(n))
        self._n += 1

    def column_values(self, name: str) -> list[Any]:
        return self._cols[name]

    def columns(self) -> dict[str, list[Any]]:
        """Columns that hold at least one value (the rest are written as nulls)."""
        return {n: v for n, v in self._cols.items() if any(x is not None for x in v)}

    def arrow_columns(self) -> dict[str, pa.Array]:
        """:meth:`columns` as Arrow arrays of the schema's types.

        Strings are dictionary-encoded in order of first appearance; an integer outside
        its column's type (e.g. beyond int32) is null, as a value beyond int64 already is.
        """
        out = {}
        for name, values in self.columns().items():
            typ = self.table.column(name).type
            if typ == schema.STR:
                out[name] = str_array(values).dictionary_encode()
                continue
            lo, hi = INT_RANGES[typ]
            ok = [v is not None and lo <= v <= hi for v in values]
            data = [v if k else 0 for v, k in zip(values, ok, strict=True)]
            out[name] = int_array(data, typ, ~np.array(ok, bool))
        return {n: a for n, a in out.items() if a.null_count < len(a)}
