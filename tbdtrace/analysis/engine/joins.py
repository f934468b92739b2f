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
            if int(i.min()) >= 0 and int(i.max()) < lut_t.size:  # all inside: no mask
                out[s : s + _BLOCK] = lut_t[i]
                continue
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


def _min_max(x: I64, ok: npt.NDArray[np.bool_]) -> tuple[int, int]:
    """(min, max) of ``x`` where ``ok``; (0, 0) when none is (an empty side fits any key)."""
    if ok.all():
        return (int(x.min()), int(x.max())) if x.size else (0, 0)
    v = x[ok]
    return (int(v.min()), int(v.max())) if v.size else (0, 0)


def _pack(hi: I64, lo: I64, ok: npt.NDArray[np.bool_]) -> I64:
    """((hi + 1) << 42) | lo, lo as 0 where not ``ok``."""
    key = hi + 1
    key <<= 42
    key |= lo if ok.all() else np.where(ok, lo, 0)
    return key


def _dense_ids(a: I64, b: I64) -> I64 | None:
    """:func:`join_ids` through a lookup table, without a sort, when ``b``'s non-null ids
    span at most ~4 keys per row (as :func:`_dense_pairs`, one rank). The table is filled
    block by block from the last row back, so each id keeps its first row, and each
    block is checked once written (later blocks only write earlier rows), else None and
    the caller sorts; every temporary is one block's (29M ops). A block without a null
    id, or of ``a`` inside the table's range, is read without a mask."""
    lo = hi = 0
    count = 0
    for s in range(0, b.size, _BLOCK):
        v = b[s : s + _BLOCK]
        if int(v.min()) <= NULL_ID:
            v = v[v != NULL_ID]
        if v.size:
            vlo, vhi = int(v.min()), int(v.max())
            lo, hi = (vlo, vhi) if count == 0 else (min(lo, vlo), max(hi, vhi))
            count += v.size
    if count == 0 or hi - lo + 1 > 4 * count + 1024:
        return None
    small: type[np.signedinteger[Any]] = np.int32 if b.size < 2**31 else np.int64
    lut: npt.NDArray[np.signedinteger[Any]] = np.full(hi - lo + 1, -1, dtype=small)
    for s in reversed(range(0, b.size, _BLOCK)):  # the first row of each id written last
        v = b[s : s + _BLOCK]
        if int(v.min()) > NULL_ID:
            at = np.arange(s, s + v.size, dtype=small)
            k = v - lo
        else:
            ok = v != NULL_ID
            at = np.flatnonzero(ok).astype(small)
            at += s
            k = v[ok] - lo
        lut[k[::-1]] = at[::-1]
        # Every row finds a row at or before it: first-row semantics held.
        if not bool((lut[k] <= at).all()):
            return None
    out = np.full(a.size, -1, dtype=np.int64)
    for s in range(0, a.size, _BLOCK):
        x = a[s : s + _BLOCK]
        if lo > NULL_ID and int(x.min()) >= lo and int(x.max()) <= hi:
            out[s : s + _BLOCK] = lut[x - lo]
            continue
        ok = (x != NULL_ID) & (x >= lo) & (x <= hi)
        k = np.where(ok, x - lo, 0)
        out[s : s + _BLOCK] = np.where(ok, lut[k], -1)
    return out


def join_ids(a: I64, b: I64) -> I64:
    """:func:`join_pairs` where every row of both sides has one and the same ``hi`` (one
    rank): for each ``a``, the index of the first equal ``b``, -1 if none (``NULL_ID``
    never matches). No key is built: dense ids through a lookup table, else the ids sorted
    as they are (29M ops: 0.45 GB less than the pairs' keys at the peak)."""
    out = np.full(a.size, -1, dtype=np.int64)
    if a.size == 0 or b.size == 0:
        return out
    dense = _dense_ids(a, b)
    if dense is not None:
        return dense
    order = np.argsort(b, kind="stable")  # b's nulls (NULL_ID) sort first; a's never match
    sb = b[order]
    pos = np.searchsorted(sb, a, side="left")
    np.clip(pos, 0, sb.size - 1, out=pos)
    ok = (a != NULL_ID) & (sb[pos] == a)
    out[ok] = order[pos[ok]]
    return out


def join_pairs(a_hi: I64, a_lo: I64, b_hi: I64, b_lo: I64) -> I64:
    """For each (a_hi, a_lo), the index of the first equal (b_hi, b_lo) pair, -1 if none."""
    out = np.full(a_lo.size, -1, dtype=np.int64)
    if a_lo.size == 0 or b_lo.size == 0:
        return out
    a_ok, b_ok = a_lo != NULL_ID, b_lo != NULL_ID
    # Ranges side by side, not of concatenated copies (29M ops: 0.6 GB less at the peak).
    a_mm, b_mm = _min_max(a_lo, a_ok), _min_max(b_lo, b_ok)
    lo_range = (min(a_mm[0], b_mm[0]), max(a_mm[1], b_mm[1]))
    if (
        lo_range[0] >= 0
        and lo_range[1] < 1 << 42
        and min(int(a_hi.min()), int(b_hi.min())) >= -1
        and max(int(a_hi.max()), int(b_hi.max())) < (1 << 20) - 1
    ):
        dense = _dense_pairs(a_hi, a_lo, a_ok, b_hi, b_lo, b_ok)
        if dense is not None:
            return dense
        # Both ids fit one int64 key: a single sort and search. The keys are built in
        # place: one temporary at a time.
        ak = _pack(a_hi, a_lo, a_ok)
        bk = _pack(b_hi, b_lo, b_ok)
        bk[~b_ok] = -1
        order = np.argsort(bk, kind="stable")
        sk = bk[order]
        del bk
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
