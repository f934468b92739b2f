"""How the CLI ends on an error that is not a TraceError: one line, or a bug report.

* ``OSError`` (a path that cannot be read or written, a full disk, a closed or full
  standard output): one line naming the path and the problem, exit 1. A closed pipe
  (``tbdtrace report T | head -1``) ends quietly with exit 0, as it did before.
* Arrow and DuckDB errors: they come from the data a user gave (a damaged Arrow file, a
  query DuckDB rejects): one line naming the command's inputs and the error, exit 1.
* Anything else is a bug in tbdtrace: its traceback, then one line asking for a report,
  exit 1.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tbdtrace.outdir import describe_os_error
from tbdtrace.safe_text import printable


def _say(line: str) -> None:
    with contextlib.suppress(OSError):  # stderr itself is gone: nothing left to tell
        print(f"tbdtrace: {printable(line)}", file=sys.stderr)


def quiet_stdout_if_broken() -> None:
    """Flush stdout; when it is closed or full, point it at /dev/null so the interpreter's
    own flush at exit does not print a second error."""
    try:
        sys.stdout.flush()
    except OSError:
        _devnull_stdout()


def _devnull_stdout() -> None:
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError):
        pass


class StdoutError(OSError):
    """Writing the standard output failed (full, closed): raised by :func:`guarded_stdout`."""


class _Guard:
    """sys.stdout as it was, except that its write errors become StdoutError."""

    def __init__(self, stream: Any):
        self._stream = stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except OSError as e:
            raise StdoutError(e.errno, e.strerror or str(e)) from e

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as e:
            raise StdoutError(e.errno, e.strerror or str(e)) from e


class _Escaping:
    """sys.stderr as it was, except that control characters in what is written (names
    from a trace in a message) are shown as escapes; newlines stay."""

    def __init__(self, stream: Any):
        self._stream = stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def write(self, text: str) -> int:
        return int(self._stream.write(printable(text, keep_newlines=True)))

    @property
    def unescaped(self) -> Any:
        """The stream underneath, for a display that writes its own control codes
        (tbdtrace.progress, whose labels are escaped where they are made)."""
        return self._stream


@contextlib.contextmanager
def escaped_stderr() -> Iterator[None]:
    """Escape control characters on the standard error for the block (see _Escaping)."""
    old = sys.stderr
    sys.stderr = _Escaping(old)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stderr = old


@contextlib.contextmanager
def guarded_stdout() -> Iterator[None]:
    """Tell the standard output's write errors from other OSErrors for the block."""
    old = sys.stdout
    sys.stdout = _Guard(old)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout = old


def _user_data_error(e: BaseException) -> bool:
    mods = [sys.modules.get("pyarrow"), sys.modules.get("duckdb")]
    kinds = []
    if mods[0] is not None:
        kinds.append(mods[0].lib.ArrowException)
    if mods[1] is not None:
        kinds.append(mods[1].Error)
    return bool(kinds) and isinstance(e, tuple(kinds))


def _inputs(argv: list[str]) -> str:
    paths = [a for a in argv[1:] if not a.startswith("-") and os.path.exists(a)]
    return ", ".join(paths) if paths else "the input"


def out_of_memory(argv: list[str]) -> str:
    """The one line for a command that ran out of memory: which inputs, their size, the
    process's limit, and what to do (docs/RELIABILITY.md, "Sizes")."""
    import resource

    paths = [a for a in argv[1:] if not a.startswith("-") and os.path.exists(a)]
    size = 0
    for a in paths:
        p = Path(a)
        files = [f for f in p.rglob("*") if f.is_file()] if p.is_dir() else [p]
        size += sum(f.stat().st_size for f in files)
    what = f"{', '.join(paths)} ({size / 2**20:,.0f} MiB)" if paths else "the input"
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    limit = f", limit {soft / 2**30:.1f} GiB of address space" if soft > 0 else ""
    command = argv[0] if argv else "the command"
    return (
        f"{what}: out of memory in `tbdtrace {command}`{limit}; give the process more memory, "
        "cover less of the trace (--steps A:B or --window), or import it first "
        "(tbdtrace import, which needs little memory) and analyse per rank (--jobs N)"
    )


def handle(e: BaseException, argv: list[str]) -> int:
    """Print what ``e`` means for the user; returns the exit code."""
    if isinstance(e, BrokenPipeError) or (isinstance(e, OSError) and e.errno == errno.EPIPE):
        _devnull_stdout()
        return 0
    if isinstance(e, StdoutError):
        _devnull_stdout()
        _say(f"cannot write the standard output ({e.strerror or e})")
        return 1
    _say(line_for(e, argv))
    return 1


def line_for(e: BaseException, argv: list[str]) -> str:
    """The one line for an error of the command ``argv`` other than a TraceError (a bug:
    its traceback is printed on stderr first)."""
    if isinstance(e, OSError):
        if e.filename is None:
            return f"{_inputs(argv)}: {describe_os_error(e)}"
        return describe_os_error(e)
    if isinstance(e, MemoryError):  # C++ bad_alloc, numpy's and Arrow's out-of-memory
        return out_of_memory(argv)
    if _user_data_error(e):
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return f"{_inputs(argv)}: {type(e).__name__}: {first}"
    traceback.print_exception(e)
    return (
        f"internal error ({type(e).__name__}); this is a bug in tbdtrace: please report it "
        "with the command line and the traceback above"
    )


__all__ = ["handle", "line_for", "quiet_stdout_if_broken"]
