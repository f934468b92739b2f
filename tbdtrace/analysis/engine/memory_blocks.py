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
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace.analysis.engine.cache import Entry
from tbdtrace.analysis.engine.grouping import dense_codes, dict_codes
from tbdtrace.analysis.engine.intervals import is_sorted
from tbdtrace.arrow_ints import int_column

if TYPE_CHECKING:
    from tbdtrace.analysis.engine.context import AnalysisContext

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
    """One code per row for (level, device_type, device_id, rank, pid) and the key list
    (codes in order of first appearance; a null or -1 id is None in the key)."""
    n = tbl.num_rows
    parts: list[npt.NDArray[np.int64]] = []
    labels: list[list[str | None] | None] = []
    for c in _KEY_COLS:
        if c in ("level", "device_type"):
            codes, lbl = dict_codes(tbl, c)
            parts.append(codes if codes.size else np.zeros(n, np.int64))
            labels.append(lbl)
        else:
            parts.append(int_column(tbl, c, -1))
            labels.append(None)
    if n == 0:
        return np.zeros(0, np.int64), []
    # Each column densely coded by hashing, mixed-radix combined, hashed again: linear,
    # and dictionary encoding numbers the codes in order of first appearance.
    key = np.zeros(n, dtype=np.int64)
    values = []
    for p in parts:
        code, vals = dense_codes(p)
        key = key * len(vals) + code
        values.append(vals)
    code, ukeys = dense_codes(key)
    keys = []
    for k in ukeys.tolist():
        digits = []
        for vals in reversed(values):
            digits.append(int(vals[k % len(vals)]))
            k //= len(vals)
        key_row: list[object] = []
        for v, names in zip(reversed(digits), labels, strict=True):
            key_row.append(names[v] if names is not None else (None if v == -1 else int(v)))
        keys.append(tuple(key_row))
    return code, keys


def pair(tbl: pa.Table) -> Blocks:
    """Blocks of ``tbl`` (a ``memory`` table with ts_ns, action, level, bytes, address,
    device_type, device_id, rank, pid)."""
    n = tbl.num_rows
    ts = int_column(tbl, "ts_ns", 0)
    nbytes = int_column(tbl, "bytes", 0)
    addr_col = tbl.column("address")
    has_addr = (
        ~np.asarray(addr_col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        if n
        else np.zeros(0, dtype=bool)
    )
    addr = (
        np.asarray(addr_col.fill_null(0).to_numpy(), dtype=np.uint64).view(np.int64)
        if n
        else np.zeros(0, dtype=np.int64)
    )
    acodes, alabels = dict_codes(tbl, "action")
    is_alloc = (
        np.array([lbl == "alloc" for lbl in alabels], dtype=bool)[acodes]
        if n
        else np.zeros(0, dtype=bool)
    )
    group, keys = group_codes(tbl)
    rows = np.arange(n, dtype=np.int64)
    a = _pair_by_address(
        rows[has_addr],
        group[has_addr],
        addr[has_addr],
        ts[has_addr],
        is_alloc[has_addr],
        nbytes[has_addr],
    )
    b = _pair_by_size(
        rows[~has_addr], group[~has_addr], ts[~has_addr], is_alloc[~has_addr], nbytes[~has_addr]
    )
    c = np.concatenate([a, b], axis=1)
    return Blocks(
        alloc_row=c[0],
        free_row=c[1],
        alloc_ts_ns=c[2],
        free_ts_ns=c[3],
        bytes=c[4],
        group=c[5],
        address=c[6],
        group_keys=keys,
        unmatched_frees=int(np.sum(c[0] < 0)),
    )


def _pair_by_address(
    rows: npt.NDArray[np.int64],
    group: npt.NDArray[np.int64],
    addr: npt.NDArray[np.int64],
    ts: npt.NDArray[np.int64],
    is_alloc: npt.NDArray[np.bool_],
    nbytes: npt.NDArray[np.int64],
) -> npt.NDArray[np.int64]:
    """Rows with an address, vectorized: sorted by (group, address, time, row), an alloc
    owns the next row of its key when that is a free; a following alloc closes it (lost
    free); a free not preceded by an alloc of its key is unmatched. Returns a (7, blocks)
    array: alloc_row, free_row, alloc_ts, free_ts, bytes, group, address."""
    if rows.size > 1 and is_sorted(ts) and is_sorted(rows):
        # A stored table's rows are in time order: (group, address) decides, stably
        # (the same order as the four-key sort, one or two keys sorted instead).
        one_group = group.min() == group.max()
        o = np.argsort(addr, kind="stable") if one_group else np.lexsort((addr, group))
    else:
        o = np.lexsort((rows, ts, addr, group))
    r, g, ad, t, al, nb = rows[o], group[o], addr[o], ts[o], is_alloc[o], nbytes[o]
    same_next = np.zeros(r.size, dtype=bool)
    if r.size > 1:
        same_next[:-1] = (g[1:] == g[:-1]) & (ad[1:] == ad[:-1])
    nxt = np.minimum(np.arange(r.size) + 1, max(r.size - 1, 0))
    next_free = same_next & ~al[nxt]
    same_prev = np.zeros(r.size, dtype=bool)
    same_prev[1:] = same_next[:-1]
    prev_alloc = same_prev & np.roll(al, 1)
    ia = np.flatnonzero(al)
    free_row = np.where(next_free[ia], r[nxt[ia]], -1)
    free_ts = np.where(same_next[ia], t[nxt[ia]], INT64_MAX)
    iu = np.flatnonzero(~al & ~prev_alloc)  # unmatched frees
    return np.array(
        [
            np.concatenate([r[ia], np.full(iu.size, -1)]),
            np.concatenate([free_row, r[iu]]),
            np.concatenate([t[ia], np.full(iu.size, INT64_MIN)]),
            np.concatenate([free_ts, t[iu]]),
            np.concatenate([nb[ia], nb[iu]]),
            np.concatenate([g[ia], g[iu]]),
            np.concatenate([ad[ia], ad[iu]]),
        ],
        dtype=np.int64,
    ).reshape(7, -1)


def _pair_by_size(
    rows: npt.NDArray[np.int64],
    group: npt.NDArray[np.int64],
    ts: npt.NDArray[np.int64],
    is_alloc: npt.NDArray[np.bool_],
    nbytes: npt.NDArray[np.int64],
) -> npt.NDArray[np.int64]:
    """Rows without an address (rare: old Kineto traces): a free closes the oldest live
    block of its group and size."""
    out: list[list[int]] = []
    live: dict[tuple[int, int], deque[int]] = {}
    for i in np.lexsort((rows, ts)).tolist():
        r, g, t, b = int(rows[i]), int(group[i]), int(ts[i]), int(nbytes[i])
        q = live.setdefault((g, b), deque())
        if is_alloc[i]:
            q.append(len(out))
            out.append([r, -1, t, INT64_MAX, b, g, -1])
        elif q:
            blk = out[q.popleft()]
            blk[1], blk[3] = r, t
        else:
            out.append([-1, r, INT64_MIN, t, b, g, -1])
    return np.asarray(out, dtype=np.int64).reshape(-1, 7).T.reshape(7, -1)


BLOCKS: Entry[Blocks] = Entry(
    "memory_blocks.pair", "the blocks of the context's memory table (pair), read-only"
)


def blocks_of(ctx: AnalysisContext, mem: pa.Table) -> Blocks:
    """:func:`pair` of ``mem``, a projection of ``ctx``'s memory table (any columns that
    include pair's: the rows, and so the blocks, are the table's), once per context."""
    return ctx.cache.get(BLOCKS, lambda: pair(mem))
