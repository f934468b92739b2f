"""The kernel category vocabulary and the classification of kernels (gemm, conv,
elementwise, ...): from the launching op, the kernel's own name, else ``other``. The
``categories`` pass (kernel time by category) and the callers outside the passes (diff,
the timeline exporter) classify through this module.

Two data tables, both regular expressions searched case-insensitively:

* ``data/kernel_categories.csv``: (category, kind, pattern) rows in priority order,
  matched against the kernel's *function name* only (:mod:`._kernel_names`: template
  and parameter lists, return type and ``(anonymous namespace)`` removed). ``kind`` is
  ``name`` for patterns that name a kernel family (``nvjet_``, ``ncclDevKernel``,
  ATen's ``vectorized_elementwise_kernel``) and ``hint`` for generic words (``add``,
  ``copy``, ``index``) that only suggest a category.
* ``data/op_categories.csv``: (category, pattern) rows for launching ops
  (``aten::addmm`` gemm, ``aten::convolution`` conv, ``nccl:all_reduce`` communication).

A kernel's category: its name's category when a ``name`` row matches (an elementwise
bias-add launched by ``aten::linear`` stays elementwise); else the category of the op
that launched it (the innermost op, :mod:`.attribution`) when that op is in the op
table; else its name's ``hint`` category; else ``other``. Names and ops are classified
once per distinct label and the launching op is looked up only when some kernel's name
is not decisive, so the cost grows with distinct names, not kernels.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace.analysis.engine import kernel_names as _kernel_names
from tbdtrace.analysis.engine import shared_arrays
from tbdtrace.analysis.engine.cache import Entry
from tbdtrace.analysis.engine.context import AnalysisContext, Source, of
from tbdtrace.analysis.engine.grouping import dict_codes

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
OTHER = CAT_INDEX["other"]
# How a kernel's category was decided (values of KernelCategories.source).
BY_NONE, BY_NAME, BY_OP = 0, 1, 2
SOURCES = ("none", "name", "op")


class Rule:
    """One row of a classifier table: ``matches(name)`` is
    ``re.search(pattern, name, re.IGNORECASE)``, answered for ASCII names by substring
    tests for the pattern's plain-text alternatives and a regex for the rest only (most
    alternatives are plain names; a large case-insensitive alternation took ~18 us per
    search on kernel names, which are long)."""

    def __init__(self, category: str, pattern: str, decisive: bool = True):
        self.category = category
        self.pattern = pattern
        self.decisive = decisive  # a ``name`` row (True) or a ``hint`` row (False)
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


@dataclass(frozen=True)
class KernelCategories:
    """Per row of the ``kernels`` table: ``code``, an index into :data:`CATEGORIES`
    (int8); ``source``, how it was decided (int8: :data:`BY_NONE` for ``other``,
    :data:`BY_NAME`, :data:`BY_OP`); ``by_op``: whether any row's launching op decided."""

    code: npt.NDArray[np.int8]
    source: npt.NDArray[np.int8]
    by_op: bool


def _load(file: str) -> list[dict[str, str]]:
    text = (Path(__file__).parent / "data" / file).read_text()
    rows = list(csv.DictReader(text.splitlines()))
    for row in rows:
        if row["category"].strip() not in CAT_INDEX:
            raise ValueError(f"{file}: unknown category {row['category']!r}")
        # A bad pattern fails when its Rule compiles the alternatives that are not plain
        # text (the only ones that can be invalid), whatever names come.
    return rows


@lru_cache(maxsize=1)
def rules() -> tuple[Rule, ...]:
    """The kernel-name table's rules, in priority order."""
    out = []
    for row in _load("kernel_categories.csv"):
        if row["kind"] not in ("name", "hint"):
            raise ValueError(f"kernel_categories.csv: kind must be name or hint: {row['kind']!r}")
        out.append(Rule(row["category"].strip(), row["pattern"], row["kind"] == "name"))
    return tuple(out)


@lru_cache(maxsize=1)
def op_rules() -> tuple[Rule, ...]:
    """The launching-op table's rules, in priority order."""
    return tuple(Rule(r["category"].strip(), r["pattern"]) for r in _load("op_categories.csv"))


@lru_cache(maxsize=65536)
def classify_name(name: str | None) -> tuple[str, bool]:
    """(category, decisive) of a kernel (or CPU op) name from its own name: the first
    rule matching its function name (for a generic entry point, the kernel it runs, then
    the entry point; a ``name`` row matching either beats a ``hint`` row). ``decisive``
    is False for ``hint`` rules and ``other``."""
    if not name:
        return "other", False
    found = [_first_rule(c) for c in _kernel_names.candidates(name)]
    hit = next((r for r in found if r is not None and r.decisive), None)
    hit = hit or next((r for r in found if r is not None), None)
    return (hit.category, hit.decisive) if hit else ("other", False)


def _first_rule(name: str) -> Rule | None:
    return next((rule for rule in rules() if rule.matches(name)), None)


def classify(name: str | None) -> str:
    """Category of one kernel (or CPU op) name from the name alone; ``other`` when no
    pattern matches."""
    return classify_name(name)[0]


@lru_cache(maxsize=65536)
def classify_op(name: str | None) -> str | None:
    """Category of the kernels a launching op runs (``aten::addmm`` gemm); None when the
    op table does not say."""
    if not name:
        return None
    for rule in op_rules():
        if rule.matches(name):
            return rule.category
    return None


def kernel_categories(tbl: pa.Table) -> npt.NDArray[np.int64]:
    """Per kernel row of ``tbl`` (needs ``name``), its index into :data:`CATEGORIES`
    from the name alone (no launching op)."""
    codes, labels = dict_codes(tbl, "name")
    return _lut(labels)[0].astype(np.int64)[codes] if codes.size else np.zeros(0, np.int64)


KERNEL_CODES: Entry[KernelCategories] = Entry(
    "categories.kernel_codes", "category and its source of every kernel row"
)


def kernel_codes(ctx: Source) -> KernelCategories:
    """Category of every kernel row of ``trace`` (the rule of the module docstring),
    computed once per trace. Other passes use it to split kernel time by category."""
    ctx = of(ctx)
    return ctx.cache.get(KERNEL_CODES, lambda: _kernel_codes(ctx))


def _kernel_codes(ctx: AnalysisContext) -> KernelCategories:
    codes, labels = shared_arrays.codes(ctx, "kernels", "name")
    cat, decisive = _lut(labels)
    name_src = np.where(cat == OTHER, BY_NONE, BY_NAME).astype(np.int8)
    op = _op_path(ctx)
    if op is None:
        return KernelCategories(cat[codes], name_src[codes], False)
    use_op = (op >= 0) & ~decisive[codes]
    return KernelCategories(
        np.where(use_op, op, cat[codes]).astype(np.int8),
        np.where(use_op, BY_OP, name_src[codes]).astype(np.int8),
        bool(use_op.any()),
    )


OP_PATH: Entry[npt.NDArray[np.int8] | None] = Entry(
    "categories.op_path", "per kernel row, the op table's category of its launching op"
)


def _op_path(ctx: AnalysisContext) -> npt.NDArray[np.int8] | None:
    """Per kernel row, the op table's category of its launching op (-1 when none); None
    when no op can decide (every kernel's name decides, no ops, or no launching op in the
    op table), so callers can stay on per-name tables. Computed once per trace."""

    def compute() -> npt.NDArray[np.int8] | None:
        if ctx.num_rows("ops") == 0 or ctx.num_rows("kernels") == 0:
            return None
        codes, labels = shared_arrays.codes(ctx, "kernels", "name")
        _, decisive = _lut(labels)
        if decisive.all():
            return None
        if not (np.bincount(codes, minlength=len(labels)) > 0)[~decisive].any():
            return None  # the names that do not decide label no row
        return _op_categories(ctx)

    return ctx.cache.get(OP_PATH, compute)


def _op_categories(ctx: AnalysisContext) -> npt.NDArray[np.int8] | None:
    """Per kernel row, the op table's category of its launching op (-1 when none); None
    when no launching op is in the op table."""
    if ctx.num_rows("ops") == 0:
        return None
    from tbdtrace.analysis.engine.attribution import attribute

    att = attribute(ctx)
    lut = np.array(
        [CAT_INDEX[c] if (c := classify_op(x)) else -1 for x in att.op_labels] + [-1],
        dtype=np.int8,
    )
    if not (lut >= 0).any():
        return None
    op = np.asarray(att.op)
    return lut[np.where(op >= 0, op, lut.size - 1)]


def _lut(labels: list[str | None]) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.bool_]]:
    got = [classify_name(lbl) for lbl in labels]
    return (
        np.array([CAT_INDEX[c] for c, _ in got], dtype=np.int8),
        np.array([d for _, d in got], dtype=np.bool_),
    )


def name_categories(ctx: Source) -> dict[str, str]:
    """Per kernel name of ``trace``, the category holding most of its time (a name whose
    launching ops differ can have rows of several categories)."""
    ctx = of(ctx)
    codes, labels = shared_arrays.codes(ctx, "kernels", "name")
    names = [x if x is not None else "<unknown>" for x in labels]
    if _op_path(ctx) is None:
        return {nm: classify(lbl) for nm, lbl in zip(names, labels, strict=True)}
    kc = kernel_codes(ctx)
    n = len(CATEGORIES)
    dur = shared_arrays.durations(ctx, "kernels")
    t = np.bincount(codes.astype(np.int64) * n + kc.code, weights=dur, minlength=len(labels) * n)
    best = t.reshape(len(labels), n).argmax(axis=1)
    return {nm: CATEGORIES[int(b)] for nm, b in zip(names, best, strict=True)}


def other_share(ctx: Source) -> float | None:
    """Share of kernel time (kernels table only) left in ``other``."""
    ctx = of(ctx)
    dur = shared_arrays.durations(ctx, "kernels")
    if not dur.size or not dur.sum():
        return None
    other = kernel_codes(ctx).code == OTHER
    return float(dur[other].sum() / dur.sum())
