"""Training iterations of one process, found after the fact in what the trace has.

An *iteration* is one backward pass with the forward before it and the optimizer after
it. The post-hoc labeller (:mod:`.posthoc`) reads allocations against these phases; no
hook in the training process marks them. Per process:

* **backward** comes from the threads that do the work. PyTorch runs a CUDA backward on
  the autograd engine's device thread, not on the thread that called ``backward()``: the
  CUPTI runtime records of kernel launches, copies and sets on another thread than the
  step's *main* thread (the thread of the step's first launch) are backward, and each
  unbroken run of them (no main-thread launch between) is one backward pass. A
  torch.profiler trace names its backward ops instead
  (``autograd::engine::evaluate_function: ...``, on any thread; the CPU engine runs on the
  calling thread), and those are used when present. A backward pass begins where the
  main thread's last launch before it ends (the engine allocates before it launches) and
  ends with its last launch;
* **iteration bounds** come from the steps (the harness steps table, NVTX ``step N``
  ranges, ``ProfilerStep#N``): an iteration starts at its step's start and ends at its
  step's end; with several backward passes in one step (gradient accumulation), each one
  after the first starts where the previous backward ended, and only the last has an
  optimizer phase. Without steps an iteration starts where the previous one ended (the
  first at the process's first launch or op) and ends at the first optimizer mark after
  its backward (the end of a profiler ``Optimizer.step#...`` range, or a step-boundary
  snapshot time), else at its backward's end;
* **forward** is the iteration up to its backward; its first *work* (main-thread launch
  or non-backward op) splits off what the step made before computing (``pre``);
* **optimizer** is the rest of the iteration after backward; it begins at the first
  main-thread work after backward (the engine's own frees come before).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace import trace as trace_io
from tbdtrace.analysis.engine.grouping import dict_codes
from tbdtrace.arrow_ints import int_column

I64 = npt.NDArray[np.int64]
# Runtime/driver calls that put work on a device: kernel and graph launches, copies, sets.
LAUNCH = re.compile(r"launch|memcpy|memset", re.IGNORECASE)
BACKWARD_OP = "autograd::engine::evaluate_function:"
OP_CATEGORIES = frozenset({"cpu_op", "Operator"})
STEP_MARKER = re.compile(r"step -?[0-9]+|ProfilerStep#[0-9]+")
OPTIMIZER_MARKER = re.compile(r"Optimizer\.step#.*")


@dataclass(frozen=True)
class Iterations:
    """One entry per backward pass, in time order (all arrays int64 ns, same length)."""

    start_ns: I64  # the iteration's start: its step's, else the previous iteration's end
    work_ns: I64  # first forward work on the main thread (bwd_start_ns when none)
    bwd_start_ns: I64  # backward begins (the main thread's last launch before it ends)
    bwd_end_ns: I64  # the backward pass's last launch or op ends
    opt_start_ns: I64  # first main-thread work after backward (end_ns when none)
    end_ns: I64  # the iteration's end: its step's, else the optimizer mark after backward
    source: str  # "ops", "launch_threads" or "none": where backward was seen
    steps: int  # step windows the process has

    def __len__(self) -> int:
        return int(self.start_ns.size)

    @classmethod
    def empty(cls, source: str = "none", steps: int = 0) -> Iterations:
        z = np.zeros(0, np.int64)
        return cls(z, z, z, z, z, z, source, steps)


def _table(tables: Mapping[str, Any], name: str, cols: list[str]) -> pa.Table | None:
    t = tables.get(name)
    if t is None:
        return None
    if not isinstance(t, pa.Table):
        t = trace_io.to_table(name, {k: v for k, v in t.items() if k in cols or k == "pid"})
    have = [c for c in cols if c in t.column_names]
    return t.select(have) if t.num_rows else None


def _of_pid(t: pa.Table | None, pid: int | None) -> pa.Table | None:
    """Rows of ``pid`` (and rows without a pid); all rows when ``pid`` is None."""
    if t is None or pid is None or "pid" not in t.column_names:
        return t
    p = int_column(t, "pid", -1)
    keep = (p == pid) | (p == -1)
    return t.filter(pa.array(keep)) if not keep.all() else t


def _matches(t: pa.Table, test: Callable[[str], bool], col: str = "name") -> npt.NDArray[np.bool_]:
    """Per row: does ``test`` hold for its ``col`` string (tested once per distinct value)?"""
    codes, labels = dict_codes(t, col)
    hit = np.array([bool(lbl is not None and test(lbl)) for lbl in labels] or [False])
    return hit[codes] if codes.size else np.zeros(t.num_rows, dtype=bool)


def step_windows(tables: Mapping[str, Any], pid: int | None) -> tuple[I64, I64]:
    """(starts, ends) of the process's steps, sorted: the steps table, else NVTX ``step N``
    ranges or ``ProfilerStep#N`` ranges in ``markers`` (or ``ops``)."""
    st = _of_pid(_table(tables, "steps", ["start_ns", "end_ns", "pid"]), pid)
    if st is not None and st.num_rows:
        s, e = int_column(st, "start_ns"), int_column(st, "end_ns")
    else:
        s, e = np.zeros(0, np.int64), np.zeros(0, np.int64)
        for name in ("markers", "ops"):
            t = _of_pid(_table(tables, name, ["start_ns", "end_ns", "pid", "name"]), pid)
            if t is None:
                continue
            hit = _matches(t, lambda n: bool(STEP_MARKER.fullmatch(n)))
            if hit.any():
                s, e = int_column(t, "start_ns")[hit], int_column(t, "end_ns")[hit]
                break
    order = np.argsort(s, kind="stable")
    return s[order], e[order]


def optimizer_marks(tables: Mapping[str, Any], pid: int | None) -> I64:
    """Ends of profiler ``Optimizer.step#...`` ranges (markers or ops) of the process."""
    out = []
    for name in ("markers", "ops"):
        t = _of_pid(_table(tables, name, ["start_ns", "end_ns", "pid", "name"]), pid)
        if t is None:
            continue
        hit = _matches(t, lambda n: bool(OPTIMIZER_MARKER.fullmatch(n)))
        out.append(int_column(t, "end_ns")[hit])
    return np.sort(np.concatenate(out)) if out else np.zeros(0, np.int64)


@dataclass(frozen=True)
class _Work:
    """Work events of one process in start order, each flagged backward or not."""

    start: I64
    end: I64
    bwd: npt.NDArray[np.bool_]
    source: str


def _from_ops(tables: Mapping[str, Any], pid: int | None) -> _Work | None:
    """Ops of a torch.profiler trace; None when none is a backward op."""
    t = _of_pid(
        _table(tables, "ops", ["start_ns", "end_ns", "pid", "tid", "name", "category"]), pid
    )
    if t is None or "category" not in t.column_names:
        return None
    keep = _matches(t, lambda c: c in OP_CATEGORIES, "category")
    bwd_op = _matches(t, lambda n: n.startswith(BACKWARD_OP))[keep]
    if not bwd_op.any():
        return None
    sel = pa.array(keep)
    start = int_column(t.filter(sel), "start_ns")
    end = int_column(t.filter(sel), "end_ns")
    tid = int_column(t.filter(sel), "tid", -1)
    inside = bwd_op.copy()
    # An op nested in a backward op (its start within one, same thread) is backward too.
    for th in np.unique(tid[bwd_op]):
        on = tid == th
        b = np.flatnonzero(bwd_op & on)
        b = b[np.argsort(start[b], kind="stable")]
        reach = np.maximum.accumulate(end[b])
        idx = np.flatnonzero(on)
        j = np.searchsorted(start[b], start[idx], side="right") - 1
        ok = j >= 0
        inside[idx[ok]] |= start[idx[ok]] <= reach[j[ok]]
    order = np.argsort(start, kind="stable")
    return _Work(start[order], end[order], inside[order], "ops")


def _from_launches(tables: Mapping[str, Any], pid: int | None, steps: tuple[I64, I64]) -> _Work:
    """CUPTI runtime launches; a launch is backward when not on its step's main thread."""
    t = _of_pid(_table(tables, "runtime", ["start_ns", "end_ns", "pid", "tid", "name"]), pid)
    if t is None:
        z = np.zeros(0, np.int64)
        return _Work(z, z, np.zeros(0, bool), "none")
    hit = _matches(t, lambda n: bool(LAUNCH.search(n)))
    start = int_column(t, "start_ns")[hit]
    end = int_column(t, "end_ns")[hit]
    tid = int_column(t, "tid", -1)[hit]
    order = np.argsort(start, kind="stable")
    start, end, tid = start[order], end[order], tid[order]
    if not start.size:
        return _Work(start, end, np.zeros(0, bool), "none")
    main = np.full(start.size, tid[0], dtype=np.int64)  # outside steps: the first launcher
    k = _step_of(start, steps)
    for step in np.unique(k[k >= 0]):
        m = k == step
        main[m] = tid[np.flatnonzero(m)[0]]
    return _Work(start, end, tid != main, "launch_threads")


def _step_of(t: I64, steps: tuple[I64, I64]) -> I64:
    """Per time: the index of the step window holding it, -1 for none."""
    s0, e0 = steps
    if not s0.size:
        return np.full(t.size, -1, dtype=np.int64)
    k = np.searchsorted(s0, t, side="right") - 1
    k[(k >= 0) & (t >= e0[np.maximum(k, 0)])] = -1
    return k.astype(np.int64)


def _runs(w: _Work) -> tuple[I64, I64]:
    """(backward start, backward end) of each unbroken run of backward work."""
    b = w.bwd.astype(np.int8)
    edges = np.diff(np.concatenate([[0], b, [0]]))
    first, stop = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)  # [first, stop)
    bwd_end = np.array([int(w.end[f:s].max()) for f, s in zip(first, stop, strict=True)])
    bwd_start = w.start[first].copy()
    if w.source == "launch_threads":
        # The engine allocates before its first launch, after the main thread's last.
        prev = first - 1
        has = prev >= 0
        bwd_start[has] = np.minimum(bwd_start[has], w.end[prev[has]])
    return bwd_start.astype(np.int64), bwd_end.astype(np.int64)


def find(
    tables: Mapping[str, Any], pid: int | None = None, opt_marks_ns: Iterable[int] = ()
) -> Iterations:
    """The iterations of process ``pid`` (None: every row) in ``tables`` (name -> pyarrow
    table or column mapping: ``runtime``, ``ops``, ``markers``, ``steps``).

    ``opt_marks_ns``: extra optimizer-end times (step-boundary snapshots), used to close
    iterations where the process has no steps.
    """
    steps = step_windows(tables, pid)
    work = _from_ops(tables, pid) or _from_launches(tables, pid, steps)
    if not work.bwd.any():
        return Iterations.empty(work.source, int(steps[0].size))
    b0, b1 = _runs(work)
    marks = np.unique(
        np.concatenate(
            [optimizer_marks(tables, pid), np.asarray(list(opt_marks_ns), dtype=np.int64)]
        )
    )
    s0, e0 = steps
    k = _step_of(b0, steps)
    n = b0.size
    start = np.zeros(n, np.int64)
    end = np.zeros(n, np.int64)
    prev_end = int(work.start[0])
    for j in range(n):
        first = j == 0 or k[j - 1] != k[j] or k[j] < 0
        last = j == n - 1 or k[j + 1] != k[j] or k[j] < 0
        if k[j] >= 0:
            start[j] = s0[k[j]] if first else prev_end
            end[j] = e0[k[j]] if last else b1[j]
        else:
            start[j] = prev_end
            nxt = b0[j + 1] if j + 1 < n else np.iinfo(np.int64).max
            m = int(np.searchsorted(marks, b1[j], side="right"))
            end[j] = marks[m] if m < marks.size and marks[m] < nxt else b1[j]
        start[j] = min(start[j], b0[j])
        end[j] = max(end[j], b1[j])
        prev_end = int(end[j])
    fwd = ~work.bwd
    ws = work.start[fwd]
    i = np.searchsorted(ws, start, side="left")
    work_ns = (
        np.where(
            (i < ws.size) & (ws[np.minimum(i, ws.size - 1)] < b0),
            ws[np.minimum(i, ws.size - 1)],
            b0,
        )
        if ws.size
        else b0.copy()
    )
    i = np.searchsorted(ws, b1, side="right")
    opt = ws[np.minimum(i, ws.size - 1)] if ws.size else end
    opt_start = np.where((i < ws.size) & (opt <= end), opt, end) if ws.size else end.copy()
    return Iterations(
        start,
        work_ns.astype(np.int64),
        b0,
        b1,
        opt_start.astype(np.int64),
        end,
        work.source,
        int(s0.size),
    )
