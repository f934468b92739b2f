"""The physical floor of reading a profiler file: inflate it with isal and scan every byte.

``python bench/floor.py FILE [--bare]``: reads FILE in the pieces the Kineto importer
reads (gzip inflated by ``isal``, as ``tbdtrace/importers/kineto/feed.py`` does) and
counts the events' ``"ph"`` keys with ``bytes.count`` (a memchr-speed scan of every
byte, no ``json.loads``), then prints the count. Without ``--bare`` it first imports
numpy and pyarrow, so it costs what any analysis command must pay before its own work:
the interpreter, the two libraries (numpy without its BLAS thread pool, as the CLI
loads it), and the bytes. With ``--bare``: the interpreter and
the bytes only (the floor of a multi-gigabyte file, where the imports are noise).

The performance gate (``bench/perf_gate.py``) and the streaming-import benchmark
(``bench/stream_import.py``) time it as a child process beside the command measured.
"""

from __future__ import annotations

import os
import sys

PIECE_BYTES = 1 << 20  # decompressed bytes per piece (feed.PIECE_BYTES)
READ_BYTES = 1 << 17  # compressed bytes read at a time (feed.READ_BYTES)


def scan(path: str) -> int:
    """Events (``"ph"`` keys) in the file's content."""
    from isal import isal_zlib

    n = 0
    with open(path, "rb") as f:
        if f.read(2) != b"\x1f\x8b":
            f.seek(0)
            while piece := f.read(PIECE_BYTES):
                n += piece.count(b'"ph"')
            return n
        f.seek(0)
        d = isal_zlib.decompressobj(31)
        pending = b""
        while True:
            if not pending:
                pending = f.read(READ_BYTES)
                if not pending:
                    return n + d.flush().count(b'"ph"')
            if d.eof:  # a further gzip member
                d = isal_zlib.decompressobj(31)
            out = d.decompress(pending, PIECE_BYTES)
            pending = d.unused_data if d.eof else d.unconsumed_tail
            n += out.count(b'"ph"')


def main(argv: list[str]) -> int:
    bare = "--bare" in argv
    files = [a for a in argv if a != "--bare"]
    if len(files) != 1:
        print("usage: floor.py FILE [--bare]", file=sys.stderr)
        return 2
    if not bare:
        # As the CLI's analysis commands (tbdtrace.cli.one_blas_thread): without a BLAS
        # thread pool spinning on the cores, ~50 ms of CPU less.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        import numpy  # noqa: F401 - the libraries every analysis command loads
        import pyarrow  # noqa: F401

    print(scan(files[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
