"""A tbdtrace trace of N kernels written directly (no JSON), replaying a real trace.

``python bench/gen_native.py --kernels 10000000 --out out/bench/native_10m``

Kernel rows are random rows of the fixture's imported kernels table (names, durations,
streams, launch geometry); per stream, each kernel starts after the previous one by a
gap drawn from the fixture's gaps on that stream. Each kernel gets a runtime launch row
(a random fixture launch, ending a fixture launch latency before the kernel) joined by
correlation id, numbered in launch order as CUPTI does, and the steps are cut so a step
holds as many kernels as in the fixture.
``--compression`` sets the page compression (zstd, as tbdtrace writes, lz4, or none).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

import tbdtrace
import tbdtrace.trace as trace_mod
from tbdtrace import tablefile
from tbdtrace.importers import kineto

# The real fixtures are provided beside the checkout (shared/fixtures/), never committed.
FIXTURES = Path(
    os.environ.get("TBDTRACE_FIXTURES")
    or Path(__file__).resolve().parents[2] / "shared" / "fixtures"
)
FIXTURE = FIXTURES / "kineto" / "hta" / "df_index_resolver.json.gz"


def _per_stream_starts(
    stream: np.ndarray,
    dur: np.ndarray,
    gaps: dict[int, np.ndarray],
    rng: np.random.Generator,
    t0: int,
) -> np.ndarray:
    start = np.empty(len(stream), dtype=np.int64)
    for s, pool in gaps.items():
        idx = np.flatnonzero(stream == s)
        step = pool[rng.integers(0, len(pool), len(idx))] + dur[idx]
        start[idx] = t0 + np.concatenate(([0], np.cumsum(step[:-1])))
    return start


def _gaps(k: pa.Table) -> dict[int, np.ndarray]:
    out = {}
    stream = k["stream_id"].to_numpy()
    for s in np.unique(stream):
        sel = np.flatnonzero(stream == s)
        st, en = k["start_ns"].to_numpy()[sel], k["end_ns"].to_numpy()[sel]
        o = np.argsort(st)
        g = st[o][1:] - en[o][:-1]
        out[int(s)] = np.clip(g, 0, None) if len(g) else np.zeros(1, np.int64)
    return out


def generate(n: int, out: Path, compression: str | None, seed: int = 0) -> Path:
    """Write the trace; returns its path."""
    tables, meta = kineto.import_files([FIXTURE])
    fx = trace_mod.to_table("kernels", tables["kernels"])
    rt = trace_mod.to_table("runtime", tables["runtime"])
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, fx.num_rows, n)
    k = fx.take(rows)
    dur = (fx["end_ns"].to_numpy() - fx["start_ns"].to_numpy())[rows]
    stream = k["stream_id"].to_numpy()
    t0 = int(fx["start_ns"].to_numpy().min())
    start = _per_stream_starts(stream, dur, _gaps(fx), rng, t0)
    k = k.set_column(k.schema.get_field_index("start_ns"), "start_ns", pa.array(start))
    k = k.set_column(k.schema.get_field_index("end_ns"), "end_ns", pa.array(start + dur))
    r = rt.take(rng.integers(0, rt.num_rows, n))
    rdur = r["end_ns"].to_numpy() - r["start_ns"].to_numpy()
    rstart = start - rng.integers(1_000, 20_000, n) - rdur
    # Correlation ids count launches in call order, as CUPTI assigns them (in the fixture
    # they increase with the runtime call's start).
    corr = np.empty(n, dtype=np.int64)
    corr[np.argsort(rstart, kind="stable")] = np.arange(1, n + 1, dtype=np.int64)
    for c in ("correlation_id", "external_id"):
        k = k.set_column(k.schema.get_field_index(c), c, pa.array(corr))
    r = r.set_column(r.schema.get_field_index("start_ns"), "start_ns", pa.array(rstart))
    r = r.set_column(r.schema.get_field_index("end_ns"), "end_ns", pa.array(rstart + rdur))
    for c in ("correlation_id", "external_id"):
        r = r.set_column(r.schema.get_field_index(c), c, pa.array(corr))
    steps = _steps(start, start + dur, tables, fx.num_rows)
    tablefile.COMPRESSION = compression
    meta = dict(meta, source_files=[f"synthetic from {FIXTURE.name}"])
    return trace_mod.write(
        out, {"kernels": k, "runtime": r, "steps": steps, "devices": tables["devices"]}, meta
    )


def _steps(start: np.ndarray, end: np.ndarray, tables: dict, n_fx: int) -> dict:
    n_steps_fx = len(tables.get("steps", {}).get("step", [])) or 1
    per = max(1, n_fx // n_steps_fx)
    order = np.sort(start)
    cuts = order[::per]
    s_end = np.append(cuts[1:], end.max())
    return {
        "step": np.arange(len(cuts), dtype=np.int64),
        "start_ns": cuts,
        "end_ns": s_end,
        "source": ["profiler_step"] * len(cuts),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--compression", choices=("zstd", "lz4", "none"), default="zstd")
    a = ap.parse_args(argv)
    p = generate(a.kernels, a.out, None if a.compression == "none" else a.compression)
    size = sum(f.stat().st_size for f in p.iterdir())
    print(f"{p}: {a.kernels} kernels, {size} bytes, {tbdtrace.open(p)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
