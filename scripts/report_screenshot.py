"""Remake docs/img/report.png, the README's picture of the HTML report: the page of the
committed H200 capture (tests/data/gpu/h200_resnet50_cupti), shot by headless Chromium
(the flags tests/report/conftest.py uses) and reduced to a 256-colour PNG with Pillow
(matplotlib's dependency) to stay under 300 KB.

    .venv/bin/python scripts/report_screenshot.py [--out docs/img/report.png]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACE = "tests/data/gpu/h200_resnet50_cupti"  # relative: the page's title names it
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--hide-scrollbars",
]
LIMIT_BYTES = 300 * 1024


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs/img/report.png"))
    ap.add_argument("--size", default="1280,1500", help="window width,height in px")
    args = ap.parse_args(argv)
    exe = next(
        (
            shutil.which(n)
            for n in ("chromium", "chromium-browser", "google-chrome")
            if shutil.which(n)
        ),
        None,
    )
    if exe is None:
        print("report_screenshot: Chromium is not installed (make chromium)", file=sys.stderr)
        return 1
    from PIL import Image

    with tempfile.TemporaryDirectory() as tmp:
        page, shot = Path(tmp) / "report.html", Path(tmp) / "shot.png"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "tbdtrace",
                "report",
                str(TRACE),
                "--format",
                "html",
                "-o",
                str(page),
            ],
            check=True,
            cwd=ROOT,
        )
        subprocess.run(
            [
                exe,
                *FLAGS,
                f"--user-data-dir={Path(tmp) / 'profile'}",
                f"--window-size={args.size}",
                f"--screenshot={shot}",
                page.as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=180,
        )
        img = Image.open(shot).convert("RGB").quantize(colors=256, dither=Image.Dither.NONE)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        img.save(out, optimize=True)
    size = out.stat().st_size
    print(f"{out}: {img.width}x{img.height}, {size / 1024:.0f} KiB")
    return 0 if size < LIMIT_BYTES else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
