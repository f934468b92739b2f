"""Kernel time by category (gemm, conv, elementwise, ...), from a table of name patterns.

The classifier is data: ``data/kernel_categories.csv`` lists (category, regular
expression) rows in priority order; a name takes the category of the first pattern found
in it (``re.search``, case-insensitive), else ``other``. Only distinct names are
classified, so the cost grows with the number of distinct kernel names, not kernels.
"""

from __future__ import annotations

import csv
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace.passes import _frame, kernels
from tbdtrace.passes._util import dict_codes
from tbdtrace.trace import Trace

CATEGORIES = (
    "gemm",
    "conv",
    "elementwise",
    "reduction",
    "normalization",
    "pooling",
    "softmax_attention",
    "rnn",
    "embedding",
    "communication",
    "memcpy",
    "memset",
    "other",
)
CAT_INDEX = {c: i for i, c in enumerate(CATEGORIES)}

SCHEMA = pa.schema(
    [
        ("category", pa.string()),
        ("count", pa.int64()),
        ("total_ns", pa.int64()),
        ("share", pa.float64()),
    ]
)


class Rule:
    """One row of the classifier table: ``matches(name)`` is
    ``re.search(pattern, name, re.IGNORECASE)``, answered for ASCII names by substring
    tests for the pattern's plain-text alternatives and a regex for the rest only (most
    alternatives are plain names; a large case-insensitive alternation took ~18 us per
    search on kernel names, which are long)."""

    def __init__(self, category: str, pattern: str):
        self.category = category
        self.pattern = pattern
        alts = _split_alternatives(pattern)
        self.literals = tuple(a.lower() for a in alts if not _META & set(a))
        rest = [a for a in alts if _META & set(a)]
        self.regex = re.compile("|".join(rest), re.IGNORECASE) if rest else None
        self._full: re.Pattern[str] | None = None

    def matches(self, name: str) -> bool:
        if not name.isascii():  # ASCII case folding is what lower() does; else ask re
            if self._full is None:
                self._full = re.compile(self.pattern, re.IGNORECASE)
            return self._full.search(name) is not None
        low = name.lower()
        if any(lit in low for lit in self.literals):
            return True
        return self.regex is not None and self.regex.search(name) is not None


_META = set("\\^$.|?*+()[]{}")


def _split_alternatives(pattern: str) -> list[str]:
    """The pattern's top-level ``|`` alternatives (outside groups and classes)."""
    out, cur, depth, in_class, i = [], [], 0, False, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            cur.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            out.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(ch)
        i += 1
    out.append("".join(cur))
    return out


@lru_cache(maxsize=1)
def rules() -> tuple[Rule, ...]:
    """The classifier table's rules, in priority order."""
    text = (Path(__file__).parent / "data" / "kernel_categories.csv").read_text()
    out = []
    for row in csv.DictReader(text.splitlines()):
        cat = row["category"].strip()
        if cat not in CAT_INDEX:
            raise ValueError(f"kernel_categories.csv: unknown category {cat!r}")
        re.compile(row["pattern"])  # a bad pattern fails here, whatever names come
        out.append(Rule(cat, row["pattern"]))
    return tuple(out)


@lru_cache(maxsize=65536)
def classify(name: str | None) -> str:
    """Category of one kernel (or CPU op) name; ``other`` when no pattern matches."""
    if not name:
        return "other"
    for rule in rules():
        if rule.matches(name):
            return rule.category
    return "other"


def kernel_categories(tbl: pa.Table) -> npt.NDArray[np.int64]:
    """Per kernel row of ``tbl`` (needs ``name``), its index into :data:`CATEGORIES`."""
    codes, labels = dict_codes(tbl, "name")
    return _lut(labels)[codes] if codes.size else np.zeros(0, dtype=np.int64)


def run(trace: Trace, config: Any = None) -> pa.Table:
    """Device time by category, one row per category with any time, largest first.

    Kernels are classified by name; rows of the memcpy and memset tables count as
    ``memcpy`` and ``memset``. Columns: category; count (rows); total_ns (sum of
    durations, ns); share = total_ns / sum over all categories (ratio 0..1).
    """
    # From the per-name table (shared with the kernels pass): no pass over the rows.
    per_name = kernels.run(trace)
    lut = _lut(per_name.column("name").to_pylist())
    count = np.zeros(len(CATEGORIES), dtype=np.int64)
    total = np.zeros(len(CATEGORIES), dtype=np.int64)
    np.add.at(count, lut, per_name.column("count").to_numpy())
    np.add.at(total, lut, per_name.column("total_ns").to_numpy())
    for table, cat in (("memcpy", "memcpy"), ("memset", "memset")):
        d = _frame.durations(trace, table)
        count[CAT_INDEX[cat]] += d.size
        total[CAT_INDEX[cat]] += int(d.sum())
    return _table(count, total)


def _lut(labels: list[str | None]) -> npt.NDArray[np.int64]:
    return np.array([CAT_INDEX[classify(lbl)] for lbl in labels], dtype=np.int64)


def _table(count: npt.NDArray[np.int64], total: npt.NDArray[np.int64]) -> pa.Table:
    grand = int(total.sum())
    keep = [i for i in range(len(CATEGORIES)) if count[i] > 0]
    keep.sort(key=lambda i: (-int(total[i]), i))
    return pa.table(
        {
            "category": [CATEGORIES[i] for i in keep],
            "count": [int(count[i]) for i in keep],
            "total_ns": [int(total[i]) for i in keep],
            "share": [int(total[i]) / grand if grand else 0.0 for i in keep],
        },
        schema=SCHEMA,
    )


def other_share(trace: Trace) -> float | None:
    """Share of kernel time (kernels table only) the classifier leaves in ``other``."""
    codes, labels = _frame.codes(trace, "kernels", "name")
    dur = _frame.durations(trace, "kernels")
    if not dur.size or not dur.sum():
        return None
    other = _lut(labels) == CAT_INDEX["other"]
    return float(dur[other[codes]].sum() / dur.sum())
