"""The capture backend contract shared by the CUPTI and torch backends.

A backend module exposes ``available() -> bool`` (can it capture on this machine now?)
and a class whose instances follow :class:`Backend`: ``start()`` begins capturing in the
calling process, ``stop()`` ends it and returns ``(tables, meta)``, where ``tables`` maps
schema table names to Arrow tables or column mappings (as :func:`tbdtrace.trace.write`
takes) and ``meta`` holds meta.json keys (``source``, ``clock``, ``clock_offset_ns``,
``dropped_records``, ``extra``, ...). :func:`tbdtrace.collector.capture` adds the host
samples and writes the trace directory. Failures raise
:class:`tbdtrace.errors.TraceError` with one line for people.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class Backend(Protocol):
    def start(self) -> None:
        """Begin capturing in this process; raises TraceError if it cannot."""

    def stop(self) -> tuple[dict[str, Any], Mapping[str, Any]]:
        """Stop capturing; returns (tables, meta) for tbdtrace.trace.write."""


class BackendModule(Protocol):
    def available(self) -> bool:
        """True when this backend can capture on this machine."""


__all__ = ["Backend", "BackendModule"]
