"""The process's C heap: access to glibc's malloc tuning (``mallopt``, ``malloc_trim``).

Used by the CLI (which raises the trim threshold before a big input) and by the trace
opener (which hands a parser's freed staging memory back to the system).
"""

from __future__ import annotations

from typing import Any


def glibc() -> Any:
    """The C library, when it is glibc (has mallopt and malloc_trim); else None."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
