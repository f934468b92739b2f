"""A big profiler file's import into a temporary trace directory, in a process of its own.

``report FILE`` (and the other analysis commands) import a profiler file over the size
rule of :mod:`tbdtrace.commands._open` into a temporary trace directory, then analyse
that. Run in the command's own process, the import leaves its heap behind: glibc's
arenas, fragmented by the import's batches, keep ~0.3 GiB of the 10M-kernel file's
import that ``malloc_trim`` does not return, under the analysis that follows. Run in a
child process, all of it goes back to the system when the child exits
(docs/DECISIONS.md, 256).

The parent's side is here (:func:`start`, :class:`Child`), the child's in
:mod:`tbdtrace.commands._import_child_main`:

* the child is the same interpreter (``sys.executable``) importing the same package (its
  folder first on the path; checked), started with ``subprocess`` (fork and exec: nothing
  of the parent's threads or heap is carried over);
* its progress lines go to the parent's standard error, so they show on a terminal as
  before, by the parent's rule (``--quiet``, the size thresholds);
* it reports back on its standard output, a pipe of its own: one JSON object, the
  skipped-event counts (which the parent prints once, as it did) or the one line of an
  error (which the parent raises as a TraceError: the same line, the same exit 1 as the
  import in the parent's process);
* it cannot outlive the parent: Ctrl-C and SIGTERM of the parent stop it (it ignores
  SIGINT itself: the parent decides), and on Linux the parent's death sends it SIGTERM
  (``PR_SET_PDEATHSIG``), on which it removes the temporary folder and exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tbdtrace.errors import TraceError

# How long the parent waits for a child it asked to stop (SIGTERM) before it kills it.
STOP_WAIT_S = 5.0

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding tbdtrace/
# The child's first lines: the current directory off the path (it could hold another
# tbdtrace), this package's folder first on it unless the interpreter's own path has it
# (an installed package: its site-packages). main() checks which tbdtrace it got.
_BOOT = (
    "import sys; r = sys.argv[1]; "
    "sys.path[0:1] = [] if sys.path[:1] == [''] else sys.path[:1]; "
    "sys.path[0:0] = [] if r in sys.path else [r]; "
    "from tbdtrace.commands import _import_child_main as m; m.main(sys.argv[1:])"
)


class Child:
    """A child process importing ``path`` into ``folder / "trace"``."""

    def __init__(self, path: Path, folder: Path, proc: subprocess.Popen[bytes], piped: bool):
        self.path, self.folder, self.proc = path, folder, proc
        self.piped = piped  # its stderr is a pipe, copied to ours when it ends

    def result(self) -> tuple[Path, dict[str, Any]]:
        """Wait for the child: (the trace directory it wrote, its skipped-event counts);
        TraceError with its one line when the import failed. Interrupted (Ctrl-C, a
        signal whose handler raises), the child is stopped first."""
        try:
            out, err = self.proc.communicate()
        except BaseException:
            self.stop()
            raise
        if self.piped and err:
            sys.stderr.write(err.decode(errors="replace"))
        try:
            got = json.loads(out.decode()) if out.strip() else None
        except ValueError:
            got = None
        if isinstance(got, dict) and isinstance(got.get("error"), str):
            raise TraceError(got["error"])
        rc = self.proc.returncode
        if rc == 0 and isinstance(got, dict) and "skipped_events" in got:
            return self.folder / "trace", got["skipped_events"]
        raise TraceError(f"{self.path}: {ended(rc)}")

    def stop(self) -> None:
        """Stop the child (SIGTERM, then SIGKILL after STOP_WAIT_S) and reap it. System
        calls only: the SIGTERM handler calls this, maybe while ``Popen.wait`` holds the
        Popen's lock on this same thread."""
        pid = self.proc.pid
        if self.proc.returncode is not None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_WAIT_S
            done, status = os.waitpid(pid, os.WNOHANG)
            while not done and time.monotonic() < deadline:
                time.sleep(0.02)
                done, status = os.waitpid(pid, os.WNOHANG)
            if not done:
                os.kill(pid, signal.SIGKILL)
                done, status = os.waitpid(pid, 0)
        except (ChildProcessError, ProcessLookupError):  # reaped already
            return
        self.proc.returncode = os.waitstatus_to_exitcode(status)


def ended(rc: int | None) -> str:
    """What the child's exit status says, for a child that gave no result."""
    if rc is not None and rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        why = (
            " (the system's out-of-memory killer sends it: give the machine more memory, "
            "or import the file with `tbdtrace import` where it has more)"
            if -rc == getattr(signal, "SIGKILL", 9)
            else ""
        )
        return f"its import (a process of its own) was ended by {name} before it finished{why}"
    return (
        f"its import (a process of its own) exited with status {rc} without a result; "
        "import it with `tbdtrace import FILE -o DIR` to see why"
    )


def start(path: Path, folder: Path, cleanup: Callable[[], None]) -> Child | None:
    """Start the child importing ``path`` into ``folder`` (an empty private folder the
    caller removes; ``cleanup`` removes it, called on SIGTERM of this process after the
    child is stopped); None when no child can be started (no memory or processes left,
    no interpreter to run), for the caller to import in its own process instead."""
    from tbdtrace import progress

    if threading.current_thread() is not threading.main_thread():
        return None  # PR_SET_PDEATHSIG follows the thread that started the child
    stderr: Any = None
    try:
        stderr = sys.stderr.fileno()  # the child's progress and messages: on ours
    except (AttributeError, OSError, ValueError):
        stderr = subprocess.PIPE  # a stream without a file (an embedding program's)
    quiet = "1" if not progress.on_terminal() else "0"
    args = [
        sys.executable,
        "-c",
        _BOOT,
        _PACKAGE_ROOT,
        str(os.getpid()),
        _command(),
        quiet,
        str(progress.BIG_BYTES),
        str(progress.BIG_ROWS),
        str(path),
        str(folder),
    ]
    try:
        proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr
        )
    except (OSError, ValueError):  # EAGAIN, ENOMEM, no executable: in this process then
        return None
    child = Child(path, folder, proc, stderr is subprocess.PIPE)
    _children.append(child)
    _cleanups.append(cleanup)
    _stop_on_sigterm()
    return child


_children: list[Child] = []  # the children this process started (stopped on SIGTERM)
_cleanups: list[Callable[[], None]] = []  # then called


def _command() -> str:
    """The name of the command this process runs (for the child's error lines)."""
    return next((a for a in sys.argv[1:] if not a.startswith("-")), "report")


def _on_sigterm(signum: int, _frame: Any) -> None:
    for child in _children:
        child.stop()
    for cleanup in _cleanups:
        cleanup()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _stop_on_sigterm() -> None:
    """SIGTERM of this process stops the children and removes the temporary folders
    before this process ends by it (Python's default would end it at once, leaving
    both); only where the program has no handler of its own."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        with contextlib.suppress(ValueError):  # not the main thread
            signal.signal(signal.SIGTERM, _on_sigterm)
