"""``--backend cupti``: the native CUPTI collector (``tbdtrace._native``), in-process.

:class:`Backend`: ``start()`` enables the CUPTI activity kinds of :class:`CuptiConfig` and
spools column chunks to a temporary file; ``stop()`` flushes (forced), reads the spool back
and returns the tables (the in-process capture, :mod:`.inprocess`, writes them). Without a CUDA
driver or device ``start()`` raises TraceError with the line :data:`NO_DEVICE` starts with.
Running another CUPTI user at the same time (nsys, ncu, torch.profiler, the TensorFlow
profiler) is refused at start when CUPTI reports it, naming the tool where CUPTI can.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tbdtrace.collector import child_protocol as proto
from tbdtrace.collector import merge, route_nvtx, spool
from tbdtrace.collector.native import native
from tbdtrace.errors import TraceError

NO_DEVICE = "no CUDA driver/device"
API_SETS = ("lite", "full")
MIB = 1 << 20
# CUDA_INJECTION64_PATH for commands, and NVTX_INJECTION64_PATH everywhere
# (csrc/collector/inject.cpp).
INJECT_LIB = proto.INJECT_LIB


@dataclass(frozen=True)
class CuptiConfig:
    activities: tuple[str, ...] = ()  # CUPTI kinds (see activity_names()); () = defaults
    # Runtime/driver calls the runtime and driver kinds record: "lite" = the calls the
    # analysis reads (launches, copies, sets, syncs and waits, allocations), the rest off at
    # the source; "full" = every call (docs/COLLECTOR.md, "Lite and full API sets").
    api: str = "lite"
    buffer_bytes: int = 4 * MIB  # one CUPTI activity buffer
    buffer_count: int = 8  # buffers zeroed and faulted in at start
    buffer_max: int = 64  # the pool grows with the producing threads up to this many
    flush_interval_ms: int = 1000  # periodic flush and spill to the spool
    # capture command: PyTorch tensor allocations from the caching allocator's history,
    # labelled (tbdtrace.collector.memory.torch_cuda), as the memory table's allocated level:
    # "posthoc" (snapshots + phases), "exact" (hook tracker) or "off"; True/False mean
    # "posthoc"/"off"
    torch_memory: str | bool = "posthoc"
    # capture command: PyTorch matmul/convolution/attention ops with shapes and FLOPs, from
    # a dispatch-level recorder (tbdtrace.collector.torch_flops), as ``ops`` rows
    torch_flops: bool = False  # capture --torch-flops (its host cost: docs/DECISIONS.md 75)
    # capture command: "flops" = per-kernel FLOPs from hardware counters (Range Profiling API,
    # kernel replay: serializes and replays kernels; a separate run mode). "" = off.
    counters: str = ""

    def __post_init__(self) -> None:
        from tbdtrace.collector.memory.torch_labels import check_mode

        object.__setattr__(self, "torch_memory", check_mode(self.torch_memory))


def activity_names() -> list[str]:
    return list(native().activity_names())


def resolve_activities(cfg: CuptiConfig) -> list[str]:
    """Kinds to enable; TraceError naming the bad one and the valid names."""
    acts = list(cfg.activities) or list(native().default_activities())
    known = set(activity_names())
    for a in acts:
        if a not in known:
            raise TraceError(f"unknown activity {a!r}; choose from {', '.join(sorted(known))}")
    return acts


def check_config(cfg: CuptiConfig) -> None:
    if cfg.buffer_bytes < 64 * 1024 or cfg.buffer_count < 1:
        raise TraceError("CUPTI buffers must be at least 64 KiB and at least one buffer")
    if cfg.buffer_max < cfg.buffer_count:
        raise TraceError("--buffer-max must be at least --buffer-count")
    if cfg.api not in API_SETS:
        raise TraceError(f"unknown API set {cfg.api!r}; choose {' or '.join(API_SETS)}")
    if cfg.flush_interval_ms < 1:
        raise TraceError("--flush-interval-ms must be >= 1")
    if cfg.counters not in ("", "flops"):
        raise TraceError(f"unknown counters {cfg.counters!r}; choose flops")


def probe() -> tuple[bool, str, str]:
    """(usable, status, one line): starts and stops a session on a throw-away spool."""
    n = native()
    with tempfile.TemporaryDirectory(prefix="tbdtrace-probe-") as d:
        ok, status, msg = n.start(
            str(Path(d) / "probe.tbds"), ["context"], 64 * 1024, 1, 1000, "lite", 1
        )
        if ok:
            n.stop()
    return ok, status, msg if not ok else "CUPTI usable"


def available() -> bool:
    try:
        return probe()[0]
    except TraceError:
        return False


class Backend:
    """In-process CUPTI capture (see the module docstring)."""

    def __init__(self, config: CuptiConfig | None = None):
        self.config = config or CuptiConfig()
        self._dir: Path | None = None

    def start(self) -> None:
        check_config(self.config)
        if self.config.counters:
            raise TraceError(
                "cupti backend: hardware counters need a capture of a command "
                "(tbdtrace capture --counters flops -- COMMAND), not in-process capture"
            )
        acts = resolve_activities(self.config)
        route_nvtx()
        self._dir = Path(tempfile.mkdtemp(prefix="tbdtrace-spool-"))
        ok, _status, msg = native().start(
            str(self._dir / f"{os.getpid()}.tbds"),
            acts,
            self.config.buffer_bytes,
            self.config.buffer_count,
            self.config.flush_interval_ms,
            self.config.api,
            self.config.buffer_max,
        )
        if not ok:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
            raise TraceError(f"cupti backend: {msg}")

    def stop(self) -> tuple[dict[str, Any], dict[str, Any]]:
        if self._dir is None:
            raise TraceError("cupti backend: stop() without a successful start()")
        path = native().stop()
        try:
            tables, meta = merge.merge([spool.read(path)])
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        why = merge.incomplete_reason(meta)
        if why is not None:
            warnings.warn(f"cupti backend: {why}", RuntimeWarning, stacklevel=2)
        return tables, meta


__all__ = [
    "API_SETS",
    "INJECT_LIB",
    "NO_DEVICE",
    "Backend",
    "CuptiConfig",
    "activity_names",
    "available",
    "probe",
]
