"""The C++ Kineto parser alone: ns per event on a file's decompressed bytes.

``python bench/kineto_parse.py FILE.json.gz [--runs 5]``

The file is decompressed into memory first; each run feeds it to a fresh
``tbdtrace._native.KinetoParser`` in 1 MiB pieces (as ``tbdtrace.importers.kineto.feed``
does) and finishes it, without taking the columns out; the parsing thread's CPU time of the
fastest run counts (the machine is shared, and CPU time is less disturbed by other jobs than
wall time). Run it with PYTHONPATH pointing at another checkout to compare two builds of the parser.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    from tbdtrace import _native
    from tbdtrace.importers.kineto.feed import PIECE_BYTES
    from tbdtrace.importers.kineto.vocab import ROUTES

    raw = args.file.read_bytes()
    data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    view = memoryview(data)
    best, events = float("inf"), 0
    for _ in range(args.runs):
        p = _native.KinetoParser(ROUTES)
        p.begin_file()
        t0 = time.thread_time()  # CPU time of this thread: less noise on a shared machine
        for off in range(0, len(data), PIECE_BYTES):
            p.feed(view[off : off + PIECE_BYTES])
        p.finish()
        best = min(best, time.thread_time() - t0)
        events = p.events
    print(
        f"{args.file.name}: {len(data) / 2**20:.0f} MiB, {events:,} events; best of "
        f"{args.runs}: {best:.3f} s CPU, {best * 1e9 / events:.1f} ns/event, "
        f"{len(data) / best / 2**20:.0f} MiB/s ({_native.__file__})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
