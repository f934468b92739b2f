"""Headless Chromium for the HTML report's tests: found on PATH and probed once; tests
that need it are skipped, with the reason, where it is absent or cannot start."""

from __future__ import annotations

import shutil
import subprocess
import tempfile

import pytest

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


def _find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if path := shutil.which(name):
            return path
    pytest.skip("Chromium is not installed (make test installs the Debian package chromium)")


def browse(exe: str, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [
                exe,
                *FLAGS,
                f"--user-data-dir={profile}",
                "--enable-logging=stderr",
                "--v=0",
                *extra,
                url,
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )


@pytest.fixture(scope="session")
def chromium() -> str:
    exe = _find_chromium()
    probe = browse(exe, "data:text/html,<p>tbd-probe</p>", "--dump-dom")
    if probe.returncode != 0 or "tbd-probe" not in probe.stdout:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"Chromium cannot run here (exit {probe.returncode}): {last}")
    return exe
