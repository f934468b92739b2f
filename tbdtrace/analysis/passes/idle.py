"""Device idle time and its causes; queue delay and launch call durations; kernels
shorter than their launch.

Per device, over its span (as in the summary pass), every gap [a, b) between merged busy
intervals (kernels, memcpy, memset) is split (docs/METRICS.md, "Idle"):

* ``sync_wait_ns``: the part during which the host sat in a synchronization wait (rows of
  the ``sync`` table, runtime calls named ``*Synchronize*``, and blocking copy calls:
  ``cudaMemcpy``, ``hipMemcpyWithStream`` and every other ``*Memcpy*`` call without
  ``Async``, which return only when the copy is done; of the same rank);
* ``host_bound_ns``: the rest of [a, L), where L is the start of the runtime call that
  launched the work ending the gap: nothing was queued, the device waited on the host;
* ``queued_ns``: the rest of [L, b): the next work was already issued, the device idled
  with work queued (work ahead in the queue, stream dependencies). When the next work has
  no runtime call, a gap shorter than ``IdleConfig.queued_threshold_ns`` counts as queued and
  a longer one as host-bound. ``queued_gap_max_ns``: the longest queued part of one gap.

The three sum to ``idle_ns`` = span - busy. Zero-duration rows (kernels, copies or sets
with end == start) occupy no time: they neither extend the span nor split a gap, and the
span runs from the first busy start to the last busy end; they still count in
``launch_count`` and the queue delay. Queue delay = kernel start - start of its launch
call (how long the launched kernel waited for the device: the depth of the queue ahead of
it, not the cost of launching); the launch call's own duration (end - start of the
runtime row) is given apart, ``launch_call_*_ns``. A kernel is "shorter than its launch"
when its duration is below the duration of that runtime call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace.analysis.engine import data_wait, intervals, outputs, shared_arrays, summaries
from tbdtrace.analysis.engine.context import AnalysisContext, Source, of
from tbdtrace.analysis.engine.grouping import decode_device_key
from tbdtrace.analysis.engine.intervals import covered_in_merged
from tbdtrace.arrow_ints import int_column


@dataclass(frozen=True)
class IdleConfig:
    # Gap below which idle time counts as work queued when no launch call is known (ns).
    queued_threshold_ns: int = 10_000


_STATS = ("mean", "p50", "p90", "p99", "max")
# Runtime and driver copy calls that block the host until the copy is done: every
# cudaMemcpy*/hipMemcpy*/cuMemcpy* call that is not an *Async one (hipMemcpyWithStream,
# despite its stream argument, blocks too).
_BLOCKING_COPY = re.compile(r"^(?:cuda|hip|cu)Memcpy(?!\w*Async)\w*$")


def is_sync_call(name: str) -> bool:
    """Whether a runtime call named ``name`` holds the host until the device catches up:
    an explicit synchronization (``*Synchronize*``) or a blocking copy."""
    return "Synchronize" in name or _BLOCKING_COPY.match(name) is not None


SCHEMA = outputs.IDLE.arrow_schema()  # declared in analysis/engine/outputs.py


def run(ctx: Source, config: IdleConfig | None = None) -> pa.Table:
    """One row per device. Columns: rank, device_type, device_id; span_ns, busy_ns,
    idle_ns, host_bound_ns, queued_ns, sync_wait_ns (ns); gap_count; queued_gap_max_ns
    (ns, the longest queued part of one gap; 0 without gaps); launch_count
    (kernels with a matched runtime call); queue_delay_{mean,p50,p90,p99,max}_ns (ns, launch
    call start to kernel start; null without launches); launch_call_{mean,p50,p90,p99,
    max}_ns (ns, the launch call's own duration; null as above); short_kernel_count,
    short_kernel_ns (kernels shorter than their launch call, and their summed duration)."""
    ctx = of(ctx)
    cfg = config or IdleConfig()
    sync = _sync_intervals(ctx)
    waits = data_wait.intervals_by_rank(ctx)
    rows: dict[str, list[Any]] = {f.name: [] for f in SCHEMA}
    for k in shared_arrays.device_keys_of(ctx):
        rank, dtype, dev = decode_device_key(k)
        rk = -1 if rank is None else rank
        none = (np.zeros(0, np.int64),) * 2
        data = None if waits is None else waits.get(rk, none)
        r = _device(ctx, k, sync.get(rk, none), cfg, data)
        r.update(rank=rank, device_type=dtype, device_id=dev)
        for c in rows:
            rows[c].append(r[c])
    return pa.table(rows, schema=SCHEMA)


def _sync_intervals(ctx: AnalysisContext) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    sy = ctx.table("sync", ["start_ns", "end_ns", "rank"])
    rsel = np.flatnonzero(shared_arrays.label_mask(ctx, "runtime", "name", is_sync_call))
    # Only the sync calls' ranks are needed: from the file's statistics when every call
    # has the same one, else taken from the column, not kept.
    known = ctx.constant("runtime", "rank") if rsel.size else None
    if known is not None:
        rt_ranks = np.full(rsel.size, -1 if known[0] is None else known[0], np.int64)
    else:
        rt_rank = ctx.table("runtime", ["rank"], cache=False).column(0).take(pa.array(rsel))
        rt_ranks = int_column(pa.table({"r": rt_rank}), "r")
    rank = np.concatenate([int_column(sy, "rank"), rt_ranks])
    s = np.concatenate(
        [int_column(sy, "start_ns"), shared_arrays.ints(ctx, "runtime", "start_ns")[rsel]]
    )
    e = np.concatenate(
        [int_column(sy, "end_ns"), shared_arrays.ints(ctx, "runtime", "end_ns")[rsel]]
    )
    return {int(r): intervals.merge(s[rank == r], e[rank == r]) for r in np.unique(rank)}


def _kernel_gap_launches(ctx: AnalysisContext, key: int) -> np.ndarray:
    """:func:`_gap_launches` for a device that ran only kernels: the merge already knows
    the kernel opening each busy interval, so only ties on its start need a look."""
    s, e = shared_arrays.spans(ctx, "kernels", key)
    first = shared_arrays.merged_kernels_first(ctx, key)[2][1:]
    if (e == s).any():
        return _gap_launches(ctx, "kernels", key, shared_arrays.merged(ctx, key, "kernels")[0][1:])
    rows = shared_arrays.rows_of(ctx, "kernels", key)
    ls = shared_arrays.launch_times(ctx, "kernels")[rows]
    out = ls[first]
    if not intervals.is_sorted(s):
        return _unsorted_ties(ctx, key, s, ls, first, out)
    # Later rows starting at the same ns come right after the first (stable order). One
    # sequential comparison finds whether any two rows share a start at all (real
    # traces: few; the gathers at each opener are skipped without them).
    same = s[1:] == s[:-1]  # same[i]: row i + 1 starts where row i does
    if same.any():
        inb = first < s.size - 1
        tie = np.zeros(first.size, dtype=bool)
        tie[inb] = same[first[inb]]
        t = np.flatnonzero(tie)
        if t.size:
            out[t] = _run_max(ls, first[t], np.searchsorted(s, s[first[t]], side="right"))
    return out


# Above this many gaps opened by rows that share their start, :func:`_gap_launches`.
_TIE_GAPS_MAX = 1024


def _unsorted_ties(
    ctx: AnalysisContext,
    key: int,
    s: np.ndarray,
    ls: np.ndarray,
    first: np.ndarray,
    out: np.ndarray,
) -> np.ndarray:
    """:func:`_kernel_gap_launches` for kernels not in start order (several streams):
    ``out`` holds each gap's opener's launch; the rows starting where another row starts
    are found in one stable sort of the starts (no search per gap), and only the gaps
    opened at such a start (real traces: a few) take the latest launch among them."""
    order = np.argsort(s, kind="stable")
    ss = s[order]
    same = ss[1:] == ss[:-1]
    if not same.any():
        return out
    t = np.flatnonzero(np.isin(s[first], np.unique(ss[1:][same])))
    if t.size > _TIE_GAPS_MAX:
        return _gap_launches(ctx, "kernels", key, shared_arrays.merged(ctx, key, "kernels")[0][1:])
    gb = s[first[t]]
    lo = np.searchsorted(ss, gb, side="left")
    hi = np.searchsorted(ss, gb, side="right")
    for i, a, b in zip(t.tolist(), lo.tolist(), hi.tolist(), strict=True):
        out[i] = ls[order[a:b]].max()
    return out


def _run_max(v: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max(v[lo[i]:hi[i]]) for each i (every run non-empty), in one reduceat."""
    out = np.empty(lo.size, dtype=v.dtype)
    tail = hi >= v.size  # not a valid reduceat index: the run reaching the end (one)
    for i in np.flatnonzero(tail):
        out[i] = v[lo[i] :].max()
    mid = ~tail
    if mid.any():
        bounds = np.empty(2 * int(mid.sum()), dtype=np.int64)
        bounds[0::2], bounds[1::2] = lo[mid], hi[mid]
        out[mid] = np.maximum.reduceat(v, bounds)[0::2]
    return out


def _gap_launches(ctx: AnalysisContext, table: str, key: int, gb: np.ndarray) -> np.ndarray:
    """Per gap end ``gb``: the latest launch-call start among the rows of ``table`` on
    device ``key`` that start exactly at ``gb``; -1 where none has a launch call."""
    out = np.full(gb.size, -1, dtype=np.int64)
    rows = shared_arrays.rows_of(ctx, table, key)
    if rows is None or not gb.size:
        return out
    s, e = shared_arrays.spans(ctx, table, key)
    ls = shared_arrays.launch_times(ctx, table)[rows]
    if (e == s).any():  # zero-duration rows end no gap
        pos = e > s
        s, ls = s[pos], ls[pos]
    if not intervals.is_sorted(s):
        order = np.argsort(s, kind="stable")
        s, ls = s[order], ls[order]
    lo = np.searchsorted(s, gb, side="left")
    at = lo < s.size
    at[at] = s[lo[at]] == gb[at]
    out[at] = ls[lo[at]]
    # Several rows starting at the same ns (rare): the latest launch among them.
    nxt = lo + 1
    tie = at & (nxt < s.size)
    tie[tie] = s[nxt[tie]] == gb[tie]
    if tie.any():
        t = np.flatnonzero(tie)
        out[t] = _run_max(ls, lo[t], np.searchsorted(s, gb[t], side="right"))
    return out


def _device(
    ctx: AnalysisContext,
    key: int,
    sync: tuple[np.ndarray, np.ndarray],
    cfg: IdleConfig,
    data: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, Any]:
    ms, me = shared_arrays.merged(ctx, key, "all")
    first_last = shared_arrays.device_span(ctx, key)  # zero-duration rows excluded
    span = first_last[1] - first_last[0] if first_last else 0
    busy = int((me - ms).sum())
    ga, gb = me[:-1], ms[1:]  # gaps between merged busy intervals
    # The work ending each gap starts at gb; among several, the one with the latest launch.
    if (
        shared_arrays.rows_of(ctx, "memcpy", key) is None
        and shared_arrays.rows_of(ctx, "memset", key) is None
    ):
        launch = _kernel_gap_launches(ctx, key)
    else:
        launch = np.max(
            [_gap_launches(ctx, t, key, gb) for t in shared_arrays.EVENT_TABLES], axis=0
        )
    known = launch >= 0
    cut = np.where(
        known, np.clip(launch, ga, gb), np.where(gb - ga < cfg.queued_threshold_ns, ga, gb)
    )
    sync_a = _covered_total(sync[0], sync[1], ga, cut)
    sync_b = _covered_total(sync[0], sync[1], cut, gb)
    host = int((cut - ga).sum()) - sync_a
    queued = int((gb - cut).sum()) - sync_b
    longest = int(_queued_per_gap(sync, cut, gb).max()) if ga.size else 0
    out: dict[str, Any] = {
        "span_ns": span,
        "busy_ns": busy,
        "idle_ns": span - busy,
        "host_bound_ns": host,
        **_host_split(host, data, sync, ga, cut),
        "queued_ns": queued,
        "sync_wait_ns": sync_a + sync_b,
        "gap_count": int(ga.size),
        "queued_gap_max_ns": longest,
    }
    out.update(_launch_stats(ctx, key))
    return out


def _host_split(
    host: int,
    data: tuple[np.ndarray, np.ndarray] | None,
    sync: tuple[np.ndarray, np.ndarray],
    ga: np.ndarray,
    cut: np.ndarray,
) -> dict[str, int | None]:
    """host_bound_ns split: the part of the host-bound windows [ga, cut) (less sync waits)
    under the rank's data waits, and the rest; both null without data-wait ranges."""
    if data is None:
        return {"host_bound_data_ns": None, "host_bound_other_ns": None}
    under = _covered_total(data[0], data[1], ga, cut)
    if under and sync[0].size:  # a data wait that is also a sync wait counts as sync
        both = data_wait.intersect(data[0], data[1], sync[0], sync[1])
        under -= _covered_total(both[0], both[1], ga, cut)
    return {"host_bound_data_ns": under, "host_bound_other_ns": host - under}


def _queued_per_gap(
    sync: tuple[np.ndarray, np.ndarray], cut: np.ndarray, gb: np.ndarray
) -> np.ndarray:
    """Per gap, the queued part [cut, gb) less its synchronization wait.

    The parts [cut, gb) are sorted and disjoint (``cut`` lies in its gap), so the gaps a
    sync wait [s, e) overlaps are one run of them; the wait is subtracted on the gaps of
    those runs only (millions of gaps, few of them under a wait)."""
    part = gb - cut
    if sync[0].size and part.size:
        ss, se = sync
        first = np.searchsorted(gb, ss, side="right")  # first gap ending after s
        end = np.searchsorted(cut, se, side="left")  # gaps starting before e
        ok = first < end
        if ok.any():
            # The gaps under some wait: the union of the runs [first, end), listed in
            # order (work in the gaps covered, not in all of them).
            ra, rb = intervals.merge(first[ok], end[ok])
            lens = rb - ra
            idx = np.arange(int(lens.sum()), dtype=np.int64)
            idx += np.repeat(ra - (np.cumsum(lens) - lens), lens)
            part[idx] -= covered_in_merged(ss, se, cut[idx], np.maximum(gb[idx], cut[idx]))
    return part


def _covered_total(ms: np.ndarray, me: np.ndarray, ws: np.ndarray, we: np.ndarray) -> int:
    """Length of the merged intervals (ms, me) inside the sorted, disjoint windows [ws, we).

    |M ∩ W| is symmetric: the per-window search runs over whichever set is smaller, so
    millions of gaps against a few sync waits cost one cumulative sum, not a search each.
    """
    if ms.size == 0 or ws.size == 0:
        return 0
    if ms.size < ws.size:
        return int(covered_in_merged(ws, np.maximum(we, ws), ms, me).sum())
    return int(covered_in_merged(ms, me, ws, we).sum())


def _launch_stats(ctx: AnalysisContext, key: int) -> dict[str, Any]:
    """Queue delay, launch call durations and kernels shorter than their launch call, on
    device ``key``."""
    rows = shared_arrays.rows_of(ctx, "kernels", key)
    out: dict[str, Any] = {"launch_count": 0, "short_kernel_count": 0, "short_kernel_ns": 0}
    out.update({f"queue_delay_{st}_ns": None for st in _STATS})
    out.update({f"launch_call_{st}_ns": None for st in _STATS})
    if rows is None:
        return out
    s, e = shared_arrays.spans(ctx, "kernels", key)
    ls = shared_arrays.launch_times(ctx, "kernels")[rows]
    launched = ls >= 0
    if not launched.any():
        return out
    all_launched = bool(launched.all())
    lat = (s - ls) if all_launched else (s - ls)[launched]
    out["launch_count"] = int(lat.size)
    mean, top = lat.mean(), lat.max()
    # ``lat`` is this function's own array: the percentiles partition it in place.
    pct = np.percentile(lat, [50, 90, 99], overwrite_input=True)
    del lat
    for st, v in zip(_STATS, (mean, *pct, top), strict=True):
        out[f"queue_delay_{st}_ns"] = float(v)
    dur = shared_arrays.durations(ctx, "kernels")[rows]
    # A kernel is short when it runs for less time than its launch call: the call's
    # duration is its runtime row's (one gather, no end times gathered and subtracted).
    call = _call_durations(ctx, rows, launched, all_launched)
    short_k = np.less(dur, call)
    if not all_launched:
        short_k &= launched
    own = call if all_launched else call[launched]
    del call
    mean, top = own.mean(), own.max()
    # The short kernels are counted: the percentiles partition the durations in place.
    cpct = np.percentile(own, [50, 90, 99], overwrite_input=True)
    for st, v in zip(_STATS, (mean, *cpct, top), strict=True):
        out[f"launch_call_{st}_ns"] = float(v)
    del own
    out["short_kernel_count"] = int(short_k.sum())
    out["short_kernel_ns"] = int(dur[short_k].sum())
    return out


def _call_durations(
    ctx: AnalysisContext, rows: shared_arrays.Rows, launched: np.ndarray, all_launched: bool
) -> np.ndarray:
    """Per kernel row of ``rows``, the duration of its launch call (end - start of the
    matched runtime row); 0 where it has none (``launched`` False)."""
    m = shared_arrays.runtime_match(ctx, "kernels")[rows]
    rd = shared_arrays.durations(ctx, "runtime", keep=False)  # needed here only
    if all_launched:
        return rd[m]
    return np.where(launched, rd[np.where(launched, m, 0)], 0)


# The totals over devices live in the engine (engine/summaries.py).
summarize = summaries.idle_totals
