"""tbdtrace: capture and analyze where the time and memory of DNN training go.

Public API:
    open(path) -> Trace           read a trace directory (tbdtrace.trace)
    write(path, tables, meta)     write one
    capture(out_dir, ...)         context manager: capture the code inside (tbdtrace.collector)
    step()                        mark a training step's end (capture windows)
    schedule(wait=, warmup=, active=, repeat=)  windows that repeat, for capture(schedule=)
    analyze(trace) -> TraceAnalysis  every analysis of a trace as methods (tbdtrace.analysis)
    analysis.passes.<name>.run(trace)  analysis passes
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tbdtrace.errors import TraceError

if TYPE_CHECKING:
    from tbdtrace.analysis.facade import TraceAnalysis, analyze
    from tbdtrace.trace import Trace, open, write  # noqa: A004 - documented API name
    from tbdtrace.version import __version__

__all__ = ["Trace", "TraceAnalysis", "TraceError", "analyze", "open", "write", "__version__"]


def __getattr__(name: str) -> object:
    # Loaded on first use, so `import tbdtrace` (and the command line, before it knows
    # what it will do) does not pay for pyarrow and numpy: see docs/DECISIONS.md.
    if name == "__version__":
        from tbdtrace.version import __version__

        return __version__
    if name in ("Trace", "open", "write"):
        from tbdtrace import trace

        return getattr(trace, name)
    if name in ("analyze", "TraceAnalysis"):
        from tbdtrace.analysis import facade

        return getattr(facade, name)
    # capture pulls in the native module and framework backends (step and schedule do not).
    if name in ("capture", "start", "stop", "step", "schedule", "OnDemand"):
        from tbdtrace import collector

        return getattr(collector, name)
    raise AttributeError(f"module 'tbdtrace' has no attribute {name!r}")
