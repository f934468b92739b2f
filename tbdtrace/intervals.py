"""Interval arithmetic on int64 nanosecond intervals, vectorized with numpy."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

I64Array = npt.NDArray[np.int64]


def merge(starts: npt.ArrayLike, ends: npt.ArrayLike) -> tuple[I64Array, I64Array]:
    """Union of half-open intervals [start, end) as sorted, disjoint intervals.

    Overlapping and adjacent intervals merge; zero-length intervals add nothing.
    """
    ms, me, _ = merge_first(starts, ends)
    return ms, me


def merge_first(starts: npt.ArrayLike, ends: npt.ArrayLike) -> tuple[I64Array, I64Array, I64Array]:
    """:func:`merge`, plus for each merged interval the index (into the input) of the
    interval that opens it: the first, in input order, of those starting there."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    src: I64Array | None = None
    if not keep.all():
        src = np.flatnonzero(keep)
        s, e = s[src], e[src]
    if s.size == 0:
        return s, e, np.zeros(0, dtype=np.int64)
    if not is_sorted(s):
        order = np.argsort(s, kind="stable")  # timsort: near-sorted input is cheap
        s, e = s[order], e[order]
        src = order if src is None else src[order]
    run_end = np.maximum.accumulate(e)
    # A new merged interval begins where the start lies beyond every earlier end.
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    np.greater(s[1:], run_end[:-1], out=new[1:])
    idx = np.flatnonzero(new)
    merged_s = s[idx]
    last = np.empty(idx.size, dtype=np.int64)
    last[:-1] = idx[1:] - 1
    last[-1] = s.size - 1
    first = idx if src is None else src[idx]
    return merged_s, run_end[last], first


def is_sorted(a: npt.NDArray[np.int64]) -> bool:
    """True when ``a`` is non-decreasing."""
    return bool(a.size < 2 or (a[1:] >= a[:-1]).all())


def merge_merged(
    a: tuple[I64Array, I64Array], b: tuple[I64Array, I64Array]
) -> tuple[I64Array, I64Array]:
    """Union of two results of :func:`merge` (cheaper than merging all intervals again)."""
    if a[0].size == 0:
        return b
    if b[0].size == 0:
        return a
    return merge(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))


def union_length(starts: npt.ArrayLike, ends: npt.ArrayLike) -> int:
    """Total length covered by the union of the intervals, in the input's unit."""
    ms, me = merge(starts, ends)
    return int((me - ms).sum())


def span(starts: npt.ArrayLike, ends: npt.ArrayLike) -> int:
    """Last end minus first start (0 when empty)."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    if s.size == 0:
        return 0
    return int(e.max() - s.min())


def overlap_length(
    a_starts: npt.ArrayLike, a_ends: npt.ArrayLike, b_starts: npt.ArrayLike, b_ends: npt.ArrayLike
) -> int:
    """Length of (union of A) intersected with (union of B)."""
    a_s, a_e = merge(a_starts, a_ends)
    b_s, b_e = merge(b_starts, b_ends)
    if a_s.size == 0 or b_s.size == 0:
        return 0
    # |A ∩ B| = |A| + |B| - |A ∪ B|
    both_s = np.concatenate([a_s, b_s])
    both_e = np.concatenate([a_e, b_e])
    return int((a_e - a_s).sum() + (b_e - b_s).sum()) - union_length(both_s, both_e)
