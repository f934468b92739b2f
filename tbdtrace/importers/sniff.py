"""Which format a profiler file is in, from its first bytes (standard library only).

Kept apart from the importers so that naming a file's format, and starting its import on
another thread, need neither pyarrow nor numpy (``tbdtrace report FILE`` starts parsing
while the analysis modules load: docs/DECISIONS.md).

Detection asks for positive evidence of a format (docs/IMPORTERS.md, "Format
detection"): a Chrome-trace JSON file is not taken for a PyTorch profiler trace unless it
carries Kineto's own keys or event categories. :func:`lookalike` names the Chrome-trace
files tbdtrace recognises but does not import (a browser trace, a JAX trace), so the
error can say what the file is.
"""

from __future__ import annotations

import re

TV_MAGIC = b'"displayTimeUnit":"ns","metadata":{"highres-ticks"'
SQLITE_MAGIC = b"SQLite format 3\x00"

# Top-level keys only Kineto writes, and its event categories (current and pre-1.10).
_KINETO_KEYS = re.compile(
    rb'"(schemaVersion|deviceProperties|distributedInfo|baseTimeNanoseconds)"\s*:'
)
_KINETO_CATS = re.compile(
    rb'"cat"\s*:\s*"(cpu_op|kernel|Kernel|cuda_runtime|cuda_driver|Runtime|Operator|'
    rb"gpu_memcpy|gpu_memset|Memcpy|Memset|python_function|user_annotation|"
    rb'gpu_user_annotation|cuda_sync|cpu_instant_event|ac2g|fwdbwd)"'
)
_PROFILER_STEP = b'"ProfilerStep#'
# What other Chrome-trace writers leave in their files.
_BROWSER = re.compile(
    rb'"cat"\s*:\s*"[^"]*(devtools\.timeline|disabled-by-default-devtools|blink|'
    rb"v8\.execute|toplevel|loading|navigation|cc,|viz)"
    rb'|"(CrBrowserMain|CrRendererMain|Renderer|Browser)"'
)
_JAX = re.compile(rb"PjitFunction|PjRt|jaxlib|\bjax\.|pjit")


def _is_json_start(head: bytes) -> bool:
    return head.lstrip(b" \t\r\n\xef\xbb\xbf")[:1] in (b"{", b"[")


def _chrome_like(head: bytes) -> bool:
    return _is_json_start(head) and (b'"traceEvents"' in head or b'"ph"' in head)


def tensorflow(head: bytes) -> bool:
    """An XSpace protobuf (first field: planes, holding a /host: or /device: plane) or
    TensorFlow trace-viewer JSON (not a JAX one, which shares its layout)."""
    if TV_MAGIC in head[:200]:
        return not _JAX.search(head)
    return head[:1] == b"\x0a" and (b"/host:CPU" in head or b"Task Environment" in head)


def mxnet(head: bytes) -> bool:
    """Chrome-trace JSON with MXNet's categories or process names."""
    return b'"traceEvents"' in head and (
        b'"MXNET_C_API"' in head
        or b'"Device Storage"' in head
        or (b'"cat": "operator"' in head and b'"cpu/0"' in head)
    )


def kineto(head: bytes) -> bool:
    """Chrome-trace JSON as Kineto writes it: its top-level keys (schemaVersion,
    deviceProperties, ...), its event categories (cpu_op, kernel, cuda_runtime, ...) or
    ProfilerStep# ranges."""
    if _is_json_start(head) and _KINETO_KEYS.search(head):
        return True
    return _chrome_like(head) and bool(_KINETO_CATS.search(head) or _PROFILER_STEP in head)


def nsys(head: bytes) -> bool:
    """An SQLite database (any; the nsys importer checks for the nsys tables)."""
    return head.startswith(SQLITE_MAGIC)


def lookalike(head: bytes) -> str | None:
    """What a file no format accepts looks like, when tbdtrace can tell; else None."""
    if not _chrome_like(head) and TV_MAGIC not in head[:200]:
        return None
    if _JAX.search(head):
        return "a JAX profiler trace, which tbdtrace does not import"
    if _BROWSER.search(head):
        return (
            "a Chrome browser (DevTools) performance trace, not a training profile; "
            "tbdtrace imports PyTorch (Kineto), TensorFlow, MXNet and Nsight Systems files"
        )
    return (
        "a Chrome-trace JSON file without the marks of a PyTorch profiler (Kineto), MXNet "
        "or TensorFlow trace (no schemaVersion, deviceProperties or Kineto event "
        "categories); if it is a Kineto trace, force it with --format kineto"
    )


# Tried in this order, the first that accepts the file wins. TensorFlow trace-viewer and
# MXNet JSON are Chrome traces too: their sniffs run before Kineto's.
SNIFFERS = {"tensorflow": tensorflow, "mxnet": mxnet, "kineto": kineto, "nsys": nsys}
