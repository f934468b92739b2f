"""Bytes on disk per kernel record: tbdtrace's kernels table against gzipped Kineto JSON.

``.venv/bin/python bench/size.py [FILE ...]``  (default: the largest fixture)

For each Kineto file: the kernel events alone are re-serialised as compact JSON (no
spaces, which favours JSON) and gzipped at the default level 6; the same events imported
by tbdtrace are written as the kernels table with each IPC compression (zstd is what
tbdtrace writes). Goal: zstd bytes per kernel <= 1/3 of gzipped JSON's.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
from pathlib import Path

import pyarrow as pa

import tbdtrace.trace as trace_mod
from tbdtrace.importers import kineto

# label -> IPC compression; "zstd" is what tbdtrace writes (level trace.ZSTD_LEVEL).
CODECS = {
    "zstd": "zstd",
    "zstd19": pa.Codec("zstd", compression_level=19),
    "lz4": "lz4",
    "none": None,
}
# The real fixtures are provided beside the checkout (shared/fixtures/), never committed.
FIXTURES = Path(
    os.environ.get("TBDTRACE_FIXTURES")
    or Path(__file__).resolve().parents[2] / "shared" / "fixtures"
)
FIXTURE = FIXTURES / "kineto" / "hta" / "df_index_resolver.json.gz"


def kernel_json_gz_bytes(path: Path) -> tuple[int, int]:
    """(kernel events, bytes of those events as gzipped compact JSON)."""
    doc = kineto.read_json(path)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    ks = [
        e
        for e in events
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in kineto.KERNEL_CATS
    ]
    text = json.dumps({"traceEvents": ks}, separators=(",", ":"))
    return len(ks), len(gzip.compress(text.encode(), compresslevel=6))


def arrow_bytes(tables: dict, meta: dict, compression: object) -> tuple[int, int]:
    """(kernel rows, bytes of the kernels table file) as tbdtrace writes it."""
    trace_mod.COMPRESSION = compression  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as d:
        out = trace_mod.write(Path(d) / "t", {"kernels": tables["kernels"]}, meta)
        return trace_mod.open(out).num_rows("kernels"), (out / "kernels.arrow").stat().st_size


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    a = ap.parse_args(argv)
    print(
        f"{'file':<44} {'kernels':>9} {'json.gz B/k':>11} {'zstd B/k':>9} "
        f"{'zstd19 B/k':>10} {'lz4 B/k':>8} {'none B/k':>8} {'zstd/json.gz':>12}"
    )
    for f in a.files or [FIXTURE]:
        n, jbytes = kernel_json_gz_bytes(f)
        tables, meta = kineto.import_files([f])
        sizes = {}
        for label, comp in CODECS.items():
            rows, b = arrow_bytes(tables, meta, comp)
            assert rows == n, f"{f}: {rows} imported kernels, {n} kernel events"
            sizes[label] = b / n
        print(
            f"{f.name:<44} {n:9d} {jbytes / n:11.1f} {sizes['zstd']:9.1f} "
            f"{sizes['zstd19']:10.1f} {sizes['lz4']:8.1f} {sizes['none']:8.1f} "
            f"{sizes['zstd'] / (jbytes / n):12.3f}"
        )
    print("goal: zstd/json.gz <= 0.333")
    return 0


if __name__ == "__main__":
    sys.exit(main())
