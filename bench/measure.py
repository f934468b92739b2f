"""Run one command in a child process and measure its wall time and peak RSS.

Peak RSS comes from ``os.wait4`` on that child (``ru_maxrss``, KiB on Linux), so
measurements of different tools in one benchmark run do not mix. The kernel folds into it
the peaks of the processes the command started and waited for: it is the peak of the
command's largest single process (the same figure as ``/usr/bin/time``'s ``%M``). A
command whose work runs in processes of its own (``report FILE`` imports a big file in a
child) is also sampled every 50 ms from /proc: each process's own peak (``VmHWM``) and
the peak of the sum of their RSS, the memory they held at once. With ``limit_bytes`` the
watchdog kills the command's processes when that sum passes the limit, so a tool that
cannot fit the machine is recorded as such instead of taking it down.
"""

from __future__ import annotations

import contextlib
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
    cpu_s: float = 0.0  # user + system CPU seconds of the child (and its waited children)
    # Sampled every 50 ms: the command's own process's peak, its children's largest peak
    # (0 when it started none), the largest sum of the RSS of all of them at one time.
    own_peak_rss_bytes: int = 0
    children_peak_rss_bytes: int = 0
    sum_peak_rss_bytes: int = 0


def _status_bytes(pid: int, key: str) -> int:
    """A ``kB`` field of /proc/PID/status (VmRSS, VmHWM), in bytes; 0 when gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux's /proc/PID/task/TID/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo += [int(c) for c in f.read().split()]
            except (OSError, ValueError):
                continue
    return out


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
    own, kids, total = [0], [0], [0]

    def watch() -> None:
        while not done.wait(0.05):
            pids = _tree(p.pid)
            rss = [_rss_bytes(q) for q in pids]
            total[0] = max(total[0], sum(rss))
            own[0] = max(own[0], _status_bytes(p.pid, "VmHWM"))
            for q in pids[1:]:
                kids[0] = max(kids[0], _status_bytes(q, "VmHWM"))
            if limit_bytes is not None and sum(rss) > limit_bytes:
                killed.set()
                for q in pids:
                    with contextlib.suppress(OSError):  # gone meanwhile
                        os.kill(q, signal.SIGKILL)
                return

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    _, status, usage = os.wait4(p.pid, 0)
    done.set()
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    w.join()
    top = usage.ru_maxrss * 1024
    run = Run(
        label,
        wall,
        top,
        p.returncode,
        killed.is_set(),
        cpu,
        own[0],
        kids[0],
        max(total[0], top),
    )
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
