"""Arrow integer (and boolean) columns as int64 numpy arrays, nulls replaced by a fill.

The one place that converts: the trace reader, the passes and the importers use these.
They read the values buffer and validity bitmap directly, because ChunkedArray.to_numpy
and non-zero-copy conversions go through Arrow's pandas converter, which imports pandas.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa


def int_column(tbl: pa.Table, name: str, fill: int = -1) -> npt.NDArray[np.int64]:
    """An integer column as int64 numpy, nulls replaced by ``fill``.

    Zero-copy for a single-chunk int64 column without nulls (the result may then be
    read-only); an all-null column becomes a constant array without reading values.
    """
    col = tbl.column(name)
    n = len(col)
    if col.null_count == n:
        return np.full(n, fill, dtype=np.int64)
    return int_values(col, fill)


def int_values(col: pa.Array | pa.ChunkedArray, fill: int = -1) -> npt.NDArray[np.int64]:
    """Integer (or boolean) Arrow values as int64 numpy, nulls as ``fill``.

    Reads the values buffer and validity bitmap directly: ChunkedArray.to_numpy and
    non-zero-copy conversions go through Arrow's pandas converter, which imports pandas.
    """
    if isinstance(col, pa.ChunkedArray):
        col = (
            col.chunk(0)
            if col.num_chunks == 1
            else (col.combine_chunks() if col.num_chunks else pa.array(np.zeros(0, np.int64)))
        )
    if pa.types.is_boolean(col.type):
        vals = np.unpackbits(np.frombuffer(col.buffers()[1], dtype=np.uint8), bitorder="little")[
            col.offset : col.offset + len(col)
        ]
        out: npt.NDArray[np.int64] = vals.astype(np.int64)
    else:
        width = col.type.bit_width // 8
        dt = np.dtype(f"{'u' if pa.types.is_unsigned_integer(col.type) else 'i'}{width}")
        raw = np.frombuffer(col.buffers()[1], dtype=dt, count=len(col), offset=col.offset * width)
        out = raw.astype(np.int64) if (dt != np.int64 or col.null_count) else raw
    if col.null_count:
        valid = np.unpackbits(np.frombuffer(col.buffers()[0], dtype=np.uint8), bitorder="little")[
            col.offset : col.offset + len(col)
        ]
        out[valid == 0] = fill
    return out
