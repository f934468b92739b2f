"""Row-at-a-time column builders for importers written in Python."""

from __future__ import annotations

from typing import Any

from tbdtrace import schema


class TableBuilder:
    """Collects rows of one schema table as Python lists, one list per column.

    ``append(**values)`` takes column names; omitted columns are null. ``columns()``
    gives the mapping that ``tbdtrace.trace.write`` accepts.
    """

    def __init__(self, table: str):
        self.table = schema.table(table)
        self.names = tuple(self.table.column_names)
        self._cols: dict[str, list[Any]] = {n: [] for n in self.names}
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def append(self, **values: Any) -> None:
        for k in values:
            if k not in self._cols:
                raise KeyError(f"table {self.table.name!r} has no column {k!r}")
        for n, col in self._cols.items():
            col.append(values.get(n))
        self._n += 1

    def column_values(self, name: str) -> list[Any]:
        return self._cols[name]

    def columns(self) -> dict[str, list[Any]]:
        """Columns that hold at least one value (the rest are written as nulls)."""
        return {n: v for n, v in self._cols.items() if any(x is not None for x in v)}
