"""The passes' cache: values derived from an analysis context's rows, computed once.

A report runs a dozen passes over the same rows; what several of them derive (int64
columns, device row groups, merged busy intervals, kernel categories, the attribution)
is computed once per context (``ctx.cache``, ``engine/context.py``) and kept here. Each
kind of value is an :class:`Entry` declared once, next to the code that computes it, with
its type and a doc line, so a reader sees what the cache holds and mypy checks what each
entry returns::

    STATS: Entry[pa.Table] = Entry("kernels.stats", "per-name kernel statistics")
    table = ctx.cache.get(STATS, compute)
    ints = ctx.cache.get(INTS, compute, "kernels", "start_ns", -1)

A whole trace's cache is kept on the trace (``Trace.pass_cache``, opaque to storage), so
it lives and dies with the trace; a windowed context has its own. Values are shared
between passes and must not be modified (arrays are marked read-only where they are
made).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One kind of cached value: ``name`` (unique, "<module>.<value>") and what it holds."""

    name: str
    doc: str


class PassCache:
    """The cached values of one context, keyed by entry and the entry's arguments."""

    def __init__(self) -> None:
        self._values: dict[tuple[Hashable, ...], Any] = {}

    def get(self, entry: Entry[T], compute: Callable[[], T], *args: Hashable) -> T:
        """The value of ``entry`` for ``args``: ``compute()`` on the first call, kept."""
        key = (entry.name, *args)
        if key not in self._values:
            self._values[key] = compute()
        value: T = self._values[key]
        return value

    def contains(self, entry: Entry[Any], *args: Hashable) -> bool:
        """True when the value of ``entry`` for ``args`` is already computed."""
        return (entry.name, *args) in self._values

    def forget(self, entries: tuple[str, ...], *args: Hashable) -> None:
        """Drop the values of the entries named ``entries`` whose arguments begin with
        ``args`` (computed again when asked for)."""
        n = len(args)
        for key in [k for k in self._values if k[0] in entries and k[1 : 1 + n] == args]:
            del self._values[key]

    def forget_of(self, *args: Hashable) -> None:
        """Drop the values of every entry whose arguments begin with ``args`` (a table's
        columns, groups and codes: ``forget_of("ops")``); computed again when asked for."""
        n = len(args)
        for key in [k for k in self._values if k[1 : 1 + n] == args]:
            del self._values[key]

    def __len__(self) -> int:
        return len(self._values)

    @contextmanager
    def scratch(self) -> Iterator[None]:
        """Values computed inside the ``with`` block are dropped at its end (a one-off
        use that must not keep arrays alive); values computed before stay."""
        had = set(self._values)
        try:
            yield
        finally:
            for k in set(self._values) - had:
                del self._values[k]
