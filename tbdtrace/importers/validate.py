"""Value checks shared by the importers: which events are skipped, and why.

An event whose time or duration cannot be stored as int64 nanoseconds, or whose range runs
backwards, is left out of the trace and counted under a reason (docs/IMPORTERS.md,
"Skipped events"); the import reports the counts (``meta.json`` ``skipped_events``) and
``tbdtrace import --strict`` fails on any. The reasons are shared by every importer; the
Kineto C++ parser uses the same names (``csrc/kineto/parser.h``, ``kSkipNames``).
"""

from __future__ import annotations

import decimal
import math
from collections import Counter
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1

# Reason -> what it means (the order reports list them in).
REASONS = {
    "time_not_a_number": "a time or duration that is not a number (text, null, list, ...)",
    "time_not_finite": "a time or duration that is NaN or infinite",
    "time_out_of_range": "a time, duration or end time beyond int64 nanoseconds",
    "negative_duration": "a negative duration",
    "end_before_start": "an end before its start",
    "args_not_an_object": "an args member that is neither an object nor empty",
    "unmatched_begin_end": "a begin without its end, or an end without its begin",
}


def us_to_ns(value: Any) -> int:
    """Microseconds (int, or decimal text as parsed) to integer nanoseconds, exactly."""
    if isinstance(value, int):
        return value * 1000
    if isinstance(value, str):
        if "e" not in value and "E" not in value:
            neg = value.startswith("-")
            whole, _, frac = value.lstrip("-+").partition(".")
            if len(frac) <= 3 and whole.isdigit() and (not frac or frac.isdigit()):
                ns = int(whole) * 1000 + int((frac + "000")[:3])
                return -ns if neg else ns
        try:
            return int((Decimal(value) * 1000).to_integral_value())
        except InvalidOperation:
            raise ValueError(f"not a number: {value!r}") from None
    if isinstance(value, float):  # only from callers that already parsed floats
        return int(Decimal(repr(value)) * 1000)
    raise ValueError(f"not a time: {value!r}")


def in_range(x: int) -> bool:
    return I64_MIN <= x <= I64_MAX


def us_to_ns_checked(value: Any) -> int | str:
    """Microseconds as parsed from JSON (int, decimal text, or a float for NaN/Infinity)
    to integer nanoseconds exactly (half to even below 1 ns), or the reason it is unusable.
    """
    if isinstance(value, bool | int):
        ns = int(value) * 1000
        return ns if in_range(ns) else "time_out_of_range"
    if isinstance(value, float):  # json gives floats only for NaN and +-Infinity here
        if not math.isfinite(value):
            return "time_not_finite"
        value = repr(value)
    if not isinstance(value, str):
        return "time_not_a_number"
    try:
        d = Decimal(value.strip())
    except (decimal.InvalidOperation, ValueError):
        return "time_not_a_number"
    if not d.is_finite():
        return "time_not_a_number" if d.is_nan() else "time_not_finite"
    try:
        ns = us_to_ns(value)
    except (decimal.Overflow, OverflowError):
        return "time_out_of_range"
    except (ValueError, ArithmeticError):
        return "time_not_a_number"
    return ns if in_range(ns) else "time_out_of_range"


def ns_value(value: Any) -> int | str:
    """An integer nanosecond value as stored by nsys (SQLite INTEGER), or why not."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and not math.isfinite(value):
            return "time_not_finite"
        return "time_not_a_number"
    return value if in_range(value) else "time_out_of_range"


def span_ns(start: int, end: int) -> str | None:
    """Why a [start, end] range of int64 ns cannot be kept (end before start), or None."""
    return "end_before_start" if end < start else None


def summary(skipped: Mapping[str, int]) -> str:
    """``N events skipped (reason: count, ...)``; empty when none were."""
    n = sum(skipped.values())
    if not n:
        return ""
    order = {r: i for i, r in enumerate(REASONS)}
    parts = sorted(skipped.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))
    detail = ", ".join(f"{r}: {c}" for r, c in parts if c)
    return f"{n} event{'s' if n != 1 else ''} skipped ({detail})"


def merged(*counts: Mapping[str, int]) -> dict[str, int]:
    """Counts added up, zeros left out, in the order of REASONS."""
    total: Counter[str] = Counter()
    for c in counts:
        total.update(c)
    order = {r: i for i, r in enumerate(REASONS)}
    return {r: n for r, n in sorted(total.items(), key=lambda kv: order.get(kv[0], 99)) if n}
