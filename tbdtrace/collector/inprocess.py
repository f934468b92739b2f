"""The in-process capture strategy: ``tbdtrace.capture()``, ``tbdtrace.start()``/``stop()``.

The backend (torch.profiler, or the native CUPTI collector) collects in the calling
process; the host sampler samples it from a helper process (:class:`~.host_sampler.
HelperSampler`). With capture windows (``steps=``, ``schedule=``, ``on_demand=``) a
:class:`~.windows.Controller` opens and closes the collection at step boundaries, marked
by ``tbdtrace.step()`` or a trainer callback (:mod:`tbdtrace.integrations`). The meta and
the windows are completed by the runner's :func:`.run.describe` and
:func:`.run.apply_windows`, as a captured command's are.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tbdtrace import trace
from tbdtrace.collector import CHILD_ONLY, choose_backend, windows
from tbdtrace.collector.host_sampler import HelperSampler
from tbdtrace.collector.run import CaptureConfig, apply_windows, describe
from tbdtrace.errors import TraceError

_CUPTI_MODULE = "tbdtrace.collector.cupti_backend"


class _TorchWindows:
    """torch.profiler per window; the windows' tables are kept (as a captured child's)."""

    def __init__(self, config: CaptureConfig):
        from tbdtrace.collector.torch_backend import TorchBackend

        self._make = lambda: TorchBackend(config.torch)
        self.backend: Any = None  # the profiler of the last window (Capture.backend)
        self.collected: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def open(self) -> None:
        self.backend = self._make()
        self.backend.start()

    def close(self) -> None:
        self.collected.append(self.backend.stop())

    def stop(self) -> tuple[dict[str, Any], dict[str, Any]]:
        from tbdtrace.collector.profiler_child import combine

        tables, meta = combine(self.collected)
        meta.setdefault("source", "torch")
        return tables, meta


class _CuptiWindows:
    """The native collector runs for the whole capture, paused outside the windows."""

    def __init__(self, config: CaptureConfig):
        self.backend: Any = importlib.import_module(_CUPTI_MODULE).Backend(config.cupti)
        self._native: Any = None

    def start(self) -> None:
        self.backend.start()
        self._native = importlib.import_module(_CUPTI_MODULE).native()
        self._native.pause()

    def open(self) -> None:
        self._native.resume()

    def close(self) -> None:
        self._native.pause()

    def stop(self) -> tuple[dict[str, Any], dict[str, Any]]:
        return self.backend.stop()  # type: ignore[no-any-return]


class Capture:
    """Handle yielded by :func:`capture`; after exit, ``backend`` is the backend object
    (``capture.backend.profiler`` is the torch profiler for the torch backend) and
    ``path`` the written trace directory."""

    def __init__(self, out_dir: Path, config: CaptureConfig):
        self.out_dir = out_dir
        self.config = config
        self.backend_name, self.reason = choose_backend(config.backend)
        if self.backend_name in CHILD_ONLY:
            raise TraceError(
                f"backend {self.backend_name} runs in a captured program only; use "
                f"`tbdtrace capture --backend {self.backend_name} -- COMMAND`"
            )
        self._windows: Any = None
        self.controller: windows.Controller | None = None
        self.recorder = windows.MemoryRecorder()
        if config.windows is not None:
            if self.backend_name == "cupti":
                self._windows = _CuptiWindows(config)
            else:
                self._windows = _TorchWindows(config)
            self.controller = windows.Controller(config.windows, self._windows, self.recorder)
            self.backend: Any = self._windows.backend
        elif self.backend_name == "torch":
            from tbdtrace.collector.torch_backend import TorchBackend

            self.backend = TorchBackend(config.torch)
        else:
            self.backend = importlib.import_module(_CUPTI_MODULE).Backend(config.cupti)
        self._dir = Path(tempfile.mkdtemp(prefix="tbdtrace-capture-"))
        self.sampler = HelperSampler(config.sampler, self._dir / "host_samples.jsonl")
        self.path: Path | None = None

    def start(self) -> None:
        self.sampler.start()
        try:
            if self.controller is None:
                self.backend.start()
                return
            if isinstance(self._windows, _CuptiWindows):
                self._windows.start()
            if windows.active() is not None:
                raise TraceError("another capture with windows runs in this process")
            windows.activate(self.controller)
            if self.config.windows is not None and self.config.windows.on_demand is not None:
                why = self.controller.install_signal()
                if why is not None:
                    raise TraceError(f"on-demand capture: {why}")
            self.controller.start()
        except BaseException:
            windows.activate(None)
            self.sampler.stop()
            shutil.rmtree(self._dir, ignore_errors=True)
            raise

    def step(self) -> None:
        """The current step ends, the next begins (as :func:`tbdtrace.step`)."""
        if self.controller is not None:
            self.controller.mark("api")

    def stop(self) -> Path:
        try:
            if self.controller is not None:
                self.controller.finish(restore_signal=True)
                windows.activate(None)
                tables, meta = self._windows.stop()
                self.backend = self._windows.backend
            else:
                tables, meta = self.backend.stop()
            tables = dict(tables)
        finally:
            samples = self.sampler.stop()
            shutil.rmtree(self._dir, ignore_errors=True)
        tables["host_samples"] = samples
        meta = dict(meta)
        if self.controller is not None:
            assert self.config.windows is not None
            self._add_steps(tables)
            for note in apply_windows(tables, meta, self.recorder.windows, self.config.windows):
                meta.setdefault("extra", {}).setdefault("notes", []).append(note)
        meta["workload"] = self.config.workload
        sampler = {
            "rate_hz": self.config.sampler.rate_hz,
            "nvml": self.sampler.nvml_status,
            "pid": os.getpid(),
        }
        describe(meta, self.backend_name, self.reason, sampler)
        self.path = trace.write(self.out_dir, tables, meta)
        return self.path

    def _add_steps(self, tables: dict[str, Any]) -> None:
        """The steps the controller timed (tbdtrace.step(), a trainer callback)."""
        rows = self.recorder.steps
        if not rows or "steps" in tables:
            return
        tables["steps"] = {
            "step": [r[0] for r in rows],
            "start_ns": [r[1] for r in rows],
            "end_ns": [r[2] for r in rows],
            "pid": [r[3] for r in rows],
            "source": [r[4] for r in rows],
        }


def _config(
    backend: str, config: CaptureConfig | None, plan: windows.WindowPlan | None
) -> CaptureConfig:
    cfg = config or CaptureConfig(backend=backend)
    if config is not None and backend != "auto":
        cfg = dataclasses.replace(cfg, backend=backend)
    if plan is not None:
        cfg = dataclasses.replace(cfg, windows=plan)
    return cfg


def _plan(
    steps: tuple[int, int] | None,
    schedule: windows.Schedule | None,
    on_demand: windows.OnDemand | None,
) -> windows.WindowPlan | None:
    if steps is None and schedule is None and on_demand is None:
        return None
    return windows.WindowPlan(steps, schedule, on_demand)


@contextmanager
def capture(
    out_dir: str | os.PathLike[str],
    backend: str = "auto",
    config: CaptureConfig | None = None,
    *,
    steps: tuple[int, int] | None = None,
    schedule: windows.Schedule | None = None,
    on_demand: windows.OnDemand | None = None,
) -> Iterator[Capture]:
    """Profile the body; writes the trace directory ``out_dir`` when it ends.

    ``steps=(A, B)``, ``schedule=tbdtrace.schedule(...)`` or ``on_demand=OnDemand(...)``
    record only those steps (marked by ``tbdtrace.step()`` or a trainer callback)."""
    c = Capture(Path(out_dir), _config(backend, config, _plan(steps, schedule, on_demand)))
    c.start()
    try:
        yield c
    finally:
        c.stop()


_active: Capture | None = None


def start(
    out_dir: str | os.PathLike[str],
    backend: str = "auto",
    config: CaptureConfig | None = None,
    *,
    steps: tuple[int, int] | None = None,
    schedule: windows.Schedule | None = None,
    on_demand: windows.OnDemand | None = None,
) -> Capture:
    """Begin a capture that :func:`stop` ends (one at a time per process)."""
    global _active
    if _active is not None:
        raise TraceError(f"a capture into {_active.out_dir} is already running; stop() it first")
    c = Capture(Path(out_dir), _config(backend, config, _plan(steps, schedule, on_demand)))
    c.start()
    _active = c
    return c


def stop() -> Path:
    """End the capture :func:`start` began; returns the written trace directory."""
    global _active
    if _active is None:
        raise TraceError("no capture is running; call tbdtrace.start(out_dir) first")
    c, _active = _active, None
    return c.stop()
