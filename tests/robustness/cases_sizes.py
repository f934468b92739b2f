"""Hostile sizes: small files that hold gigabytes (docs/RELIABILITY.md, "Sizes").

Each case is a gzip file of a few megabytes whose content is huge: built from gzip members
compressed once and repeated (a multi-member gzip reads as the members' contents one after
another, as ``gzip.decompress`` does), so a 3 GiB content costs seconds to make and ~3 MB
on disk. What each command must do with it, under a 4 GiB address-space limit
(tests/robustness/test_sizes.py): succeed, or end in one line naming the file that says
what is wrong and what to do, exit 1; never a traceback, never memory exhausted.

``small_seeds()`` gives the same shapes at fuzzing size (tests/robustness/fuzz/).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path

MEMBER_BYTES = 64 << 20  # content of one repeated member
GIB = 1 << 30
EVENT = b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 1}'


def _member(content: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)  # a gzip member
    return c.compress(content) + c.flush()


@dataclass(frozen=True)
class SizeCase:
    name: str
    head: bytes  # content before the repeated part
    unit: bytes  # repeated to fill `repeat_bytes`
    repeat_bytes: int
    tail: bytes  # content after it
    # command -> (exit code, words of the one line on exit 1; tables -> rows on exit 0)
    expect: dict[str, tuple[int, tuple[str, ...]]] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    fmt: str | None = None

    def write(self, path: Path) -> Path:
        """The case's gzip file (its repeated member compressed once)."""
        per = max(1, MEMBER_BYTES // len(self.unit))
        block = self.unit * per
        n = self.repeat_bytes // len(block)
        body = _member(block)
        with path.open("wb") as f:
            f.write(_member(self.head))
            for _ in range(n):
                f.write(body)
            f.write(_member(self.tail))
        return path

    @property
    def units(self) -> int:
        """How many times ``unit`` is repeated (whole members of MEMBER_BYTES)."""
        per = max(1, MEMBER_BYTES // len(self.unit))
        return self.repeat_bytes // (len(self.unit) * per) * per

    @property
    def content_bytes(self) -> int:
        per = max(1, MEMBER_BYTES // len(self.unit))
        block = len(self.unit) * per
        return len(self.head) + self.repeat_bytes // block * block + len(self.tail)


CASES = [
    # Detection reads 64 KiB of content and refuses it; forced, the parser scans all of it
    # (whitespace is never held) and finds no document.
    SizeCase(
        "3 GiB of spaces",
        b"",
        b" ",
        3 * GIB,
        b"",
        {"import": (1, ("empty",)), "report": (1, ("empty",))},
    ),
    SizeCase(
        "3 GiB of spaces, --format kineto",
        b"",
        b" ",
        3 * GIB,
        b"",
        {"import": (1, ("truncated JSON", "unexpected end of input"))},
        fmt="kineto",
    ),
    # Whitespace between events is consumed as it streams by: the file is a valid trace.
    SizeCase(
        "3 GiB of spaces between two events",
        b'{"traceEvents": [' + EVENT + b",",
        b" ",
        3 * GIB,
        EVENT + b"]}",
        {"import": (0, ()), "report": (0, ())},
        rows={"kernels": 2},
    ),
    # One string of 3 GiB: the parser stops holding the event at 256 MiB.
    SizeCase(
        "one 3 GiB string",
        b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "',
        b"A",
        3 * GIB,
        b'", "pid": 0, "tid": 7, "ts": 10, "dur": 1}]}',
        {"import": (1, ("longer than 256 MiB",)), "report": (1, ("longer than 256 MiB",))},
    ),
    # 25 million events: the import streams them in bounded memory; the report analyses
    # them, or says it ran out of memory, naming the file and its size.
    SizeCase(
        "25 million events",
        b'{"traceEvents": [' + EVENT,
        b", " + EVENT,
        (25_000_000 // (MEMBER_BYTES // len(b", " + EVENT)) + 1) * MEMBER_BYTES,  # >= 25M
        b"]}",
        {"import": (0, ()), "report": (-1, ("out of memory", "MiB"))},
    ),
]


def small_seeds() -> list[bytes]:
    """The cases' shapes at fuzzing size (under 64 KiB): a run of spaces inside the
    event list, a long name, many tiny events."""
    return [
        b'{"traceEvents": [' + EVENT + b"," + b" " * 60_000 + EVENT + b"]}",
        b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "'
        + b"A" * 60_000
        + b'", "pid": 0, "tid": 7, "ts": 10, "dur": 1}]}',
        b'{"traceEvents": [' + b", ".join([EVENT] * 700) + b"]}",
        b" " * 60_000,
    ]
