"""Capture: collectors (CUPTI, torch.profiler, TensorFlow's and MXNet's profilers), the
host sampler and capture windows.

``capture(out_dir, backend=...)`` is a context manager that profiles the code inside it
and writes a trace directory on exit, with a ``host_samples`` table from the host sampler
in every capture (:mod:`.inprocess`). ``tbdtrace capture -- COMMAND`` runs a command
under a backend (:mod:`.run`, the one capture runner). Backends: ``torch``
(torch.profiler, :mod:`.torch_backend`); ``cupti`` (the native collector, when built);
``tf`` and ``mxnet`` (the framework's profiler in a captured program, ``tbdtrace capture``
only: :mod:`.profiler_child`); ``auto`` picks cupti when a GPU is usable and the native
collector is present, else torch (the capture command then lets the program's framework
decide). ``meta.backend`` names the one used and ``meta.extra.backend_choice`` says why.

This module stays light (no pyarrow, no framework): the bootstrap of a captured process
and ``tbdtrace.step()`` import it. Importing it points NVTX at the injection library
(:func:`route_nvtx`), so that an in-process CUPTI capture sees NVTX ranges.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from tbdtrace.collector import child_protocol as _proto
from tbdtrace.errors import TraceError

BACKENDS = ("auto", "cupti", "torch", "tf", "mxnet")
# Backends that run only in a captured child (``tbdtrace capture``): the framework's
# profiler starts when the program imports it (profiler_child).
CHILD_ONLY = ("tf", "mxnet")
_CUPTI_MODULE = "tbdtrace.collector.cupti_backend"


def route_nvtx() -> None:
    """Point NVTX at the injection library (which hands it to CUPTI) unless the program or
    another tool chose an injection. NVTX reads the variable once, at the process's first
    NVTX call: importing this package before the program's first NVTX range is what lets
    an in-process capture see NVTX ranges."""
    if _proto.INJECT_LIB.exists():
        os.environ.setdefault(_proto.NVTX_INJECTION, str(_proto.INJECT_LIB))


route_nvtx()


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


_LAZY = {
    "Capture": "tbdtrace.collector.inprocess",
    "capture": "tbdtrace.collector.inprocess",
    "start": "tbdtrace.collector.inprocess",
    "stop": "tbdtrace.collector.inprocess",
    "CaptureConfig": "tbdtrace.collector.run",
    "OnDemand": "tbdtrace.collector.windows",
    "Schedule": "tbdtrace.collector.windows",
    "schedule": "tbdtrace.collector.windows",
    "step": "tbdtrace.collector.windows",
}


def __getattr__(name: str) -> Any:
    # The capture API loads pyarrow and the backends: only when used.
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tbdtrace.collector' has no attribute {name!r}")


__all__ = [
    "BACKENDS",
    "Capture",
    "CaptureConfig",
    "OnDemand",
    "Schedule",
    "capture",
    "choose_backend",
    "gpu_usable",
    "schedule",
    "start",
    "step",
    "stop",
]
