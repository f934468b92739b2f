"""Cross-rank report on a synthetic rank set: wall time and the driver's peak RSS of
``tbdtrace report DIR`` in one process (every rank imported as one trace) and rank by
rank (``--jobs N``: a local process pool; ``--workers N``: a local Dask cluster), per
rank count.

``python bench/ranks.py [--ranks 64 --ranks 256] [--kernels 100000] [--how one,pool,dask]
[--procs 2] [--fixture F]``

Each set (``bench/gen_ranks.py``: one straggler, one slow link) is generated once and
cached in ``out/bench/ranks-<N>x<K>/``. Each report runs as a child process; its peak RSS
is the driver's own (``VmHWM`` read from /proc every 50 ms: the pool's and the cluster's
worker processes are not counted; growth in the last 50 ms could be missed). The JSON is
checked to hold every rank and the injected faults, and the rank-by-rank ``ranks``
sections to equal each other (and the one-process one, where it ran).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_ranks  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("TBDTRACE_FIXTURES") or ROOT.parent / "shared" / "fixtures")
FIXTURE = FIXTURES / "kineto" / "hta" / "nccl_data.json.gz"
STEPS, COLLECTIVES = 10, 8
# The one-process report is stopped past this driver RSS (it holds every rank's tables).
LIMIT_BYTES = 6 << 30


def _set(ranks: int, kernels: int, fixture: Path) -> Path:
    out = ROOT / "out" / "bench" / f"ranks-{ranks}x{kernels}"
    spec = gen_ranks.JobSpec(
        ranks=ranks,
        steps=STEPS,
        kernels_per_step=kernels // STEPS - COLLECTIVES,
        collectives_per_step=COLLECTIVES,
        stragglers=((1, 3, 5_000_000),),
        slow_link=(ranks - 1, 1_000_000),
    )
    if not (out / "manifest").is_file():
        t0 = time.perf_counter()
        gen_ranks.generate(fixture, spec, out)
        print(f"  generated {out} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return out


def _hwm_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, int, bool, dict | None]:
    """(wall s, driver peak RSS bytes, killed at LIMIT_BYTES, JSON document)."""
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.DEVNULL)
        peak, killed = 0, False
        done = threading.Event()

        def watch() -> None:
            nonlocal peak, killed
            while not done.wait(0.05):
                peak = max(peak, _hwm_bytes(p.pid))
                if peak > LIMIT_BYTES:
                    killed = True
                    p.kill()
                    return

        w = threading.Thread(target=watch, daemon=True)
        w.start()
        rc = p.wait()
        done.set()
        w.join()
        wall = time.perf_counter() - t0
        if rc != 0 and not killed:
            raise SystemExit(f"command failed (exit {rc}): {' '.join(cmd)}")
        out.seek(0)
        return wall, peak, killed, None if killed else json.load(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, action="append", help="rank counts (default 64, 256)")
    ap.add_argument("--kernels", type=int, default=100_000, help="kernels per rank")
    ap.add_argument("--how", default="one,pool,dask", help="paths to run (one, pool, dask)")
    ap.add_argument("--procs", type=int, default=2, help="pool processes / Dask workers")
    ap.add_argument("--fixture", type=Path, default=FIXTURE)
    a = ap.parse_args(argv)
    if not a.fixture.is_file():
        print(
            f"{a.fixture}: no such file; pass --fixture or set TBDTRACE_FIXTURES", file=sys.stderr
        )
        return 1
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    opts = {"one": [], "pool": ["--jobs", str(a.procs)], "dask": ["--workers", str(a.procs)]}
    rows = []
    for n in a.ranks or [64, 256]:
        d = _set(n, a.kernels, a.fixture)
        sections = {}
        for how in a.how.split(","):
            cmd = [sys.executable, "-m", "tbdtrace", "report", str(d), "--format", "json"]
            wall, peak, killed, doc = _run(cmd + opts[how], env)
            print(f"  {n} ranks, {how}: {wall:.1f} s, {peak / 2**20:.0f} MiB", file=sys.stderr)
            if doc is None:
                rows.append((n, how, wall, peak, "stopped at the RSS limit", "", ""))
                continue
            r = sections[how] = doc["ranks"]
            st = next(s for s in r["steps"] if s["step"] == 3)
            slow = [x["rank"] for x in r["collectives"]["per_rank"] if x["slow_link"]]
            found = f"rank {st['slowest_rank']}, lead {st['lead_ns'] / 1e6:.2f} ms"
            rows.append((n, how, wall, peak, str(len(r["per_rank"])), found, str(slow)))
        same = len({json.dumps(s, sort_keys=True) for s in sections.values()}) == 1
        print(f"  {n} ranks: ranks sections identical across {list(sections)}: {same}")
    print(
        "| ranks | kernels | path | report wall (s) | driver peak RSS (MiB) | ranks reported "
        "| straggler step 3 | slow link |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for n, how, wall, peak, got, st, slow in rows:
        print(
            f"| {n} | {n * a.kernels:,} | {how} | {wall:.1f} | {peak / 2**20:,.0f} | {got} | "
            f"{st} | {slow} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
