"""Synthetic Kineto traces that replay a real fixture's statistics, at any kernel count.

``python bench/gen_kineto.py FIXTURE.json.gz --kernels 1000000 --out big.json.gz``

What is replayed from the fixture (sampled with replacement, seeded, so a run is
reproducible):
- kernels: the joint (name, duration, stream, grid, block, registers, shared memory) of
  a random fixture kernel; the gap to the previous kernel on the same stream from the
  fixture's per-stream gap distribution (negative gaps clipped to 0);
- one ``cuda_runtime`` launch per kernel (name and duration of a random fixture launch),
  ending before its kernel starts by a fixture launch-to-start latency, joined to the
  kernel by ``correlation`` and by an ``ac2g`` flow pair (``s`` on the launch, ``f`` on
  the kernel), as Kineto writes them;
- ``gpu_memcpy``, ``gpu_memset``, ``cpu_op`` and ``user_annotation`` events in the
  fixture's ratios to kernels, each a random fixture event of that kind moved into the
  synthetic time span; the header (deviceProperties, distributedInfo) is copied.

Times are written as integers or 3-decimal microseconds, as Kineto writes them.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

CHUNK = 1 << 16  # events formatted per batch


@dataclass(frozen=True)
class FixtureStats:
    """What the generator samples from, taken from one real trace."""

    header: dict[str, Any]  # top-level keys except traceEvents
    kernels: list[dict[str, Any]]  # the fixture's kernel events
    launches: list[dict[str, Any]]  # its cuda_runtime launch events
    latency_ns: np.ndarray  # launch end -> kernel start, ns, clipped at 0
    gaps_ns: dict[int, np.ndarray]  # stream -> gaps between consecutive kernels, ns
    others: dict[str, list[dict[str, Any]]]  # cat -> events, for the other kinds
    per_kernel: dict[str, float]  # cat -> events per kernel in the fixture


def _ns(v: Any) -> int:
    return int(round(float(v) * 1000))


def load_stats(path: Path) -> FixtureStats:
    """Statistics of a (gzipped) Kineto fixture; raises SystemExit on an unusable file."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    if not kernels:
        raise SystemExit(f"{path}: no kernel events to replay; choose a GPU trace")
    by_corr = {e["args"].get("correlation"): e for e in kernels}
    launches = [
        e
        for e in events
        if e.get("ph") == "X"
        and e.get("cat") == "cuda_runtime"
        and e.get("args", {}).get("correlation") in by_corr
    ]
    lat = [
        _ns(by_corr[r["args"]["correlation"]]["ts"]) - _ns(r["ts"]) - _ns(r.get("dur", 0))
        for r in launches
    ]
    gaps: dict[int, np.ndarray] = {}
    for stream in {k["args"].get("stream", k["tid"]) for k in kernels}:
        ks = sorted(
            (k for k in kernels if k["args"].get("stream", k["tid"]) == stream),
            key=lambda k: _ns(k["ts"]),
        )
        g = [
            _ns(b["ts"]) - _ns(a["ts"]) - _ns(a.get("dur", 0))
            for a, b in zip(ks, ks[1:], strict=False)
        ]
        gaps[int(stream)] = np.clip(np.array(g or [0], dtype=np.int64), 0, None)
    cats = ("gpu_memcpy", "gpu_memset", "cpu_op", "user_annotation")
    others = {c: [e for e in events if e.get("ph") == "X" and e.get("cat") == c] for c in cats}
    header = {k: v for k, v in doc.items() if k != "traceEvents"} if isinstance(doc, dict) else {}
    return FixtureStats(
        header=header,
        kernels=kernels,
        launches=launches
        or [{"name": "cudaLaunchKernel", "dur": 5, "pid": 1, "tid": 1, "args": {"cbid": 211}}],
        latency_ns=np.clip(np.array(lat or [1000], dtype=np.int64), 0, None),
        gaps_ns=gaps,
        others={c: v for c, v in others.items() if v},
        per_kernel={c: len(v) / len(kernels) for c, v in others.items() if v},
    )


def _us(ns: int) -> str:
    """Integer ns as Kineto's microsecond text (integer, or 3 decimals)."""
    q, r = divmod(ns, 1000)
    return str(q) if r == 0 else f"{q}.{r:03d}"


def _kernel_events(st: FixtureStats, n: int, seed: int) -> Iterator[str]:
    rng = np.random.default_rng(seed)
    t0 = min(_ns(k["ts"]) for k in st.kernels)
    cursor = {s: t0 for s in st.gaps_ns}
    corr0 = 1_000_000
    for lo in range(0, n, CHUNK):
        m = min(CHUNK, n - lo)
        ki = rng.integers(0, len(st.kernels), m)
        li = rng.integers(0, len(st.launches), m)
        lat = st.latency_ns[rng.integers(0, len(st.latency_ns), m)]
        for j in range(m):
            k = st.kernels[ki[j]]
            a = k["args"]
            stream = int(a.get("stream", k["tid"]))
            gaps = st.gaps_ns[stream]
            start = cursor[stream] + int(gaps[rng.integers(0, len(gaps))])
            dur = _ns(k.get("dur", 0))
            cursor[stream] = start + dur
            corr = corr0 + lo + j
            launch = st.launches[li[j]]
            ldur = _ns(launch.get("dur", 0))
            lstart = start - int(lat[j]) - ldur
            pid, tid = launch["pid"], launch["tid"]
            yield (
                f'{{"ph":"X","cat":"cuda_runtime","name":{json.dumps(launch["name"])},'
                f'"pid":{pid},"tid":{tid},"ts":{_us(lstart)},"dur":{_us(ldur)},'
                f'"args":{{"External id":{corr},"cbid":{launch["args"].get("cbid", 211)},'
                f'"correlation":{corr}}}}}'
            )
            yield (
                f'{{"ph":"s","id":{corr},"pid":{pid},"tid":{tid},"ts":{_us(lstart)},'
                f'"cat":"ac2g","name":"ac2g"}}'
            )
            kargs = dict(a, correlation=corr, **{"External id": corr})
            yield (
                f'{{"ph":"X","cat":"kernel","name":{json.dumps(k["name"])},'
                f'"pid":{k["pid"]},"tid":{k["tid"]},"ts":{_us(start)},"dur":{_us(dur)},'
                f'"args":{json.dumps(kargs, separators=(",", ":"))}}}'
            )
            yield (
                f'{{"ph":"f","id":{corr},"pid":{k["pid"]},"tid":{k["tid"]},"ts":{_us(start)},'
                f'"cat":"ac2g","name":"ac2g","bp":"e"}}'
            )
    _span[0], _span[1] = t0, max(cursor.values())


_span = [0, 0]  # [first, last] kernel time of the last _kernel_events run, ns


def _other_events(st: FixtureStats, n_kernels: int, seed: int) -> Iterator[str]:
    rng = np.random.default_rng(seed + 1)
    t0, t1 = _span
    for cat, pool in st.others.items():
        count = int(round(st.per_kernel[cat] * n_kernels))
        starts = np.sort(rng.integers(t0, max(t1, t0 + 1), count))
        picks = rng.integers(0, len(pool), count)
        for s, p in zip(starts.tolist(), picks.tolist(), strict=True):
            e = dict(pool[p])
            e["ts"] = int(s) // 1000  # integer microseconds (Kineto's usual for host events)
            yield json.dumps(e, separators=(",", ":"))


def generate(st: FixtureStats, n_kernels: int, out: Path, seed: int = 0) -> int:
    """Write a synthetic trace of ``n_kernels`` kernels to ``out``; returns events written.

    A ``.gz`` suffix writes gzip (level 1: the generator is not what is benchmarked).
    """
    n = 0
    gz = out.suffix == ".gz"
    with (
        gzip.open(out, "wt", compresslevel=1, encoding="utf-8")
        if gz
        else open(out, "w", encoding="utf-8")  # noqa: SIM115 - closed by the with
    ) as f:
        head = json.dumps(st.header, separators=(",", ":"))[:-1]
        f.write((head + "," if len(head) > 1 else "{") + '"traceEvents":[\n')
        batch: list[str] = []
        for gen in (_kernel_events(st, n_kernels, seed), _other_events(st, n_kernels, seed)):
            for line in gen:
                batch.append(line)
                if len(batch) >= CHUNK:
                    f.write(("\n," if n else "") + ",\n".join(batch))
                    n += len(batch)
                    batch = []
        if batch:
            f.write(("\n," if n else "") + ",\n".join(batch))
            n += len(batch)
        f.write("\n]}\n")
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fixture", type=Path, help="real Kineto trace to replay (.json or .json.gz)")
    ap.add_argument("--kernels", type=int, required=True, help="kernel events to generate")
    ap.add_argument("--out", type=Path, required=True, help="output .json or .json.gz")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if not a.fixture.is_file():
        print(f"{a.fixture}: no such file; check the path", file=sys.stderr)
        return 1
    n = generate(load_stats(a.fixture), a.kernels, a.out, a.seed)
    print(f"{a.out}: {n} events ({a.kernels} kernels), {a.out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
