"""``tbdtrace report`` over a native N-kernel trace: wall time and peak RSS.

``.venv/bin/python bench/native_report.py [--kernels 10000000] [--compression zstd none]``

Generates the trace with ``bench/gen_native.py`` (cached in out/bench/), once per
page compression asked for, then runs the report in a child process on each.
Goal: at most 5 s and 2 GB peak RSS for 10M kernels.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import measure  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "out" / "bench"
PY = str(ROOT / ".venv" / "bin" / "python")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=10_000_000)
    ap.add_argument(
        "--compression", nargs="+", default=["zstd", "none"], choices=("zstd", "lz4", "none")
    )
    a = ap.parse_args(argv)
    rows = []
    for comp in a.compression:
        trace = OUT / f"native_{a.kernels}_{comp}"
        if not (trace / "meta.json").exists():
            measure(
                f"generate ({comp})",
                [
                    PY,
                    str(ROOT / "bench" / "gen_native.py"),
                    "--kernels",
                    str(a.kernels),
                    "--out",
                    str(trace),
                    "--compression",
                    comp,
                ],
            )
        size = sum(f.stat().st_size for f in trace.iterdir())
        run = measure(f"report ({comp})", [PY, "-m", "tbdtrace", "report", str(trace)])
        rows.append((comp, size, run))
    print(f"{'compression':<12} {'size MiB':>9} {'report s':>9} {'peak MiB':>9}")
    for comp, size, run in rows:
        print(f"{comp:<12} {size / 2**20:9.0f} {run.wall_s:9.2f} {run.peak_rss_bytes / 2**20:9.0f}")
    print(f"goals ({a.kernels} kernels): report <= 5 s, peak RSS <= 2048 MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
