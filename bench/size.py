"""Bytes on disk per kernel record and read time: tbdtrace's kernels table against gzipped
Kineto JSON, and the storage alternatives.

``.venv/bin/python bench/size.py [FILE ...] [--trace DIR ...]``  (default: the largest fixture)

For each Kineto file: the kernel events alone are re-serialised as compact JSON (no
spaces, which favours JSON) and gzipped at the default level 6. The same events,
imported by tbdtrace (or read from a trace directory given with ``--trace``), are
written as the kernels table in:

* ``parquet``: what tbdtrace writes (format v3: true values, times and ids
  DELTA_BINARY_PACKED, other columns dictionary-encoded, zstd level 3);
* ``ipc``: Arrow IPC (Feather v2) with true values, rows in the same order, zstd
  level 3: the alternative that pyarrow.feather/polars.read_ipc read;
* ``ipc9``: the same at zstd level 9;
* ``v2``: format v2 (Arrow IPC, times and ids stored as differences, zstd level 3),
  which needed tbdtrace's decoder.

Read time: the whole kernels table, best of 5, with pyarrow (one process, warm cache).
Goal: parquet bytes per kernel <= 1/3 of gzipped JSON's.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import tbdtrace
import tbdtrace.trace as trace_mod
from tbdtrace import schema, tablefile
from tbdtrace.importers import kineto
from tbdtrace.importers.kineto import repair, vocab

# The real fixtures are provided beside the checkout (shared/fixtures/), never committed.
FIXTURES = Path(
    os.environ.get("TBDTRACE_FIXTURES")
    or Path(__file__).resolve().parents[2] / "shared" / "fixtures"
)
FIXTURE = FIXTURES / "kineto" / "hta" / "df_index_resolver.json.gz"


def kernel_json_gz_bytes(path: Path) -> tuple[int, int]:
    """(kernel events, bytes of those events as gzipped compact JSON)."""
    doc = repair.read_json(path)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    ks = [
        e
        for e in events
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in vocab.KERNEL_CATS
    ]
    text = json.dumps({"traceEvents": ks}, separators=(",", ":"))
    return len(ks), len(gzip.compress(text.encode(), compresslevel=6))


def _v2(tbl: pa.Table) -> pa.Table:
    """The kernels table as format v2 stored it (differences; end as a duration)."""
    cols = {}
    start = tbl["start_ns"].to_numpy()
    for name in tbl.column_names:
        col = tbl[name].combine_chunks()
        if name == "end_ns":
            cols["end_ns.minus_start_ns"] = pa.array(col.to_numpy() - start)
        elif name in ("start_ns", "correlation_id", "external_id"):
            valid = col.is_valid().to_numpy(zero_copy_only=False)
            v = np.asarray(col.fill_null(0).to_numpy(), np.int64)
            prev = np.maximum.accumulate(np.where(valid, np.arange(len(v)), -1))
            last = np.concatenate(([0], np.where(prev >= 0, v[np.clip(prev, 0, None)], 0)[:-1]))
            cols[f"{name}.delta"] = pa.array(v - last, mask=~valid)
        else:
            cols[name] = col
    return pa.table(cols)


def _ipc(file: Path, tbl: pa.Table, level: int) -> None:
    opts = pa.ipc.IpcWriteOptions(compression=pa.Codec("zstd", level))
    with pa.OSFile(str(file), "wb") as sink, pa.ipc.new_file(sink, tbl.schema, options=opts) as w:
        w.write_table(tbl)


def _read_s(file: Path) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        if file.suffix == ".parquet":
            pq.read_table(file)
        else:
            with pa.memory_map(str(file)) as src:
                pa.ipc.open_file(src).read_all()
        best = min(best, time.perf_counter() - t0)
    return best


def measure(label: str, kernels: pa.Table, json_bytes: int | None) -> str:
    n = kernels.num_rows
    decl = schema.table("kernels")
    tbl = trace_mod.stored(decl, kernels)
    with tempfile.TemporaryDirectory() as d:
        files = {
            "parquet": Path(d) / "k.parquet",
            "ipc": Path(d) / "k.arrow",
            "ipc9": Path(d) / "k9.arrow",
            "v2": Path(d) / "v2.arrow",
        }
        tablefile.write(files["parquet"], decl, tbl)
        _ipc(files["ipc"], tbl, 3)
        _ipc(files["ipc9"], tbl, 9)
        _ipc(files["v2"], _v2(tbl), 3)
        b = {k: f.stat().st_size / n for k, f in files.items()}
        r = {k: _read_s(files[k]) * 1e3 for k in ("parquet", "ipc")}
    j = f"{json_bytes / n:11.1f}" if json_bytes else f"{'-':>11}"
    ratio = f"{b['parquet'] / (json_bytes / n):10.3f}" if json_bytes else f"{'-':>10}"
    return (
        f"{label:<36} {n:9d} {j} {b['parquet']:9.2f} {b['ipc']:7.2f} {b['ipc9']:7.2f} "
        f"{b['v2']:6.2f} {ratio} {r['parquet']:9.1f} {r['ipc']:8.1f}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path, help="Kineto JSON files")
    ap.add_argument("--trace", nargs="*", type=Path, default=[], help="trace directories")
    a = ap.parse_args(argv)
    print(
        f"{'input':<36} {'kernels':>9} {'json.gz B/k':>11} {'parquet':>9} {'ipc':>7} "
        f"{'ipc9':>7} {'v2':>6} {'pq/json.gz':>10} {'pq read ms':>9} {'ipc read':>8}"
    )
    for f in a.files or ([] if a.trace else [FIXTURE]):
        n, jbytes = kernel_json_gz_bytes(f)
        tables, _ = kineto.import_files([f])
        k = trace_mod.to_table("kernels", tables["kernels"])
        assert k.num_rows == n, f"{f}: {k.num_rows} imported kernels, {n} kernel events"
        print(measure(f.name, k, jbytes))
    for d in a.trace:
        print(measure(d.name, tbdtrace.open(d).table("kernels"), None))
    print("bytes per kernel; goal: parquet/json.gz <= 0.333")
    return 0


if __name__ == "__main__":
    sys.exit(main())
