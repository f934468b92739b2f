"""The regression gate of ``tbdtrace diff --fail-above``: the metrics a threshold may name,
their values in a diff document, and the verdict.

Every metric is a figure of the diff document (``diff.compare``), per measured step where
it is a time (so a 3-step run and a 20-step run compare step for step), and declares which
direction is worse. A threshold is a relative change in that direction: ``step_time=5%``
fails when B's median step is more than 5 % longer than A's, ``throughput=5%`` when B's
throughput is more than 5 % lower. A metric measured in neither trace, or in only one,
fails the gate as ``missing`` (a gate that passes because its figure vanished is no gate:
DECISIONS 169).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# The exit status of ``tbdtrace diff`` when a gate fails (1: bad input, 2: usage, 3:
# capture records lost are taken).
REGRESSION_EXIT = 4


@dataclass(frozen=True)
class Metric:
    """One figure a threshold may name."""

    name: str  # as written in --fail-above; "kernel:<category>" and "op:<name>" are families
    unit: str  # ns, bytes, samples/s, ratio
    worse: str  # "higher" (a time, a size) or "lower" (a rate, a utilization)
    doc: str


METRICS: tuple[Metric, ...] = (
    Metric("step_time", "ns", "higher", "median duration of a measured step (median over ranks)"),
    Metric("throughput", "samples/s", "lower", "samples / duration of the measured steps"),
    Metric("kernel_time", "ns", "higher", "device kernel time per measured step"),
    Metric(
        "kernel:<category>",
        "ns",
        "higher",
        "device time per measured step of one category (gemm, conv, ..., memcpy; the "
        "categories pass)",
    ),
    Metric(
        "op:<name>",
        "ns",
        "higher",
        "device time per measured step of the kernels one op launched (ops aligned by name)",
    ),
    Metric(
        "data_wait",
        "ns",
        "higher",
        "median time a measured step waited for its data (steps' data_wait_ns)",
    ),
    Metric("utilization", "ratio", "lower", "device busy time / span (summary's utilization)"),
    Metric(
        "memory.peak",
        "bytes",
        "higher",
        "peak live device memory of the trace (the memory section's peak)",
    ),
)

_BY_NAME = {m.name.split(":")[0] + (":" if ":" in m.name else ""): m for m in METRICS}


@dataclass(frozen=True)
class Threshold:
    metric: str  # e.g. "kernel:gemm"
    limit: float  # relative change allowed in the worse direction, 0.05 for 5 %


class GateUsageError(ValueError):
    """A --fail-above that names no declared metric or has no percentage (exit 2)."""


def metric_of(name: str) -> Metric | None:
    """The declared metric ``name`` is (``kernel:gemm`` -> ``kernel:<category>``)."""
    if ":" in name:
        family, arg = name.split(":", 1)
        return _BY_NAME.get(family + ":") if arg else None
    return _BY_NAME.get(name)


def parse(texts: list[str], categories: tuple[str, ...]) -> list[Threshold]:
    """``["step_time=5%,kernel:gemm=10%", ...]`` as thresholds; GateUsageError names the
    first bad item and the metrics there are."""
    out: list[Threshold] = []
    for text in texts:
        for item in (t.strip() for t in text.split(",")):
            if not item:
                continue
            name, sep, value = item.rpartition("=")
            name = name.strip()
            m = metric_of(name) if sep else None
            if m is None:
                names = ", ".join(x.name for x in METRICS)
                raise GateUsageError(f"--fail-above {item!r}: no such metric (metrics: {names})")
            if m.name == "kernel:<category>" and name.split(":", 1)[1] not in categories:
                raise GateUsageError(
                    f"--fail-above {item!r}: no such category (categories: {', '.join(categories)})"
                )
            out.append(Threshold(name, _percent(item, value.strip())))
    return out


def _percent(item: str, value: str) -> float:
    try:
        if not value.endswith("%"):
            raise ValueError
        v = float(value[:-1]) / 100
    except ValueError:
        raise GateUsageError(
            f"--fail-above {item!r}: give the limit as a percentage, e.g. step_time=5%"
        ) from None
    if not math.isfinite(v) or v < 0:
        raise GateUsageError(f"--fail-above {item!r}: the limit must be a percentage >= 0")
    return v


def values(
    head: dict[str, Any], cats: list[dict[str, Any]], ops: list[dict[str, Any]], name: str
) -> tuple[float | None, float | None]:
    """Metric ``name`` of A and of B (None: not measured), from a diff document's
    ``headline`` and its full category and op rows."""
    simple = {
        "step_time": "step_median_ns",
        "throughput": "throughput_per_s",
        "kernel_time": "kernel_time_per_step_ns",
        "data_wait": "data_wait_median_ns",
        "utilization": "utilization",
        "memory.peak": "memory_peak_bytes",
    }
    if name in simple:
        fig = head[simple[name]]
        return fig["a"], fig["b"]
    family, arg = name.split(":", 1)
    rows, key = (cats, "category") if family == "kernel" else (ops, "op")
    for r in rows:
        if r[key] == arg:
            return r["a_per_step_ns"], r["b_per_step_ns"]
    if family == "op":
        return None, None  # no such op in either trace: a misspelt gate must not pass
    # A category in neither trace: no time in either, where both have measured steps.
    n = head["measured_rank_steps"]
    zero = 0.0 if n["a"] and n["b"] else None
    return zero, zero


def judge(
    head: dict[str, Any],
    cats: list[dict[str, Any]],
    ops: list[dict[str, Any]],
    thresholds: list[Threshold],
) -> dict[str, Any]:
    """The gate's verdict (see :func:`values` for the arguments): one result per
    threshold (metric, unit, worse, a, b, change = B / A - 1, limit, status pass |
    regression | missing), ``failed`` (how many did not pass), ``passed`` and
    ``exit_code`` (0, or :data:`REGRESSION_EXIT`)."""
    results = []
    for t in thresholds:
        m = metric_of(t.metric)
        assert m is not None  # parse() checked it
        a, b = values(head, cats, ops, t.metric)
        change = _change(a, b)
        if change is None:
            status = "missing"
        else:
            worse = change if m.worse == "higher" else -change
            status = "regression" if worse > t.limit else "pass"
        results.append(
            {
                "metric": t.metric,
                "unit": m.unit,
                "worse": m.worse,
                "a": a,
                "b": b,
                "change": None if change is None or math.isinf(change) else change,
                "limit": t.limit,
                "status": status,
            }
        )
    failed = sum(r["status"] != "pass" for r in results)
    return {
        "results": results,
        "failed": failed,
        "passed": not failed,
        "exit_code": REGRESSION_EXIT if failed else 0,
    }


def _change(a: float | None, b: float | None) -> float | None:
    """B / A - 1; +inf when A is 0 and B is not (anything from nothing is worse), 0 when
    both are 0."""
    if a is None or b is None:
        return None
    if a == 0:
        return 0.0 if b == 0 else math.copysign(math.inf, b)
    return b / a - 1
