"""Synthetic per-rank Kineto traces of one data-parallel job, from a real multi-rank
fixture's statistics, with injected faults.

``python bench/gen_ranks.py FIXTURE.json.gz --ranks 4 --steps 6 --kernels-per-step 200
--out DIR [--straggler RANK:STEP:DELAY_US] [--slow-link RANK:EXTRA_US] [--missing RANK]
[--truncated RANK] [--launches]``

What is replayed from the fixture (``gen_kineto.load_stats``, sampled with a seed):
compute kernels (name, duration, grid, block...) and the gaps between kernels on a stream;
collectives: the fixture's NCCL kernels with their args (``Collective name``, ``In msg
nelems``, dtype, group) and durations; the header (deviceProperties, distributedInfo
with this file's rank and the world size).

The job model (every rank runs the same kernels, in lock step at the collectives):
each step is ``--collectives-per-step`` segments of compute kernels, each ended by a
collective. A rank arrives at a collective when its compute is done; the collective
kernel of every rank starts at its arrival and ends at the last rank's arrival plus the
transfer time (the fixture kernel's duration), plus ``EXTRA`` on a ``--slow-link`` rank.
A ``--straggler`` rank sleeps ``DELAY`` (device idle) before the first segment of that
step. Step ranges (``ProfilerStep#N``, user_annotation) span each rank's step; each
collective kernel carries ``Seq`` (its number in the process group) unless ``--no-seq``.
``--launches`` adds a ``cudaLaunchKernel`` (host thread, 2 us before its kernel, within
the step, launches in sequence) per kernel with the kernel's correlation id: HTA drops
kernels that no host event launched.
``--missing`` ranks get no file; a ``--truncated`` rank's file is cut at half its bytes
(a broken gzip stream). ``manifest`` in DIR (JSON; no .json suffix, so that reading the
folder as rank files skips it) records the parameters.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_kineto  # noqa: E402


@dataclass(frozen=True)
class JobSpec:
    ranks: int = 4
    steps: int = 6
    kernels_per_step: int = 200  # compute kernels per step and rank
    collectives_per_step: int = 4
    seed: int = 0
    seq: bool = True  # write the Seq arg on collective kernels
    stragglers: tuple[tuple[int, int, int], ...] = ()  # (rank, step, delay_ns)
    slow_link: tuple[int, int] | None = None  # (rank, extra_ns per collective)
    missing: tuple[int, ...] = ()
    truncated: tuple[int, ...] = ()
    # A cudaLaunchKernel (cuda_runtime, host thread) per kernel, linked by correlation:
    # HTA keeps only kernels launched from inside a traced step.
    launches: bool = False
    first_step: int = 1
    t0_ns: int = 1_700_000_000_000_000_000 // 1000 * 1000


@dataclass
class _Pools:
    compute: list[dict[str, Any]]
    colls: list[dict[str, Any]]
    gaps: np.ndarray
    header: dict[str, Any] = field(default_factory=dict)


def _pools(fixture: Path) -> _Pools:
    st = gen_kineto.load_stats(fixture)
    colls = [k for k in st.kernels if k["name"].lower().startswith("nccl")]
    compute = [k for k in st.kernels if not k["name"].lower().startswith("nccl")]
    if not colls or not compute:
        raise SystemExit(f"{fixture}: needs NCCL and compute kernels; use nccl_data.json.gz")
    gaps = np.concatenate(list(st.gaps_ns.values()))
    gaps = np.clip(gaps, 0, np.percentile(gaps, 90))  # the job model adds its own waits
    return _Pools(compute, colls, gaps, st.header)


def _prefix(k: dict[str, Any], extra: dict[str, Any]) -> tuple[str, str]:
    """(event text up to "ts", its args text without the closing brace): formatted once
    per fixture kernel, so that writing an event is two integer formats."""
    args = {a: v for a, v in k["args"].items() if a not in ("correlation", "External id")}
    args.update(extra)
    head = (
        f'{{"ph":"X","cat":"kernel","name":{json.dumps(k["name"])},"pid":0,'
        f'"tid":{args.get("stream", 7)},'
    )
    return head, json.dumps(args, separators=(",", ":"))[:-1]


def _event(pre: tuple[str, str], start: int, end: int, corr: int) -> str:
    us = gen_kineto._us
    return (
        f'{pre[0]}"ts":{us(start)},"dur":{us(end - start)},"args":{pre[1]},'
        f'"correlation":{corr},"External id":{corr}}}}}'
    )


def _launch(start: int, corr: int) -> str:
    us = gen_kineto._us
    return (
        f'{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":100,"tid":100,'
        f'"ts":{us(start)},"dur":{us(LAUNCH_NS)},"args":{{"correlation":{corr},'
        f'"External id":{corr}}}}}'
    )


LAUNCH_NS, LAUNCH_LEAD_NS = 500, 2000  # a launch's length and how far it precedes its kernel


def _step(n: int, start: int, end: int) -> str:
    us = gen_kineto._us
    return (
        f'{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{n}","pid":100,"tid":100,'
        f'"ts":{us(start)},"dur":{us(end - start)},"args":{{"External id":{n}}}}}'
    )


@dataclass
class _Segment:
    picks: list[int]  # compute kernels (pool indices), the same on every rank
    rel: list[tuple[int, int]]  # their (start, end) relative to the segment's start
    coll: int  # collective kernel (pool index)
    seq: int
    begin: np.ndarray  # per rank: segment start (device clock)
    c_start: np.ndarray  # per rank: collective kernel start and end
    c_end: np.ndarray


def simulate(p: _Pools, spec: JobSpec) -> list[tuple[int, list[_Segment], np.ndarray, np.ndarray]]:
    """The job's timeline: per step (number, segments, step start and end per rank)."""
    rng = np.random.default_rng(spec.seed)
    clock = np.full(spec.ranks, spec.t0_ns, np.int64)  # each rank's device cursor
    delay = {(r, s): d for r, s, d in spec.stragglers}
    seq = 0
    sizes = [
        len(x) for x in np.array_split(np.arange(spec.kernels_per_step), spec.collectives_per_step)
    ]
    steps = []
    for i in range(spec.steps):
        step = spec.first_step + i
        step_start = clock.copy()
        clock += np.array([delay.get((r, step), 0) for r in range(spec.ranks)], np.int64)
        segs = []
        for n in sizes:
            picks = rng.integers(0, len(p.compute), n).tolist()
            gaps = p.gaps[rng.integers(0, len(p.gaps), n)].tolist()
            rel, t = [], 0
            for j, g in zip(picks, gaps, strict=True):  # same kernels on every rank
                t += int(g)
                d = gen_kineto._ns(p.compute[j].get("dur", 0))
                rel.append((t, t + d))
                t += d
            begin = clock.copy()
            arrive = begin + t
            c = int(rng.integers(0, len(p.colls)))
            transfer = max(1000, gen_kineto._ns(p.colls[c].get("dur", 0)))
            end = np.full(spec.ranks, int(arrive.max()) + transfer, np.int64)
            if spec.slow_link:
                end[spec.slow_link[0]] += spec.slow_link[1]
            segs.append(_Segment(picks, rel, c, seq, begin, arrive, end))
            clock = end.copy()
            seq += 1
        steps.append((step, segs, step_start, clock.copy()))
        clock += 10_000  # host gap between steps
    return steps


def _rank_events(p: _Pools, spec: JobSpec, timeline: list[Any], r: int) -> Any:
    pre = [_prefix(k, {}) for k in p.compute]
    extra: dict[str, Any] = {"Group size": spec.ranks}
    corr = 1
    host = 0  # end of the last launch on the host thread (launches do not overlap)

    def launch(kernel_start: int, step_start: int) -> Any:
        nonlocal host
        if spec.launches:
            t = max(kernel_start - LAUNCH_LEAD_NS, step_start, host)
            host = t + LAUNCH_NS
            yield _launch(t, corr)

    for step, segs, s0, s1 in timeline:
        first = int(s0[r])
        for seg in segs:
            b = int(seg.begin[r])
            for j, (a, e) in zip(seg.picks, seg.rel, strict=True):
                yield from launch(b + a, first)
                yield _event(pre[j], b + a, b + e, corr)
                corr += 1
            cx = dict(extra, Seq=seg.seq) if spec.seq else extra
            cpre = _prefix(p.colls[seg.coll], cx)
            yield from launch(int(seg.c_start[r]), first)
            yield _event(cpre, int(seg.c_start[r]), int(seg.c_end[r]), corr)
            corr += 1
        yield _step(step, int(s0[r]), int(s1[r]))


def generate(fixture: Path, spec: JobSpec, out: Path) -> dict[str, Any]:
    """Write ``rank-<r>.json.gz`` per rank and ``manifest``; returns the manifest."""
    p = _pools(fixture)
    out.mkdir(parents=True, exist_ok=True)
    timeline = simulate(p, spec)
    files = {}
    header = {k: v for k, v in p.header.items() if k != "baseTimeNanoseconds"}
    for r in range(spec.ranks):
        path = out / f"rank-{r}.json.gz"
        files[r] = str(path)
        if r in spec.missing:
            continue
        header["distributedInfo"] = {"backend": "nccl", "rank": r, "world_size": spec.ranks}
        # Spaces after the colons as Kineto writes them: HTA finds a file's rank with the
        # pattern '"rank":\\s+(\\d+)' and reads a file without a match as rank 0.
        head = json.dumps(header, separators=(", ", ": "))[:-1]
        with gzip.open(path, "wt", compresslevel=1, encoding="utf-8") as f:
            f.write((head + "," if len(head) > 1 else "{") + '"traceEvents":[\n')
            batch: list[str] = []
            first = True
            for ev in _rank_events(p, spec, timeline, r):
                batch.append(ev)
                if len(batch) >= gen_kineto.CHUNK:
                    f.write(("" if first else ",\n") + ",\n".join(batch))
                    first, batch = False, []
            if batch:
                f.write(("" if first else ",\n") + ",\n".join(batch))
            f.write("\n]}\n")
        if r in spec.truncated:
            data = path.read_bytes()
            path.write_bytes(data[: len(data) // 2])
    manifest = {
        "fixture": str(fixture),
        "spec": {k: (list(v) if isinstance(v, tuple) else v) for k, v in spec.__dict__.items()},
        "files": files,
    }
    (out / "manifest").write_text(json.dumps(manifest, indent=1))
    return manifest


def _ints(text: str, n: int) -> tuple[int, ...]:
    parts = text.split(":")
    if len(parts) != n:
        raise argparse.ArgumentTypeError(f"{text!r}: expected {n} numbers separated by ':'")
    return tuple(int(x) for x in parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fixture", type=Path, help="real multi-rank Kineto trace (nccl_data.json.gz)")
    ap.add_argument("--out", type=Path, required=True, help="output folder")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--kernels-per-step", type=int, default=200)
    ap.add_argument("--collectives-per-step", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-seq", action="store_true", help="leave the Seq arg out")
    ap.add_argument(
        "--launches",
        action="store_true",
        help="a cudaLaunchKernel per kernel (HTA needs them: it keeps launched kernels only)",
    )
    ap.add_argument("--straggler", action="append", default=[], metavar="RANK:STEP:DELAY_US")
    ap.add_argument("--slow-link", metavar="RANK:EXTRA_US")
    ap.add_argument("--missing", type=int, action="append", default=[], metavar="RANK")
    ap.add_argument("--truncated", type=int, action="append", default=[], metavar="RANK")
    a = ap.parse_args(argv)
    if not a.fixture.is_file():
        print(f"{a.fixture}: no such file; check the path", file=sys.stderr)
        return 1
    try:
        strag = tuple((r, s, d * 1000) for r, s, d in (_ints(x, 3) for x in a.straggler))
        slow = _ints(a.slow_link, 2) if a.slow_link else None
    except (argparse.ArgumentTypeError, ValueError) as e:
        print(f"gen_ranks: {e}", file=sys.stderr)
        return 2
    spec = JobSpec(
        ranks=a.ranks,
        steps=a.steps,
        kernels_per_step=a.kernels_per_step,
        collectives_per_step=a.collectives_per_step,
        seed=a.seed,
        seq=not a.no_seq,
        launches=a.launches,
        stragglers=strag,
        slow_link=(slow[0], slow[1] * 1000) if slow else None,
        missing=tuple(a.missing),
        truncated=tuple(a.truncated),
    )
    generate(a.fixture, spec, a.out)
    print(f"{a.out}: {a.ranks} ranks x {a.steps} steps x {a.kernels_per_step} kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
