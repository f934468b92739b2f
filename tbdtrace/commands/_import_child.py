"""A big profiler file's import into a temporary trace directory, in a process of its own.

``report FILE`` (and the other analysis commands) import a profiler file over the size
rule of :mod:`tbdtrace.commands._open` into a temporary trace directory, then analyse
that. Run in the command's own process, the import leaves its heap behind: glibc's
arenas, fragmented by the import's batches, keep ~0.3 GiB of the 10M-kernel file's
import that ``malloc_trim`` does not return, under the analysis that follows. Run in a
child process, all of it goes back to the system when the child exits
(docs/DECISIONS.md, child.1).

The parent (:func:`start`, :class:`Child`) and the child (:func:`main`) are both here:

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
from pathlib import Path
from typing import Any

from tbdtrace.errors import TraceError

# How long the parent waits for a child it asked to stop (SIGTERM) before it kills it.
STOP_WAIT_S = 5.0
PR_SET_PDEATHSIG = 1  # linux/prctl.h

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding tbdtrace/
# The child's first lines: the current directory off the path (it could hold another
# tbdtrace), this package's folder first on it unless the interpreter's own path has it
# (an installed package: its site-packages). main() checks which tbdtrace it got.
_BOOT = (
    "import sys; r = sys.argv[1]; "
    "sys.path[0:1] = [] if sys.path[:1] == [''] else sys.path[:1]; "
    "sys.path[0:0] = [] if r in sys.path else [r]; "
    "from tbdtrace.commands import _import_child; _import_child.main(sys.argv[1:])"
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
        """Stop the child (SIGTERM, then SIGKILL after STOP_WAIT_S) and wait for it."""
        proc = self.proc
        if proc.poll() is not None:
            return
        try:
            proc.terminate()
            proc.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        except ProcessLookupError:
            pass


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


def start(path: Path, folder: Path) -> Child | None:
    """Start the child importing ``path`` into ``folder`` (an empty private folder the
    caller removes); None when no child can be started (no memory or processes left, no
    interpreter to run), for the caller to import in its own process instead."""
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
    _stop_on_sigterm()
    return child


_children: list[Child] = []  # the children this process started (stopped on SIGTERM)


def _command() -> str:
    """The name of the command this process runs (for the child's error lines)."""
    return next((a for a in sys.argv[1:] if not a.startswith("-")), "report")


def _on_sigterm(signum: int, _frame: Any) -> None:
    from tbdtrace.commands import _open

    for child in _children:
        child.stop()
    _open.remove_temporary()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _stop_on_sigterm() -> None:
    """SIGTERM of this process stops the children and removes the temporary folders
    before this process ends by it (Python's default would end it at once, leaving
    both); only where the program has no handler of its own."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        with contextlib.suppress(ValueError):  # not the main thread
            signal.signal(signal.SIGTERM, _on_sigterm)


# -- the child -------------------------------------------------------------------------


def main(argv: list[str]) -> None:
    """The child: ``ROOT PARENT_PID COMMAND QUIET BIG_BYTES BIG_ROWS FILE FOLDER``.
    Imports FILE into FOLDER/trace; writes its result (see :class:`Child`) on stdout;
    exits 0 or 1."""
    root, parent, command, quiet, big_bytes, big_rows, file, where = argv
    folder = Path(where)
    global _reply_fd
    _reply_fd = os.dup(1)  # the answer's pipe; anything else printed goes to stderr
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the parent stops this process
    signal.signal(signal.SIGTERM, lambda *_: _gone(folder))
    _die_with_parent(int(parent), folder)
    import tbdtrace

    if Path(tbdtrace.__file__).resolve().parents[1] != Path(root).resolve():
        _reply({"error": f"{file}: the import process loaded {tbdtrace.__file__}, not {root}"})
        os._exit(1)
    from tbdtrace import cli, progress

    cli._tune_process("import", [file])  # the heap settings `tbdtrace import` gets
    progress.set_quiet(quiet == "1")
    progress.BIG_BYTES, progress.BIG_ROWS = int(big_bytes), int(big_rows)
    rc = 1
    try:
        from tbdtrace import cli_errors

        with cli_errors.escaped_stderr():
            skipped = _import(Path(file), folder)
        reply: dict[str, Any] = {"skipped_events": skipped}
        rc = 0
    except TraceError as e:
        reply = {"error": str(e)}
    except Exception as e:  # the line the CLI would print (a bug: its traceback too)
        from tbdtrace import cli_errors

        reply = {"error": cli_errors.line_for(e, [command, file])}
    _reply(reply)
    os._exit(rc)  # the import's heap and modules are not torn down: the process ends


def _import(path: Path, folder: Path) -> dict[str, int]:
    from tbdtrace import importers
    from tbdtrace.commands import _open

    pending = importers.begin_import([path], streamed=True, batch_rows=0)
    reading = _open.show_reading(pending, [path])
    _, meta = _open.import_into(pending, reading, path, folder)
    return dict(meta.get("skipped_events") or {})


_reply_fd = 1  # the child's answer: its stdout as the parent gave it


def _reply(obj: dict[str, Any]) -> None:
    data = memoryview(json.dumps(obj).encode())
    with contextlib.suppress(OSError):  # the parent is gone
        while data:
            data = data[os.write(_reply_fd, data) :]


def _gone(folder: Path) -> None:
    """SIGTERM (from the parent stopping this import, or the parent's death): the
    temporary folder removed (the parent, if alive, waits for this process first), and
    out."""
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
    os._exit(128 + signal.SIGTERM)


def _die_with_parent(parent: int, folder: Path) -> None:
    """SIGTERM to this process when the parent dies (Linux); if it is already gone, out."""
    from tbdtrace.heap import glibc

    libc = glibc()
    if libc is not None and hasattr(libc, "prctl"):
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent:
        _gone(folder)
