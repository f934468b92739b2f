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

API for passes: :func:`resolve` (spec -> :class:`Window`), :func:`rank_bounds` (the
measured window of each rank, as passes that compute rates need it), :func:`view` (a
:class:`~tbdtrace.trace.Trace` that holds only the window's rows, which every pass reads
unchanged), :func:`phase_bounds`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from tbdtrace.arrow_ints import int_column
from tbdtrace.errors import TraceError
from tbdtrace.passes import steps as steps_pass
from tbdtrace.passes.cache import Entry, PassCache
from tbdtrace.trace import Trace

KINDS = ("measured", "steps", "warmup", "init", "after", "all")
PHASES = ("init", "warmup", "measured", "after")
LO = int(np.iinfo(np.int64).min)  # no lower bound
HI = int(np.iinfo(np.int64).max)  # no upper bound
NO_RANK = -1  # key of rows whose rank is null
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


def row_rank_keys(trace: Trace, table: str) -> npt.NDArray[np.int64]:
    """Rank of each row of ``table`` (-1 for null; all -1 when the table has no rank)."""
    from tbdtrace import schema

    if "rank" not in schema.table(table).column_names:
        return np.full(trace.num_rows(table), NO_RANK, dtype=np.int64)
    return int_column(trace.table(table, ["rank"], cache=False), "rank", NO_RANK)


def row_times(trace: Trace, table: str) -> npt.NDArray[np.int64]:
    """Placement time of each row of ``table`` (see the module docstring)."""
    from tbdtrace.passes import shared_arrays

    tc = "ts_ns" if table in ("memory", "host_samples") else "start_ns"
    start = shared_arrays.ints(trace, table, tc)
    if table in shared_arrays.EVENT_TABLES and trace.num_rows("runtime"):
        launch = shared_arrays.launch_times(trace, table, keep=False)
        known = launch >= 0
        return launch if known.all() else np.where(known, launch, start)
    return start


def one_rank_key(trace: Trace, table: str) -> int | None:
    """The rank key (as :func:`row_rank_keys`) that every row of ``table`` has, when they
    all have the same one; None when they differ or the table is empty. Read from the
    file's statistics when they tell, else from the column's minimum and maximum,
    without an int64 copy of it."""
    import pyarrow.compute as pc

    from tbdtrace import schema

    if "rank" not in schema.table(table).column_names:
        return NO_RANK if trace.num_rows(table) else None
    if trace.num_rows(table) == 0:
        return None
    known = trace.constant(table, "rank")  # from the file's statistics, when they tell
    if known is not None:
        return NO_RANK if known[0] is None else int(known[0])
    col = trace.table(table, ["rank"], cache=False).column(0)
    n = len(col)
    if n == 0 or 0 < col.null_count < n:
        return None
    if col.null_count == n:
        return NO_RANK
    mm = pc.min_max(col)
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    return int(lo) if lo == hi else None


def step_rows(trace: Trace) -> dict[int, dict[str, np.ndarray]]:
    """Per rank key (-1 for null): the steps pass's step, start_ns, end_ns and warmup
    (the effective flag) as numpy arrays, in (rank, start) order."""
    st = steps_pass.run(trace)
    rank = int_column(st, "rank", NO_RANK)
    cols = {c: int_column(st, c) for c in ("step", "start_ns", "end_ns")}
    warm = np.asarray(st.column("warmup").to_numpy(zero_copy_only=False), dtype=bool)
    return {
        int(r): {**{c: v[rank == r] for c, v in cols.items()}, "warmup": warm[rank == r]}
        for r in np.unique(rank)
    }


def phase_bounds(trace: Trace) -> dict[int, dict[str, tuple[int, int]]]:
    """Per rank key with steps: phase -> (lo, hi), half-open, LO/HI for no bound."""
    out: dict[int, dict[str, tuple[int, int]]] = {}
    for r, s in step_rows(trace).items():
        t0, t_end = int(s["start_ns"].min()), int(s["end_ns"].max())
        m = ~s["warmup"]
        t1, t2 = (
            (int(s["start_ns"][m].min()), int(s["end_ns"][m].max())) if m.any() else (t_end, t_end)
        )
        out[r] = {"init": (LO, t0), "warmup": (t0, t1), "measured": (t1, t2), "after": (t2, HI)}
    return out


def rank_bounds(trace: Trace, spec: WindowSpec | None = None) -> dict[int | None, tuple[int, int]]:
    """Per rank (None for null): the window's (start_ns, end_ns), for passes that need
    the measured window's length (rates). Ranks without steps are absent: their window
    is the whole trace, and the caller measures its own span."""
    win = resolve(trace, spec)
    return {
        r.rank: (r.start_ns, r.end_ns)
        for r in win.ranks
        if r.start_ns is not None and r.end_ns is not None
    }


def resolve(trace: Trace, spec: WindowSpec | None = None) -> Window:
    """The window ``spec`` (default: the measured steps) on ``trace``, per rank."""
    spec = spec or WindowSpec()
    steps = step_rows(trace)
    pre = pre_trace_count(trace)
    if spec.kind == "all" and spec.steps is None:
        kept = f"keeps {pre} device rows launched before the trace began (phase {PRE_TRACE})"
        return Window(
            spec,
            tuple(_rank_window(r, s, "all", LO, HI) for r, s in steps.items()),
            notes=(kept,) if pre else (),
        )
    if not steps and (spec.steps is not None or spec.kind in ("warmup", "init", "after")):
        raise TraceError(
            f"{trace.path}: the trace has no steps, so it has no {spec.name} window; "
            "use --window all (or measured, which falls back to the whole trace)"
        )
    phases = phase_bounds(trace)
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
            f"{trace.path}: no step numbered {spec.steps[0]}..{spec.steps[1]}; "
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


def view(trace: Trace, window: Window) -> Trace:
    """``trace`` restricted to ``window`` (the trace itself when the window keeps every
    row: ``all``, or a whole-trace window of a trace without pre-trace work)."""
    if window.is_all and (window.keeps_pre_trace or not pre_trace_count(trace)):
        return trace
    from tbdtrace.passes._windowed import WindowedTrace

    return WindowedTrace(trace, window)


PRE_TRACE_ROWS: Entry[npt.NDArray[np.bool_]] = Entry(
    "window.pre_trace_rows", "(table,): device rows launched before the trace began"
)


def pre_trace_rows(trace: Trace, table: str) -> npt.NDArray[np.bool_]:
    """Per row of a device table (kernels, memcpy, memset): launched before the trace
    began. Such a row has no runtime call, and its correlation id is below that of every
    runtime call of its rank: the PyTorch profiler keeps the device activity of the step
    before the first one it records, whose launches it did not record. Placed by its own
    start it would land in the first recorded step (docs/METRICS.md, "Pre-trace work").
    False everywhere for a rank without runtime calls (CPU backends, device-only traces)."""
    return PassCache.of(trace).get(PRE_TRACE_ROWS, lambda: _pre_trace_rows(trace, table), table)


def _pre_trace_rows(trace: Trace, table: str) -> npt.NDArray[np.bool_]:
    from tbdtrace.passes import shared_arrays
    from tbdtrace.passes.joins import NULL_ID

    n = trace.num_rows(table)
    out = np.zeros(n, dtype=bool)
    if n == 0 or trace.num_rows("runtime") == 0:
        return out
    miss = shared_arrays.runtime_match(trace, table) < 0
    if not miss.any():
        return out
    kc = shared_arrays.ints(trace, table, "correlation_id", NULL_ID)
    rc = shared_arrays.ints(trace, "runtime", "correlation_id", NULL_ID)
    k_rank, r_rank = row_rank_keys(trace, table), row_rank_keys(trace, "runtime")
    known = rc != NULL_ID
    for r in np.unique(k_rank[miss]).tolist():
        launches = known & (r_rank == r)
        if launches.any():
            out |= miss & (k_rank == r) & (kc != NULL_ID) & (kc < rc[launches].min())
    out.flags.writeable = False
    return out


def pre_trace_count(trace: Trace) -> int:
    """Device rows (kernels, memcpy, memset) launched before the trace began."""
    from tbdtrace.passes import shared_arrays

    return sum(int(pre_trace_rows(trace, t).sum()) for t in shared_arrays.EVENT_TABLES)
