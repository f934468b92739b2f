"""Damaged Kineto (and other Chrome-trace) JSON: what can be repaired, and what cannot.

When the C++ parser stops on a file (:class:`~tbdtrace.importers.kineto.feed.ParseFailure`),
:func:`resolve` either repairs it and says how to parse it again (a
:class:`~tbdtrace.importers.kineto.feed.FileFix`), or raises one line
(:class:`tbdtrace.errors.TraceError`) naming the file, what is wrong and what to do:

- old Kineto versions wrote double quotes inside ``"name"`` values unescaped (e.g.
  ``"name": "at::foo<"bar">", "pid": ...``): :func:`repair_quotes` re-escapes them and the
  repaired text is parsed instead of the file;
- a duplicated ``traceEvents`` key: JSON keeps the last one, so the file is parsed again
  passing over the first;
- a truncated or invalid document, a corrupt gzip stream, an event whose value cannot be
  stored: the one line, with the line and column in the (decompressed) content.

:func:`read_json` reads a whole (possibly gzipped) JSON document with the quote repair,
keeping decimals as their text and reading invalid UTF-8 as U+FFFD (the MXNet importer).
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from tbdtrace.errors import TraceError
from tbdtrace.importers.kineto.feed import FileFix, ParseFailure

# Content (decompressed) above this size is neither repaired nor searched for the line
# and column of an error (the message gives the byte offset instead).
REPAIR_MAX_BYTES = 256 << 20
# read_json (formats read whole: MXNet dumps) refuses content above this size.
READ_JSON_MAX_BYTES = 1 << 30
# Parses of one import, repairs included, before giving up.
MAX_PARSES = 64

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
            content = inflate(raw, READ_JSON_MAX_BYTES)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceError(
                f"{path}: gzip data is truncated or corrupt ({e}); re-export the trace"
            ) from e
        if content is None:
            raise TraceError(
                f"{path}: {len(raw):,} bytes of gzip holding more than "
                f"{READ_JSON_MAX_BYTES >> 20} MiB of content; this format is read whole and "
                "so large a file is not one its profiler writes: check the file (and --format)"
            )
        raw = content
    elif len(raw) > READ_JSON_MAX_BYTES:
        raise TraceError(
            f"{path}: {len(raw):,} bytes; this format is read whole and so large a file is "
            "not one its profiler writes: check the file (and --format)"
        )
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


def resolve(failure: ParseFailure, fixes: dict[int, FileFix]) -> dict[int, FileFix]:
    """The fixes to parse the files again with, or TraceError saying what is wrong."""
    path, error = failure.path, failure.error
    fix = fixes.get(failure.index, FileFix())
    if failure.what == "read":
        why = getattr(error, "strerror", None) or str(error)
        raise TraceError(f"{path}: cannot read ({why}); check the path") from error
    if failure.what == "gzip":
        raise TraceError(
            f"{path}: gzip data is truncated or corrupt ({error}); re-export the trace"
        ) from error
    msg = str(error)
    if msg.startswith("a second traceEvents"):  # JSON keeps the last of duplicated keys
        return {**fixes, failure.index: _replace(fix, skip_lists=fix.skip_lists + 1)}
    if msg == "no traceEvents list":
        raise TraceError(
            f"{path}: no traceEvents list; this is not a PyTorch profiler (Kineto) trace"
        ) from error
    big = re.fullmatch(r"a JSON value of more than (\d+) bytes at byte (\d+)", msg)
    if big:  # the parser stopped holding it: nothing to repair, nothing inflated
        raise TraceError(
            f"{path}: one JSON value (an event or a top-level key) is longer than "
            f"{int(big[1]) >> 20} MiB, at byte {int(big[2]):,} of the content; profilers "
            "write no names or arguments that long: the file is damaged or not a trace, "
            "re-export it from the profiler"
        ) from error
    event = re.fullmatch(r"(.*) in event (\d+)", msg, re.S)
    if event:
        raise TraceError(
            f"{path}: event {event[2]} is malformed ({event[1]}); "
            "re-export the trace or report the file"
        ) from error
    # Invalid JSON: repair the quotes once; else report the file as it is.
    content = _content(path)
    if fix.source is None and content is not None:
        fixed, n = repair_quotes(content.decode("utf-8", errors="replace"))
        if n:
            return {**fixes, failure.index: _replace(fix, source=fixed.encode(), error=msg)}
    raise TraceError(json_error(path, fix.error or msg, content)) from error


def _replace(fix: FileFix, **changes: Any) -> FileFix:
    return replace(fix, **changes)


def _content(path: Path) -> bytes | None:
    """The file's (decompressed) content, or None above REPAIR_MAX_BYTES: inflated at
    most that far (a small gzip may hold gigabytes; an error path never inflates it)."""
    try:
        if path.stat().st_size > REPAIR_MAX_BYTES:
            return None
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            return inflate(raw, REPAIR_MAX_BYTES)
    except (OSError, EOFError, zlib.error):
        return None
    return raw if len(raw) <= REPAIR_MAX_BYTES else None


def inflate(raw: bytes, limit: int) -> bytes | None:
    """gzip members of ``raw`` decompressed (as gzip.decompress), or None past ``limit``
    bytes of content: never more than ``limit`` bytes are inflated."""
    out = bytearray()
    pending = raw
    while pending:
        d = zlib.decompressobj(31)
        out += d.decompress(pending, limit + 1 - len(out))
        if len(out) > limit or d.unconsumed_tail:
            return None
        if not d.eof:
            raise EOFError("the data ends inside a gzip member")
        pending = d.unused_data
    return bytes(out)


def json_error(path: Path, msg: str, content: bytes | None) -> str:
    """One line for the parser's complaint ``msg`` ("<what> at byte <n>", or "unexpected
    end of input" at the end): truncated or invalid JSON, where, and what to do."""
    m = re.fullmatch(r"(.*) at byte (\d+)", msg, re.S)
    why, at = (m[1], int(m[2])) if m else (msg, len(content) if content is not None else None)
    what = "truncated" if why == "unexpected end of input" else "invalid"
    if content is not None and at is not None:
        before = content[:at].decode("utf-8", errors="replace")
        line = before.count("\n") + 1
        column = len(before) - before.rfind("\n")
        where = f" at line {line} column {column}"
    else:
        where = f" at byte {at}" if at is not None else ""
    return f"{path}: {what} JSON{where} ({why}); re-export the trace from the profiler"
