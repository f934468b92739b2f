"""The trace as a timeline for viewers: processes, tracks, slices, flows and counters.

One model feeds both writers (``perfetto.py``, ``chrome.py``):

* a process per device (``rank R GPU D``), with a track per stream holding its kernels,
  copies and sets; a process per host process (rank, pid), with a track per thread
  holding framework ops and runtime calls, a track per thread for annotations
  (markers), and a ``steps`` track;
* kernels carry their category (the category pass's classifier), op (attribution) and
  launch configuration as arguments; a flow links each runtime launch to its kernel,
  copy or set (same rank and correlation id);
* counter tracks: memory allocated per category and reserved, per device; host samples
  per metric and index.

Viewers draw a track as a stack of properly nested slices, so slices that partially
overlap on one track (clock skew between sources, ranges that were never nested) are
moved to an extra track beside it (``... (overlap N)``): on every track slices nest
or are disjoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace.analysis.engine import shared_arrays
from tbdtrace.analysis.engine.attribution import attribute
from tbdtrace.analysis.engine.categories import CATEGORIES, kernel_categories
from tbdtrace.analysis.engine.context import AnalysisContext, Source, of
from tbdtrace.analysis.engine.grouping import dense_codes

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
# Synthetic pids of device and "host samples" processes: above any Linux pid (2^22).
DEVICE_PID_BASE = 1 << 30
# Ids shown as kernel arguments (int columns of kernels).
KERNEL_INT_ARGS = ("correlation_id",)
# The launch configuration, shown as one interned string argument (one string per
# distinct configuration, so a million kernels carry a few hundred strings).
LAUNCH_COLUMNS = (
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "registers_per_thread",
    "static_shared_bytes",
    "dynamic_shared_bytes",
)


@dataclass
class Process:
    pid: int
    name: str


@dataclass
class Track:
    process: int  # index into Timeline.processes
    name: str
    tid: int  # thread id for host threads; a synthetic id for others (Chrome needs one)
    thread: bool  # a host thread (Perfetto ThreadDescriptor) rather than a named track
    counter: bool = False


@dataclass
class Arg:
    name: str
    values: I64  # int values, or string ids when ``string``
    valid: npt.NDArray[np.bool_]
    string: bool = False


@dataclass
class Slices:
    """All slices, one row each (arrays of equal length)."""

    track: I64
    start: I64
    end: I64
    name: I64  # string id
    cat: I64  # string id
    flow_out: I64  # flow id leaving this slice (0 = none)
    flow_in: I64  # flow id ending at this slice (0 = none)
    args: list[Arg]
    source: I64  # index into SOURCES: which table the row came from


SOURCES = ("kernels", "memcpy", "memset", "runtime", "ops", "markers", "steps", "critical_path")


@dataclass
class Timeline:
    processes: list[Process] = field(default_factory=list)
    tracks: list[Track] = field(default_factory=list)
    strings: list[str] = field(default_factory=list)
    slices: Slices | None = None
    counter_track: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    counter_ts: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    counter_value: F64 = field(default_factory=lambda: np.zeros(0, np.float64))
    _ids: dict[str, int] = field(default_factory=dict)
    _procs: dict[tuple[object, ...], int] = field(default_factory=dict)
    _tracks: dict[tuple[object, ...], int] = field(default_factory=dict)

    def intern(self, s: str) -> int:
        if s not in self._ids:
            self._ids[s] = len(self.strings)
            self.strings.append(s)
        return self._ids[s]

    def intern_labels(self, labels: list[str | None], none: str) -> I64:
        return np.array([self.intern(x if x is not None else none) for x in labels], np.int64)

    def process(self, key: tuple[object, ...], pid: int, name: str) -> int:
        if key not in self._procs:
            self._procs[key] = len(self.processes)
            self.processes.append(Process(pid, name))
        return self._procs[key]

    def track(self, key: tuple[object, ...], make: Track) -> int:
        if key not in self._tracks:
            self._tracks[key] = len(self.tracks)
            self.tracks.append(make)
        return self._tracks[key]


def groups(*cols: I64) -> tuple[list[tuple[int, ...]], I64]:
    """Distinct rows of the columns (first-seen order) and each row's group: hash
    grouping, linear time (np.unique over rows sorts). The rows are packed into one
    int64 code (a column's value less its minimum where its range is narrow, its dense
    code otherwise), whose distinct values are taken in first-seen order."""
    code = np.zeros(len(cols[0]), np.int64)
    span = 1  # codes so far are < span
    for c in cols:
        c = np.asarray(c, np.int64)
        lo = int(c.min()) if len(c) else 0
        k = int(c.max()) - lo + 1 if len(c) else 1
        if k <= 1 << 16:  # a narrow range (devices, launch sizes): the value is its code
            cc = c - lo
        else:
            cc, vals = dense_codes(c)
            k = max(len(vals), 1)
        if span * k >= 1 << 62:  # re-densify so the packed key stays in int64
            code, firsts = dense_codes(code)
            span = max(len(firsts), 1)
        code = code * k + cc
        span *= k
    inv, firsts = dense_codes(code)
    first_row = np.zeros(len(firsts), np.int64)
    first_row[inv[::-1]] = np.arange(len(inv) - 1, -1, -1)
    uniq = list(zip(*(np.asarray(c, np.int64)[first_row].tolist() for c in cols), strict=True))
    return uniq, inv


# Columns build() reads, per table: read together, one pass over each file.
COLUMNS = {
    "kernels": (
        "start_ns",
        "end_ns",
        "rank",
        "pid",
        "tid",
        "device_id",
        "device_type",
        "stream_id",
        "name",
        "correlation_id",
        "external_id",
        *LAUNCH_COLUMNS,
    ),
    "memcpy": (
        "start_ns",
        "end_ns",
        "rank",
        "device_id",
        "device_type",
        "stream_id",
        "copy_kind",
        "bytes",
        "correlation_id",
    ),
    "memset": (
        "start_ns",
        "end_ns",
        "rank",
        "device_id",
        "device_type",
        "stream_id",
        "memory_kind",
        "bytes",
        "correlation_id",
    ),
    "runtime": ("start_ns", "end_ns", "rank", "pid", "tid", "name", "correlation_id"),
}


def build(ctx: Source, window: Any = None, critical_path: bool = False) -> Timeline:
    """The timeline of a trace or an analysis context (see the module doc); with
    ``window`` (a :class:`tbdtrace.analysis.engine.window.Window`), of what is inside it:
    the window's rows (device work placed by its launch, host ranges that overlap it),
    flows between them, and counter values inside it (memory levels from the whole trace,
    so each starts at its level when the window opens). ``critical_path``: each step's
    critical path (``passes/critical_path.py``) as a track of its segments per rank
    (process "critical path"), and an argument ``critical_path`` = 1 on every slice the
    paths go through."""
    ctx = of(ctx)
    base = ctx
    if window is not None:
        ctx = ctx.windowed(window)
    tl = Timeline()
    for table, cols in COLUMNS.items():
        if ctx.num_rows(table):
            ctx.prefetch(table, cols)
    parts: list[dict[str, object]] = []
    flows = _flows(ctx)
    for i, table in enumerate(("kernels", "memcpy", "memset")):
        if ctx.num_rows(table):
            parts.append(_device_part(ctx, tl, table, i, flows))
    for table in ("runtime", "ops", "markers"):
        if ctx.num_rows(table):
            parts.append(_host_part(ctx, tl, table, flows))
    if ctx.num_rows("steps"):
        parts.append(_steps_part(ctx, tl))
    if critical_path:
        _mark_path(ctx, tl, parts)
    tl.slices = _concat(parts)
    _split_overlaps(tl)
    _counters(ctx, tl, base, window)
    return tl


def _rank_pid(ctx: AnalysisContext, table: str) -> tuple[I64, I64]:
    return shared_arrays.ints(ctx, table, "rank"), shared_arrays.ints(ctx, table, "pid")


def _labels(ctx: AnalysisContext, tl: Timeline, table: str, column: str, none: str) -> I64:
    codes, labels = shared_arrays.codes(ctx, table, column)
    lut = tl.intern_labels(labels, none)
    return lut[codes] if len(lut) else np.full(len(codes), tl.intern(none), np.int64)


def _flows(ctx: AnalysisContext) -> dict[str, I64]:
    """Per device table, the flow id of each row (runtime row index + 1; 0 = none)."""
    return {
        t: np.add(shared_arrays.runtime_match(ctx, t), 1, dtype=np.int64)
        for t in ("kernels", "memcpy", "memset")
        if ctx.num_rows(t) and ctx.num_rows("runtime")
    }


def _device_part(
    ctx: AnalysisContext, tl: Timeline, table: str, source: int, flows: dict[str, I64]
) -> dict[str, object]:
    n = ctx.num_rows(table)
    rank = shared_arrays.ints(ctx, table, "rank")
    dev = shared_arrays.ints(ctx, table, "device_id")
    dtype_codes, dtype_labels = shared_arrays.codes(ctx, table, "device_type")
    stream = shared_arrays.ints(ctx, table, "stream_id")
    uniq, inv = groups(rank, dev, np.asarray(dtype_codes, np.int64), stream)
    track_of = np.empty(len(uniq), np.int64)
    for j, (r, d, tcode, s) in enumerate(uniq):
        dtype = dtype_labels[tcode] if 0 <= tcode < len(dtype_labels) else None
        track_of[j] = tl.track(("stream", r, d, dtype, s), _stream_track(tl, r, d, dtype, s))
    t = tl.intern
    if table == "kernels":
        name = _labels(ctx, tl, table, "name", "(unnamed kernel)")
        cat_lut = np.array([t(f"kernel,{c}") for c in CATEGORIES], np.int64)
        cat = cat_lut[kernel_categories(ctx.table(table, ["name"]))]
        launch = _launch(ctx, tl)
        args = [launch] if launch is not None else []
        args += [Arg(c, *_int_arg(ctx, table, c)) for c in KERNEL_INT_ARGS if _has(ctx, table, c)]
        att = attribute(ctx)
        if (att.op >= 0).any():
            op_lut = tl.intern_labels(list(att.op_labels), "")
            args.append(Arg("op", op_lut[np.clip(att.op, 0, None)], att.op >= 0, string=True))
    else:
        kinds = "copy_kind" if table == "memcpy" else "memory_kind"
        codes, labels = shared_arrays.codes(ctx, table, kinds)
        pre = "Memcpy" if table == "memcpy" else "Memset"
        lut = np.array([t(f"{pre} {x}" if x else pre) for x in labels], np.int64)
        name = lut[codes] if len(lut) else np.full(n, t(pre), np.int64)
        cat = np.full(n, t(table), np.int64)
        args = [Arg(c, *_int_arg(ctx, table, c)) for c in ("bytes", "correlation_id")]
    return {
        "track": track_of[inv],
        "start": shared_arrays.ints(ctx, table, "start_ns"),
        "end": shared_arrays.ints(ctx, table, "end_ns"),
        "name": name,
        "cat": cat,
        "flow_in": flows.get(table, np.zeros(n, np.int64)),
        "flow_out": np.zeros(n, np.int64),
        "args": args,
        "source": np.full(n, SOURCES.index(table), np.int64),
    }


def _launch(ctx: AnalysisContext, tl: Timeline) -> Arg | None:
    """The launch configuration as one string argument, e.g.
    "grid [256, 1, 1] block [128, 1, 1] registers 32 shared 0+1024 B" (static+dynamic)."""
    if not _has(ctx, "kernels", "grid_x"):
        return None
    vals = [shared_arrays.ints(ctx, "kernels", c, -1, keep=False) for c in LAUNCH_COLUMNS]
    uniq, inv = groups(*vals)

    def text(u: tuple[int, ...]) -> str:
        def dim(x: tuple[int, ...]) -> str:
            return "[" + ", ".join(str(v) if v >= 0 else "?" for v in x) + "]"

        out = f"grid {dim(u[0:3])} block {dim(u[3:6])}"
        if u[6] >= 0:
            out += f" registers {u[6]}"
        if u[7] >= 0 or u[8] >= 0:
            out += f" shared {max(u[7], 0)}+{max(u[8], 0)} B"
        return out

    lut = np.array([tl.intern(text(u)) for u in uniq], np.int64)
    valid = _bools(ctx.column("kernels", "grid_x").is_valid())
    return Arg("launch", lut[inv], valid, string=True)


def _has(ctx: AnalysisContext, table: str, column: str) -> bool:
    return shared_arrays.has_values(ctx, table, column)


def _int_arg(ctx: AnalysisContext, table: str, column: str) -> tuple[I64, npt.NDArray[np.bool_]]:
    col = ctx.column(table, column)
    valid = (
        np.ones(len(col), bool)
        if col.null_count == 0
        else np.asarray(col.is_valid().to_numpy(zero_copy_only=False), bool)
    )
    return shared_arrays.ints(ctx, table, column, 0, keep=False), valid


def _stream_track(tl: Timeline, rank: int, dev: int, dtype: str | None, stream: int) -> Track:
    what = "CPU" if dtype == "cpu" else "GPU"
    pname = (f"rank {rank} " if rank >= 0 else "") + f"{what} {dev if dev >= 0 else '?'}"
    p = tl.process(("device", rank, dev, dtype), DEVICE_PID_BASE + len(tl.processes), pname)
    name = f"stream {stream}" if stream >= 0 else "device"
    return Track(p, name, DEVICE_PID_BASE + len(tl.tracks), thread=False)


def _host_process(tl: Timeline, rank: int, pid: int) -> int:
    key = ("host", rank, pid)
    if key in tl._procs:
        return tl._procs[key]
    name = (f"rank {rank} " if rank >= 0 else "") + (f"process {pid}" if pid >= 0 else "host")
    out = pid if pid >= 0 else DEVICE_PID_BASE - 1 - max(rank, 0)
    if any(p.pid == out for p in tl.processes):
        # the same pid on another rank (another machine): viewers would merge them
        out = DEVICE_PID_BASE - (1 << 20) - len(tl.processes)
    return tl.process(key, out, name)


def _host_part(
    ctx: AnalysisContext, tl: Timeline, table: str, flows: dict[str, I64]
) -> dict[str, object]:
    n = ctx.num_rows(table)
    rank, pid = _rank_pid(ctx, table)
    tid = shared_arrays.ints(ctx, table, "tid")
    uniq, inv = groups(rank, pid, tid)
    track_of = np.empty(len(uniq), np.int64)
    suffix = " annotations" if table == "markers" else ""
    for j, (r, p, th) in enumerate(uniq):
        proc = _host_process(tl, r, p)
        label = (f"thread {th}" if th >= 0 else "threads") + suffix
        real = th >= 0 and not suffix
        tid_out = th if real else DEVICE_PID_BASE + len(tl.tracks)
        track_of[j] = tl.track(("thread", r, p, th, suffix), Track(proc, label, tid_out, real))
    name = _labels(ctx, tl, table, "name", f"({table})")
    args: list[Arg] = []
    flow_out = np.zeros(n, np.int64)
    if table == "runtime":
        cat = np.full(n, tl.intern("cuda_runtime"), np.int64)
        args.append(Arg("correlation_id", *_int_arg(ctx, table, "correlation_id")))
        for f in flows.values():
            hit = f[f > 0]
            flow_out[hit - 1] = hit
    elif table == "ops":
        cat = _labels(ctx, tl, table, "category", "op")
        for c in ("external_id", "sequence_number"):
            if _has(ctx, table, c):
                args.append(Arg(c, *_int_arg(ctx, table, c)))
        if _has(ctx, table, "input_shapes"):
            shapes = _labels(ctx, tl, table, "input_shapes", "")
            valid = ctx.column(table, "input_shapes").is_valid()
            args.append(Arg("input_shapes", shapes, _bools(valid), string=True))
    else:
        cat = _labels(ctx, tl, table, "domain", "annotation")
    return {
        "track": track_of[inv],
        "start": shared_arrays.ints(ctx, table, "start_ns"),
        "end": shared_arrays.ints(ctx, table, "end_ns"),
        "name": name,
        "cat": cat,
        "flow_in": np.zeros(n, np.int64),
        "flow_out": flow_out,
        "args": args,
        "source": np.full(n, SOURCES.index(table), np.int64),
    }


def _bools(arr: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.bool_]:
    return np.asarray(arr.to_numpy(zero_copy_only=False), bool)


def _steps_part(ctx: AnalysisContext, tl: Timeline) -> dict[str, object]:
    n = ctx.num_rows("steps")
    rank, pid = _rank_pid(ctx, "steps")
    step = shared_arrays.ints(ctx, "steps", "step")
    warm = ctx.column("steps", "warmup")
    warm_b = _bools(warm) & _bools(warm.is_valid()) if len(warm) else np.zeros(0, bool)
    track = np.empty(n, np.int64)
    names = np.empty(n, np.int64)
    for i in range(n):
        proc = _host_process(tl, int(rank[i]), int(pid[i]))
        track[i] = tl.track(
            ("steps", proc), Track(proc, "steps", DEVICE_PID_BASE + len(tl.tracks), False)
        )
        names[i] = tl.intern(f"step {step[i]}" + (" (warm-up)" if warm_b[i] else ""))
    return {
        "track": track,
        "start": shared_arrays.ints(ctx, "steps", "start_ns"),
        "end": shared_arrays.ints(ctx, "steps", "end_ns"),
        "name": names,
        "cat": np.full(n, tl.intern("step"), np.int64),
        "flow_in": np.zeros(n, np.int64),
        "flow_out": np.zeros(n, np.int64),
        "args": [Arg("warmup", warm_b.astype(np.int64), np.ones(n, bool))],
        "source": np.full(n, SOURCES.index("steps"), np.int64),
    }


def _mark_path(ctx: AnalysisContext, tl: Timeline, parts: list[dict[str, object]]) -> None:
    """The critical path of each step of ``ctx``: a track of its segments per rank, and
    the argument ``critical_path`` = 1 on the slices of the rows it goes through."""
    from tbdtrace.analysis.passes import critical_path

    seg = critical_path.run(ctx)
    n = seg.num_rows
    source = np.array([x or "" for x in seg.column("source").to_pylist()], object)
    src_row = np.asarray(seg.column("source_row").fill_null(-1).to_numpy(), np.int64)
    for p in parts:
        table = SOURCES[int(np.asarray(p["source"])[0])] if len(np.asarray(p["source"])) else ""
        sel = src_row[(source == table) & (src_row >= 0)]
        if not sel.size:
            continue
        kept = ctx.kept_rows(table)
        if kept is not None:  # whole-trace rows -> this window's rows
            pos = np.searchsorted(kept, sel)
            ok = pos < kept.size
            ok[ok] = kept[pos[ok]] == sel[ok]
            sel = pos[ok]
        on = np.zeros(len(np.asarray(p["start"])), bool)
        on[sel] = True
        p["args"].append(Arg("critical_path", on.astype(np.int64), on))  # type: ignore[attr-defined]
    if not n:
        return
    rank = np.asarray(seg.column("rank").fill_null(-1).to_numpy(), np.int64)
    track = np.empty(n, np.int64)
    for r in np.unique(rank).tolist():
        proc = tl.process(
            ("critical path", r),
            DEVICE_PID_BASE - (1 << 22) - max(r, 0),
            (f"rank {r} " if r >= 0 else "") + "critical path",
        )
        track[rank == r] = tl.track(
            ("critical path", r),
            Track(proc, "critical path", DEVICE_PID_BASE + len(tl.tracks), False),
        )
    res = seg.column("resource").to_pylist()
    names = seg.column("name").to_pylist()
    step = seg.column("step")
    parts.append(
        {
            "track": track,
            "start": np.asarray(seg.column("start_ns").to_numpy(), np.int64),
            "end": np.asarray(seg.column("end_ns").to_numpy(), np.int64),
            "name": np.array(
                [tl.intern(x or r) for x, r in zip(names, res, strict=True)], np.int64
            ),
            "cat": np.array([tl.intern(f"critical_path,{r}") for r in res], np.int64),
            "flow_in": np.zeros(n, np.int64),
            "flow_out": np.zeros(n, np.int64),
            "args": [
                Arg(
                    "resource",
                    np.array([tl.intern(r) for r in res], np.int64),
                    np.ones(n, bool),
                    True,
                ),
                Arg(
                    "step",
                    np.asarray(step.fill_null(0).to_numpy(), np.int64),
                    _bools(step.is_valid()),
                ),
            ],
            "source": np.full(n, SOURCES.index("critical_path"), np.int64),
        }
    )


def _concat(parts: list[dict[str, object]]) -> Slices:
    """The parts' rows as one set of slices. Each part's columns are dropped from it as
    they are copied, so the parts' own arrays are freed along the way (the peak of the
    build: the heap it reaches is what the export touches)."""
    cols = ("track", "start", "end", "name", "cat", "flow_out", "flow_in", "source")
    sizes = [len(np.asarray(p["start"])) for p in parts]
    arrays = {
        c: np.concatenate([np.asarray(p.pop(c), np.int64) for p in parts])
        if parts
        else np.zeros(0, np.int64)
        for c in cols
    }
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    total = int(offsets[-1])
    merged: dict[tuple[str, bool], Arg] = {}
    for p, lo, hi in zip(parts, offsets[:-1], offsets[1:], strict=True):
        for a in p.pop("args"):  # type: ignore[attr-defined]
            key = (a.name, a.string)
            if key not in merged:
                merged[key] = Arg(
                    a.name, np.zeros(total, np.int64), np.zeros(total, bool), a.string
                )
            merged[key].values[lo:hi] = a.values
            merged[key].valid[lo:hi] = a.valid
    return Slices(args=list(merged.values()), **arrays)  # type: ignore[arg-type]


def slice_order(track: I64, start: I64, end: I64) -> I64:
    """The slices' indices by track, then start, then the longer first (then index):
    ``np.lexsort((-end, start, track))``. Track and start are packed into one int64 key
    where they fit (one sort instead of three); rows whose key ties are then ordered by
    their end."""
    n = len(track)
    if n < 2:
        return np.arange(n, dtype=np.int64)
    lo = int(start.min())
    bits = (int(start.max()) - lo).bit_length()
    if int(track.min()) < 0 or int(track.max()).bit_length() + bits > 62:
        return np.lexsort((-end, start, track))
    k = (track << bits) | (start - lo)
    order = np.argsort(k, kind="stable")
    ks = k[order]
    tie = ks[1:] == ks[:-1]
    if tie.any():  # the tied runs, by (key, -end, index): the one order lexsort gives
        at = np.flatnonzero(np.concatenate(([False], tie)) | np.concatenate((tie, [False])))
        sub = order[at]
        order[at] = sub[np.lexsort((sub, -end[sub], ks[at]))]
    return order


def lanes(track: I64, start: I64, end: I64) -> I64:
    """Per slice, the lane (0, 1, ...) that keeps slices on each (track, lane) nested
    or disjoint: greedy, in order of start, the longer first."""
    n = len(track)
    lane = np.zeros(n, np.int64)
    if n < 2:
        return lane
    order = slice_order(track, start, end)
    t, s, e = track[order], start[order], end[order]
    # A track whose consecutive slices are all disjoint is all disjoint (lane 0, no
    # loop); only tracks with some overlap need the stack walk.
    overlap = (t[1:] == t[:-1]) & (s[1:] < e[:-1])
    bad = np.unique(t[1:][overlap])
    for tr in bad.tolist():
        lo, hi = np.searchsorted(t, [tr, tr + 1])
        # Clusters: runs of slices each starting before all earlier ones ended; a slice
        # alone in its cluster is on lane 0, only the others need the walk.
        reach = np.maximum.accumulate(e[lo:hi])
        new = np.concatenate(([True], s[lo + 1 : hi] >= reach[:-1]))
        cid = np.cumsum(new) - 1
        size = np.bincount(cid)
        # A pair: the second is on lane 1 when it ends after the first (a partial
        # overlap), else it nests on lane 0, as the walk would place it.
        pair = np.flatnonzero((size[cid] == 2) & ~new)
        if pair.size:
            second = lo + pair
            lane[order[second]] = e[second] > e[second - 1]
        busy = np.flatnonzero(size[cid] > 2)
        if busy.size:
            idx = lo + busy
            lane[order[idx]] = _walk(s[idx].tolist(), e[idx].tolist())
    return lane


def _walk(s: list[int], e: list[int]) -> list[int]:
    stacks: list[list[int]] = []
    out = [0] * len(s)
    for i, (si, ei) in enumerate(zip(s, e, strict=True)):
        for k, st in enumerate(stacks):
            while st and st[-1] <= si:
                st.pop()
            if not st or st[-1] >= ei:
                st.append(ei)
                out[i] = k
                break
        else:
            stacks.append([ei])
            out[i] = len(stacks) - 1
    return out


def _split_overlaps(tl: Timeline) -> None:
    sl = tl.slices
    assert sl is not None
    lane = lanes(sl.track, sl.start, sl.end)
    moved = np.flatnonzero(lane)
    if not moved.size:
        return
    pairs, inv = groups(sl.track[moved], lane[moved])
    new = np.empty(len(pairs), np.int64)
    for j, (tr, ln) in enumerate(pairs):
        base = tl.tracks[tr]
        new[j] = tl.track(
            ("overlap", tr, ln),
            Track(
                base.process, f"{base.name} (overlap {ln})", DEVICE_PID_BASE + len(tl.tracks), False
            ),
        )
    sl.track = sl.track.copy()
    sl.track[moved] = new[inv]


def _counters(ctx: AnalysisContext, tl: Timeline, base: AnalysisContext, window: Any) -> None:
    """Memory and host-sample counters: host samples of ``ctx`` (a window keeps those that
    cover it), memory levels computed on the whole trace ``base`` and kept inside the
    window, each series starting with its level where the window opens."""
    tracks, ts, vals = [], [], []
    if base.num_rows("memory"):
        for tr, t, v, r in _memory_counters(base, tl):
            if window is not None:
                t, v = _inside(window, r, t, v)
            tracks.append(np.full(len(t), tr, np.int64))
            ts.append(t)
            vals.append(v)
    if ctx.num_rows("host_samples"):
        metric = _labels(ctx, tl, "host_samples", "metric", "sample")
        index = shared_arrays.ints(ctx, "host_samples", "index")
        t = shared_arrays.ints(ctx, "host_samples", "ts_ns")
        v = np.asarray(ctx.column("host_samples", "value").to_numpy(), np.float64)
        proc = tl.process(("host samples",), DEVICE_PID_BASE - (1 << 21), "host samples")
        uniq, inv = groups(metric, index)
        lut = np.array(
            [
                tl.track(
                    ("sample", m, i),
                    Track(
                        proc,
                        _sample_name(tl.strings[m], i),
                        DEVICE_PID_BASE + len(tl.tracks),
                        False,
                        True,
                    ),
                )
                for m, i in uniq
            ],
            np.int64,
        )
        tracks.append(lut[inv])
        ts.append(t)
        vals.append(v)
    if tracks:
        tl.counter_track = np.concatenate(tracks)
        tl.counter_ts = np.concatenate(ts)
        tl.counter_value = np.concatenate(vals)


def _sample_name(metric: str, index: int) -> str:
    if index < 0:
        return metric
    return f"{metric} {'core' if metric.startswith('cpu') else 'device'} {index}"


def _inside(window: Any, rank: int, t: I64, v: F64) -> tuple[I64, F64]:
    """A counter series of ``rank`` cut to its window: the points inside, led by the
    level when the window opens (the last value before it, stamped at the start)."""
    keys, lo, hi = window.bounds()
    i = int(np.searchsorted(keys, rank))
    if i < len(keys) and keys[i] == rank:
        a, b = int(lo[i]), int(hi[i])
    else:
        a, b = window.default
    inside = (t >= a) & (t < b)
    before = np.flatnonzero(t < a)
    if before.size and a < b:
        j = int(before[-1])
        return np.r_[np.int64(a), t[inside]], np.r_[v[j], v[inside]]
    return t[inside], v[inside]


def _memory_counters(ctx: AnalysisContext, tl: Timeline) -> list[tuple[int, I64, F64, int]]:
    """Per device: live allocated bytes per category and live reserved bytes over time,
    from the memory pass's timeline (blocks paired; a free whose alloc predates the
    capture is left out, so no series goes negative; docs/MEMORY.md), with the rank
    key (-1: none) of each series."""
    from tbdtrace.analysis.passes import memory

    mt = memory.run(ctx)
    if not mt.num_rows:
        return []
    t = mt["ts_ns"].to_numpy()
    sign = np.where(np.asarray(mt["action"].to_numpy(zero_copy_only=False)) == "alloc", 1, -1)
    delta = sign * mt["bytes"].to_numpy()
    cols = []
    labels = []
    for colname in ("level", "device_type", "category"):
        codes, lab = dense_codes_of(mt[colname])
        cols.append(codes)
        labels.append(lab)
    rank = np.asarray(mt["rank"].fill_null(-1).to_numpy(), np.int64)
    dev = np.asarray(mt["device_id"].fill_null(-1).to_numpy(), np.int64)
    level_l, dtype_l, cat_l = labels
    reserved = np.array([x == "reserved" for x in level_l], bool)[cols[0]]
    cat = np.where(reserved, -1, cols[2])  # reserved: one series, not per category
    uniq, inv = groups(cols[0], rank, dev, cols[1], cat)
    order = np.argsort(inv, kind="stable")  # rows are in time order within a level
    bounds = np.searchsorted(inv[order], np.arange(len(uniq) + 1))
    out = []
    for j, (lv, r, d, tcode, c) in enumerate(uniq):
        sel = order[bounds[j] : bounds[j + 1]]
        dtype = dtype_l[tcode]
        if d < 0 or dtype == "cpu":
            proc = _host_process(tl, r, -1)
        else:
            proc = tl.process(("device", r, d, dtype), DEVICE_PID_BASE + len(tl.processes), "")
            if not tl.processes[proc].name:
                tl.processes[proc].name = (f"rank {r} " if r >= 0 else "") + f"GPU {d}"
        name = "memory reserved (bytes)" if c < 0 else f"memory {level_l[lv]}: {cat_l[c]} (bytes)"
        tr = tl.track(
            ("mem", proc, name),
            Track(proc, name, DEVICE_PID_BASE + len(tl.tracks), False, True),
        )
        out.append((tr, t[sel], np.cumsum(delta[sel]).astype(np.float64), r))
    return out


def dense_codes_of(col: pa.ChunkedArray) -> tuple[I64, list[str]]:
    """A string column as (codes, labels); null is the label "unknown"."""
    arr = col.combine_chunks().fill_null("unknown").dictionary_encode()
    return arr.indices.to_numpy().astype(np.int64), [str(x) for x in arr.dictionary.to_pylist()]
