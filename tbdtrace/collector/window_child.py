"""Capture windows in a captured process: the controller's recorder writes to the spool,
the injected CUPTI collector is resumed and paused through the injection library, NVTX
``step N`` ranges pushed through ``torch.cuda.nvtx`` mark steps (:mod:`.windows`).

Standard library only (the bootstrap starts it in every captured Python process of a
windowed capture).
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

from tbdtrace.collector import child_protocol as proto
from tbdtrace.collector.windows import Collection, Controller, WindowPlan, activate, active

_STEP_RANGE = re.compile(r"step (\d+)")


def watch_torch_nvtx(torch: Any) -> None:
    """NVTX ``step N`` ranges pushed through ``torch.cuda.nvtx`` mark steps: ``range_push``
    and ``range_pop`` are wrapped (only while windows are planned: one Python call more
    per NVTX range)."""
    nvtx = getattr(getattr(torch, "cuda", None), "nvtx", None)
    if nvtx is None or getattr(nvtx.range_push, "_tbdtrace", False):
        return
    push, pop = nvtx.range_push, nvtx.range_pop
    stack: list[int | None] = []

    def range_push(msg: str) -> Any:
        m = _STEP_RANGE.fullmatch(msg) if isinstance(msg, str) else None
        stack.append(int(m.group(1)) if m else None)
        c = active()
        if m and c is not None:
            c.begin_step(int(m.group(1)), "nvtx")
        return push(msg)

    def range_pop() -> Any:
        out = pop()
        idx = stack.pop() if stack else None
        c = active()
        if idx is not None and c is not None:
            c.end_step(idx, "nvtx")
        return out

    range_push._tbdtrace = True  # type: ignore[attr-defined]
    nvtx.range_push, nvtx.range_pop = range_push, range_pop


class SpoolRecorder:
    """Windows to ``<spool>/windows-<pid>.jsonl``; steps timed here to the steps file."""

    def __init__(self, spool: str, steps_file: str | None):
        self.path = os.path.join(spool, proto.windows_name(os.getpid()))
        self.steps_file = steps_file

    def window(self, record: dict[str, Any]) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")

    def step(self, index: int, start_ns: int, end_ns: int, source: str) -> None:
        if not self.steps_file:
            return
        from tbdtrace.collector.steps import record

        with open(self.steps_file, "a") as f:
            f.write(record(index, start_ns, end_ns, os.getpid(), source) + "\n")


class InjectedWindows:
    """The injected collector as a window :class:`Collection`: resumed at a
    window's first step and paused, flushed, at its last
    (``tbdtrace_collector_resume``/``_pause``, exported by the injection library, reached
    through ctypes). Before the CUDA driver has loaded the library (no CUDA call yet) the
    variable the library reads at its start says whether to start paused."""

    def _lib(self) -> Any:
        import ctypes

        try:
            return ctypes.CDLL(str(proto.INJECT_LIB), mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        except OSError:
            return None  # not loaded: CUDA not initialized in this process yet

    def open(self) -> None:
        os.environ[proto.START_PAUSED] = "0"
        lib = self._lib()
        if lib is not None:
            lib.tbdtrace_collector_resume()

    def close(self) -> None:
        os.environ[proto.START_PAUSED] = "1"
        lib = self._lib()
        if lib is not None:
            lib.tbdtrace_collector_pause()


def start_in_child(plan: WindowPlan, collection: Collection, spool: str) -> Controller:
    """The controller of a captured process: windows go to the spool, SIGUSR2 opens
    on-demand windows (the process registers as ``ondemand-<pid>`` so that ``capture``
    forwards its trigger file and its own SIGUSR2), torch's NVTX ranges are watched."""
    c = Controller(plan, collection, SpoolRecorder(spool, os.environ.get(proto.STEPS_FILE)))
    activate(c)
    if plan.on_demand is not None:
        why = c.install_signal()
        if why is None:
            with open(os.path.join(spool, proto.on_demand_name(os.getpid())), "w") as f:
                f.write(str(os.getpid()))
        else:
            sys.stderr.write(f"tbdtrace: pid {os.getpid()}: {why}\n")
    if "torch" in sys.modules:
        watch_torch_nvtx(sys.modules["torch"])
    c.start()
    return c
