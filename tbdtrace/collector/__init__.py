"""Capture: collectors (CUPTI, torch.profiler) and the host sampler.

``capture(out_dir, backend=...)`` is a context manager that profiles the code inside it
and writes a trace directory on exit, with a ``host_samples`` table from the host sampler
in every capture. Backends: ``torch`` (torch.profiler, :mod:`.torch_backend`); ``cupti``
(the native collector, when built); ``tf`` and ``mxnet`` (the framework's profiler in a
captured program, ``tbdtrace capture`` only: :mod:`.framework_child`); ``auto`` picks
cupti when a GPU is usable and the native collector is present, else torch (the capture
command then lets the program's framework decide). ``meta.backend`` names the one used
and ``meta.extra.backend_choice`` says why.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tbdtrace import trace
from tbdtrace.collector import cpuinfo
from tbdtrace.collector.cupti_backend import CuptiConfig
from tbdtrace.collector.host_sampler import HostSampler, SamplerConfig
from tbdtrace.collector.torch_backend import TorchBackend, TorchConfig
from tbdtrace.errors import TraceError

BACKENDS = ("auto", "cupti", "torch", "tf", "mxnet")
# Backends that run only in a captured child (``tbdtrace capture``): the framework's
# profiler starts when the program imports it (framework_child).
CHILD_ONLY = ("tf", "mxnet")
_CUPTI_MODULE = "tbdtrace.collector.cupti_backend"


def gpu_usable() -> tuple[bool, str]:
    """(usable, why): NVML sees at least one device."""
    try:
        import pynvml

        pynvml.nvmlInit()
        n = pynvml.nvmlDeviceGetCount()
    except Exception as e:  # noqa: BLE001 (any NVML failure: no usable GPU)
        return False, f"NVML unavailable ({type(e).__name__})"
    return n > 0, f"NVML reports {n} GPU(s)"


def choose_backend(requested: str) -> tuple[str, str]:
    """Resolve ``auto``; returns (backend, reason)."""
    if requested not in BACKENDS:
        raise TraceError(f"unknown backend {requested!r}; choose one of {', '.join(BACKENDS)}")
    if requested != "auto":
        return requested, "requested"
    ok, why = gpu_usable()
    if not ok:
        return "torch", f"auto: no usable GPU ({why})"
    try:
        mod = importlib.import_module(_CUPTI_MODULE)
    except ImportError:
        return "torch", f"auto: {why} but the native CUPTI collector is not built"
    if not mod.available():  # e.g. driver too old for this CUPTI, or another CUPTI user
        return "torch", f"auto: {why} but a CUPTI session cannot start here"
    return "cupti", f"auto: {why}"


@dataclass(frozen=True)
class CaptureConfig:
    backend: str = "auto"  # auto, cupti or torch
    sampler: SamplerConfig = field(default_factory=SamplerConfig)  # host sampler settings
    torch: TorchConfig = field(default_factory=TorchConfig)  # torch backend settings
    cupti: CuptiConfig = field(default_factory=CuptiConfig)  # cupti backend settings
    workload: str | None = None  # recorded in meta.workload


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
        if self.backend_name == "torch":
            self.backend: Any = TorchBackend(config.torch)
        else:
            self.backend = importlib.import_module(_CUPTI_MODULE).Backend(config.cupti)
        self.sampler = HostSampler(config.sampler)
        self.path: Path | None = None

    def start(self) -> None:
        self.sampler.start()
        try:
            self.backend.start()
        except BaseException:
            self.sampler.stop()
            raise

    def stop(self) -> Path:
        tables, meta = self.backend.stop()
        tables["host_samples"] = self.sampler.stop()
        meta = dict(meta)
        meta.update(
            backend=self.backend_name, host=socket.gethostname(), workload=self.config.workload
        )
        extra = dict(meta.get("extra") or {})
        extra.update(
            backend_choice=self.reason,
            cpu=cpuinfo.describe(),
            host_sampler={
                "rate_hz": self.config.sampler.rate_hz,
                "nvml": self.sampler.nvml_status,
                "pid": os.getpid(),
            },
        )
        meta["extra"] = extra
        self.path = trace.write(self.out_dir, tables, meta)
        return self.path


@contextmanager
def capture(
    out_dir: str | os.PathLike[str], backend: str = "auto", config: CaptureConfig | None = None
) -> Iterator[Capture]:
    """Profile the body; writes the trace directory ``out_dir`` when it ends."""
    cfg = config or CaptureConfig(backend=backend)
    if config is not None and backend != "auto":
        cfg = dataclasses.replace(config, backend=backend)
    c = Capture(Path(out_dir), cfg)
    c.start()
    try:
        yield c
    finally:
        c.stop()


_active: Capture | None = None


def start(
    out_dir: str | os.PathLike[str], backend: str = "auto", config: CaptureConfig | None = None
) -> Capture:
    """Begin a capture that :func:`stop` ends (one at a time per process)."""
    global _active
    if _active is not None:
        raise TraceError(f"a capture into {_active.out_dir} is already running; stop() it first")
    cfg = config or CaptureConfig(backend=backend)
    if config is not None and backend != "auto":
        cfg = dataclasses.replace(config, backend=backend)
    c = Capture(Path(out_dir), cfg)
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


__all__ = [
    "BACKENDS",
    "Capture",
    "CaptureConfig",
    "capture",
    "choose_backend",
    "gpu_usable",
    "start",
    "stop",
]
