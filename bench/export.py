"""``tbdtrace export`` against ``tbdtrace report`` on a native N-kernel trace.

``.venv/bin/python bench/export.py [--kernels 1000000] [--runs 3] [--chrome]``

Generates the trace with ``bench/gen_native.py`` (cached in out/bench/, shared with
``native_report.py``), then runs ``report``, ``export --format perfetto`` (and with
``--chrome`` the JSON export) in child processes, each ``--runs`` times, alternating,
and keeps each one's best wall time and best CPU time (user + system: on a shared
machine it moves less than wall time). Goal: the Perfetto export takes at most 2x the
time of the report on the 1M-kernel trace (issue 35; was 3x).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import Run, measure  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "out" / "bench"
PY = str(ROOT / ".venv" / "bin" / "python")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--chrome", action="store_true", help="also time the JSON export")
    a = ap.parse_args(argv)
    trace = OUT / f"native_{a.kernels}_zstd"
    if not (trace / "meta.json").exists():
        gen = [PY, str(ROOT / "bench" / "gen_native.py"), "--kernels", str(a.kernels)]
        measure("generate", [*gen, "--out", str(trace)])
    tbd = [PY, "-m", "tbdtrace"]
    with tempfile.TemporaryDirectory(dir=OUT) as d:
        jobs = {"report": [*tbd, "report", str(trace)]}
        for fmt in ("perfetto", "chrome") if a.chrome else ("perfetto",):
            out = str(Path(d) / f"t.{fmt}")
            jobs[f"export {fmt}"] = [*tbd, "export", str(trace), "--format", fmt, "-o", out]
            jobs[f"export {fmt}"].append("--force")
        runs: dict[str, list[Run]] = {k: [] for k in jobs}
        for _ in range(a.runs):
            for k, cmd in jobs.items():
                runs[k].append(measure(k, cmd))
        sizes = {k: Path(cmd[-2]).stat().st_size for k, cmd in jobs.items() if k != "report"}
    wall = {k: min(r.wall_s for r in v) for k, v in runs.items()}
    cpu = {k: min(r.cpu_s for r in v) for k, v in runs.items()}
    rss = {k: max(r.peak_rss_bytes for r in v) for k, v in runs.items()}
    print(f"{a.kernels} kernels, best of {a.runs} runs")
    print(
        f"{'command':<16} {'wall s':>7} {'cpu s':>7} {'x report (wall/cpu)':>20} "
        f"{'peak MiB':>9} {'file MiB':>9}"
    )
    for k in jobs:
        size = f"{sizes[k] / 2**20:9.1f}" if k in sizes else f"{'-':>9}"
        print(
            f"{k:<16} {wall[k]:7.2f} {cpu[k]:7.2f} "
            f"{wall[k] / wall['report']:9.1f} / {cpu[k] / cpu['report']:<8.1f} "
            f"{rss[k] / 2**20:9.0f} {size}"
        )
    print("goal: export perfetto <= 2x report")
    return 0


if __name__ == "__main__":
    sys.exit(main())
