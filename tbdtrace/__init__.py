"""tbdtrace: capture and analyze where the time and memory of DNN training go.

Public API:
    open(path) -> Trace           read a trace directory (tbdtrace.trace)
    write(path, tables, meta)     write one
    capture(out_dir, ...)         context manager: capture the code inside (tbdtrace.collector)
    passes.<name>.run(trace)      analysis passes
"""

from __future__ import annotations

from tbdtrace.errors import TraceError
from tbdtrace.trace import Trace, open, write  # noqa: A004 - documented API name

__version__ = "0.1.0"

__all__ = ["Trace", "TraceError", "open", "write", "__version__"]


def __getattr__(name: str) -> object:
    # capture pulls in the native module and framework backends: load it on first use.
    if name in ("capture", "start", "stop"):
        from tbdtrace import collector

        return getattr(collector, name)
    raise AttributeError(f"module 'tbdtrace' has no attribute {name!r}")
