"""Capture windows: record only some steps of a training run.

A :class:`WindowPlan` says which steps to record, and why:

* ``steps``: one window, steps A..B (``capture --steps A:B``, ``capture(steps=(A, B))``);
* ``schedule``: windows that repeat, as ``torch.profiler.schedule`` does (:class:`Schedule`:
  ``skip_first`` steps, then cycles of ``wait`` steps off, ``warmup`` steps collected and
  discarded, ``active`` steps recorded; ``repeat`` cycles, 0 = until the run ends); each
  active span is its own step range in the one trace;
* ``on-demand``: a window opens when the process receives SIGUSR2 (``capture
  --on-demand`` also sends it when a trigger file appears) and lasts N steps or S seconds;
  the job keeps running.

A :class:`Controller` lives in the training process (the captured command's processes, or
the process of an in-process capture). It learns where steps begin and end from the
first of these sources that reports one (the others are then ignored, so that a harness
that also pushes NVTX ranges counts each step once): the workload harness
(``workloads/harness.py`` calls :func:`harness_begin`/:func:`harness_end` when this
module is loaded), NVTX ``step N`` ranges pushed through ``torch.cuda.nvtx``, calls of
:func:`step` (``tbdtrace.step()``: the end of one step and the start of the next; step 0
starts when the capture does), and the trainer callbacks of :mod:`tbdtrace.integrations`.
At a window's first step it opens the backend's collection (:class:`Collection`: the
framework profiler starts, or the injected CUPTI collector resumes) and at the window's
last step's end it closes it (stopped and flushed). Everything it does runs at step
boundaries; between them the training process runs no Python of the capture's.

The captured process's side (the spool recorder, the injected collector's pause and resume,
NVTX ranges) is :mod:`.window_child`; the trace's side (``meta.windows``, the rows kept) is
:mod:`.window_trace`. This module imports only the standard library, so that the bootstrap
and the harness hook cost nothing in a captured process.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from tbdtrace.errors import TraceError

REASONS = ("steps", "schedule", "on-demand")
SOURCES = ("harness", "nvtx", "api", "lightning", "transformers")


@dataclass(frozen=True)
class Schedule:
    """Which steps a scheduled capture records, in the spirit of ``torch.profiler.schedule``."""

    wait: int = 0  # steps off at the start of each cycle
    warmup: int = 0  # steps collected and then discarded (one-time costs stay out)
    active: int = 1  # steps recorded in each cycle
    repeat: int = 0  # cycles; 0 = until the run ends
    skip_first: int = 0  # steps off before the first cycle

    def __post_init__(self) -> None:
        if min(self.wait, self.warmup, self.repeat, self.skip_first) < 0 or self.active < 1:
            raise TraceError(
                "schedule: wait, warmup, repeat and skip_first must be >= 0 and active >= 1"
            )


def schedule(
    *, wait: int = 0, warmup: int = 0, active: int = 1, repeat: int = 0, skip_first: int = 0
) -> Schedule:
    """A :class:`Schedule` for ``tbdtrace.capture(..., schedule=...)`` and the trainer
    callbacks: e.g. ``schedule(wait=5, warmup=1, active=3, repeat=2)`` records steps 6-8
    and 15-17."""
    return Schedule(wait, warmup, active, repeat, skip_first)


@dataclass(frozen=True)
class OnDemand:
    """How long an on-demand window lasts: ``steps`` steps, or ``seconds`` seconds."""

    steps: int = 0
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if (self.steps > 0) == (self.seconds > 0) or self.steps < 0 or self.seconds < 0:
            raise TraceError("an on-demand window lasts either N steps or S seconds (> 0)")


@dataclass(frozen=True)
class Span:
    """One window of a plan: collection from ``collect_from``, recorded from ``first``
    to ``last`` (steps, inclusive)."""

    collect_from: int
    first: int
    last: int


@dataclass(frozen=True)
class WindowPlan:
    """The windows of one capture (exactly one of the three)."""

    steps: tuple[int, int] | None = None  # A..B, inclusive
    schedule: Schedule | None = None
    on_demand: OnDemand | None = None

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.steps, self.schedule, self.on_demand)) != 1:
            raise TraceError(
                "a capture window plan needs exactly one of steps, schedule, on-demand"
            )
        if self.steps is not None and not 0 <= self.steps[0] <= self.steps[1]:
            raise TraceError(f"--steps {self.steps[0]}:{self.steps[1]}: need 0 <= A <= B")

    @property
    def reason(self) -> str:
        if self.steps is not None:
            return "steps"
        return "schedule" if self.schedule is not None else "on-demand"

    def spans(self) -> Iterator[Span]:
        """The planned windows in step order (none for on-demand)."""
        if self.steps is not None:
            yield Span(self.steps[0], self.steps[0], self.steps[1])
        elif self.schedule is not None:
            s = self.schedule
            cycle = s.wait + s.warmup + s.active
            k = 0
            while s.repeat == 0 or k < s.repeat:
                base = s.skip_first + k * cycle + s.wait
                yield Span(base, base + s.warmup, base + s.warmup + s.active - 1)
                k += 1

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WindowPlan:
        d = json.loads(text)
        return cls(
            tuple(d["steps"]) if d.get("steps") else None,  # type: ignore[arg-type]
            Schedule(**d["schedule"]) if d.get("schedule") else None,
            OnDemand(**d["on_demand"]) if d.get("on_demand") else None,
        )


def parse_steps(text: str) -> tuple[int, int]:
    """``A:B`` -> (A, B); TraceError with the form expected."""
    m = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", text)
    if not m or int(m.group(1)) > int(m.group(2)):
        raise TraceError(f"--steps {text!r}: expected A:B with 0 <= A <= B (e.g. 100:103)")
    return int(m.group(1)), int(m.group(2))


def parse_schedule(text: str) -> Schedule:
    """``wait=5,warmup=1,active=3,repeat=2`` (any of the five keys) -> Schedule."""
    keys = {"wait", "warmup", "active", "repeat", "skip_first"}
    vals: dict[str, int] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        k, _, v = item.partition("=")
        if k.strip() not in keys or not v.strip().isdigit():
            raise TraceError(
                f"--schedule {text!r}: expected KEY=N items, KEY one of "
                f"{', '.join(sorted(keys))} (e.g. wait=5,warmup=1,active=3,repeat=2)"
            )
        vals[k.strip()] = int(v)
    return Schedule(**vals)


class Collection(Protocol):
    """What a window opens and closes: the backend's collection in this process."""

    def open(self) -> None:
        """Start (or resume) collecting."""

    def close(self) -> None:
        """Stop (or pause) collecting, flushed."""


class Recorder(Protocol):
    """Where the controller writes the windows it opened and the steps it timed itself."""

    def window(self, record: dict[str, Any]) -> None: ...

    def step(self, index: int, start_ns: int, end_ns: int, source: str) -> None: ...


@dataclass
class MemoryRecorder:
    """Keeps windows and steps in lists (in-process capture)."""

    windows: list[dict[str, Any]] = field(default_factory=list)
    steps: list[tuple[int, int, int, int, str]] = field(default_factory=list)

    def window(self, record: dict[str, Any]) -> None:
        self.windows.append(record)

    def step(self, index: int, start_ns: int, end_ns: int, source: str) -> None:
        self.steps.append((index, start_ns, end_ns, os.getpid(), source))


class Controller:
    """Opens and closes windows of ``plan`` at step boundaries (module docstring)."""

    def __init__(self, plan: WindowPlan, collection: Collection, recorder: Recorder):
        self.plan = plan
        self.collection = collection
        self.recorder = recorder
        self.source: str | None = None  # the step source in use
        self.step_index = 0  # the current step, or the next one between steps
        self.in_step = False
        self._step_start_ns = 0
        self._lock = threading.RLock()  # a signal handler may run on the holding thread
        self._spans = plan.spans()
        self._next: Span | None = next(self._spans, None)
        self.window: dict[str, Any] | None = None  # the open window
        self._span: Span | None = None
        self._demand: str | None = None  # on-demand (steps): opens at the next step
        self._timer: threading.Timer | None = None
        self._close_due = False
        self._signal_installed = False
        self._old_signal: Any = signal.SIG_DFL
        self.opened = 0
        self.failed: str | None = None  # why windows stopped (a backend failed)

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        """Step 0 starts now (for tbdtrace.step()); a window from step 0 opens now."""
        with self._lock:
            if self._next is not None and self._next.collect_from == 0:
                self._open(self._next, "plan")
            self._step_start_ns = time.time_ns()

    def finish(self, restore_signal: bool = False) -> None:
        """The run ends: a window still open is closed (marked as cut short). SIGUSR2, if
        watched, is ignored from now on (a process at its exit must not die of a late
        trigger), or given back its old handler (``restore_signal``: an in-process capture
        ends, the program goes on)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            if self.window is not None:
                self._close(complete=False)
        if self._signal_installed and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGUSR2, self._old_signal if restore_signal else signal.SIG_IGN)
            self._signal_installed = False

    # -- step sources --------------------------------------------------------------------
    def begin_step(self, index: int, source: str) -> None:
        with self._lock:
            if not self._accept(source):
                return
            if self.window is None:
                if self._demand is not None and self.plan.on_demand is not None:
                    n = self.plan.on_demand.steps
                    self._open(Span(index, index, index + n - 1), self._demand)
                    self._demand = None
                else:
                    while self._next is not None and self._next.last < index:
                        self._next = next(self._spans, None)
                    sp = self._next
                    if sp is not None and sp.collect_from <= index <= sp.last:
                        self._open(sp, "plan")
            now = time.time_ns()  # after opening: the step's time is all inside the window
            self.step_index, self.in_step, self._step_start_ns = index, True, now
            w = self.window
            if w is not None and self._span is not None and index == self._span.first:
                w["active_start_ns"] = max(now, w["start_ns"])

    def end_step(self, index: int, source: str) -> None:
        with self._lock:
            if not self._accept(source) or not self.in_step:
                return
            now = time.time_ns()
            self.in_step = False
            w = self.window
            if w is not None:
                if source not in ("harness",) and self._step_start_ns >= w["start_ns"]:
                    self.recorder.step(index, self._step_start_ns, now, source)
                active = w.get("active_start_ns")
                if active is not None and self._step_start_ns >= active:
                    w["last_step"] = index
                    w["first_step"] = index if w["first_step"] is None else w["first_step"]
                if self._span is not None and index >= self._span.last:
                    self._close(complete=True)
            self.step_index = index + 1

    def mark(self, source: str = "api") -> None:
        """The current step ends and the next begins (``tbdtrace.step()``)."""
        with self._lock:
            if not self._accept(source):
                return
            if not self.in_step:  # step 0 began at start()
                self.in_step = True
            self.end_step(self.step_index, source)
            self.begin_step(self.step_index, source)

    def _accept(self, source: str) -> bool:
        if self.source is None:
            self.source = source
        return self.source == source

    # -- on demand ---------------------------------------------------------------------------
    def request(self, trigger: str) -> bool:
        """Open an on-demand window (False: none planned, or one is open already)."""
        od = self.plan.on_demand
        with self._lock:
            if od is None or self.window is not None or self._demand is not None:
                return False
            if od.steps:
                self._demand = trigger  # opens at the next step's begin
                return True
            self._open(None, trigger)
            self._timer = threading.Timer(od.seconds, self._due)
            self._timer.daemon = True
            self._timer.start()
            return True

    def _due(self) -> None:
        """The seconds of an on-demand window are up: closed on the main thread (the
        signal handler runs there) when the handler is ours, else here."""
        self._close_due = True
        if self._signal_installed:
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGUSR2)
        else:
            with self._lock:
                if self.window is not None:
                    self._close(complete=True)

    def on_signal(self, _sig: int, _frame: Any) -> None:
        if self._close_due:
            self._close_due = False
            with self._lock:
                if self.window is not None:
                    self._close(complete=True)
            return
        self.request("SIGUSR2")

    def install_signal(self) -> str | None:
        """SIGUSR2 opens a window; None, or why it cannot (the program has its own handler,
        or this is not the main thread)."""
        if threading.current_thread() is not threading.main_thread():
            return "not started on the main thread: SIGUSR2 is not watched"
        old = signal.getsignal(signal.SIGUSR2)
        if old not in (signal.SIG_DFL, None):
            return "the program has its own SIGUSR2 handler: on-demand windows are off"
        self._old_signal = old
        signal.signal(signal.SIGUSR2, self.on_signal)
        self._signal_installed = True
        return None

    # -- windows -----------------------------------------------------------------------------
    def _open(self, span: Span | None, trigger: str) -> None:
        """Open a window for ``span`` (None: an on-demand window of seconds). Its steps are
        those that start after its active start and end in it. A backend that fails to
        open turns the windows off with one line: the training run must go on."""
        if self.failed is not None:
            return
        try:
            self.collection.open()
        except Exception as e:  # noqa: BLE001 - capture must never break the program
            self._fail("opened", e)
            return
        now = time.time_ns()
        self.opened += 1
        self._span = span
        warm = span is not None and span.first > span.collect_from
        self.window = {
            "reason": self.plan.reason,
            "trigger": trigger if self.plan.on_demand is not None else None,
            "planned": [span.first, span.last] if span is not None else None,
            "first_step": None,
            "last_step": None,
            "start_ns": now,
            "active_start_ns": None if warm else now,
            "end_ns": None,
            "pid": os.getpid(),
            "complete": None,
        }

    def _close(self, complete: bool) -> None:
        w, self.window = self.window, None
        self._span = None
        assert w is not None
        w["end_ns"] = time.time_ns()  # the window's last step ended; closing is not in it
        w["complete"] = complete
        if w["active_start_ns"] is None:  # closed during warm-up: nothing recorded
            w["active_start_ns"] = w["end_ns"]
        try:
            self.collection.close()
        except Exception as e:  # noqa: BLE001 - capture must never break the program
            self._fail("closed", e)
            w["complete"] = False
        self.recorder.window(w)
        if self._next is not None and w["planned"] is not None:
            self._next = next(self._spans, None)

    def _fail(self, what: str, e: Exception) -> None:
        self.failed = f"a capture window could not be {what} ({type(e).__name__}: {e})"
        sys.stderr.write(f"tbdtrace: pid {os.getpid()}: {self.failed}; no more windows\n")


# --- the process's controller and its step hooks --------------------------------------------
_active: Controller | None = None


def activate(c: Controller | None) -> None:
    """Make ``c`` this process's controller (None: none)."""
    global _active
    _active = c


def active() -> Controller | None:
    return _active


def step() -> None:
    """Mark a step boundary: the current training step ends and the next one begins.

    Call it once per iteration, after the optimizer step, in a program run under
    ``tbdtrace capture --steps/--schedule/--on-demand`` or inside ``tbdtrace.capture(...,
    steps=... | schedule=... | on_demand=...)``; step 0 starts when the capture starts.
    Without a capture window it does nothing (a dictionary look-up)."""
    c = _active
    if c is not None:
        c.mark("api")


def harness_begin(index: int) -> None:
    """Called by ``workloads/harness.py`` at the start of step ``index``."""
    c = _active
    if c is not None:
        c.begin_step(index, "harness")


def harness_end(index: int) -> None:
    """Called by ``workloads/harness.py`` at the end of step ``index``."""
    c = _active
    if c is not None:
        c.end_step(index, "harness")


__all__ = [
    "Controller",
    "MemoryRecorder",
    "OnDemand",
    "Schedule",
    "WindowPlan",
    "harness_begin",
    "harness_end",
    "parse_schedule",
    "parse_steps",
    "schedule",
    "step",
]
