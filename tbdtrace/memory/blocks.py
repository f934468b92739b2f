"""Pair allocation and free events into blocks, robust to a partial capture.

A *block* is one allocation's life: the alloc row that made it and the free row that
released it. Rows are paired per (level, device_type, device_id, rank, pid, address) in
time order. The rules, chosen so that no total can go negative:

* a free with no live alloc at its address (the block was allocated before capture
  started) becomes a block with ``alloc_row = -1`` and ``alloc_ts_ns = INT64_MIN``;
* an alloc at an address that is already live (the capture lost a free) first closes
  the older block at that moment (``free_row = -1``, ``free_ts_ns`` = the new alloc);
* an alloc never freed stays live to the end (``free_row = -1``, ``free_ts_ns = INT64_MAX``);
* rows with a null address cannot be paired by address; they pair by size instead
  (a free closes the oldest live block of the same size), and a free that finds none is
  treated like any unmatched free.

A block's size is the alloc row's ``bytes``; the free row's bytes are not trusted.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace.passes._util import dict_codes, int_column

INT64_MIN = np.iinfo(np.int64).min
INT64_MAX = np.iinfo(np.int64).max

_KEY_COLS = ("level", "device_type", "device_id", "rank", "pid")


@dataclass(frozen=True)
class Blocks:
    """Blocks of a memory table, one entry per block (all arrays the same length)."""

    alloc_row: npt.NDArray[np.int64]  # row index of the alloc in the input table, -1 if none
    free_row: npt.NDArray[np.int64]  # row index of the free, -1 if none
    alloc_ts_ns: npt.NDArray[np.int64]  # INT64_MIN when allocated before capture
    free_ts_ns: npt.NDArray[np.int64]  # INT64_MAX when never freed
    bytes: npt.NDArray[np.int64]  # size from the alloc row (the free row's for pre-capture)
    group: npt.NDArray[np.int64]  # index into group_keys
    address: npt.NDArray[np.int64]  # address as int64 bit pattern, -1 when null
    group_keys: list[tuple[object, ...]]  # (level, device_type, device_id, rank, pid)
    unmatched_frees: int  # frees with no live alloc (allocated before capture)

    def __len__(self) -> int:
        return int(self.alloc_row.size)


def group_codes(tbl: pa.Table) -> tuple[npt.NDArray[np.int64], list[tuple[object, ...]]]:
    """One code per row for (level, device_type, device_id, rank, pid) and the key list."""
    parts = []
    for c in _KEY_COLS:
        if c in ("level", "device_type"):
            codes, labels = dict_codes(tbl, c)
            parts.append(np.array(labels, dtype=object)[codes] if codes.size else
                         np.zeros(0, dtype=object))
        else:
            parts.append(int_column(tbl, c, -1))
    n = tbl.num_rows
    keys: dict[tuple[object, ...], int] = {}
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        k = tuple(p[i] for p in parts)
        out[i] = keys.setdefault(k, len(keys))
    klist = [tuple(None if (isinstance(v, (int, np.integer)) and v == -1) else v for v in k)
             for k in keys]
    return out, [tuple(int(v) if isinstance(v, np.integer) else v for v in k) for k in klist]


def pair(tbl: pa.Table) -> Blocks:
    """Blocks of ``tbl`` (a ``memory`` table with ts_ns, action, level, bytes, address,
    device_type, device_id, rank, pid)."""
    n = tbl.num_rows
    ts = int_column(tbl, "ts_ns", 0)
    nbytes = int_column(tbl, "bytes", 0)
    addr_col = tbl.column("address")
    addr_valid = ~np.asarray(addr_col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    addr = np.asarray(addr_col.fill_null(0).to_numpy(), dtype=np.uint64).view(np.int64) \
        if n else np.zeros(0, dtype=np.int64)
    acodes, alabels = dict_codes(tbl, "action")
    is_alloc = (np.array([lbl == "alloc" for lbl in alabels], dtype=bool)[acodes]
                if n else np.zeros(0, dtype=bool))
    group, keys = group_codes(tbl)
    order = np.lexsort((np.arange(n), ts))  # time order, ties keep row order

    # one [alloc_row, free_row, alloc_ts, free_ts, bytes, group, address] per block
    out: list[list[int]] = []
    live: dict[tuple[int, int], int] = {}  # (group, address) -> block index
    by_size: dict[tuple[int, int], deque[int]] = {}  # (group, bytes) -> live blocks, no address
    unmatched = 0
    for r in order.tolist():
        g, t, b = int(group[r]), int(ts[r]), int(nbytes[r])
        has_addr = bool(addr_valid[r])
        if is_alloc[r]:
            if has_addr:
                key = (g, int(addr[r]))
                old = live.pop(key, None)
                if old is not None:  # lost free: close the older block now
                    out[old][3] = t
            idx = len(out)
            out.append([r, -1, t, INT64_MAX, b, g, int(addr[r]) if has_addr else -1])
            if has_addr:
                live[key] = idx
            else:
                by_size.setdefault((g, b), deque()).append(idx)
            continue
        idx = -1
        if has_addr:
            idx = live.pop((g, int(addr[r])), -1)
        else:
            q = by_size.get((g, b))
            if q:
                idx = q.popleft()
        if idx >= 0:
            out[idx][1], out[idx][3] = r, t
            continue
        unmatched += 1
        out.append([-1, r, INT64_MIN, t, b, g, int(addr[r]) if has_addr else -1])

    c = np.ascontiguousarray(np.asarray(out, dtype=np.int64).reshape(-1, 7).T)
    return Blocks(alloc_row=c[0], free_row=c[1], alloc_ts_ns=c[2], free_ts_ns=c[3],
                  bytes=c[4], group=c[5], address=c[6], group_keys=keys,
                  unmatched_frees=unmatched)
