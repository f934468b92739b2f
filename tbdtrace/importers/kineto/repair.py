"""Damaged Kineto (and other Chrome-trace) JSON: what can be repaired, and what cannot.

Old Kineto versions wrote double quotes inside ``"name"`` values unescaped (e.g.
``"name": "at::foo<"bar">", "pid": ...``): :func:`repair_quotes` re-escapes them.
:func:`read_json` reads a whole (possibly gzipped) JSON document with that repair, keeping
decimals as their text and reading invalid UTF-8 as U+FFFD; a file it cannot read is one
clear line (:class:`tbdtrace.errors.TraceError`) saying what is wrong.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from pathlib import Path
from typing import Any

from tbdtrace.errors import TraceError

# A name value runs to the quote that is followed by the next key Kineto writes after it
# ("pid" in X/i/M events) or by the end of the object (M-event args {"name": ...}).
_NAME_RE = re.compile(r'("name": ")([^\n]*?)("(?=, "(?:pid|tid|ts|ph|cat|args)"|\s*\}))')


def repair_quotes(text: str) -> tuple[str, int]:
    """(text with inner quotes of name values escaped, number of values changed)."""
    changed = 0

    def fix(m: re.Match[str]) -> str:
        nonlocal changed
        inner = m.group(2)
        fixed = re.sub(r'(?<!\\)"', r'\\"', inner)
        if fixed != inner:
            changed += 1
        return m.group(1) + fixed + m.group(3)

    return _NAME_RE.sub(fix, text), changed


def read_json(path: Path) -> Any:
    """Parse a (possibly gzipped) JSON file keeping decimals as their text."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TraceError(f"{path}: cannot read ({e.strerror}); check the path") from e
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceError(
                f"{path}: gzip data is truncated or corrupt ({e}); re-export the trace"
            ) from e
    # Invalid UTF-8 (seen in real traces in kernel and op names) becomes U+FFFD.
    text = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text, parse_float=str)
    except json.JSONDecodeError as e:
        # Old Kineto versions wrote quotes inside names unescaped: re-escape, retry once.
        fixed, n = repair_quotes(text)
        if n:
            try:
                return json.loads(fixed, parse_float=str)
            except json.JSONDecodeError:
                pass
        cut = e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string")
        what = "truncated" if cut else "invalid"
        raise TraceError(
            f"{path}: {what} JSON at line {e.lineno} column {e.colno} ({e.msg}); "
            "re-export the trace from the profiler"
        ) from e
    except (ValueError, RecursionError) as e:  # an int of > 4300 digits; absurd nesting
        raise TraceError(f"{path}: invalid JSON ({e}); re-export the trace") from e
