"""The HTML report of a profiler file: time and memory to write it, its size, and the time
headless Chromium takes to open it (navigation start to the page's script having
counted every plot, ``data-ready-ms``).

``.venv/bin/python bench/html_report.py [FILE] [--runs 3]``

FILE defaults to the largest Kineto fixture. Goals: the page a few MB at most, and open
in about a second.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import measure  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PY = str(ROOT / ".venv" / "bin" / "python")
FIXTURE = ROOT.parent / "shared" / "fixtures" / "kineto" / "hta" / "df_index_resolver.json.gz"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def open_ms(exe: str, page: Path) -> int:
    with tempfile.TemporaryDirectory() as profile:
        r = subprocess.run(
            [exe, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
    m = re.search(r'data-ready-ms="(\d+)"', r.stdout)
    if m is None:
        raise SystemExit(f"{page}: the page did not finish drawing in Chromium")
    return int(m.group(1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", nargs="?", default=str(FIXTURE))
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args(argv)
    src = Path(a.file)
    if not src.is_file():
        print(f"{src}: no such file; pass a profiler file", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        base = [PY, "-m", "tbdtrace", "report", str(src)]
        html = [
            measure("report --format html", [*base, "--format", "html", "-o", str(page)])
            for _ in range(a.runs)
        ]
        js = [measure("report --format json", [*base, "--format", "json"]) for _ in range(a.runs)]
        for runs in (html, js):
            best = min(runs, key=lambda r: r.wall_s)
            print(
                f"{best.label:<24} {best.wall_s:6.2f} s  {best.peak_rss_bytes / 2**20:6.0f} MiB"
                f"  (fastest of {len(runs)})"
            )
        print(f"page size                {page.stat().st_size / 2**20:6.2f} MiB")
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if exe is None:
            print("Chromium not installed: open time not measured")
            return 0
        ms = sorted(open_ms(exe, page) for _ in range(a.runs))
        print(
            f"open in Chromium         {ms[0]} ms fastest, {ms[len(ms) // 2]} ms median "
            f"of {len(ms)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
