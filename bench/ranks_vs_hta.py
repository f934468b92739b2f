"""Cross-rank analysis against HTA 0.5.0's ``TraceAnalysis`` on the same folder of
per-rank Kineto files: time, CPU time and memory of each, how far HTA gets under a
memory and a time cap, and per rank whether the two agree.

``python bench/ranks_vs_hta.py --ranks 8 [--kernels 100000] [--how pool] [--procs 2]
[--hta-limit-gib 12] [--hta-timeout-s 1200] [--sets DIR]``
``python bench/ranks_vs_hta.py --dir FOLDER --steps A:B`` (a folder of real rank files,
e.g. symbolic links to ``sampled_rank-0/1.json.gz``; ``--steps``: every step but the last)

The set is ``bench/gen_ranks.py``'s (the one ``bench/ranks.py`` times: a 5 ms straggler,
rank 1 in step 3; a 1 ms slow link on the last rank) with ``--launches``, because HTA
keeps only kernels a host event launched; cached as ``DIR/hta-ranks-<N>x<K>/``.

Ours: ``tbdtrace report DIR --format json --steps 1:9`` (``--how one``: every rank in
one process; ``pool``/``dask``: rank by rank). HTA: ``bench/hta_ranks.py`` in
``.venv-bench``: load, ``get_comm_comp_overlap``, ``get_temporal_breakdown``,
``get_potential_stragglers``. HTA drops the kernels launched in the last profiler step,
so ``--steps 1:9`` gives both the same kernels (steps 1-9 of 10).

HTA runs with a watchdog on the RSS of its whole process tree (its parse pool's
processes included, read every 0.2 s) and is killed past ``--hta-limit-gib`` or
``--hta-timeout-s``; the stages it finished are printed either way. CPU time of both
sides is the whole process tree's (``bench/ranks.py``'s subreaper accounting).

Agreement, per rank (definitions: docs/METRICS.md "ranks" and HTA's source): HTA's
``comp_comm_overlap_pctg`` = length(communication kernels' union intersected with the
compute kernels' union) / length(communication union), ours ``overlap`` the same ratio;
HTA's ``kernel_time`` = first kernel start to last kernel end (ours ``span_ns``),
``compute_time`` = union of non-NCCL, non-memory kernels (ours ``compute_ns``),
``idle_time`` = span minus the union of all kernels (ours ``idle_ns``). HTA floors every
event's start up and its end down to whole microseconds (``round_down_time_stamps``), so
each figure may differ by up to 2 us per kernel it sums; the check allows that (kernels
in the window x 2 us) and prints the largest difference seen. To show that the rounding
is the whole difference, rank 0's file is also read here with Python's ``json`` (a
reader independent of both tools), HTA's rule applied (kernels launched before the last
``ProfilerStep`` starts; start ceiled, end floored, in float64 microseconds as HTA
holds them) and its compute, idle and span computed: they must equal HTA's exactly.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_ranks  # noqa: E402
import ranks  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HTA_PY = ROOT / ".venv-bench" / "bin" / "python"
WINDOW = ["--steps", f"1:{ranks.STEPS - 1}"]


def _set(n: int, kernels: int, sets: Path) -> Path:
    out = sets / f"hta-ranks-{n}x{kernels}"
    spec = gen_ranks.JobSpec(
        ranks=n,
        steps=ranks.STEPS,
        kernels_per_step=kernels // ranks.STEPS - ranks.COLLECTIVES,
        collectives_per_step=ranks.COLLECTIVES,
        stragglers=((1, 3, 5_000_000),),
        slow_link=(n - 1, 1_000_000),
        launches=True,
    )
    if not (out / "manifest").is_file():
        t0 = time.perf_counter()
        gen_ranks.generate(ranks.FIXTURE, spec, out)
        print(f"  generated {out} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return out


def _tree_rss(p: psutil.Process) -> int:
    total = 0
    for q in [p, *p.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            total += q.memory_info().rss
    return total


def run_hta(d: Path, limit_bytes: int, timeout_s: float) -> dict[str, Any]:
    """HTA's stages (the JSON lines it printed), its wall and CPU time, the peak RSS of
    its process tree, and why it stopped (None: it finished)."""
    cpu0 = ranks._children_cpu_s()
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [str(HTA_PY), str(ROOT / "bench" / "hta_ranks.py"), str(d)],
            stdout=out,
            stderr=subprocess.DEVNULL,
        )
        ps = psutil.Process(proc.pid)
        peak, stop = 0, None
        done = threading.Event()

        def watch() -> None:
            nonlocal peak, stop
            while not done.wait(0.2):
                try:
                    peak = max(peak, _tree_rss(ps))
                except psutil.Error:
                    return
                why = None
                if peak > limit_bytes:
                    why = f"killed past {limit_bytes / 2**30:.0f} GiB (its process tree's RSS)"
                elif time.perf_counter() - t0 > timeout_s:
                    why = f"killed at the {timeout_s:.0f} s time cap"
                if why:
                    stop = why
                    for q in [*ps.children(recursive=True), ps]:
                        with contextlib.suppress(psutil.Error):
                            q.kill()
                    return

        w = threading.Thread(target=watch, daemon=True)
        w.start()
        rc = proc.wait()
        wall = time.perf_counter() - t0
        done.set()
        w.join()
        ranks._reap_orphans()
        out.seek(0)
        stages = [json.loads(x) for x in out.read().decode().splitlines() if x.startswith("{")]
    if rc != 0 and stop is None:
        stop = f"exited with status {rc} after stage {stages[-1]['stage'] if stages else '-'}"
    return {
        "wall_s": wall,
        "cpu_s": ranks._children_cpu_s() - cpu0,
        "peak_bytes": peak,
        "stop": stop,
        "stages": stages,
    }


def compare(ours: dict[str, Any], hta: dict[str, Any], kernels: int) -> list[str]:
    """One line per figure: the largest difference over the ranks, and whether it is
    within HTA's microsecond flooring."""
    per = {r["rank"]: r for r in ours["per_rank"]}
    theirs = {int(k): v for k, v in hta["per_rank"].items()}
    lines = [f"ranks: ours {sorted(per)}, HTA {sorted(theirs)}"]
    if sorted(per) != sorted(theirs):
        return [*lines, "rank sets differ: no comparison"]
    pairs = {
        "span (kernel_time)": ("span_ns", "kernel_time_us"),
        "compute": ("compute_ns", "compute_us"),
        "idle": ("idle_ns", "idle_us"),
    }
    allow_ns = kernels * 2000
    for label, (mine, their) in pairs.items():
        worst = max(abs(per[r][mine] - theirs[r][their] * 1000) for r in per)
        ok = "within" if worst <= allow_ns else "OUTSIDE"
        lines.append(
            f"{label}: largest |ours - HTA| {worst / 1e3:,.0f} us ({ok} {allow_ns / 1e3:,.0f} "
            "us = 2 us per kernel)"
        )
    worst = max(abs((per[r]["overlap"] or 0.0) - theirs[r]["overlap"]) for r in per)
    lines.append(
        f"overlap: largest |ours - HTA| {worst:.4f} (HTA prints a percentage with 2 decimals; "
        f"ours {sorted({per[r]['overlap'] for r in per})[:3]}, HTA "
        f"{sorted({theirs[r]['overlap'] for r in theirs})[:3]})"
    )
    return lines


def _union_us(iv: list[tuple[int, int]]) -> int:
    total, cur = 0, None
    for a, b in sorted(x for x in iv if x[1] > x[0]):
        if cur is None or a > cur[1]:
            total += 0 if cur is None else cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return total + (0 if cur is None else cur[1] - cur[0])


def hta_rounded(path: Path) -> dict[str, int]:
    """Rank file ``path`` read with ``json``, HTA's kernel selection and rounding applied:
    compute (non-NCCL kernels' union), idle (span minus all kernels' union), span, in us."""
    import gzip
    import math

    with gzip.open(path) as f:
        ev = json.load(f)["traceEvents"]
    last = max(e["ts"] for e in ev if str(e.get("name", "")).startswith("ProfilerStep#"))
    launched = {e["args"]["correlation"]: e["ts"] for e in ev if e.get("cat") == "cuda_runtime"}
    ks = [
        (e["name"], math.ceil(e["ts"]), math.floor(e["ts"] + e["dur"]))
        for e in ev
        if e.get("cat") == "kernel" and launched.get(e["args"]["correlation"], last) < last
    ]
    every = [(a, b) for _, a, b in ks]
    span = max(b for _, b in every) - min(a for a, _ in every)
    compute = _union_us([(a, b) for n, a, b in ks if "nccl" not in n.lower()])
    return {"compute_us": compute, "idle_us": span - _union_us(every), "kernel_time_us": span}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, help="generate a set of this many ranks")
    ap.add_argument("--dir", type=Path, help="an existing folder of per-rank files instead")
    ap.add_argument("--steps", help="our window (default 1:9, HTA's steps of a generated set)")
    ap.add_argument("--kernels", type=int, default=100_000, help="kernels per rank")
    ap.add_argument("--how", default="pool", help="our path: one, pool or dask")
    ap.add_argument("--procs", type=int, default=2, help="pool processes / Dask workers")
    ap.add_argument("--hta-limit-gib", type=float, default=12.0)
    ap.add_argument("--hta-timeout-s", type=float, default=1200.0)
    ap.add_argument("--sets", type=Path, default=ROOT / "out" / "bench")
    a = ap.parse_args(argv)
    if not HTA_PY.exists():
        print(f"{HTA_PY}: missing; run `make bench-venv` first", file=sys.stderr)
        return 1
    if not ranks.FIXTURE.is_file():
        print(f"{ranks.FIXTURE}: no such file; set TBDTRACE_FIXTURES", file=sys.stderr)
        return 1
    if (a.ranks is None) == (a.dir is None):
        print("ranks_vs_hta: pass --ranks N or --dir FOLDER", file=sys.stderr)
        return 2
    ranks._subreaper()
    d = a.dir if a.dir is not None else _set(a.ranks, a.kernels, a.sets)
    window = ["--steps", a.steps] if a.steps else WINDOW
    opts = {"one": [], "pool": ["--jobs", str(a.procs)], "dask": ["--workers", str(a.procs)]}
    cmd = [sys.executable, "-m", "tbdtrace", "report", str(d), "--format", "json", *window]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = ranks._run(cmd + opts[a.how], env)
    ours_cpu = r.driver_cpu_s + r.workers_cpu_s
    print(
        f"ours ({a.how}): {r.wall_s:.1f} s wall, {ours_cpu:.1f} CPU s, driver peak RSS "
        f"{r.peak_bytes / 2**20:,.0f} MiB, load {r.load[0]:.1f}-{r.load[1]:.1f}"
    )
    load0 = os.getloadavg()[0]
    h = run_hta(d, int(a.hta_limit_gib * 2**30), a.hta_timeout_s)
    print(
        f"HTA: {h['wall_s']:.1f} s wall, {h['cpu_s']:.1f} CPU s, process tree peak RSS "
        f"{h['peak_bytes'] / 2**20:,.0f} MiB, load {load0:.1f}-{os.getloadavg()[0]:.1f}; "
        f"{h['stop'] or 'finished'}"
    )
    for s in h["stages"]:
        print(f"  HTA stage {s['stage']:<22} at {s['t_s']:8.1f} s")
    last = h["stages"][-1] if h["stages"] else {}
    if last.get("stage") == "done" and r.doc is not None:
        sec = r.doc["ranks"]
        n_kernels = (
            a.kernels * (ranks.STEPS - 1) // ranks.STEPS
            if a.dir is None
            else max(int(x["kernels"]) for x in last["per_rank"].values())
        )
        for line in compare(sec, last, n_kernels):
            print("  " + line)
        if a.dir is None:
            mine = hta_rounded(d / "rank-0.json.gz")
            theirs = {k: int(v) for k, v in last["per_rank"]["0"].items() if k in mine}
            same = "equal" if mine == theirs else "DIFFERENT"
            print(f"  rank 0 recomputed with HTA's rounding {mine}: {same} to HTA's {theirs}")
        slowest = [
            f"step {st['step']} rank {st['slowest_rank']} (lead {st['lead_ns'] / 1e6:.2f} ms"
            f"{', straggler' if st['straggler'] else ''})"
            for st in sec["steps"]
            if st["lead_ns"] > 0
        ]
        slow = [x["rank"] for x in sec["collectives"]["per_rank"] if x["slow_link"]]
        print(
            f"  stragglers: HTA get_potential_stragglers {last['stragglers']} "
            f"{last['stragglers_error'] or ''}; ours: slowest rank by work time where it "
            f"leads: {', '.join(slowest) or 'none'}; slow link {slow}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
