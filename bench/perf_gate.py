"""Performance regression gate: `report FILE` against a floor measured in the same run.

``.venv/bin/python bench/perf_gate.py [--runs 5] [--kernels 1000000] [--code DIR ...]``

Budgets that do not depend on the machine's speed: every time is a ratio to a floor
timed in the same run, on the same file, alternating with the command (floor, text
report, JSON report, floor, ...), medians of ``--runs`` rounds. The floor
(``bench/floor.py``) starts Python, imports numpy and pyarrow, inflates the file with
isal and scans every byte without ``json.loads``: what any analysis of the file must
pay. Inputs: the largest Kineto fixture (``df_index_resolver.json.gz``) and a synthetic
file of ``--kernels`` kernels (``bench/gen_kineto.py`` from that fixture, cached in
out/bench/; ``--kernels 0`` leaves it out).

Each budget is printed next to its measured ratio; the gate exits 1, naming what went
over and by how much, when a budget is exceeded (``.ci/run`` runs it; the import budget,
which modules each command may load, is tests/perf/test_import_budget.py).

Ratios are of wall time and of CPU time (user + system of the whole process, every
thread). On a machine whose other jobs compete for the cores, a two-thread command's
wall time tends to its CPU time, so the budgets apply to the CPU ratio, which moves
little with the load; the wall ratio is printed beside it (the goals of issue 35 are
wall time on a quiet machine).

``--code DIR`` (repeatable) measures other checkouts of tbdtrace in the same rounds,
interleaved, e.g. main against a branch; budgets apply to the first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("TBDTRACE_FIXTURES") or ROOT.parent / "shared" / "fixtures")
FIXTURE = FIXTURES / "kineto" / "hta" / "df_index_resolver.json.gz"
OUT = ROOT / "out" / "bench"
PY = sys.executable

# Budgets (ratio of CPU time, medians): (what, numerator, denominator, budget, goal note).
# The goals of issue 35 item 6 are wall time on a quiet machine: the fixture's report at
# most 2x the floor, JSON at most 1.2x text. A CPU budget is looser than the wall goal it
# guards by what the report's second thread overlaps (the parse runs beside the imports).
# Sections that issues 33/34 add must fit under these with the defaults
# (docs/DECISIONS.md 136).
BUDGETS: dict[str, tuple[str, str, float]] = {
    # fixture (216k events, 54 MB of JSON): 2.4x measured at load ~15 (main before
    # issue 35: 2.9x); its wall time was 2.0x the floor's in the same runs. The floor
    # then lost numpy's OpenBLAS thread pool (~50 ms of CPU, docs/DECISIONS.md 225):
    # 2.60x measured against it at load 2.5-3.5 (3.01x for the code before); 2.9x of
    # the new floor (~0.18 s) allows ~0.51 s, less than 2.6x of the old one (~0.60 s).
    # After the day's parser, memory and gzip-read work (DECISIONS 223-237): 2.19x quiet,
    # 2.07x in a fresh clone's .ci/run at load ~2, against 2.84x for the code before it in
    # the same runs; 2.7x catches a return to that code and leaves ~20% for load.
    "fixture: report / floor": ("fixture report", "fixture floor", 2.7),
    "fixture: report --format json / report": ("fixture json", "fixture report", 1.2),
    # synthetic N-kernel file (7.2 events per kernel): 3.3x measured at load ~15
    # (main before issue 35: 4.6x); the report's passes over 1M kernels and 2.9M ops are
    # most of it (docs/DECISIONS.md 136). Since DECISIONS 223-237 (and a floor that reads
    # 128 KiB at a time, 236): 2.43x quiet, 2.49x in .ci/run at load ~2, against 3.21-3.46x
    # for the code before them in the same runs; 3.1x catches a return to it.
    "synthetic: report / floor": ("synthetic report", "synthetic floor", 3.1),
    "synthetic: report --format json / report": ("synthetic json", "synthetic report", 1.2),
}


@dataclass(frozen=True)
class Sample:
    wall_s: float
    cpu_s: float
    rss_bytes: int


def run(cmd: list[str], cwd: Path) -> Sample:
    """Run ``cmd`` (output discarded) and measure it; a failure ends the gate."""
    env = dict(os.environ, PYTHONPATH=str(cwd))
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert p.stderr is not None
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        raise SystemExit(f"perf_gate: {' '.join(cmd)} failed (exit {rc}): {err.decode()[-500:]}")
    return Sample(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024)


def synthetic(n: int) -> Path:
    out = OUT / f"synthetic_{n}.json.gz"
    if not out.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        print(f"generating {out} ({n:,} kernels)", file=sys.stderr)
        tmp = out.with_suffix(".tmp.gz")
        gen = [PY, str(ROOT / "bench" / "gen_kineto.py"), str(FIXTURE), "--kernels", str(n)]
        subprocess.run([*gen, "--out", str(tmp)], check=True, stdout=subprocess.DEVNULL)
        tmp.rename(out)
    return out


def commands(path: Path) -> dict[str, list[str]]:
    tb = [PY, "-m", "tbdtrace", "report", str(path)]
    return {
        "floor": [PY, str(ROOT / "bench" / "floor.py"), str(path)],
        "report": tb,
        "json": [*tb, "--format", "json"],
    }


def measure(
    inputs: dict[str, Path], codes: list[Path], runs: dict[str, int]
) -> dict[tuple[Path, str], list[Sample]]:
    """Samples per (code, "<input> <command>"), rounds interleaving every command."""
    got: dict[tuple[Path, str], list[Sample]] = {}
    for name, path in inputs.items():
        cmds = commands(path)
        for i in range(runs[name]):
            for code in codes:
                for what, cmd in cmds.items():
                    # The floor does not depend on the code: measured once per round.
                    if what == "floor" and code != codes[0]:
                        continue
                    s = run(cmd, code)
                    got.setdefault((code, f"{name} {what}"), []).append(s)
            print(f"  {name}: round {i + 1} of {runs[name]}", file=sys.stderr)
    return got


def median(samples: list[Sample], attr: str) -> float:
    return statistics.median(getattr(s, attr) for s in samples)


def report(got: dict[tuple[Path, str], list[Sample]], codes: list[Path]) -> list[str]:
    """Print the table and the budgets; returns the budgets exceeded (first code only)."""
    print(f"{'code':<28} {'measurement':<20} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9}")
    for (code, what), samples in got.items():
        label = "floor" if what.endswith("floor") else str(code)
        print(
            f"{label[-28:]:<28} {what:<20} {median(samples, 'wall_s'):8.3f} "
            f"{median(samples, 'cpu_s'):8.3f} {max(s.rss_bytes for s in samples) / 2**20:9.0f}"
        )
    over = []
    print()
    for code in codes:
        print(f"ratios, {code} (medians; budget on the CPU ratio):")
        for label, (num, den, budget) in BUDGETS.items():
            n = got.get((code, num))
            d = got.get((codes[0] if den.endswith("floor") else code, den))
            if not n or not d:
                continue
            cpu = median(n, "cpu_s") / median(d, "cpu_s")
            wall = median(n, "wall_s") / median(d, "wall_s")
            ok = cpu <= budget
            print(
                f"  {label:<44} CPU {cpu:5.2f}x  wall {wall:5.2f}x  "
                f"budget {budget:.2f}x  {'ok' if ok else 'OVER'}"
            )
            if not ok and code == codes[0]:
                over.append(
                    f"{label}: {cpu:.2f}x the CPU time, budget {budget:.2f}x "
                    f"({100 * (cpu / budget - 1):.0f}% over)"
                )
    return over


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="rounds on the fixture (default 5)")
    ap.add_argument(
        "--kernels",
        type=int,
        default=1_000_000,
        help="kernels of the synthetic file (default 1000000; 0: fixture only)",
    )
    ap.add_argument(
        "--synthetic-runs", type=int, default=3, help="rounds on the synthetic file (default 3)"
    )
    ap.add_argument(
        "--code",
        type=Path,
        action="append",
        default=[],
        help="a checkout of tbdtrace to measure (repeatable; default this one)",
    )
    a = ap.parse_args(argv)
    if not FIXTURE.is_file():
        print(f"perf_gate: fixture {FIXTURE} absent (shared/fixtures/); gate skipped")
        return 0
    codes = [c.resolve() for c in a.code] or [ROOT]
    inputs = {"fixture": FIXTURE}
    runs = {"fixture": a.runs}
    if a.kernels:
        inputs["synthetic"] = synthetic(a.kernels)
        runs["synthetic"] = a.synthetic_runs
    load = os.getloadavg()[0]
    got = measure(inputs, codes, runs)
    print(f"load average (1 min): {load:.1f} before, {os.getloadavg()[0]:.1f} after")
    over = report(got, codes)
    for line in over:
        print(f"perf_gate: budget exceeded: {line}", file=sys.stderr)
    if over:
        print(
            "perf_gate: find what made the command slower (python -X importtime, cProfile) "
            "and fix it; a new section that costs this much is opt-in (docs/DECISIONS.md "
            "136)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
