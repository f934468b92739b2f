"""Run a captured command as tbdtrace's child and stop it the way the user asked.

The command runs in its own process group. SIGINT and SIGTERM sent to tbdtrace (Ctrl-C
in its terminal, ``kill``, a batch scheduler) are forwarded to that whole group, so the
command and everything it started see them; tbdtrace then keeps waiting for the command,
which flushes what it captured. A second signal escalates: the group gets SIGKILL. When
the command has ended, the caller assembles whatever was captured, so stopping a capture
never throws it away.

If tbdtrace itself is killed outright (SIGKILL), the command gets SIGTERM from the kernel
(``PR_SET_PDEATHSIG``), so it is not left running, orphaned; its spool stays for
``tbdtrace recover``.

Because the group is not the terminal's foreground group, a command that reads from the
terminal is stopped by the kernel (SIGTTIN); training programs do not.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tbdtrace.errors import TraceError

FORWARDED = (signal.SIGINT, signal.SIGTERM)


@dataclass
class Outcome:
    """How the command ended."""

    pid: int
    returncode: int  # as Popen reports it: negative -N when killed by signal N
    received: list[str] = field(default_factory=list)  # signals tbdtrace got, by name
    escalated: bool = False  # a second signal made tbdtrace SIGKILL the group

    @property
    def exit_code(self) -> int:
        """The shell's convention: 128 + N for a command killed by signal N."""
        return 128 - self.returncode if self.returncode < 0 else self.returncode

    @property
    def killed_by(self) -> str | None:
        """The signal that ended the command, by name, or None when it exited."""
        if self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"

    def stop_reason(self) -> str | None:
        """Why the capture is partial (None: the command ran to its own end)."""
        if self.received:
            how = f"tbdtrace received {', '.join(self.received)}"
            how += " (forwarded to the command"
            how += "; the second one killed it with SIGKILL)" if self.escalated else ")"
            return how
        if self.killed_by:
            return f"the command was killed by {self.killed_by}"
        return None


def group_alive(pgid: int) -> bool:
    """Does any process of process group ``pgid`` still run (may still write a spool)?"""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _die_with_parent() -> Callable[[], None] | None:
    """A function to run in the child before exec: SIGTERM when tbdtrace dies (even by
    SIGKILL), so the command writes what it captured and ends instead of running on,
    orphaned; SIGINT and SIGTERM at their default action. ``prctl`` is looked up here,
    in the parent: the child only calls it (no dynamic loading between fork and exec,
    where another thread may hold a lock)."""
    import ctypes

    pr_set_pdeathsig = 1  # linux/prctl.h
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def child() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGTERM))
        # A tbdtrace started with SIGINT ignored (a background job of a shell script)
        # would pass that on: the command then ignores the Ctrl-C tbdtrace forwards.
        for s in FORWARDED:
            signal.signal(s, signal.SIG_DFL)

    return child


def spool_writers(spool: os.PathLike[str] | str, pids: list[int] | None = None) -> list[int]:
    """Processes (of ``pids``, default all) whose environment names ``spool`` (a captured
    command and what it started, wherever they moved to): they may still write there."""
    needle = os.fsencode(os.fspath(spool))
    found = []
    if pids is None:
        try:
            pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
        except OSError:
            return []
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if any(v.endswith(b"=" + needle) for v in env.split(b"\0")):
            found.append(pid)
    return found


def run(
    command: Sequence[str],
    env: dict[str, str],
    on_start: Callable[[int], None] | None = None,
) -> Outcome:
    """Start ``command`` in its own process group, forward signals, wait for its end."""
    out = Outcome(0, 0)
    procs: list[subprocess.Popen[bytes]] = []
    pending: list[int] = []  # signals that came before the command existed

    def forward(sig: int, _frame: Any) -> None:
        out.received.append(signal.Signals(sig).name)
        kill = sig if len(out.received) == 1 else signal.SIGKILL
        out.escalated = out.escalated or kill == signal.SIGKILL
        if not procs:
            pending.append(kill)
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(procs[0].pid, kill)

    # Installed before the command starts: a signal in between is not lost.
    old = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        try:
            procs.append(
                subprocess.Popen(
                    list(command), env=env, process_group=0, preexec_fn=_die_with_parent()
                )
            )
        except OSError as e:
            raise TraceError(
                f"{command[0]}: cannot start ({e.strerror}); check the command after --"
            ) from None
        proc = procs[0]
        out.pid = proc.pid
        for kill in pending:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, kill)
        try:
            if on_start is not None:
                on_start(proc.pid)
            out.returncode = proc.wait()
        except BaseException:
            # tbdtrace itself fails: the command must not run on, orphaned.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return out


__all__ = ["FORWARDED", "Outcome", "group_alive", "run", "spool_writers"]
