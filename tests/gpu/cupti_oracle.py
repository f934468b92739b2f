"""An independent reference collector on NVIDIA's cupti-python (the `cupti` package): the
GPU check captures one deterministic workload with it and with tbdtrace's native collector
and compares kernel names, counts per step and duration medians (tests/gpu/test_gpu.py).

It shares no code with tbdtrace's collector: its own buffers (cupti-python's), its own
record decoding (cupti-python's record objects), kernels, copies and the launch calls only.
Used only by the GPU check; never by the package.

Without a CUDA driver, :meth:`Oracle.start` raises :class:`OracleError` with one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

BUFFER_BYTES = 8 << 20  # cupti-python's sample size


class OracleError(RuntimeError):
    """The oracle cannot run here (one line for people)."""


@dataclass
class OracleTrace:
    # (name, start_ns, end_ns, correlation_id) per kernel
    kernels: list[tuple[str, int, int, int]] = field(default_factory=list)
    # (copy kind, bytes, start_ns, end_ns, correlation_id) per memcpy
    memcpy: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    # (cbid, start_ns, end_ns, correlation_id) per runtime call
    launches: list[tuple[int, int, int, int]] = field(default_factory=list)


def _cupti() -> Any:
    try:
        from cupti import cupti
    except ImportError as e:  # the requirement is pinned; a GPU machine may lack the wheel
        raise OracleError(f"cupti-python is not installed ({e}); see docs/COLLECTOR.md") from None
    return cupti


class Oracle:
    """Start, run the workload, stop: the records, decoded by cupti-python."""

    def __init__(self) -> None:
        self.trace = OracleTrace()
        self._on = False

    def _completed(self, activities: list[Any]) -> None:
        c = _cupti()
        for a in activities:
            if a.kind == c.ActivityKind.CONCURRENT_KERNEL:
                self.trace.kernels.append((a.name, a.start, a.end, a.correlation_id))
            elif a.kind == c.ActivityKind.MEMCPY:
                self.trace.memcpy.append((a.copy_kind, a.bytes, a.start, a.end, a.correlation_id))
            elif a.kind == c.ActivityKind.RUNTIME:
                self.trace.launches.append((a.cbid, a.start, a.end, a.correlation_id))

    def start(self) -> None:
        c = _cupti()
        try:
            c.activity_register_callbacks(lambda: (BUFFER_BYTES, 0), self._completed)
            for kind in (
                c.ActivityKind.CONCURRENT_KERNEL,
                c.ActivityKind.MEMCPY,
                c.ActivityKind.RUNTIME,
            ):
                c.activity_enable(kind)
        except Exception as e:  # cupti-python raises its own NotSupportedError, CUPTIError
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise OracleError(f"cupti-python oracle: {first}") from None
        self._on = True

    def stop(self) -> OracleTrace:
        c = _cupti()
        if self._on:
            c.activity_flush_all(1)
            for kind in (
                c.ActivityKind.CONCURRENT_KERNEL,
                c.ActivityKind.MEMCPY,
                c.ActivityKind.RUNTIME,
            ):
                c.activity_disable(kind)
            self._on = False
        return self.trace
