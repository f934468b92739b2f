"""``capture --on-demand``: the parent's side of on-demand windows.

Each process of the command that watches SIGUSR2 (its window controller,
:mod:`.windows`) registers as ``<spool>/ondemand-<pid>``. The :class:`Relay` in
``tbdtrace capture`` sends SIGUSR2 to those processes, and to no other (a process that
does not expect SIGUSR2 dies of it), when

* ``tbdtrace capture`` itself receives SIGUSR2 (``kill -USR2 <tbdtrace's pid>``), or
* the trigger file appears, or its modification time changes (``touch FILE`` again for
  the next window). The file is the user's: it is only looked at, never removed.

Sending SIGUSR2 to a training process directly works too. The file is polled every
:data:`POLL_S` seconds here, in the parent: the training processes poll nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from tbdtrace.collector import child_protocol as proto
from tbdtrace.collector import supervise

POLL_S = 0.2


class Relay:
    """Forwards on-demand triggers to the registered processes (module docstring)."""

    def __init__(self, spool: Path, trigger_file: Path | None):
        self.spool = spool
        self.trigger_file = trigger_file
        self.triggers: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._old: Any = None
        self._seen = self._stamp()

    def _stamp(self) -> int | None:
        if self.trigger_file is None:
            return None
        try:
            return os.stat(self.trigger_file).st_mtime_ns
        except OSError:
            return None

    def install(self) -> None:
        """Watch SIGUSR2 in tbdtrace (before the command starts: a signal meanwhile would
        otherwise end tbdtrace)."""
        self._old = signal.signal(signal.SIGUSR2, lambda *_: self.fire("SIGUSR2"))

    def start(self) -> None:
        if self.trigger_file is not None:
            self._thread = threading.Thread(target=self._poll, name="tbdtrace-trigger", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._old is not None:
            signal.signal(signal.SIGUSR2, self._old)
            self._old = None

    def _poll(self) -> None:
        while not self._stop.wait(POLL_S):
            st = self._stamp()
            if st is not None and st != self._seen:
                self._seen = st
                self.fire("file")

    def fire(self, by: str) -> None:
        """SIGUSR2 to every registered process that still runs under this capture."""
        sent = []
        for f in sorted(self.spool.glob(f"{proto.ON_DEMAND_PREFIX}*")):
            pid = proto.pid_of(f.name)
            if pid not in supervise.spool_writers(self.spool, pids=[pid]):
                continue  # ended (its pid may belong to another process by now)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGUSR2)
                sent.append(pid)
        self.triggers.append({"by": by, "ns": time.time_ns(), "pids": sent})

    def summary(self) -> dict[str, Any]:
        """``meta.extra.on_demand``: the trigger file and every trigger received."""
        return {
            "trigger_file": str(self.trigger_file) if self.trigger_file else None,
            "triggers": self.triggers,
        }
