"""Which format a profiler file is in, from its first bytes (standard library only).

Kept apart from the importers so that naming a file's format, and starting its import on
another thread, need neither pyarrow nor numpy (``tbdtrace report FILE`` starts parsing
while the analysis modules load: docs/DECISIONS.md).
"""

from __future__ import annotations

TV_MAGIC = b'"displayTimeUnit":"ns","metadata":{"highres-ticks"'
SQLITE_MAGIC = b"SQLite format 3\x00"


def tensorflow(head: bytes) -> bool:
    """An XSpace protobuf (first field: planes, holding a /host: or /device: plane) or
    TensorFlow trace-viewer JSON."""
    if TV_MAGIC in head[:200]:
        return True
    return head[:1] == b"\x0a" and (b"/host:CPU" in head or b"Task Environment" in head)


def mxnet(head: bytes) -> bool:
    """Chrome-trace JSON with MXNet's categories or process names."""
    return b'"traceEvents"' in head and (
        b'"MXNET_C_API"' in head
        or b'"Device Storage"' in head
        or (b'"cat": "operator"' in head and b'"cpu/0"' in head)
    )


def kineto(head: bytes) -> bool:
    """Chrome-trace JSON as Kineto writes it."""
    text = head.lstrip()
    return text[:1] in (b"{", b"[") and (
        b'"traceEvents"' in head or b'"schemaVersion"' in head or b'"ph"' in head
    )


def nsys(head: bytes) -> bool:
    """An SQLite database (any; the nsys importer checks for the nsys tables)."""
    return head.startswith(SQLITE_MAGIC)


# Tried in this order, the first that accepts the file wins. TensorFlow trace-viewer and
# MXNet JSON are Chrome traces too: their sniffs run before Kineto's.
SNIFFERS = {"tensorflow": tensorflow, "mxnet": mxnet, "kineto": kineto, "nsys": nsys}
