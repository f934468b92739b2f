"""Streaming and repair for big or damaged Chrome-trace JSON files.

``iter_events(path)`` yields the objects of the top-level ``traceEvents`` list one at a
time from a (possibly gzipped) file, reading it in chunks, so memory holds one chunk plus
one event instead of the whole document; ``header(path)`` gives the other top-level keys
(distributedInfo, deviceProperties, baseTimeNanoseconds, ...). Decimals stay text
(``parse_float=str``) as in :func:`tbdtrace.importers.kineto.repair.read_json`; invalid UTF-8
becomes U+FFFD. The entry point is one function so a faster parser can replace it.
"""

from __future__ import annotations

import codecs
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from tbdtrace.errors import TraceError

CHUNK_CHARS = 1 << 20
_DECODER = json.JSONDecoder(parse_float=str)
_KEY = '"traceEvents"'


def _open_text(path: Path) -> IO[bytes]:
    f = path.open("rb")
    magic = f.read(2)
    f.seek(0)
    if magic == b"\x1f\x8b":
        f.close()
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return f


class _Reader:
    """Text from a byte stream in chunks, with a sliding buffer."""

    def __init__(self, path: Path):
        self.path = path
        self.f = _open_text(path)
        self.dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.buf = ""
        self.pos = 0
        self.eof = False

    def more(self) -> bool:
        if self.eof:
            return False
        try:
            raw = self.f.read(CHUNK_CHARS)
        except (OSError, EOFError) as e:
            raise TraceError(
                f"{self.path}: gzip data is truncated or corrupt ({e}); re-export the trace"
            ) from e
        self.buf = self.buf[self.pos :] + self.dec.decode(raw, final=not raw)
        self.pos = 0
        self.eof = not raw
        return True

    def skip_ws(self) -> str:
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def close(self) -> None:
        self.f.close()


def _bad(path: Path, what: str) -> TraceError:
    return TraceError(f"{path}: {what}; re-export the trace from the profiler")


def iter_events(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield each event object of ``traceEvents`` in file order (see module docstring)."""
    p = Path(path)
    r = _Reader(p)
    try:
        while True:
            i = r.buf.find(_KEY, r.pos)
            if i >= 0:
                r.pos = i + len(_KEY)
                break
            r.pos = max(0, len(r.buf) - len(_KEY))
            if not r.more():
                raise _bad(p, "no traceEvents list")
        if r.skip_ws() != ":":
            raise _bad(p, "traceEvents is not followed by ':'")
        r.pos += 1
        if r.skip_ws() != "[":
            raise _bad(p, "traceEvents is not a list")
        r.pos += 1
        yield from _items(r, p)
    finally:
        r.close()


def _items(r: _Reader, p: Path) -> Iterator[dict[str, Any]]:
    first = True
    while True:
        c = r.skip_ws()
        if c == "]":
            return
        if c == "":
            raise _bad(p, "truncated JSON inside traceEvents")
        if not first:
            if c != ",":
                raise _bad(p, f"invalid JSON inside traceEvents (expected ',' not {c!r})")
            r.pos += 1
            r.skip_ws()
        first = False
        while True:
            try:
                obj, end = _DECODER.raw_decode(r.buf, r.pos)
                break
            except json.JSONDecodeError as e:
                # Incomplete object at the end of the buffer: read more and retry.
                if not r.more():
                    raise _bad(p, f"truncated or invalid JSON inside traceEvents ({e.msg})") from e
        r.pos = end
        if isinstance(obj, dict):
            yield obj


def header(path: str | Path) -> dict[str, Any]:
    """Top-level keys other than traceEvents, read without building the event list."""
    p = Path(path)
    r = _Reader(p)
    pre: list[str] = []
    try:
        while True:
            i = r.buf.find(_KEY, r.pos)
            if i >= 0:
                pre.append(r.buf[r.pos : i])
                r.pos = i + len(_KEY)
                break
            keep = max(0, len(r.buf) - len(_KEY))
            pre.append(r.buf[r.pos : keep])
            r.pos = keep
            if not r.more():
                return {}
        r.skip_ws()
        r.pos += 1  # ':'
        r.skip_ws()
        r.pos += 1  # '['
        for _ in _items(r, p):
            pass
        r.pos += 1  # ']'
        rest: list[str] = []
        while True:
            rest.append(r.buf[r.pos :])
            r.pos = len(r.buf)
            if not r.more():
                break
    finally:
        r.close()
    try:
        doc = json.loads("".join(pre) + _KEY + ": []" + "".join(rest), parse_float=str)
    except json.JSONDecodeError as e:
        raise _bad(p, f"invalid JSON outside traceEvents ({e.msg})") from e
    return doc if isinstance(doc, dict) else {}
