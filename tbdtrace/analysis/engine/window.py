"""The time window a report covers, and the phases of a training trace.

Per rank, from that rank's own steps (steps pass, warm-up as flagged there), the trace
splits into four phases at three times (docs/METRICS.md, "Window and phases"):

* t0 = start of the rank's first step, t1 = start of its first measured step,
  t2 = end of its last measured step (t1 = t2 = end of its last step when no step is
  measured);
* ``init`` = before t0, ``warmup`` = [t0, t1), ``measured`` = [t1, t2), ``after`` = from t2.

A window is one interval per rank: a phase, ``steps`` (first step start to last step
end), the steps numbered A..B (``--steps A:B``, inclusive), or ``all`` (no bound). A rank
without steps takes the window of the steps that have no rank (a harness steps file of
one process), if any; else it keeps its whole trace for ``measured`` and ``steps`` and
nothing for the others. A trace without steps cannot be cut into ``warmup``, ``init`` or
``after`` (TraceError).

Which rows a window holds (:func:`row_times`, :func:`view`): an event belongs to the
window of its rank when its *placement time* is inside [start, end). Device work
(kernels, memcpy, memset) is placed at the start of the runtime call that launched it
(its own start when no call is known), so work issued in a step belongs to that step even
when the device runs it later; other events at their start (``ts_ns`` for memory
events); host samples from the last one before the window to the first one after it.
Host ranges (ops, markers) are kept when they overlap the window: they give kernels
their launching op and annotation. Rows are kept whole, never clipped.

Device work launched before the trace began (:func:`pre_trace_rows`: no runtime call, and
a correlation id below every runtime call of its rank; the PyTorch profiler keeps the
device activity of the step before the first one it records) is in no window but
``all``: it is the ``pre-trace`` phase.

The steps come from :func:`recorded_steps` (the ``steps`` table, else NVTX ``step N``
ranges); a step is warm-up where flagged (``StepsConfig.warmup_steps`` of the steps pass
does not move the window).

API for passes: :func:`resolve` (spec -> :class:`Window`), :func:`rank_bounds` (the
measured window of each rank, as passes that compute rates need it),
:func:`phase_bounds`, :func:`step_rows`, :func:`recorded_steps`. The rows a window holds
are read through ``AnalysisContext.windowed(window)`` (``engine/context.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace.analysis.engine import shared_arrays
from tbdtrace.analysis.engine.cache import Entry
from tbdtrace.analysis.engine.grouping import NO_RANK
from tbdtrace.arrow_ints import int_column
from tbdtrace.errors import TraceError

if TYPE_CHECKING:
    from tbdtrace.analysis.engine.context import AnalysisContext

KINDS = ("measured", "steps", "warmup", "init", "after", "all")
PHASES = ("init", "warmup", "measured", "after")
LO = int(np.iinfo(np.int64).min)  # no lower bound
HI = int(np.iinfo(np.int64).max)  # no upper bound
PRE_TRACE = "pre-trace"  # phase of device work launched before the trace began
RULE = (
    "device work by the start of its launching runtime call (else its own start), other "
    "events by their start, in [start_ns, end_ns) of their rank; ops and markers when they "
    "overlap it; rows kept whole; device work launched before the trace began (no launch "
    "record, correlation id below every launch of its rank) only in the all window"
)


@dataclass(frozen=True)
class WindowSpec:
    # measured (default), steps, warmup, init, after or all; ignored when ``steps`` is set.
    kind: str = "measured"
    # Inclusive step numbers (first, last) selected per rank; None = by kind.
    steps: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"window kind must be one of {KINDS}, not {self.kind!r}")
        if self.steps is not None and self.steps[0] > self.steps[1]:
            raise ValueError(f"--steps {self.steps[0]}:{self.steps[1]}: first > last")

    @property
    def name(self) -> str:
        return "steps A:B" if self.steps is not None else self.kind


def parse_steps(text: str) -> tuple[int, int]:
    """``"A:B"`` (inclusive), ``"A:"``, ``":B"`` or ``"A"`` as (first, last) step numbers.

    Raises ValueError with a message for people."""
    a, sep, b = text.partition(":")
    try:
        first = int(a) if a.strip() else LO
        last = (int(b) if b.strip() else HI) if sep else first
    except ValueError:
        raise ValueError(f"--steps {text!r}: expected A:B with step numbers, e.g. 3:7") from None
    if first > last:
        raise ValueError(f"--steps {text!r}: the first step is after the last")
    return first, last


@dataclass(frozen=True)
class RankWindow:
    rank: int | None
    kind: str  # what this rank's window is (the spec's, or "all" where the rank has no steps)
    start_ns: int | None  # None: no lower bound
    end_ns: int | None  # None: no upper bound
    first_step: int | None  # step numbers inside the window, when it holds steps
    last_step: int | None
    step_count: int  # steps that start inside the window
    warmup_steps_excluded: int  # the rank's warm-up steps outside the window


@dataclass(frozen=True)
class Window:
    spec: WindowSpec
    ranks: tuple[RankWindow, ...]
    # Bound for ranks that have no steps (and rows whose rank the steps do not name).
    default: tuple[int, int] = (LO, HI)
    rule: str = RULE
    notes: tuple[str, ...] = field(default=())

    @property
    def is_all(self) -> bool:
        """True when the window keeps every row (the trace as recorded)."""
        bounded = any(r.start_ns is not None or r.end_ns is not None for r in self.ranks)
        return not bounded and self.default == (LO, HI)

    @property
    def keeps_pre_trace(self) -> bool:
        """True for the ``all`` window only: the trace as recorded keeps the device work
        launched before the trace began; every other window leaves it out."""
        return self.spec.kind == "all" and self.spec.steps is None

    def bounds(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(rank keys sorted, lower bounds, upper bounds); rank key -1 for null."""
        keys = [NO_RANK if r.rank is None else r.rank for r in self.ranks]
        lo = [LO if r.start_ns is None else r.start_ns for r in self.ranks]
        hi = [HI if r.end_ns is None else r.end_ns for r in self.ranks]
        order = np.argsort(np.asarray(keys, dtype=np.int64), kind="stable")
        return (
            np.asarray(keys, dtype=np.int64)[order],
            np.asarray(lo, dtype=np.int64)[order],
            np.asarray(hi, dtype=np.int64)[order],
        )

    def label(self) -> str:
        """A short phrase for table titles: "measured steps", "steps 3-5", ..."""
        if self.is_all:
            return "whole trace"
        if self.spec.steps is not None:
            a, b = self.spec.steps
            lo = "" if a == LO else str(a)
            hi = "" if b == HI else str(b)
            return f"steps {lo}-{hi}" if a != b else f"step {a}"
        return {
            "measured": "measured steps",
            "steps": "all steps",
            "warmup": "warm-up steps",
            "init": "before the first step",
            "after": "after the last measured step",
        }.get(self.spec.kind, self.spec.kind)

    def to_json(self) -> dict[str, Any]:
        s = self.spec.steps
        return {
            "kind": self.spec.kind if s is None else "steps_range",
            "steps": None if s is None else [_open(s[0], LO), _open(s[1], HI)],
            "label": self.label(),
            "rule": self.rule,
            "ranks": [vars(r).copy() for r in self.ranks],
            "notes": list(self.notes),
        }


def _open(v: int, unbounded: int) -> int | None:
    return None if v == unbounded else v


def row_times(ctx: AnalysisContext, table: str) -> npt.NDArray[np.int64]:
    """Placement time of each row of ``table`` (see the module docstring)."""
    tc = "ts_ns" if table in ("memory", "host_samples") else "start_ns"
    start = shared_arrays.ints(ctx, table, tc)
    if table in shared_arrays.EVENT_TABLES and ctx.num_rows("runtime"):
        launch = shared_arrays.launch_times(ctx, table, keep=False)
        known = launch >= 0
        return launch if known.all() else np.where(known, launch, start)
    return start


RECORDED_STEPS: Entry[pa.Table] = Entry(
    "window.recorded_steps", "the trace's steps as recorded, in (rank, start, step) order"
)
STEP_COLUMNS = ["step", "start_ns", "end_ns", "rank", "samples", "warmup", "source"]
_NVTX_STEP = re.compile(r"step (-?[0-9]+)")


def recorded_steps(ctx: AnalysisContext) -> pa.Table:
    """The trace's steps in (rank, start, step) order, columns :data:`STEP_COLUMNS`
    (``warmup`` null where not flagged): its ``steps`` table, or, where it has none, every
    marker range named ``step N`` with an integer N (``step -1``, ``step 12``) as step N
    of its rank, source ``nvtx``, samples unknown. A negative N marks a warm-up step;
    where a rank has no negative N, its flags stay unknown."""
    return ctx.cache.get(RECORDED_STEPS, lambda: _in_order(_steps_table(ctx)))


def _in_order(t: pa.Table) -> pa.Table:
    if t.num_rows == 0:
        return t
    rank, start, step = (int_column(t, c) for c in ("rank", "start_ns", "step"))
    return t.take(pa.array(np.lexsort((step, start, rank))))


def _steps_table(ctx: AnalysisContext) -> pa.Table:
    """The trace's ``steps`` table, or steps from NVTX ``step N`` ranges when it has none."""
    t = ctx.table("steps", STEP_COLUMNS)
    if t.num_rows or not ctx.num_rows("markers"):
        return t
    m = ctx.table("markers", ["name", "kind", "rank", "start_ns", "end_ns"])
    names = m.column("name").cast(pa.string()).to_pylist()
    kinds = m.column("kind").cast(pa.string()).to_pylist()
    idx: list[int] = []
    nums: list[int] = []
    for i, (name, kind) in enumerate(zip(names, kinds, strict=True)):
        hit = _NVTX_STEP.fullmatch(name) if kind == "range" and name else None
        if hit:
            idx.append(i)
            nums.append(int(hit.group(1)))
    if not idx:
        return t
    sel = m.take(pa.array(idx, pa.int64()))
    num = np.asarray(nums, dtype=np.int64)
    rank = int_column(sel, "rank")
    # Warm-up is known (True) for negative N; non-negative N are unknown where the rank has
    # no negative N (the config default applies), else measured.
    warm: list[bool | None] = []
    has_neg = {int(r) for r in np.unique(rank[num < 0])}
    for n, r in zip(num, rank, strict=True):
        warm.append(True if n < 0 else (False if int(r) in has_neg else None))
    return pa.table(
        {
            "step": pa.array(num, pa.int64()),
            "start_ns": sel.column("start_ns"),
            "end_ns": sel.column("end_ns"),
            "rank": sel.column("rank"),
            "samples": pa.nulls(len(idx), pa.int64()),
            "warmup": pa.array(warm, pa.bool_()),
            "source": pa.array(["nvtx"] * len(idx), pa.string()),
        }
    )


def step_rows(ctx: AnalysisContext) -> dict[int, dict[str, np.ndarray]]:
    """Per rank key (-1 for null): the recorded steps' step, start_ns, end_ns and warmup
    (unflagged steps measured) as numpy arrays, in (rank, start) order."""
    st = recorded_steps(ctx)
    rank = int_column(st, "rank", NO_RANK)
    cols = {c: int_column(st, c) for c in ("step", "start_ns", "end_ns")}
    flag = pc.fill_null(st.column("warmup"), False)
    warm = np.asarray(flag.to_numpy(zero_copy_only=False), dtype=bool)
    return {
        int(r): {**{c: v[rank == r] for c, v in cols.items()}, "warmup": warm[rank == r]}
        for r in np.unique(rank)
    }


def phase_bounds(ctx: AnalysisContext) -> dict[int, dict[str, tuple[int, int]]]:
    """Per rank key with steps: phase -> (lo, hi), half-open, LO/HI for no bound."""
    out: dict[int, dict[str, tuple[int, int]]] = {}
    for r, s in step_rows(ctx).items():
        t0, t_end = int(s["start_ns"].min()), int(s["end_ns"].max())
        m = ~s["warmup"]
        t1, t2 = (
            (int(s["start_ns"][m].min()), int(s["end_ns"][m].max())) if m.any() else (t_end, t_end)
        )
        out[r] = {"init": (LO, t0), "warmup": (t0, t1), "measured": (t1, t2), "after": (t2, HI)}
    return out


def rank_bounds(
    ctx: AnalysisContext, spec: WindowSpec | None = None
) -> dict[int | None, tuple[int, int]]:
    """Per rank (None for null): the window's (start_ns, end_ns), for passes that need
    the measured window's length (rates). Ranks without steps are absent: their window
    is the whole trace, and the caller measures its own span."""
    win = resolve(ctx, spec)
    return {
        r.rank: (r.start_ns, r.end_ns)
        for r in win.ranks
        if r.start_ns is not None and r.end_ns is not None
    }


def resolve(ctx: AnalysisContext, spec: WindowSpec | None = None) -> Window:
    """The window ``spec`` (default: the measured steps) on ``trace``, per rank."""
    spec = spec or WindowSpec()
    steps = step_rows(ctx)
    pre = pre_trace_count(ctx)
    if spec.kind == "all" and spec.steps is None:
        kept = f"keeps {pre} device rows launched before the trace began (phase {PRE_TRACE})"
        return Window(
            spec,
            tuple(_rank_window(r, s, "all", LO, HI) for r, s in steps.items()),
            notes=(kept,) if pre else (),
        )
    if not steps and (spec.steps is not None or spec.kind in ("warmup", "init", "after")):
        raise TraceError(
            f"{ctx.path}: the trace has no steps, so it has no {spec.name} window; "
            "use --window all (or measured, which falls back to the whole trace)"
        )
    phases = phase_bounds(ctx)
    ranks = []
    for r, s in steps.items():
        if spec.steps is not None:
            sel = (s["step"] >= spec.steps[0]) & (s["step"] <= spec.steps[1])
            lo, hi = (
                (int(s["start_ns"][sel].min()), int(s["end_ns"][sel].max()))
                if sel.any()
                else (0, 0)
            )
        elif spec.kind == "steps":
            lo, hi = int(s["start_ns"].min()), int(s["end_ns"].max())
        else:
            lo, hi = phases[r][spec.kind]
        ranks.append(_rank_window(r, s, spec.name, lo, hi))
    notes: list[str] = []
    if spec.steps is not None and not any(rw.step_count for rw in ranks):
        have = np.concatenate([s["step"] for s in steps.values()])
        raise TraceError(
            f"{ctx.path}: no step numbered {spec.steps[0]}..{spec.steps[1]}; "
            f"the trace has steps {int(have.min())}..{int(have.max())}"
        )
    default = (LO, HI) if spec.kind in ("measured", "steps") and spec.steps is None else (0, 0)
    unranked = [rw for rw in ranks if rw.rank is None]
    if unranked:
        # Steps without a rank (a harness steps file, one process) bound every rank that
        # has no steps of its own.
        u = unranked[0]
        default = (LO if u.start_ns is None else u.start_ns, HI if u.end_ns is None else u.end_ns)
    if not steps:
        notes.append("the trace has no steps: the window is the whole trace")
    if pre:
        notes.append(
            f"{pre} device rows launched before the trace began are left out (phase "
            f"{PRE_TRACE}; the all window keeps them)"
        )
    return Window(spec, tuple(ranks), default=default, notes=tuple(notes))


def _rank_window(r: int, s: dict[str, np.ndarray], kind: str, lo: int, hi: int) -> RankWindow:
    inside = (s["start_ns"] >= lo) & (s["start_ns"] < hi)
    nums = s["step"][inside]
    return RankWindow(
        rank=None if r == NO_RANK else r,
        kind=kind,
        start_ns=None if lo == LO else lo,
        end_ns=None if hi == HI else hi,
        first_step=int(nums.min()) if nums.size else None,
        last_step=int(nums.max()) if nums.size else None,
        step_count=int(inside.sum()),
        warmup_steps_excluded=int((s["warmup"] & ~inside).sum()),
    )


PRE_TRACE_ROWS: Entry[npt.NDArray[np.bool_]] = Entry(
    "window.pre_trace_rows", "(table,): device rows launched before the trace began"
)


def pre_trace_rows(ctx: AnalysisContext, table: str) -> npt.NDArray[np.bool_]:
    """Per row of a device table (kernels, memcpy, memset): launched before the trace
    began. Such a row has no runtime call, and its correlation id is below that of every
    runtime call of its rank: the PyTorch profiler keeps the device activity of the step
    before the first one it records, whose launches it did not record. Placed by its own
    start it would land in the first recorded step (docs/METRICS.md, "Pre-trace work").
    False everywhere for a rank without runtime calls (CPU backends, device-only traces)."""
    return ctx.cache.get(PRE_TRACE_ROWS, lambda: _pre_trace_rows(ctx, table), table)


def _pre_trace_rows(ctx: AnalysisContext, table: str) -> npt.NDArray[np.bool_]:
    from tbdtrace.analysis.engine.grouping import row_rank_keys
    from tbdtrace.analysis.engine.joins import NULL_ID

    n = ctx.num_rows(table)
    out = np.zeros(n, dtype=bool)
    if n == 0 or ctx.num_rows("runtime") == 0:
        return out
    miss = shared_arrays.runtime_match(ctx, table) < 0
    if not miss.any():
        return out
    # Read for this decision only, not kept (10M runtime calls: 76 MB held to the end of
    # a report otherwise; a window's runtime matches read them again, one at a time).
    kc = shared_arrays.ints(ctx, table, "correlation_id", NULL_ID, keep=False)
    rc = shared_arrays.ints(ctx, "runtime", "correlation_id", NULL_ID, keep=False)
    k_rank, r_rank = row_rank_keys(ctx, table), row_rank_keys(ctx, "runtime")
    known = rc != NULL_ID
    for r in np.unique(k_rank[miss]).tolist():
        launches = known & (r_rank == r)
        if launches.any():
            out |= miss & (k_rank == r) & (kc != NULL_ID) & (kc < rc[launches].min())
    out.flags.writeable = False
    return out


def pre_trace_count(ctx: AnalysisContext) -> int:
    """Device rows (kernels, memcpy, memset) launched before the trace began."""
    return sum(int(pre_trace_rows(ctx, t).sum()) for t in shared_arrays.EVENT_TABLES)
