"""Number and text formatting for reports."""

from __future__ import annotations

import unicodedata


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


def cell_len(s: str) -> int:
    """Terminal columns of ``s`` (wide East Asian characters take two)."""
    if s.isascii():
        return len(s)
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in s)


def clip(s: str | None, n: int, blank: str = "-") -> str:
    """``s`` cut to ``n`` columns, ending in "…" when cut; None or "" -> ``blank``.

    The one text clip of the reports (text tables, titles, HTML, plot labels). Columns as
    a terminal counts them: a wide East Asian character takes two."""
    s = s or blank
    if cell_len(s) <= n:
        return s
    out, used = [], 0
    for ch in s:
        w = cell_len(ch)
        if used + w > n - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…"


def tail(s: str | None, n: int) -> str:
    """A source line ``file:line`` cut to its last ``n`` characters (the file's name and
    line number are at the end), "…" first when cut; None -> "-"."""
    if not s:
        return "-"
    return s if len(s) <= n else "…" + s[len(s) - n + 1 :]
