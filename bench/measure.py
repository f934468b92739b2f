"""Run one command in a child process and measure its wall time and peak RSS.

Peak RSS comes from ``os.wait4`` on that child alone (``ru_maxrss``, KiB on Linux), so
measurements of different tools in one benchmark run do not mix.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Run:
    """One measured command."""

    label: str
    wall_s: float  # wall-clock seconds
    peak_rss_bytes: int  # the child's peak resident set size
    rc: int  # exit status


def measure(label: str, cmd: list[str]) -> Run:
    """Run ``cmd`` (stdout discarded, stderr passed through) and measure it."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    run = Run(label, wall, usage.ru_maxrss * 1024, p.returncode)
    print(
        f"  {label:<34} {wall:8.2f} s  {run.peak_rss_bytes / 2**20:8.0f} MiB  rc={run.rc}",
        file=sys.stderr,
    )
    if run.rc != 0:
        raise SystemExit(f"{label}: command failed (exit {run.rc}): {' '.join(cmd)}")
    return run
