"""Cross-rank report on a synthetic rank set: wall time and peak RSS of ``tbdtrace report
DIR`` (all ranks imported in memory as one trace), per rank count.

``python bench/ranks.py [--ranks 8 --ranks 64] [--kernels 100000] [--fixture F]``

Each set (``bench/gen_ranks.py``: one straggler, one slow link) is generated once and
cached in ``out/bench/ranks-<N>x<K>/``. The report runs in a child process
(``bench/measure.py``); the JSON is checked to hold every rank and the injected faults.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_ranks  # noqa: E402
from measure import measure  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("TBDTRACE_FIXTURES") or ROOT.parent / "shared" / "fixtures")
FIXTURE = FIXTURES / "kineto" / "hta" / "nccl_data.json.gz"
STEPS, COLLECTIVES = 10, 8


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, action="append", help="rank counts (default 8, 64)")
    ap.add_argument("--kernels", type=int, default=100_000, help="kernels per rank")
    ap.add_argument("--fixture", type=Path, default=FIXTURE)
    a = ap.parse_args(argv)
    if not a.fixture.is_file():
        print(
            f"{a.fixture}: no such file; pass --fixture or set TBDTRACE_FIXTURES", file=sys.stderr
        )
        return 1
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    rows = []
    for n in a.ranks or [8, 64]:
        d = _set(n, a.kernels, a.fixture)
        cmd = [sys.executable, "-m", "tbdtrace", "report", str(d), "--format", "json"]
        run = measure(f"report {n} ranks x {a.kernels} kernels", cmd)
        doc = json.loads(subprocess.run(cmd, env=env, capture_output=True, check=True).stdout)
        r = doc["ranks"]
        found = next(s for s in r["steps"] if s["step"] == 3)
        slow = [x["rank"] for x in r["collectives"]["per_rank"] if x["slow_link"]]
        rows.append((n, run.wall_s, run.peak_rss_bytes, len(r["per_rank"]), found, slow))
    print(
        "| ranks | kernels | report wall (s) | peak RSS (MiB) | ranks reported | "
        "straggler step 3 | slow link |"
    )
    print("|---|---|---|---|---|---|---|")
    for n, wall, rss, got, st, slow in rows:
        print(
            f"| {n} | {n * a.kernels:,} | {wall:.1f} | {rss / 2**20:.0f} | {got} | "
            f"rank {st['slowest_rank']}, lead {st['lead_ns'] / 1e6:.2f} ms | {slow} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
