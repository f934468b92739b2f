"""Interval helpers the passes need beyond :mod:`tbdtrace.intervals`, vectorized.

* :func:`covered_in_windows`: per window, the length of a merged interval set inside it;
* :func:`innermost`: per query time, the latest-starting range of a set that contains it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tbdtrace import intervals

I64 = npt.NDArray[np.int64]


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
    ms, me = intervals.merge(starts, ends)
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


def innermost(starts: I64, ends: I64, t: I64) -> npt.NDArray[np.int64]:
    """For each time ``t``, the index of the latest-starting range with start <= t <= end.

    ``starts``/``ends`` describe ranges on one thread (any order); -1 where no range
    contains the time. Vectorized: a sparse table of running maxima of ``ends`` lets every
    query walk back from the last range starting at or before it in log2(n) steps.
    """
    n = starts.size
    t_in = np.asarray(t, dtype=np.int64)
    if n == 0 or t_in.size == 0:
        return np.full(t_in.shape, -1, dtype=np.int64)
    # Sorted queries make every table lookup below walk memory in order (cache-friendly).
    q_order = np.argsort(t_in, kind="stable")
    tt = t_in[q_order]
    # Ties on start: the longer range first, so the shorter (inner) one is found first.
    order = np.lexsort((-ends, starts))
    s, e = starts[order], ends[order]
    levels = [e]
    k = 1
    while (1 << k) <= n:
        prev = levels[-1]
        half = 1 << (k - 1)
        cur = prev.copy()
        cur[half:] = np.maximum(prev[half:], prev[:-half])
        levels.append(cur)
        k += 1
    # j = last index with s[j] <= t; then find the largest j' <= j with e[j'] >= t.
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
    found = alive & (e[jc] >= tt)
    out = np.empty(t_in.size, dtype=np.int64)
    out[q_order] = np.where(found, order[jc], -1)
    return out
