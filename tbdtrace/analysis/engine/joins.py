"""Joins of integer id columns: for each id on one side, the row of the equal id on the other.

The passes match kernels, memcpys and memsets to their runtime calls by correlation id
(and rank) with these; :data:`NULL_ID` stands for a null id and never matches.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from tbdtrace.analysis.engine import intervals

I64 = npt.NDArray[np.int64]
NULL_ID = -(1 << 62)  # fill for null ids: never equal to a real id
_BLOCK = 1 << 20  # rows per block in the lookup-table join


def join_sorted(a: I64, b: I64) -> I64:
    """For each id of ``a``, the index of the first equal id in ``b``, -1 if none (ids
    equal to NULL_ID never match). Linear when ``b``'s ids are unique and dense, as CUPTI's
    and Kineto's correlation ids are (consecutive numbers, in whatever row order); else
    one stable sort, skipped when ``b`` is already sorted."""
    out = np.full(a.size, -1, dtype=np.int64)
    if a.size == 0 or b.size == 0:
        return out
    lut = _dense_lookup(b)
    if lut is not None:
        lut_t, base = lut
        # Read a block at a time, so the temporaries stay small at 10M rows.
        for s in range(0, a.size, _BLOCK):
            i = a[s : s + _BLOCK] - base  # a NULL_ID id is far below 0
            ok = (i >= 0) & (i < lut_t.size)
            np.clip(i, 0, lut_t.size - 1, out=i)
            out[s : s + _BLOCK] = np.where(ok, lut_t[i], -1)
        return out
    if intervals.is_sorted(b):
        order, sk = None, b
    else:
        order = np.argsort(b, kind="stable")
        sk = b[order]
    pos = np.searchsorted(sk, a, side="left")
    np.minimum(pos, sk.size - 1, out=pos)
    ok = (sk[pos] == a) & (a != NULL_ID)
    out[ok] = pos[ok] if order is None else order[pos[ok]]
    return out


def _dense_lookup(b: I64) -> tuple[np.ndarray, int] | None:
    """(table id - base -> row of ``b``, base) when ``b``'s ids are unique, not null and
    span at most ~4 per row; None otherwise (duplicates would need "first" semantics)."""
    lo, hi = int(b.min()), int(b.max())
    if lo == NULL_ID or hi - lo >= 4 * b.size + 1024:
        return None
    small: type[np.signedinteger[Any]] = np.int32 if b.size < 2**31 else np.int64
    lut: npt.NDArray[np.signedinteger[Any]] = np.full(hi - lo + 1, -1, dtype=small)
    for s in range(0, b.size, _BLOCK):
        lut[b[s : s + _BLOCK] - lo] = np.arange(s, min(s + _BLOCK, b.size), dtype=small)
    if np.count_nonzero(lut >= 0) != b.size:  # a repeated id: not unique
        return None
    return lut, lo


def _dense_pairs(
    a_hi: I64, a_lo: I64, a_ok: np.ndarray, b_hi: I64, b_lo: I64, b_ok: np.ndarray
) -> I64 | None:
    """:func:`join_pairs` through a lookup table, without a sort: when the non-null pairs
    of ``b`` span at most ~4 keys per row (correlation and external ids are consecutive
    numbers per rank, each rank's a similar range). Duplicate pairs keep their first
    row: the table is filled in reverse row order and then checked to hold, for every row
    of ``b``, a row at or before it (else None, and the caller sorts). None when the
    span is too wide."""
    rows = np.flatnonzero(b_ok)
    if rows.size == 0:
        return None
    bl, bh = b_lo[rows], b_hi[rows]
    lo_min, hi_min = int(bl.min()), int(bh.min())
    span = int(bl.max()) - lo_min + 1
    width = span * (int(bh.max()) - hi_min + 1)
    if width > 4 * rows.size + 1024:
        return None
    small: type[np.signedinteger[Any]] = np.int32 if b_lo.size < 2**31 else np.int64
    bk = (bh - hi_min) * span + (bl - lo_min)
    lut: npt.NDArray[np.signedinteger[Any]] = np.full(width, -1, dtype=small)
    lut[bk[::-1]] = rows[::-1].astype(small)  # the first row of each pair written last
    if not bool((lut[bk] <= rows).all()):  # not in order: no "first" guarantee; sort
        return None
    out = np.full(a_lo.size, -1, dtype=np.int64)
    for s in range(0, a_lo.size, _BLOCK):  # blocks: small temporaries at 10M rows
        al, ah = a_lo[s : s + _BLOCK] - lo_min, a_hi[s : s + _BLOCK] - hi_min
        ok = a_ok[s : s + _BLOCK] & (al >= 0) & (al < span) & (ah >= 0) & (ah * span < width)
        k = np.where(ok, ah * span + al, 0)
        out[s : s + _BLOCK] = np.where(ok, lut[k], -1)
    return out


def join_pairs(a_hi: I64, a_lo: I64, b_hi: I64, b_lo: I64) -> I64:
    """For each (a_hi, a_lo), the index of the first equal (b_hi, b_lo) pair, -1 if none."""
    out = np.full(a_lo.size, -1, dtype=np.int64)
    if a_lo.size == 0 or b_lo.size == 0:
        return out
    a_ok, b_ok = a_lo != NULL_ID, b_lo != NULL_ID
    lo_all = np.concatenate([a_lo[a_ok], b_lo[b_ok]])
    hi_all = np.concatenate([a_hi, b_hi])
    if (
        (lo_all.size == 0 or (lo_all.min() >= 0 and lo_all.max() < 1 << 42))
        and hi_all.min() >= -1
        and hi_all.max() < (1 << 20) - 1
    ):
        dense = _dense_pairs(a_hi, a_lo, a_ok, b_hi, b_lo, b_ok)
        if dense is not None:
            return dense
        # Both ids fit one int64 key: a single sort and search.
        ak = ((a_hi + 1) << 42) | np.where(a_ok, a_lo, 0)
        bk = np.where(b_ok, ((b_hi + 1) << 42) | np.where(b_ok, b_lo, 0), -1)
        order = np.argsort(bk, kind="stable")
        sk = bk[order]
        pos = np.clip(np.searchsorted(sk, ak, side="left"), 0, sk.size - 1)
        ok = a_ok & (sk[pos] == ak)
        out[ok] = order[pos[ok]]
        return out
    order = np.lexsort((b_lo, b_hi))
    bh, bl = b_hi[order], b_lo[order]
    # General case: binary search on hi, then a vectorized bisection on lo inside each run.
    lo = np.searchsorted(bh, a_hi, side="left")
    hi = np.searchsorted(bh, a_hi, side="right")
    left, right = lo.copy(), hi.copy()
    while True:
        active = left < right
        if not active.any():
            break
        mid = (left + right) // 2
        midc = np.clip(mid, 0, bl.size - 1)
        go_right = active & (bl[midc] < a_lo)
        left = np.where(go_right, mid + 1, left)
        right = np.where(active & ~go_right, mid, right)
    posc = np.clip(left, 0, bl.size - 1)
    ok = (left < hi) & (bl[posc] == a_lo) & a_ok
    out[ok] = order[posc[ok]]
    return out
