"""Helpers shared by passes: device keys, dictionary columns to codes."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc


def int_column(tbl: pa.Table, name: str, fill: int = -1) -> npt.NDArray[np.int64]:
    """An integer column as int64 numpy, nulls replaced by ``fill``.

    Zero-copy for a single-chunk int64 column without nulls (the result may then be
    read-only); an all-null column becomes a constant array without reading values.
    """
    col = tbl.column(name)
    n = len(col)
    if col.null_count == n:
        return np.full(n, fill, dtype=np.int64)
    if col.null_count:
        col = pc.fill_null(col, fill)
    if isinstance(col, pa.ChunkedArray) and col.num_chunks == 1:
        col = col.chunk(0)
    return np.asarray(col.to_numpy(), dtype=np.int64)


def dict_codes(tbl: pa.Table, name: str) -> tuple[npt.NDArray[np.int64], list[str | None]]:
    """A dictionary string column as (codes, labels); null maps to its own label None."""
    col = tbl.column(name)
    if col.num_chunks == 0:
        return np.zeros(0, dtype=np.int64), []
    arr = (
        pa.chunked_array(col.chunks, col.type).unify_dictionaries().combine_chunks()
        if col.num_chunks > 1
        else col.chunk(0)
    )
    if not pa.types.is_dictionary(arr.type):
        arr = pc.dictionary_encode(arr)
    labels: list[str | None] = arr.dictionary.to_pylist()
    idx = arr.indices
    if idx.null_count:
        labels.append(None)
        idx = pc.fill_null(idx, len(labels) - 1)
    return np.asarray(idx.to_numpy(), dtype=np.int64), labels


def device_keys(tbl: pa.Table) -> npt.NDArray[np.int64]:
    """One int64 key per row for (rank, device_type, device_id); see decode_device_key."""
    rank = int_column(tbl, "rank") + 1
    dev = int_column(tbl, "device_id") + 1
    codes, labels = dict_codes(tbl, "device_type")
    # Map device_type labels to fixed small ints so keys agree across tables.
    types = np.array([_TYPE_CODE.get(lbl or "", 0) for lbl in labels], dtype=np.int64)
    t = types[codes] if codes.size else np.zeros(0, dtype=np.int64)
    return (rank << 40) | (t << 32) | dev


_TYPE_CODE = {"": 0, "cuda": 1, "rocm": 2, "cpu": 3}
_CODE_TYPE = {v: k for k, v in _TYPE_CODE.items()}


def decode_device_key(key: int) -> tuple[int | None, str | None, int | None]:
    rank = (key >> 40) - 1
    t = (key >> 32) & 0xFF
    dev = (key & 0xFFFFFFFF) - 1
    return (None if rank < 0 else rank, _CODE_TYPE.get(t) or None, None if dev < 0 else dev)


def row_codes(*cols: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Dense codes of the rows of several int64 columns, and one row index per code.

    Equal rows get equal codes (0..k-1). Cheaper than ``np.unique(axis=0)``: the rows are
    hashed to one uint64 and uniqued once; every row is then checked against its code's
    first row, and only on a hash collision are the columns folded in one at a time.
    """
    n = cols[0].size if cols else 0
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    h = np.zeros(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c in cols:
            h = (h ^ c.astype(np.uint64)) * np.uint64(0x100000001B3)  # FNV-style mix
            h ^= h >> np.uint64(29)
    _, first, code = np.unique(h, return_index=True, return_inverse=True)
    code = code.reshape(-1).astype(np.int64)
    if all(np.array_equal(c[first[code]], c) for c in cols):
        return code, first.astype(np.int64)
    code = np.zeros(n, dtype=np.int64)
    for c in cols:
        _, cc = np.unique(c, return_inverse=True)
        _, code = np.unique(code * (int(cc.max()) + 1) + cc, return_inverse=True)
        code = code.reshape(-1).astype(np.int64)
    _, first = np.unique(code, return_index=True)
    return code, first.astype(np.int64)
