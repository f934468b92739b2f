"""The Kineto vocabulary, in one place (standard library only).

Event categories (current and pre-1.10 names) and the staging table each is routed to
(:data:`ROUTES`, handed to the C++ parser, ``csrc/kineto``), the name patterns that carry
memcpy directions, memset kinds and step numbers, the words Kineto uses for sync and
memory kinds, and the reading of integers as Kineto writes them (file metadata:
:mod:`tbdtrace.importers.kineto.header`). The feed of the C++ parser
(:mod:`tbdtrace.importers.kineto.feed`) and the assembly of its columns
(:mod:`tbdtrace.importers.kineto.tables`) read them from here.
"""

from __future__ import annotations

import re
from typing import Any

# Kineto event categories (current names and pre-1.10 ones).
KERNEL_CATS = {"kernel", "Kernel"}
MEMCPY_CATS = {"gpu_memcpy", "Memcpy"}
MEMSET_CATS = {"gpu_memset", "Memset"}
RUNTIME_CATS = {"cuda_runtime", "Runtime"}
DRIVER_CATS = {"cuda_driver"}
OP_CATS = {"cpu_op", "Operator", "python_function"}
ANNOTATION_CATS = {"user_annotation", "gpu_user_annotation"}
SYNC_CATS = {"cuda_sync"}


# Categories of X events that become rows (any other X event is ignored).
ROUTED_CATS = frozenset(
    KERNEL_CATS
    | MEMCPY_CATS
    | MEMSET_CATS
    | RUNTIME_CATS
    | DRIVER_CATS
    | SYNC_CATS
    | OP_CATS
    | ANNOTATION_CATS
)

# Category -> staging table of "X" events (the Route enum of csrc/kineto/staging_tables.h).
_ROUTE_IDS = {
    "kernels": 0,
    "memcpy": 1,
    "memset": 2,
    "runtime": 3,
    "sync": 4,
    "ops": 5,
    "markers": 6,
}
ROUTES = sorted(
    [(c, _ROUTE_IDS["kernels"]) for c in KERNEL_CATS]
    + [(c, _ROUTE_IDS["memcpy"]) for c in MEMCPY_CATS]
    + [(c, _ROUTE_IDS["memset"]) for c in MEMSET_CATS]
    + [(c, _ROUTE_IDS["runtime"]) for c in RUNTIME_CATS | DRIVER_CATS]
    + [(c, _ROUTE_IDS["sync"]) for c in SYNC_CATS]
    + [(c, _ROUTE_IDS["ops"]) for c in OP_CATS]
    + [(c, _ROUTE_IDS["markers"]) for c in ANNOTATION_CATS]
)

STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
MEMCPY_RE = re.compile(r"^Memcpy (\w+) \((\w+) -> (\w+)\)")
MEMSET_RE = re.compile(r"^Memset \((\w+)\)")
SYNC_KINDS = {
    "Event Sync": "event",
    "Stream Sync": "stream",
    "Context Sync": "context",
    "Stream Wait Event": "stream_wait_event",
}
# c10::DeviceType values used in profiler memory events.
C10_DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "rocm"}
MEMORY_KIND = {
    "Pageable": "pageable",
    "Pinned": "pinned",
    "Device": "device",
    "Array": "array",
    "Managed": "managed",
}


_I64_MIN, _I64_MAX, _U64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1


def _any_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        s = v.strip()
        if s.lstrip("-").isdigit():
            return int(s)
        if s.startswith("stream "):
            return _any_int(s[7:])
    return None


def _int(v: Any) -> int | None:
    """An integer that fits int64 columns; out of range (seen in real args) -> None."""
    x = _any_int(v)
    return x if x is not None and _I64_MIN <= x <= _I64_MAX else None


def _u64(v: Any) -> int | None:
    """An integer for uint64 columns (addresses); negative or out of range -> None."""
    x = _any_int(v)
    return x if x is not None and 0 <= x <= _U64_MAX else None
