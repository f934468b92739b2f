"""The process's C heap: access to glibc's malloc tuning (``mallopt``, ``malloc_trim``).

Used by the CLI (which raises the trim threshold before a big input) and by the trace
opener (which hands a parser's freed staging memory back to the system).
"""

from __future__ import annotations

from functools import cache
from typing import Any


@cache
def glibc() -> Any:
    """The C library, when it is glibc (has mallopt and malloc_trim); else None."""
    import ctypes

    try:
        # glibc's soname first: ctypes.util.find_library runs ldconfig in a child
        # process (~25 ms, on the path of every analysis command).
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        import ctypes.util

        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        except OSError:
            return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
