"""Interval arithmetic on int64 nanosecond intervals, vectorized with numpy: the one
module the passes use for it.

* :func:`merge`, :func:`merge_first`, :func:`merge_merged`: unions of half-open
  intervals as sorted, disjoint intervals; :func:`union_length`, :func:`span`,
  :func:`overlap_length`, :func:`span_and_union_of_rows`: their lengths;
* :func:`covered_before`, :func:`covered_in_windows`, :func:`covered_in_merged`: per
  time or window, the length of a merged interval set before or inside it;
* :func:`innermost`: per query time, the latest-starting range of a set that contains it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

I64Array = npt.NDArray[np.int64]
I64 = I64Array


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


def span_and_union_of_rows(
    starts: I64, ends: I64, rows: npt.NDArray[np.integer[Any]], block_rows: int = 1 << 20
) -> tuple[int, int]:
    """(:func:`span`, :func:`union_length`) of ``starts[rows]``, ``ends[rows]``, the same
    values, gathered ``block_rows`` rows at a time: each block is merged with the merged
    interval still open after the blocks before it, which is exact while no interval of
    a block starts before that open one (rows in start order, as a thread's ops are), so
    no gathered copy of every row is made (a thread of 20M ops: 0.3 GB of copies and
    0.5 GB of the merge's temporaries). Otherwise the rows are merged whole, as
    :func:`union_length` does."""
    n = rows.size
    if n == 0:
        return 0, 0
    native = _native_span_union()
    if (
        native is not None
        and rows.dtype == np.int32
        and rows.flags.c_contiguous
        and starts.dtype == ends.dtype == np.int64
    ):
        # One compiled pass over the rows in place (the 1M-kernel file's two threads of
        # 2.9M ops: ~35 ms less than the gathers and merges per block).
        got = native(starts, ends, rows)
        if got is not None:
            return got[1] - got[0], got[2]
    lo_t: int | None = None
    hi_t: int | None = None
    total = 0
    open_s: int | None = None  # the merged interval still open after the last block
    open_e = 0
    for lo in range(0, n, block_rows):
        part = rows[lo : lo + block_rows]
        s, e = starts[part], ends[part]
        b_lo, b_hi = int(s.min()), int(e.max())
        lo_t = b_lo if lo_t is None else min(lo_t, b_lo)
        hi_t = b_hi if hi_t is None else max(hi_t, b_hi)
        keep = e > s
        if not keep.all():
            s, e = s[keep], e[keep]
        if s.size == 0:
            continue
        if open_s is not None and int(s.min()) < open_s:
            # A start before the open interval's: merged whole.
            sel_s, sel_e = starts[rows], ends[rows]
            return span(sel_s, sel_e), union_length(sel_s, sel_e)
        if open_s is not None:
            s = np.concatenate([[open_s], s])
            e = np.concatenate([[open_e], e])
        ms, me = merge(s, e)
        total += int((me[:-1] - ms[:-1]).sum())
        open_s, open_e = int(ms[-1]), int(me[-1])
    if open_s is not None:
        total += open_e - open_s
    assert lo_t is not None and hi_t is not None
    return hi_t - lo_t, total


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


def covered_before(ms: I64, me: I64, t: npt.ArrayLike, cum: I64 | None = None) -> I64:
    """Length of the sorted, disjoint intervals [ms, me) lying before each time ``t``.

    ``cum`` (optional) is :func:`cumulative` of the intervals, for callers that query one
    set many times."""
    tt = np.asarray(t, dtype=np.int64)
    if ms.size == 0:
        return np.zeros(tt.shape, dtype=np.int64)
    if cum is None:
        cum = cumulative(ms, me)
    i = np.searchsorted(ms, tt, side="right") - 1  # last interval starting at or before t
    ok = i >= 0
    ic = np.clip(i, 0, None)
    part = np.where(ok, np.minimum(tt, me[ic]) - ms[ic], 0)
    return np.where(ok, cum[ic] + part, 0).astype(np.int64)


def cumulative(ms: I64, me: I64) -> I64:
    """Lengths of the intervals before each one: [0, l0, l0 + l1, ...]."""
    cum = np.empty(ms.size + 1, dtype=np.int64)
    cum[0] = 0
    np.cumsum(me - ms, out=cum[1:])
    return cum


def covered_in_windows(
    starts: npt.ArrayLike, ends: npt.ArrayLike, w_start: npt.ArrayLike, w_end: npt.ArrayLike
) -> I64:
    """Per window [w_start, w_end): length of the union of [starts, ends) inside it (ns)."""
    ms, me = merge(starts, ends)
    return covered_in_merged(ms, me, w_start, w_end)


def covered_in_merged(
    ms: I64, me: I64, w_start: npt.ArrayLike, w_end: npt.ArrayLike, cum: I64 | None = None
) -> I64:
    """As :func:`covered_in_windows` for intervals already merged (sorted, disjoint);
    ``cum`` as in :func:`covered_before`."""
    ws = np.asarray(w_start, dtype=np.int64)
    we = np.maximum(np.asarray(w_end, dtype=np.int64), ws)
    if cum is None and ms.size:
        cum = cumulative(ms, me)
    return covered_before(ms, me, we, cum) - covered_before(ms, me, ws, cum)


def innermost(
    starts: I64,
    ends: I64,
    t: I64,
    rows: npt.NDArray[np.integer[Any]] | None = None,
    ordered: bool = False,
) -> npt.NDArray[np.int64]:
    """For each time ``t``, the index of the latest-starting range with start <= t <= end.

    ``starts``/``ends`` describe ranges on one thread (any order; cheapest when sorted by
    start, then end descending, as traces store them); -1 where no range contains the
    time. Ties on start go to the shorter (inner) range. Vectorized: from the last range
    starting at or before t, each query walks the chain of previous ranges with a
    greater-or-equal end (``previous_ge``) until one reaches t. Every range skipped by a
    step ends before the range stepped from, so it cannot contain t either; the walk is as
    long as the nesting is deep. Queries still walking after ``_MAX_STEPS`` finish in a
    sparse-table search (:func:`_innermost_table`).

    ``rows``: the ranges are ``starts[rows]``, ``ends[rows]`` (one thread's rows of a
    table) and the indices returned are positions in ``rows``. Where they are int32 and
    in (start, end descending) order, the compiled search reads them in place: no
    gathered copies (a thread of 29M ops: 0.45 GB). ``ordered``: the caller knows
    ``rows`` are in that order (:func:`by_start_then_longer_rows`), so it is not checked
    again (a gather of every row's start and end per search).
    """
    t_in = np.asarray(t, dtype=np.int64)
    if rows is not None:
        if rows.size == 0 or t_in.size == 0:
            return np.full(t_in.shape, -1, dtype=np.int64)
        by_rows = _native_innermost_rows()
        if (
            by_rows is not None
            and rows.dtype == np.int32
            and starts.dtype == np.int64
            and ends.dtype == np.int64
            and (ordered or by_start_then_longer(starts, ends, rows))
        ):
            flat = np.ascontiguousarray(t_in.reshape(-1))
            got: npt.NDArray[np.int64] = by_rows(starts, ends, rows, flat).reshape(t_in.shape)
            return got
        starts, ends = starts[rows], ends[rows]
    n = starts.size
    if n == 0 or t_in.size == 0:
        return np.full(t_in.shape, -1, dtype=np.int64)
    if by_start_then_longer(starts, ends):
        order, s, e = None, starts, ends
    else:
        order = np.lexsort((-ends, starts))
        s, e = starts[order], ends[order]
    native = _native_innermost()
    flat = t_in.reshape(-1)
    # The compiled search (csrc/bindings.cpp) where the extension has it.
    j = (native(s, e, flat) if native is not None else _innermost_sorted(s, e, flat)).reshape(
        t_in.shape
    )
    if order is not None:
        j = np.where(j >= 0, order[np.clip(j, 0, None)], -1)
    return j


def native_fn(name: str) -> Any:
    """``tbdtrace._native.<name>``; None where the extension is missing or older (the
    compiled loops over columns each have a numpy twin here or in the attribution)."""
    try:
        from tbdtrace import _native
    except ImportError:  # pragma: no cover - the extension is built by `make native`
        return None
    return getattr(_native, name, None)


def _native_span_union() -> Any:
    return native_fn("span_union_rows")


def _native_innermost() -> Any:
    return native_fn("innermost_sorted")


def _native_innermost_rows() -> Any:
    return native_fn("innermost_rows")


def _innermost_sorted(s: I64, e: I64, t_in: I64) -> I64:
    """:func:`innermost` for ranges sorted by (start, -end), in numpy."""
    pg = previous_ge(e)
    j = np.searchsorted(s, t_in, side="right") - 1
    idx = np.flatnonzero(j >= 0)
    idx = idx[e[j[idx]] < t_in[idx]]
    for _ in range(_MAX_STEPS):
        if not idx.size:
            break
        j[idx] = pg[j[idx]]
        idx = idx[j[idx] >= 0]
        idx = idx[e[j[idx]] < t_in[idx]]
    if idx.size:
        j[idx] = _innermost_table(s, e, t_in[idx])
    return j


_MAX_STEPS = 64  # chain steps before the sparse-table search takes over


_CHECK_ROWS = 1 << 22  # rows compared at a time by the order check


def by_start_then_longer(s: I64, e: I64, rows: npt.NDArray[np.integer[Any]] | None = None) -> bool:
    """Sorted by start, then end descending (``s[rows]``, ``e[rows]`` when ``rows`` is
    given)? Checked a block of rows at a time, so its temporaries stay small (a thread
    of 29M ops: ~0.3 GB of differences and masks)."""
    n = s.size if rows is None else rows.size
    for lo in range(0, max(n - 1, 0), _CHECK_ROWS):
        hi = min(lo + _CHECK_ROWS, n - 1)
        if rows is None:
            bs, be = s[lo : hi + 1], e[lo : hi + 1]
        else:
            part = rows[lo : hi + 1]
            bs, be = s[part], e[part]
        ds = bs[1:] - bs[:-1]
        if not ((ds >= 0).all() and ((ds > 0) | (be[1:] <= be[:-1])).all()):
            return False
    return True


def by_start_then_longer_rows(
    s: I64, e: I64, rows: npt.NDArray[np.integer[Any]]
) -> npt.NDArray[np.integer[Any]]:
    """``rows`` reordered by (``s[rows]``, ``e[rows]`` descending), ties in the order of
    ``rows`` (what ``rows[np.lexsort((-e[rows], s[rows]))]`` gives); ``rows`` itself when
    already in that order. Rows sorted by start whose only disorder is in ties (ranges
    starting together, the shorter first: a profiler writes them so) are reordered tie
    run by tie run, not by a sort of every row (2M ops of a thread: ~0.1 s less)."""
    if rows.size < 2:
        return rows
    if rows.size > _CHECK_ROWS:
        # Checked block by block first: no gathered copy of every row when in order.
        if by_start_then_longer(s, e, rows):
            return rows
        sg, eg = s[rows], e[rows]
        ds = sg[1:] - sg[:-1]
    else:
        # One gather serves the check and the reordering (the check's own block).
        sg, eg = s[rows], e[rows]
        ds = sg[1:] - sg[:-1]
        if (ds >= 0).all() and ((ds > 0) | (eg[1:] <= eg[:-1])).all():
            return rows
    if not (ds >= 0).all():
        return rows[np.lexsort((-eg, sg))]
    # Rows in a run of equal starts (a run ends where the start grows).
    tie = np.zeros(rows.size, dtype=bool)
    eq = ds == 0
    tie[1:] |= eq
    tie[:-1] |= eq
    at = np.flatnonzero(tie)
    del ds, eq, tie
    out = rows.copy()
    # The runs are sorted by start and each holds one start: sorting their rows by
    # (start, -end) stably reorders each run within its own place.
    out[at] = rows[at[np.lexsort((-eg[at], sg[at]))]]
    return out


def previous_ge(e: I64) -> I64:
    """For each i, the nearest j < i with e[j] >= e[i]; -1 when there is none.

    Pointer jumping: every candidate j keeps the invariant that all values strictly
    between j and i are below e[i]; a candidate below e[i] is replaced by its own
    candidate. Rounds shrink the unresolved set geometrically on real traces."""
    n = e.size
    nxt = np.arange(-1, n - 1, dtype=np.int64)
    if n < 2:
        return nxt
    # Above every earlier value (top-level ranges, one after another): none. Settling
    # these first leaves only short chains (nested ranges) to jump.
    top = np.empty(n, dtype=bool)
    top[0] = True
    np.greater(e[1:], np.maximum.accumulate(e[:-1]), out=top[1:])
    nxt[top] = -1
    idx = np.flatnonzero(~top)
    while idx.size:
        k = nxt[idx]
        bad = e[k] < e[idx]
        idx, k = idx[bad], k[bad]
        nxt[idx] = nxt[k]
        idx = idx[nxt[idx] >= 0]
    return nxt


def _innermost_table(s: I64, e: I64, tt: I64) -> I64:
    """:func:`innermost` for ranges already sorted by (start, -end), by a sparse table of
    running maxima of ``e``: each query walks back in log2(n) steps."""
    n = s.size
    levels = [e]
    k = 1
    while (1 << k) <= n:
        prev = levels[-1]
        half = 1 << (k - 1)
        cur = prev.copy()
        cur[half:] = np.maximum(prev[half:], prev[:-half])
        levels.append(cur)
        k += 1
    j = np.searchsorted(s, tt, side="right") - 1
    alive = j >= 0
    # levels[k][i] = max(e[i - 2^k + 1 .. i]); skip blocks whose maximum end is before t.
    for k in range(len(levels) - 1, -1, -1):
        jc = np.clip(j, 0, None)
        blk = levels[k][jc]
        skip = alive & (blk < tt) & (j - (1 << k) + 1 >= 0)
        j = np.where(skip, j - (1 << k), j)
        alive &= j >= 0
    jc = np.clip(j, 0, None)
    return np.where(alive & (e[jc] >= tt), jc, -1)
