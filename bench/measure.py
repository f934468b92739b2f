"""Run one command in a child process and measure its wall time and peak RSS.

Peak RSS comes from ``os.wait4`` on that child alone (``ru_maxrss``, KiB on Linux), so
measurements of different tools in one benchmark run do not mix. With ``limit_bytes`` a
watchdog reads the child's RSS from /proc every 50 ms and kills it past the limit, so a
tool that cannot fit the machine is recorded as such instead of taking it down.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Run:
    """One measured command."""

    label: str
    wall_s: float  # wall-clock seconds
    peak_rss_bytes: int  # the child's peak resident set size
    rc: int  # exit status
    killed_at_limit: bool = False  # the watchdog stopped it at limit_bytes
    cpu_s: float = 0.0  # user + system CPU seconds of the child


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def measure(label: str, cmd: list[str], limit_bytes: int | None = None) -> Run:
    """Run ``cmd`` (stdout discarded, stderr passed through) and measure it; a failed
    command ends the benchmark, one killed at ``limit_bytes`` is returned as such."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    killed = threading.Event()
    done = threading.Event()

    def watch() -> None:
        while limit_bytes is not None and not done.wait(0.05):
            if _rss_bytes(p.pid) > limit_bytes:
                killed.set()
                os.kill(p.pid, signal.SIGKILL)
                return

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    _, status, usage = os.wait4(p.pid, 0)
    done.set()
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    run = Run(label, wall, usage.ru_maxrss * 1024, p.returncode, killed.is_set(), cpu)
    note = (
        f"  killed past {limit_bytes / 2**30:.0f} GiB"
        if run.killed_at_limit and limit_bytes
        else ""
    )
    print(
        f"  {label:<34} {wall:8.2f} s  {run.peak_rss_bytes / 2**20:8.0f} MiB  rc={run.rc}{note}",
        file=sys.stderr,
    )
    if run.rc != 0 and not run.killed_at_limit:
        raise SystemExit(f"{label}: command failed (exit {run.rc}): {' '.join(cmd)}")
    return run
