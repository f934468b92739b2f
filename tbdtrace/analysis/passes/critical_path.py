"""The critical path of each step: the chain of dependent host and device work that set
its length.

The dependency graph (the one of HTA's critical-path analysis, ``docs/METRICS.md``
"critical_path" says where this differs):

* host: on a thread, framework ops (``ops``) and runtime calls (``runtime``) nest and
  follow each other; at any time the thread is in its innermost range, or idle;
* launch -> device work: a runtime call and the kernel, copy or set with its (rank,
  correlation id); the work cannot start before the call starts;
* device work -> the next on its stream (rank, device, stream);
* sync: a runtime call that returns after device work ended inside it waited for it: its
  own work (a blocking copy, a launch call that returned only after its kernel ran), or,
  for a synchronizing call (``*Synchronize*``, blocking copies, or a call with a ``sync``
  row of kind stream, event or context), the last device work of its rank (of its
  stream for a stream sync) ending inside the call;
* cross-stream: device work on a stream with a ``stream_wait_event`` sync row since the
  previous work's launch waits for the work of another stream of its device that ended
  last before it started, when that ended after both its launch and its predecessor.

Every edge's weight is the time between its ends, so every path between two points is as
long as the time between them; the critical path is the one whose every edge is the
dependency that was satisfied last. It is found walking back from the step's end on the
step's thread (of the threads with runtime calls in the step, the one whose first range
in it starts earliest): on a host thread, the innermost range at that time (``cpu_op``,
``cpu_runtime``) or ``cpu_idle``; a call that waited for device work hands the path to
that work (``sync_wait``: from the work's end to the call's return); device work
(``gpu_kernel`` with its category, ``copy``, ``memset``) hands it to whichever of its
predecessor on the stream (``gpu_gap``: the time between them), another stream's work
(``gpu_gap``) or its launch (``launch_delay``: from the launch call's start to the
work's start, then on the launching thread) was ready last. A thread idle at a time when
another launching thread of its process ended a range hands the path to that thread (the
autograd engine's thread and the step's thread wait for each other this way); another
thread with none hands it back to the step's thread. The walk stops at the step's start,
so a step's path adds up to its length exactly and its segments are contiguous.

A trace without steps gets one path per rank over its host ranges' span (step null).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace.analysis.engine import outputs, shared_arrays, window
from tbdtrace.analysis.engine.cache import Entry
from tbdtrace.analysis.engine.categories import CATEGORIES, kernel_codes
from tbdtrace.analysis.engine.context import AnalysisContext, Source, of
from tbdtrace.analysis.engine.grouping import dict_codes, row_codes
from tbdtrace.analysis.engine.intervals import innermost
from tbdtrace.analysis.engine.joins import NULL_ID, join_pairs
from tbdtrace.analysis.passes import idle
from tbdtrace.arrow_ints import int_column

I64 = npt.NDArray[np.int64]

SCHEMA = outputs.CRITICAL_PATH.arrow_schema()  # declared in analysis/engine/outputs.py
RESOURCE_SCHEMA = outputs.CRITICAL_PATH_RESOURCE.arrow_schema()
OP_SCHEMA = outputs.CRITICAL_PATH_OP.arrow_schema()

# What a segment of the path is (docs/METRICS.md, critical_path).
RESOURCES = outputs.PATH_RESOURCES
BY = ("segment", "resource", "op")
_DEVICE = ("kernels", "memcpy", "memset")
_DEVICE_RESOURCE = {"kernels": "gpu_kernel", "memcpy": "copy", "memset": "memset"}
_WAITING_SYNC = ("stream", "event", "context")


SEGMENTS: Entry[pa.Table] = Entry("critical_path.segments", "every step's path, by=segment")


@dataclass(frozen=True)
class CriticalPathConfig:
    # segment: one row per path segment; resource: per (rank, step, resource, category);
    # op: per (rank, resource, category, name) over the steps, longest first.
    by: str = "segment"


def run(ctx: Source, config: CriticalPathConfig | None = None) -> pa.Table:
    """The critical path of every step of the context's window (columns: docs/METRICS.md
    ``critical_path``; ``by="resource"``: ``critical_path.by_resource``; ``by="op"``:
    ``critical_path.by_op``)."""
    cfg = config or CriticalPathConfig()
    if cfg.by not in BY:
        raise ValueError(f"by must be one of {BY}, not {cfg.by!r}")
    c = of(ctx)
    seg = c.cache.get(SEGMENTS, lambda: _segments(c))
    if cfg.by == "resource":
        return by_resource(seg)
    if cfg.by == "op":
        return by_op(seg)
    return seg


def by_resource(seg: pa.Table) -> pa.Table:
    """Per (rank, step, resource, category): the path's time, and its share of the step;
    per step (rank, start), longest first."""
    if not seg.num_rows:
        return RESOURCE_SCHEMA.empty_table()
    rank = int_column(seg, "rank", _NO_RANK)
    start = int_column(seg, "step_start_ns")
    res, cat = dict_codes(seg, "resource")[0], dict_codes(seg, "category")[0]
    code, first = row_codes(rank, start, res, cat)
    path = _sums(code, first.size, int_column(seg, "duration_ns"))
    step_ns = int_column(seg, "step_ns")[first]
    order = np.lexsort((res[first], -path, start[first], rank[first]))
    head = seg.take(pa.array(first[order]))
    return pa.table(
        {
            **{c: head.column(c) for c in ("rank", "step", "step_start_ns", "step_ns")},
            "resource": head.column("resource"),
            "category": head.column("category"),
            "segments": np.bincount(code, minlength=first.size)[order],
            "path_ns": path[order],
            "share": path[order] / np.where(step_ns[order] > 0, step_ns[order], 1),
        },
        schema=RESOURCE_SCHEMA,
    )


def by_op(seg: pa.Table) -> pa.Table:
    """Per (rank, resource, category, name) over every step: the path's time, segments,
    steps, and share of the paths' total on that rank; longest first."""
    if not seg.num_rows:
        return OP_SCHEMA.empty_table()
    rank = int_column(seg, "rank", _NO_RANK)
    dur = int_column(seg, "duration_ns")
    res = dict_codes(seg, "resource")[0]
    cat, name = dict_codes(seg, "category")[0], dict_codes(seg, "name")[0]
    code, first = row_codes(rank, res, cat, name)
    n = first.size
    path = _sums(code, n, dur)
    # steps: distinct (group, step) pairs per group
    _pair, pair_first = row_codes(code, int_column(seg, "step_start_ns"))
    steps = np.bincount(code[pair_first], minlength=n)
    rcode, rfirst = row_codes(rank)
    total = _sums(rcode, rfirst.size, dur)[rcode[first]]
    order = np.lexsort((name[first], res[first], rank[first], -path))
    head = seg.take(pa.array(first[order]))
    return pa.table(
        {
            "rank": head.column("rank"),
            "resource": head.column("resource"),
            "category": head.column("category"),
            "name": head.column("name"),
            "segments": np.bincount(code, minlength=n)[order],
            "steps": steps[order],
            "path_ns": path[order],
            "share": path[order] / np.where(total[order] > 0, total[order], 1),
        },
        schema=OP_SCHEMA,
    )


_NO_RANK = 1 << 40  # a null rank's key: sorts after every rank


def _sums(code: I64, n: int, values: I64) -> I64:
    out = np.zeros(n, np.int64)
    np.add.at(out, code, values)
    return out


# -- the graph's pieces, from the whole trace (work launched before a step is reachable)


class _Graph:
    def __init__(self, w: AnalysisContext):
        self.w = w
        ints = shared_arrays.ints
        # host ranges: ops (src 0) and runtime calls (src 1), zero-length ones left out
        hs, he, hp, ht, hr, hsrc, hrow = [], [], [], [], [], [], []
        for src, table in enumerate(("ops", "runtime")):
            n = w.num_rows(table)
            if not n:
                continue
            s, e = ints(w, table, "start_ns"), ints(w, table, "end_ns")
            keep = np.flatnonzero(e > s)
            hs.append(s[keep])
            he.append(e[keep])
            hp.append(ints(w, table, "pid")[keep])
            ht.append(ints(w, table, "tid")[keep])
            hr.append(ints(w, table, "rank")[keep])
            hsrc.append(np.full(keep.size, src, np.int64))
            hrow.append(keep)
        cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0, np.int64)  # noqa: E731
        self.hs, self.he = cat(hs), cat(he)
        self.hsrc, self.hrow = cat(hsrc), cat(hrow)
        hrank, hpid, htid = cat(hr), cat(hp), cat(ht)
        self.hthread, first = row_codes(hrank, hpid, htid)
        self.threads = [
            (int(hrank[f]), int(hpid[f]), int(htid[f])) for f in first.tolist()
        ]  # code -> (rank, pid, tid)
        order = np.lexsort((-self.he, self.hs, self.hthread))
        bounds = np.searchsorted(self.hthread[order], np.arange(len(self.threads) + 1))
        self.thread_rows = [order[bounds[c] : bounds[c + 1]] for c in range(len(self.threads))]
        self._segs: dict[int, tuple[I64, I64, I64]] = {}
        self._stops: dict[int, I64] = {}
        # runtime calls: their names, launched work, sync rows
        nrt = w.num_rows("runtime")
        self.rt_start = ints(w, "runtime", "start_ns") if nrt else np.zeros(0, np.int64)
        self.rt_end = ints(w, "runtime", "end_ns") if nrt else np.zeros(0, np.int64)
        self.rt_thread = np.full(nrt, -1, np.int64)
        is_rt = self.hsrc == 1
        self.rt_thread[self.hrow[is_rt]] = self.hthread[is_rt]
        self.rt_name_codes: I64 = np.zeros(0, np.int64)
        self.rt_labels: list[str | None] = []
        if nrt:
            self.rt_name_codes, self.rt_labels = shared_arrays.codes(w, "runtime", "name")
        sync_lut = np.array([x is not None and idle.is_sync_call(x) for x in self.rt_labels], bool)
        self.rt_sync = sync_lut[self.rt_name_codes] if sync_lut.size else np.zeros(nrt, bool)
        self.rt_sync_stream = np.full(nrt, -1, np.int64)
        self._sync_rows(w, nrt)
        # device work: kernels (not CPU-backend ones), copies, sets
        ds, de, drank, ddev, dstream, dsrc, drow = [], [], [], [], [], [], []
        self.launch_dev = np.full(nrt, -1, np.int64)  # runtime row -> device index
        self.dev_rt = np.zeros(0, np.int64)
        dev_rt = []
        offset = 0
        for src, table in enumerate(_DEVICE):
            n = w.num_rows(table)
            if not n:
                continue
            keep = np.arange(n)
            if table == "kernels":
                codes, labels = shared_arrays.codes(w, table, "device_type")
                cpu = np.array([x == "cpu" for x in labels], bool)
                if cpu.size:
                    keep = np.flatnonzero(~cpu[codes])
            ds.append(ints(w, table, "start_ns")[keep])
            de.append(ints(w, table, "end_ns")[keep])
            drank.append(ints(w, table, "rank")[keep])
            ddev.append(ints(w, table, "device_id")[keep])
            dstream.append(ints(w, table, "stream_id")[keep])
            dsrc.append(np.full(keep.size, src, np.int64))
            drow.append(keep)
            m = shared_arrays.runtime_match(w, table)[keep] if nrt else np.full(keep.size, -1)
            dev_rt.append(m)
            hit = np.flatnonzero(m >= 0)
            self.launch_dev[m[hit]] = offset + hit
            offset += keep.size
        self.ds, self.de = cat(ds), cat(de)
        self.drank, self.ddev, self.dstream = cat(drank), cat(ddev), cat(dstream)
        self.dsrc, self.drow = cat(dsrc), cat(drow)
        self.dev_rt = cat(dev_rt)
        # streams: per (rank, device, stream), rows by start; prev on the stream
        self.dkey, _ = row_codes(self.drank, self.ddev, self.dstream)
        order = np.lexsort((self.de, self.ds, self.dkey))
        self.dprev = np.full(self.ds.size, -1, np.int64)
        same = self.dkey[order][1:] == self.dkey[order][:-1]
        self.dprev[order[1:][same]] = order[:-1][same]
        # ends per stream and per rank, for "the last work that ended inside a call"
        self._by_end: dict[tuple[str, int, int], tuple[I64, I64]] = {}
        self.dev_labels = self._device_labels(w)

    def _sync_rows(self, w: AnalysisContext, nrt: int) -> None:
        """Runtime calls with a sync row of a waiting kind are synchronizing; a stream
        sync's stream is kept. ``stream_wait_event`` rows per (rank, stream) by time."""
        self.swe: dict[tuple[int, int], I64] = {}
        if not w.num_rows("sync"):
            return
        ints = shared_arrays.ints
        kcodes, klabels = shared_arrays.codes(w, "sync", "sync_kind")
        kind = np.array([x or "unknown" for x in klabels], object)[kcodes]
        srank, sstream = ints(w, "sync", "rank"), ints(w, "sync", "stream_id")
        if nrt:
            m = join_pairs(
                srank,
                ints(w, "sync", "correlation_id", NULL_ID),
                ints(w, "runtime", "rank"),
                ints(w, "runtime", "correlation_id", NULL_ID),
            )
            for k in _WAITING_SYNC:
                sel = np.flatnonzero((kind == k) & (m >= 0))
                self.rt_sync[m[sel]] = True
                if k == "stream":
                    self.rt_sync_stream[m[sel]] = sstream[sel]
        wait = np.flatnonzero(kind == "stream_wait_event")
        t = ints(w, "sync", "start_ns")
        for r, s in set(zip(srank[wait].tolist(), sstream[wait].tolist(), strict=True)):
            sel = wait[(srank[wait] == r) & (sstream[wait] == s)]
            self.swe[(r, s)] = np.sort(t[sel])

    def _device_labels(self, w: AnalysisContext) -> dict[str, tuple[I64, list[str | None]]]:
        out = {}
        for table in _DEVICE:
            if not w.num_rows(table):
                continue
            col = {"kernels": "name", "memcpy": "copy_kind", "memset": "memory_kind"}[table]
            out[table] = shared_arrays.codes(w, table, col)
        return out

    # -- host threads: runs of one innermost range (or none)

    def segs(self, th: int) -> tuple[I64, I64, I64]:
        """Thread ``th``'s time as runs (start, end, host range index or -1 for idle)."""
        if th not in self._segs:
            rows = self.thread_rows[th]
            s, e = self.hs[rows], self.he[rows]
            b = np.unique(np.concatenate([s, e]))
            lab = innermost(s, e - 1, b[:-1])
            lab = np.where(lab >= 0, rows[np.clip(lab, 0, None)], -1)
            keep = np.concatenate([[True], lab[1:] != lab[:-1]]) if lab.size else lab > 0
            starts = b[:-1][keep]
            ends = np.append(starts[1:], b[-1]) if starts.size else starts
            self._segs[th] = (starts, ends, lab[keep])
        return self._segs[th]

    def last_stop(self, th: int) -> I64:
        """Per run of thread ``th``, the latest run at or before it where the walk must
        decide (idle, or a runtime call that may have waited for device work); the runs
        between two such are taken in one step."""
        if th not in self._stops:
            starts, ends, lab = self.segs(th)
            h = np.clip(lab, 0, None)
            is_rt = (lab >= 0) & (self.hsrc[h] == 1) if lab.size else lab > 0
            r = np.where(is_rt, self.hrow[h], 0)
            stop = lab < 0
            if is_rt.any():
                d = self.launch_dev[r]
                de = np.where(d >= 0, self.de[np.clip(d, 0, None)] if self.de.size else 0, 0)
                own = (d >= 0) & (self.rt_start[r] < de) & (de <= np.minimum(self.rt_end[r], ends))
                stop |= is_rt & (self.rt_sync[r] | own)
            self._stops[th] = np.maximum.accumulate(np.where(stop, np.arange(lab.size), -1))
        return self._stops[th]

    def ends_by(self, what: str, rank: int, x: int) -> tuple[I64, I64]:
        """Device work of (rank, stream ``x``) or of rank (``x`` ignored) by end."""
        key = (what, rank, x)
        if key not in self._by_end:
            sel = self.drank == rank
            if what == "stream":
                sel &= self.dstream == x
            idx = np.flatnonzero(sel)
            idx = idx[np.argsort(self.de[idx], kind="stable")]
            self._by_end[key] = (self.de[idx], idx)
        return self._by_end[key]

    def last_ending(self, what: str, rank: int, x: int, lo: int, hi: int) -> int:
        """The device work (index) of the group that ended last in (lo, hi]; -1: none."""
        ends, idx = self.ends_by(what, rank, x)
        i = int(np.searchsorted(ends, hi, side="right")) - 1
        return int(idx[i]) if i >= 0 and ends[i] > lo else -1

    def waited(self, r: int, hi: int) -> int:
        """The device work runtime call ``r`` waited for, ending inside it before ``hi``."""
        lo, top = int(self.rt_start[r]), min(int(self.rt_end[r]), hi)
        d = int(self.launch_dev[r])
        if d >= 0 and lo < self.de[d] <= top:
            return d
        if not self.rt_sync[r]:
            return -1
        rank = self.threads[int(self.rt_thread[r])][0]
        stream = int(self.rt_sync_stream[r])
        if stream >= 0:
            hit = self.last_ending("stream", rank, stream, lo, top)
            if hit >= 0:
                return hit
        return self.last_ending("rank", rank, -1, lo, top)

    def cross_stream(self, d: int, after: int) -> int:
        """Work of another stream of ``d``'s device that ``d`` waited for (an event wait on
        its stream since its predecessor's launch), ending in (after, start of d]."""
        rank, stream = int(self.drank[d]), int(self.dstream[d])
        waits = self.swe.get((rank, stream))
        if waits is None:
            return -1
        p = int(self.dprev[d])
        since = int(self.ds[p]) if p >= 0 else -(1 << 62)
        if p >= 0 and self.dev_rt[p] >= 0:
            since = int(self.rt_start[self.dev_rt[p]])
        start = int(self.ds[d])
        i = int(np.searchsorted(waits, since, side="right"))
        if i >= waits.size or waits[i] > start:
            return -1
        ends, idx = self.ends_by("rank", rank, -1)
        j = int(np.searchsorted(ends, start, side="right")) - 1
        while j >= 0 and ends[j] > after:
            k = int(idx[j])
            if self.dstream[k] != stream and self.ddev[k] == self.ddev[d]:
                return k
            j -= 1
        return -1


def _segments(ctx: AnalysisContext) -> pa.Table:
    st = window.recorded_steps(ctx)  # the steps steps.run reports, in (rank, start) order
    g = _Graph(ctx.whole)
    if not g.threads:
        return SCHEMA.empty_table()
    if st.num_rows:
        d = st.select(["rank", "step", "start_ns", "end_ns"]).to_pydict()
        spans = [
            (d["rank"][i], d["step"][i], d["start_ns"][i], d["end_ns"][i], None)
            for i in range(st.num_rows)
        ]
    else:
        spans = _rank_spans(ctx, g)
    walks: list[tuple[Any, Any, int, int, npt.NDArray[np.int64]]] = []
    for rank, step, s, e, pid in spans:
        th = _step_thread(g, -1 if rank is None else rank, pid, s, e)
        if th < 0 or e <= s:
            continue
        walks.append((rank, step, s, e, _walk(g, th, rank, s, e)))
    return _table(g, walks)


def _rank_spans(ctx: AnalysisContext, g: _Graph) -> list[tuple[Any, Any, int, int, Any]]:
    """Without steps: per rank, the span of the window's host ranges."""
    out = []
    ranks: dict[int, list[int]] = {}
    for table in ("ops", "runtime"):
        if not ctx.num_rows(table):
            continue
        s, e = shared_arrays.ints(ctx, table, "start_ns"), shared_arrays.ints(ctx, table, "end_ns")
        r = shared_arrays.ints(ctx, table, "rank")
        for rk in np.unique(r).tolist():
            sel = r == rk
            lo, hi = int(s[sel].min()), int(e[sel].max())
            cur = ranks.setdefault(rk, [lo, hi])
            cur[0], cur[1] = min(cur[0], lo), max(cur[1], hi)
    for rk, (lo, hi) in sorted(ranks.items()):
        out.append((None if rk < 0 else rk, None, lo, hi, None))
    del g
    return out


def _step_thread(g: _Graph, rank: int, pid: int | None, s: int, e: int) -> int:
    """The step's thread: of the threads that made runtime calls in the step (else of
    all), the one whose first range in the step starts earliest (the thread that opens
    the step: PyTorch's main thread, not its autograd thread)."""
    best: tuple[bool, int] | None = None
    out = -1
    for th, (r, p, _t) in enumerate(g.threads):
        if r != rank or (pid is not None and p != pid):
            continue
        rows = g.thread_rows[th]
        hs = g.hs[rows]
        inside = (hs >= s) & (hs < e)
        if not inside.any():
            continue
        key = (not bool((g.hsrc[rows[inside]] == 1).any()), int(hs[inside].min()))
        if best is None or key < best:
            best, out = key, th
    return out


def _walk(g: _Graph, step_th: int, rank: Any, s: int, e: int) -> npt.NDArray[np.int64]:
    """Walk back from (step thread, e) to s; the segments (start, end, resource index,
    kind, index, thread), one row each, in time order."""
    segs: list[tuple[int, int, int, int, int, int]] = []
    chunks: list[npt.NDArray[np.int64]] = []  # latest first, like segs
    res_index = {r: i for i, r in enumerate(RESOURCES)}

    def emit(a: int, b: int, res: str, kind: int, idx: int, th: int = -1) -> None:
        if b > a:
            segs.append((a, b, res_index[res], kind, idx, th))

    def flush() -> None:
        if segs:
            chunks.append(np.array(segs, np.int64).reshape(-1, 6))
            segs.clear()

    def run_of_ranges(th: int, i: int, t: int) -> int:
        """Runs before run ``i`` of thread ``th`` back to the last stop, in one block."""
        starts, ends, lab = g.segs(th)
        k = i - 1
        j = int(g.last_stop(th)[k]) if k >= 0 else k
        lo = max(j + 1, int(starts.searchsorted(s, side="right")) - 1)
        if lo > k or ends[k] != t:
            return t
        h = lab[lo : k + 1]
        a = np.maximum(starts[lo : k + 1], s)
        res = np.where(g.hsrc[h] == 1, res_index["cpu_runtime"], res_index["cpu_op"])
        block = np.stack([a, ends[lo : k + 1], res, np.zeros_like(h), h, np.full_like(h, th)], 1)
        flush()
        chunks.append(block[::-1])
        return int(a[0])

    # kind: 0 host range index, 1 device index, 2 runtime row (launch delay), -1 none
    host, th, d, t = True, step_th, -1, e
    rank_key = -1 if rank is None else rank
    launchers = [
        x
        for x, (r, p, _t) in enumerate(g.threads)
        if r == rank_key
        and p == g.threads[step_th][1]
        and bool((g.hsrc[g.thread_rows[x]] == 1).any())
    ]
    if step_th not in launchers:
        launchers.append(step_th)
    budget = 4 * (g.hs.size + g.ds.size) + 16
    while t > s and budget > 0:
        budget -= 1
        if host:
            starts, ends, lab = g.segs(th)
            i = int(starts.searchsorted(t)) - 1
            if i < 0:
                a, h = s, -1
            elif t > ends[i]:
                a, h = int(ends[i]), -1
            else:
                a, h = int(starts[i]), int(lab[i])
            a = max(a, s)
            if h < 0:
                other, when = _other_thread(g, launchers, th, a, t)
                if other >= 0:
                    emit(when, t, "cpu_idle", -1, -1, th)
                    th, t = other, when
                    continue
                if th != step_th:  # nothing ended meanwhile: back to the step's thread
                    th = step_th
                    continue
                emit(a, t, "cpu_idle", -1, -1, th)
                t = a
                continue
            if g.hsrc[h] == 1:
                r = int(g.hrow[h])
                dw = g.waited(r, t)
                if dw >= 0 and g.de[dw] > a:
                    emit(int(g.de[dw]), t, "sync_wait", 0, h, th)
                    host, d, t = False, dw, int(g.de[dw])
                    continue
                emit(a, t, "cpu_runtime", 0, h, th)
            else:
                emit(a, t, "cpu_op", 0, h, th)
            t = a
            if t > s:
                t = run_of_ranges(th, i, t)
            continue
        # on device work d, at time t
        a = min(max(int(g.ds[d]), s), t)
        emit(a, t, _DEVICE_RESOURCE[_DEVICE[int(g.dsrc[d])]], 1, d)
        t = a
        if t <= s:
            break
        start = int(g.ds[d])
        p, lr = int(g.dprev[d]), int(g.dev_rt[d])
        ready_p = min(int(g.de[p]), start) if p >= 0 else None
        ready_l = int(g.rt_start[lr]) if lr >= 0 and g.rt_start[lr] <= start else None
        floor = max(x for x in (ready_p, ready_l, -(1 << 62)) if x is not None)
        w = g.cross_stream(d, floor)
        if w >= 0:
            ready = int(g.de[w])
            emit(max(ready, s), t, "gpu_gap", -1, -1)
            d, t = w, max(ready, s)
        elif ready_p is not None and (ready_l is None or ready_p >= ready_l):
            emit(max(ready_p, s), t, "gpu_gap", -1, -1)
            d, t = p, max(ready_p, s)
        elif ready_l is not None:
            emit(max(ready_l, s), t, "launch_delay", 2, lr, int(g.rt_thread[lr]))
            host, th, t = True, int(g.rt_thread[lr]), max(ready_l, s)
        else:  # launched before the trace: back to the step's thread
            host, th = True, step_th
    if t > s:  # the walk ran out of budget (a malformed trace): the rest is unexplained
        emit(s, t, "cpu_idle", -1, -1, step_th)
    flush()
    out = np.concatenate(chunks) if chunks else np.zeros((0, 6), np.int64)
    return out[::-1]


def _other_thread(g: _Graph, launchers: list[int], th: int, a: int, t: int) -> tuple[int, int]:
    """Another launching thread of the process whose last range before ``t`` ended in
    (a, t], the latest: the one this idle thread waited for."""
    best, when = -1, a
    for x in launchers:
        if x == th:
            continue
        starts, ends, lab = g.segs(x)
        i = int(np.searchsorted(ends, t, side="right")) - 1
        while i >= 0 and lab[i] < 0:
            i -= 1
        if i >= 0 and ends[i] > when:
            best, when = x, int(ends[i])
    return best, when


def _table(g: _Graph, walks: list[tuple[Any, Any, int, int, npt.NDArray[np.int64]]]) -> pa.Table:
    """The segments of every walk as the output table, built column by column."""
    parts = [w[4] for w in walks]
    if not parts or not sum(p.shape[0] for p in parts):
        return SCHEMA.empty_table()
    seg = np.concatenate(parts)
    sizes = [p.shape[0] for p in parts]
    a, b, res, kind, idx, th = (seg[:, k] for k in range(6))
    n = a.size
    name = np.full(n, None, object)
    category = np.full(n, None, object)
    source = np.full(n, None, object)
    row = np.full(n, -1, np.int64)
    w = g.w
    host = np.flatnonzero(kind == 0)
    hsrc, hrow = g.hsrc[idx[host]], g.hrow[idx[host]]
    for src, table in enumerate(("ops", "runtime")):
        sel = hsrc == src
        if sel.any():
            codes, labels = shared_arrays.codes(w, table, "name")
            name[host[sel]] = np.array(labels + [None], object)[codes[hrow[sel]]]
            source[host[sel]] = table
            row[host[sel]] = hrow[sel]
    launch = np.flatnonzero(kind == 2)
    if launch.size:
        name[launch] = np.array(g.rt_labels + [None], object)[g.rt_name_codes[idx[launch]]]
        source[launch] = "runtime"
        row[launch] = idx[launch]
    dev = np.flatnonzero(kind == 1)
    dsrc, drow = g.dsrc[idx[dev]], g.drow[idx[dev]]
    for src, table in enumerate(_DEVICE):
        sel = dsrc == src
        if not sel.any():
            continue
        codes, labels = g.dev_labels[table]
        label = np.array(labels + [None], object)[codes[drow[sel]]]
        at = dev[sel]
        source[at] = table
        row[at] = drow[sel]
        if table == "kernels":
            name[at] = label
            cats = kernel_codes(w).code
            category[at] = np.array(CATEGORIES, object)[cats[drow[sel]]]
        else:
            pre = "Memcpy" if table == "memcpy" else "Memset"
            category[at] = label
            name[at] = [pre + (f" {x}" if x else "") for x in label]
    on_host = (th >= 0) & (kind != 1)
    threads = np.array(g.threads, np.int64).reshape(-1, 3)
    pid = np.where(on_host, threads[np.clip(th, 0, None), 1], -1)
    tid = np.where(on_host, threads[np.clip(th, 0, None), 2], -1)
    didx = np.where(kind == 1, idx, 0)
    device = np.where(kind == 1, g.ddev[didx] if g.ddev.size else -1, -1)
    stream = np.where(kind == 1, g.dstream[didx] if g.dstream.size else -1, -1)
    step_start = np.repeat([wk[2] for wk in walks], sizes)
    step_ns = np.repeat([wk[3] - wk[2] for wk in walks], sizes)
    seq = np.concatenate([np.arange(k) for k in sizes])

    def opt(x: np.ndarray, typ: pa.DataType) -> pa.Array:
        return pa.array(x, typ, mask=x < 0)

    return pa.table(
        {
            "rank": pa.array(
                np.repeat(np.array([wk[0] for wk in walks], object), sizes), pa.int32()
            ),
            "step": pa.array(
                np.repeat(np.array([wk[1] for wk in walks], object), sizes), pa.int64()
            ),
            "step_start_ns": step_start,
            "step_ns": step_ns,
            "seq": seq,
            "start_ns": a,
            "end_ns": b,
            "duration_ns": b - a,
            "resource": pa.array(np.array(RESOURCES, object)[res], pa.string()),
            "category": pa.array(category, pa.string()),
            "name": pa.array(name, pa.string()),
            "source": pa.array(source, pa.string()),
            "source_row": opt(row, pa.int64()),
            "pid": opt(pid, pa.int32()),
            "tid": opt(tid, pa.int64()),
            "device_id": opt(device, pa.int32()),
            "stream_id": opt(stream, pa.int64()),
        },
        schema=SCHEMA,
    )
