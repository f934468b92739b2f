"""Any report section as flat tables: the CSV output and the HTML report's sortable tables.

A section's data becomes tables by shape, so a section added later needs no code here:

- a list of dicts: one table, a row per item; nested dicts become ``a.b`` columns and
  nested lists a JSON text cell;
- a dict: its scalars (and nested dicts of scalars, as ``a.b`` columns) form a one-row
  table named after the section, and each list inside becomes a table of its own named
  ``section.key`` (nested dicts holding lists: ``section.key.sub``);
- a list of scalars or a scalar: a ``value`` column.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Tab:
    name: str  # section key, or section.key for a list inside it
    columns: list[str] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)


def tables(key: str, data: Any) -> list[Tab]:
    """The tables of section ``key`` holding ``data`` (see the module docstring)."""
    if isinstance(data, list):
        return [_list_table(key, data)]
    if isinstance(data, dict):
        scalars: dict[str, Any] = {}
        nested: list[Tab] = []
        _split(key, "", data, scalars, nested)
        head = [Tab(key, list(scalars), [list(scalars.values())])] if scalars else []
        return head + nested
    return [Tab(key, ["value"], [[data]])]


def all_tables(doc: dict[str, Any]) -> list[Tab]:
    """Every section's tables, in document order (the ``trace`` block included)."""
    return [t for k, v in doc.items() for t in tables(k, v)]


def _split(
    key: str, prefix: str, data: dict[str, Any], scalars: dict[str, Any], nested: list[Tab]
) -> None:
    for k, v in data.items():
        if isinstance(v, list):
            nested.append(_list_table(f"{key}.{prefix}{k}", v))
        elif isinstance(v, dict) and _has_list(v):
            sub_scalars: dict[str, Any] = {}
            _split(f"{key}.{prefix}{k}", "", v, sub_scalars, nested)
            for sk, sv in sub_scalars.items():
                scalars[f"{prefix}{k}.{sk}"] = sv
        elif isinstance(v, dict):
            _flat(f"{prefix}{k}.", v, scalars)
        else:
            scalars[f"{prefix}{k}"] = v


def _has_list(d: dict[str, Any]) -> bool:
    return any(isinstance(v, list) or (isinstance(v, dict) and _has_list(v)) for v in d.values())


def _flat(prefix: str, d: dict[str, Any], out: dict[str, Any]) -> None:
    for k, v in d.items():
        if isinstance(v, dict):
            _flat(f"{prefix}{k}.", v, out)
        else:
            out[f"{prefix}{k}"] = json.dumps(v) if isinstance(v, list) else v


def _list_table(name: str, items: list[Any]) -> Tab:
    if not all(isinstance(x, dict) for x in items):
        return Tab(
            name, ["value"], [[json.dumps(x) if isinstance(x, list | dict) else x] for x in items]
        )
    flat = []
    for x in items:
        row: dict[str, Any] = {}
        _flat("", x, row)
        flat.append(row)
    cols: dict[str, None] = {}
    for row in flat:
        cols.update(dict.fromkeys(row))
    names = list(cols)
    return Tab(name, names, [[row.get(c) for c in names] for row in flat])


def find(doc: dict[str, Any], name: str) -> Tab | None:
    """The table called ``name`` (``section`` or ``section.key``), None when absent."""
    for t in all_tables(doc):
        if t.name == name:
            return t
    return None
