"""Cross-rank report on a synthetic rank set: wall time, CPU time and the driver's peak
RSS of ``tbdtrace report DIR`` in one process (every rank imported as one trace) and rank
by rank (``--jobs N``: a local process pool; ``--workers N``: a local Dask cluster), per
rank count.

``python bench/ranks.py [--ranks 64 --ranks 256] [--kernels 100000] [--how one,pool,dask]
[--procs 2] [--fixture F] [--sets DIR]``

Each set (``bench/gen_ranks.py``: two stragglers, one slow link) is generated once and
cached in ``DIR/ranks-<N>x<K>/`` (``--sets``, default ``out/bench``). Each report runs as
a child process; its peak RSS is the driver's own (``VmHWM`` read from /proc every 50 ms:
the pool's and the cluster's worker processes are not counted; growth in the last 50 ms
could be missed).

CPU time (user + system, Linux only), which a loaded machine does not inflate the way it
does wall time: this script makes itself the child subreaper (``PR_SET_CHILD_SUBREAPER``),
so every process the report starts, at any depth, is reaped either by its parent or, once
orphaned, by this script, and its CPU time lands in this script's ``RUSAGE_CHILDREN``:
the pool's forkserver and workers, Dask's nannies and workers alike (a local Dask
cluster's scheduler runs inside the report's own process, so it counts as the driver). The
driver's own share is read from ``/proc/PID/stat`` while the finished report is a zombie
(waited for with ``WNOWAIT``); "workers" is the rest of the tree. The load average (1 min)
is read before and after each run.

The JSON is checked to hold every rank and the injected faults, and the rank-by-rank
``ranks`` sections to equal each other (and the one-process one, where it ran). The goals
end the output, one ``PASS``/``FAIL`` line each: every injected straggler is its step's
slowest rank and flagged, its delay above the run's straggler threshold (the rule's floor,
2% of the median step, or 5 x its noise); the ``ranks`` sections are identical across the
paths at each size; each run's driver peak RSS is at most ``--rss-goal-mib``; CPU time per
rank at each size is within ``--cpu-ratio-goal`` of the smallest size's, per path. The
exit code is 1 when a goal fails.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_ranks  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("TBDTRACE_FIXTURES") or ROOT.parent / "shared" / "fixtures")
FIXTURE = FIXTURES / "kineto" / "hta" / "nccl_data.json.gz"
STEPS, COLLECTIVES = 10, 8
# The one-process report is stopped past this driver RSS (it holds every rank's tables).
LIMIT_BYTES = 6 << 30


def stragglers(ranks: int, delay_ms: float) -> tuple[tuple[int, int, int], ...]:
    """The injected stragglers (rank, step, delay ns): rank 1 in step 3 and a rank in the
    middle of the job in step 6, each sleeping ``delay_ms`` before its step."""
    d = int(delay_ms * 1e6)
    return ((1, 3, d), (ranks // 2 + 1, 6, d)) if ranks > 3 else ((1, 3, d),)


def _set(ranks: int, kernels: int, fixture: Path, sets: Path, delay_ms: float) -> Path:
    out = sets / f"ranks-{ranks}x{kernels}-s{delay_ms:g}"
    spec = gen_ranks.JobSpec(
        ranks=ranks,
        steps=STEPS,
        kernels_per_step=kernels // STEPS - COLLECTIVES,
        collectives_per_step=COLLECTIVES,
        stragglers=stragglers(ranks, delay_ms),
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


@dataclass
class Result:
    wall_s: float
    driver_cpu_s: float  # the report process itself (user + system)
    workers_cpu_s: float  # every other process it started, at any depth
    peak_bytes: int  # the driver's VmHWM
    killed: bool  # stopped at LIMIT_BYTES
    load: tuple[float, float]  # 1-min load average before and after
    doc: dict | None


def _subreaper() -> None:
    """Orphaned descendants are re-parented to this process (and reaped here, their CPU
    time counted in RUSAGE_CHILDREN) instead of to init."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
        raise SystemExit(f"prctl(PR_SET_CHILD_SUBREAPER): errno {ctypes.get_errno()}")


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _own_cpu_s(pid: int) -> float:
    """utime + stime of a process (a zombie's stays readable until it is reaped)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _reap_orphans(timeout_s: float = 120.0) -> None:
    """Wait for every descendant left behind by the report (workers shutting down)."""
    end = time.monotonic() + timeout_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() > end:
                print("  warning: descendants still running; their CPU is not counted")
                return
            time.sleep(0.05)


def _run(cmd: list[str], env: dict[str, str]) -> Result:
    load0 = os.getloadavg()[0]
    cpu0 = _children_cpu_s()
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
        os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)  # a zombie, not reaped yet
        wall = time.perf_counter() - t0
        done.set()
        w.join()
        driver = _own_cpu_s(p.pid)
        rc = p.wait()
        _reap_orphans()
        total = _children_cpu_s() - cpu0
        if rc != 0 and not killed:
            raise SystemExit(f"command failed (exit {rc}): {' '.join(cmd)}")
        out.seek(0)
        doc = None if killed else json.load(out)
        load = (load0, os.getloadavg()[0])
        return Result(wall, driver, total - driver, peak, killed, load, doc)


def fault_goals(
    sec: dict[str, Any],
    n: int,
    injected: tuple[tuple[int, int, int], ...],
    slow_link: int | None,
) -> tuple[list[tuple[bool, str]], list[str], list[int]]:
    """The checks of one ``ranks`` section against the faults injected into its set:
    ``(goals, found, slow)``, where a goal is (met, what): each injected straggler (rank,
    step, delay ns) is its step's slowest rank and flagged, its delay is above the run's
    straggler threshold (sized above the rule's floor and noise), every one of ``n`` ranks
    is reported and the slow link is found on ``slow_link`` only (on no rank when None);
    ``found`` describes the stragglers for the table, ``slow`` lists the ranks flagged as
    slow links."""
    goals: list[tuple[bool, str]] = []
    found = []
    rule = sec["straggler_rule"]
    threshold_ms = rule["threshold_ns"] / 1e6
    steps = {s["step"]: s for s in sec["steps"]}
    for rank, step, delay_ns in injected:
        st = steps.get(step)
        if st is None:
            goals.append((False, f"step {step} (rank {rank} injected): not in the report"))
            found.append(f"step {step}: MISSING")
            continue
        ok = st["slowest_rank"] == rank and bool(st["straggler"])
        flag = "flagged" if st["straggler"] else "NOT flagged"
        goals.append(
            (
                ok,
                f"step {step}'s slowest rank {st['slowest_rank']} (injected: rank {rank}), "
                f"lead {st['lead_ns'] / 1e6:.1f} ms over threshold "
                f"{st['threshold_ns'] / 1e6:.1f} ms, {flag}",
            )
        )
        found.append(
            f"step {step}: rank {st['slowest_rank']} (injected {rank}), lead "
            f"{st['lead_ns'] / 1e6:.1f} ms, {flag}" + ("" if ok else " MISSED")
        )
        goals.append(
            (
                delay_ns > rule["threshold_ns"],
                f"step {step}: injected delay {delay_ns / 1e6:g} ms = "
                f"{delay_ns / max(rule['threshold_ns'], 1):.1f} x the straggler threshold "
                f"{threshold_ms:.1f} ms (floor {rule['floor_ns'] / 1e6:.1f} ms = "
                f"{rule['floor_share']:.0%} of the median step; noise "
                f"{rule['noise_ns'] / 1e6:.3f} ms)",
            )
        )
    extra = [s for s, st in steps.items() if st["straggler"] and s not in {x[1] for x in injected}]
    found.append(
        f"other steps flagged: {extra or 'none'} (threshold {threshold_ms:.2f} ms, noise "
        f"{rule['noise_ns'] / 1e6:.3f} ms)"
    )
    slow = [x["rank"] for x in sec["collectives"]["per_rank"] if x["slow_link"]]
    want = [] if slow_link is None else [slow_link]
    goals.append(
        (
            len(sec["per_rank"]) == n and slow == want,
            f"{len(sec['per_rank'])} of {n} ranks reported, slow link found on {slow} "
            f"(injected: {want})",
        )
    )
    return goals, found, slow


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, action="append", help="rank counts (default 64, 256)")
    ap.add_argument("--kernels", type=int, default=100_000, help="kernels per rank")
    ap.add_argument("--how", default="one,pool,dask", help="paths to run (one, pool, dask)")
    ap.add_argument("--procs", type=int, default=2, help="pool processes / Dask workers")
    ap.add_argument("--fixture", type=Path, default=FIXTURE)
    ap.add_argument(
        "--sets", type=Path, default=ROOT / "out" / "bench", help="where the sets are cached"
    )
    ap.add_argument(
        "--straggler-ms",
        type=float,
        default=200.0,
        help="delay of each injected straggler (default 200 ms: ~15%% of a step, well above "
        "the straggler rule's threshold: the run's noise, or 2%% of the median step)",
    )
    ap.add_argument(
        "--rss-goal-mib", type=float, default=256.0, help="driver peak RSS goal (default 256)"
    )
    ap.add_argument(
        "--cpu-ratio-goal",
        type=float,
        default=1.2,
        help="CPU per rank at each size over the smallest size's, per path (default 1.2)",
    )
    a = ap.parse_args(argv)
    if not a.fixture.is_file():
        print(
            f"{a.fixture}: no such file; pass --fixture or set TBDTRACE_FIXTURES", file=sys.stderr
        )
        return 1
    _subreaper()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    opts = {"one": [], "pool": ["--jobs", str(a.procs)], "dask": ["--workers", str(a.procs)]}
    rows = []
    per_rank: dict[tuple[int, str], float] = {}
    goals: list[tuple[bool, str]] = []  # (met, what)
    for n in a.ranks or [64, 256]:
        d = _set(n, a.kernels, a.fixture, a.sets, a.straggler_ms)
        sections = {}
        for how in a.how.split(","):
            cmd = [sys.executable, "-m", "tbdtrace", "report", str(d), "--format", "json"]
            r = _run(cmd + opts[how], env)
            print(
                f"  {n} ranks, {how}: {r.wall_s:.1f} s wall, CPU {r.driver_cpu_s:.1f} s driver "
                f"+ {r.workers_cpu_s:.1f} s workers, {r.peak_bytes / 2**20:.0f} MiB, load "
                f"{r.load[0]:.1f}-{r.load[1]:.1f}",
                file=sys.stderr,
            )
            rss_mib = r.peak_bytes / 2**20
            goals.append(
                (
                    rss_mib <= a.rss_goal_mib,
                    f"{n} ranks, {how}: driver peak RSS {rss_mib:.0f} MiB "
                    f"(goal <= {a.rss_goal_mib:g} MiB)",
                )
            )
            if r.doc is None:
                rows.append((n, how, r, "stopped at the RSS limit", "", ""))
                continue
            sec = sections[how] = r.doc["ranks"]
            checks, found, slow = fault_goals(sec, n, stragglers(n, a.straggler_ms), n - 1)
            goals += [(ok, f"{n} ranks, {how}: {what}") for ok, what in checks]
            per_rank[(n, how)] = (r.driver_cpu_s + r.workers_cpu_s) / n
            rows.append((n, how, r, str(len(sec["per_rank"])), "; ".join(found), str(slow)))
        if len(sections) > 1:
            same = len({json.dumps(s, sort_keys=True) for s in sections.values()}) == 1
            goals.append((same, f"{n} ranks: ranks sections identical across {list(sections)}"))
    counts = sorted({n for n, _ in per_rank})
    for how in a.how.split(","):
        have = [n for n in counts if (n, how) in per_rank]
        for n in have[1:]:
            ratio = per_rank[(n, how)] / per_rank[(have[0], how)]
            goals.append(
                (
                    ratio <= a.cpu_ratio_goal,
                    f"{how}: CPU per rank at {n} ranks / at {have[0]} ranks: "
                    f"{per_rank[(n, how)] * 1e3:.0f} / {per_rank[(have[0], how)] * 1e3:.0f} ms "
                    f"= {ratio:.2f}x (goal <= {a.cpu_ratio_goal:g}x)",
                )
            )
    print(
        "| ranks | kernels | path | wall (s) | CPU s driver | CPU s workers | CPU ms per rank "
        "| driver peak RSS (MiB) | load avg (1 min, before-after) | ranks reported "
        "| injected stragglers | slow link |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, how, r, got, found_s, slow_s in rows:
        cpu = r.driver_cpu_s + r.workers_cpu_s
        print(
            f"| {n} | {n * a.kernels:,} | {how} | {r.wall_s:.1f} | {r.driver_cpu_s:.1f} | "
            f"{r.workers_cpu_s:.1f} | {cpu / n * 1e3:,.0f} | {r.peak_bytes / 2**20:,.0f} | "
            f"{r.load[0]:.1f}-{r.load[1]:.1f} | {got} | {found_s} | {slow_s} |"
        )
    print("Goals:")
    for met, what in goals:
        print(f"  {'PASS' if met else 'FAIL'}  {what}")
    failed = sum(not met for met, _ in goals)
    print(
        f"{len(goals) - failed} of {len(goals)} goals met"
        + (f", {failed} FAILED" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
