"""The child process of a big profiler file's import (tbdtrace/commands/_import_child.py
starts it and reads its answer): imports the file into the temporary folder it is given,
answers on its standard output, and dies with its parent."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Any

from tbdtrace.errors import TraceError

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def main(argv: list[str]) -> None:
    """The child: ``ROOT PARENT_PID COMMAND QUIET BIG_BYTES BIG_ROWS FILE FOLDER``.
    Imports FILE into FOLDER/trace; writes its result (see
    :class:`tbdtrace.commands._import_child.Child`) on stdout;
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
