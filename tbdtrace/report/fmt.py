"""Number and text formatting for reports."""

from __future__ import annotations


def fmt_ns(ns: float | int | None) -> str:
    if ns is None:
        return "-"
    a = abs(ns)
    if a >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if a >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.3f} us"
    return f"{ns:.0f} ns"


def fmt_bytes(n: float | int | None) -> str:
    if n is None:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


def fmt_pct(r: float | None) -> str:
    return "-" if r is None else f"{100 * r:.1f}%"


def clip(s: str | None, n: int, blank: str = "-") -> str:
    """``s`` cut to ``n`` characters, ending in "…" when cut; None or "" -> ``blank``.
    (For console columns, where a wide character takes two, see ``textui.clip``.)"""
    s = s or blank
    return s if len(s) <= n else s[: n - 1] + "…"
