"""Analysis of a trace: the facade, the passes and the engine they share.

* ``tbdtrace.analysis.facade``: :func:`analyze` and :class:`TraceAnalysis`, the one entry
  point for library users (also ``tbdtrace.analyze``);
* ``tbdtrace.analysis.passes``: one module per declared output, ``run(ctx, config)``;
* ``tbdtrace.analysis.engine``: what the passes share (the window and the analysis
  context, the cache, shared arrays, grouping, intervals, joins, peaks, formulas);
* ``tbdtrace.analysis.sql`` (queries) and ``tbdtrace.analysis.compare`` (two traces).

Layers import downward only (docs/ARCHITECTURE.md): the engine knows storage, the passes
know the engine, the facade knows the passes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tbdtrace.analysis.facade import TraceAnalysis, analyze

__all__ = ["TraceAnalysis", "analyze"]


def __getattr__(name: str) -> object:
    # Loaded on first use: a pass or the collector imports the engine without the facade.
    if name in __all__:
        from tbdtrace.analysis import facade

        return getattr(facade, name)
    raise AttributeError(f"module 'tbdtrace.analysis' has no attribute {name!r}")
