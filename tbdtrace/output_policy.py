"""Where a command may write, and how: the one output policy (docs/RELIABILITY.md, "Outputs").

Every command that writes goes through this module, as Nsight Systems does with
``--force-overwrite``:

* **Targets** come in three kinds: a *file* (``report -o``, ``export -o``, ``sql --output``),
  a *folder* of files (``report --format csv -o DIR``, ``bench --out``) and a *trace*
  directory (``import``, ``capture``, ``recover``, ``merge``: :func:`trace_target`, which
  ends in :func:`tbdtrace.outdir.claim`).
* An existing regular file, or a folder holding entries, is replaced only with ``force``;
  in a folder only the files the command writes are replaced, others stay.
* Never a target, with or without ``force``: the command's own inputs (the path, a
  symbolic or hard link to it, anything inside an input directory), a trace
  directory's own files (those its marker lists, ``meta.json``, table files, the marker),
  a trace directory as a file or folder output, a directory as a file output.
* Character devices (``/dev/null``, a terminal) and FIFOs (``-o >(gzip > x.gz)``) are
  written to, never replaced; block devices and sockets are refused.
* Files are written to a temporary name beside the target, then renamed into place, so
  an interrupted or failed write (a full disk) leaves the earlier file whole; new files
  get the mode ``0666 & ~umask``, as ``open()`` would give them.

Each refusal is a :class:`~tbdtrace.errors.TraceError` (one line: the path, what is wrong,
what to do), raised before any work starts.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import IO

from tbdtrace import outdir
from tbdtrace.errors import TraceError
from tbdtrace.safe_text import printable


class Kind(Enum):
    """What an output option names."""

    FILE = "file"
    FOLDER = "folder"
    TRACE = "trace"


@dataclass(frozen=True)
class Target:
    """A checked output: where to write and how."""

    path: Path  # absolute; for a file reached through symbolic links, the file itself
    given: str  # as the user wrote it (for messages)
    kind: Kind
    force: bool
    stream: bool = False  # a character device or FIFO: written to directly
    exists: bool = False  # an entry is there now (a file to replace, a folder to fill)


def _name(p: str | os.PathLike[str]) -> str:
    return printable(os.fspath(p))


def _check_names(p: Path) -> None:
    for part in p.parts:
        n = len(os.fsencode(part))
        if n > 255:
            raise TraceError(
                f"{_name(p)}: the name {_name(part[:24])}... is {n} bytes, over the 255 "
                "bytes a file name may have; choose a shorter name"
            )


def _identity(p: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(p)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino)


class Protected:
    """What a command must never write over: its inputs and the traces among them."""

    def __init__(self, inputs: Iterable[str | os.PathLike[str]] = ()):
        self.ids: set[tuple[int, int]] = set()
        self.dirs: list[Path] = []  # input directories: nothing inside them is a target
        self.paths: list[Path] = []
        for i in inputs:
            p = Path(os.path.abspath(os.fspath(i)))
            self.paths.append(p)
            ident = _identity(p)
            if ident is not None:
                self.ids.add(ident)
            if p.is_dir():
                self.dirs.append(Path(os.path.realpath(p)))
                for f in outdir.own_files(p) or []:
                    fid = _identity(p / f)
                    if fid is not None:
                        self.ids.add(fid)

    def why(self, real: Path) -> str | None:
        """Why ``real`` (absolute, links resolved) may not be written, or None."""
        for d in self.dirs:
            if real == d or real.is_relative_to(d):
                kind = "the trace" if outdir.own_files(d) is not None else "the input folder"
                return f"is inside {kind} {_name(d)} this command reads"
        ident = _identity(real)
        if ident is not None and ident in self.ids:
            return "is one of this command's inputs (or a link to one)"
        return None


def trace_file_reason(real: Path) -> str | None:
    """Why ``real`` is a trace's own file (of the trace directory it lies in), or None."""
    parent = real.parent
    name = real.name
    if name in (outdir.MARKER, outdir.LOCK) or name.startswith(
        (outdir.STAGING_PREFIX, outdir.SPOOL_PREFIX)
    ):
        return "is one of tbdtrace's working files"
    own = outdir.own_files(parent) if parent.is_dir() else None
    if own is None:
        return None
    if name in own or name == outdir.META_FILE or _table_name(name):
        return f"is a file of the trace {_name(parent)}"
    return None


def _table_name(name: str) -> bool:
    from tbdtrace import schema

    stem, dot, ext = name.rpartition(".")
    return bool(dot) and ext in ("parquet", "arrow") and stem in schema.TABLES_BY_NAME


def _never(real: Path, given: str, protected: Protected) -> None:
    why = protected.why(real) or trace_file_reason(real)
    if why:
        raise TraceError(
            f"{_name(given)}: {why}; tbdtrace never writes over a trace or an input, "
            "with or without --force: choose another path"
        )


def file_target(
    given: str | os.PathLike[str],
    force: bool = False,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Target:
    """Check ``given`` as a file output (see the module docstring); raises TraceError."""
    g = os.fspath(given)
    p = Path(os.path.abspath(g))
    _check_names(p)
    real = Path(os.path.realpath(p))
    protected = Protected(inputs)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise TraceError(f"{_name(g)}: a loop of symbolic links; choose another path") from None
        raise TraceError(f"{_name(g)}: {outdir.describe_os_error(e)}") from None
    if st is None:
        _never(real, g, protected)
        if not real.parent.is_dir():
            raise TraceError(
                f"{_name(g)}: directory {_name(real.parent)} does not exist; create it first"
            )
        return Target(real, g, Kind.FILE, force)
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        raise TraceError(f"{_name(g)}: is a directory; give a file name")
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return Target(real, g, Kind.FILE, force, stream=True, exists=True)
    if not stat.S_ISREG(mode):
        what = "a block device" if stat.S_ISBLK(mode) else "a socket or other special file"
        raise TraceError(
            f"{_name(g)}: is {what}; tbdtrace writes only files, character "
            "devices and FIFOs: choose another path"
        )
    _never(real, g, protected)
    if not force:
        raise TraceError(f"{_name(g)}: exists; pass --force to replace it, or choose another name")
    return Target(real, g, Kind.FILE, force, exists=True)


def folder_target(
    given: str | os.PathLike[str],
    force: bool = False,
    inputs: Iterable[str | os.PathLike[str]] = (),
    what: str = "-o",
) -> Target:
    """Check ``given`` as a folder output (absent: made with its parents; existing with
    entries: only with ``force``, and only the files written there are replaced)."""
    g = os.fspath(given)
    p = Path(os.path.abspath(g))
    _check_names(p)
    real = Path(os.path.realpath(p))
    protected = Protected(inputs)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise TraceError(f"{_name(g)}: a loop of symbolic links; choose another path") from None
        raise TraceError(f"{_name(g)}: {outdir.describe_os_error(e)}") from None
    if st is None:
        _never(real, g, protected)
        for anc in reversed(real.parents):
            if anc.exists() and not anc.is_dir():
                raise TraceError(
                    f"{_name(g)}: {_name(anc)} is a file, not a directory; choose another path"
                )
        return Target(real, g, Kind.FOLDER, force)
    if not stat.S_ISDIR(st.st_mode):
        raise TraceError(f"{_name(g)}: is a file; {what} here names a folder")
    _never(real, g, protected)
    if outdir.own_files(real) is not None:
        raise TraceError(
            f"{_name(g)}: is a trace directory; tbdtrace never writes other outputs into a "
            "trace: choose another folder"
        )
    busy = bool(os.listdir(real))
    if busy and not force:
        raise TraceError(
            f"{_name(g)}: exists and holds files; pass --force to replace the files of the "
            "same names there (others are kept), or choose another folder"
        )
    return Target(real, g, Kind.FOLDER, force, exists=True)


def append_target(
    given: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]] = ()
) -> Target:
    """Check ``given`` as a file to append to (``diff --summary``: a CI job summary that
    several steps add to): like a file output, but an existing regular file is appended
    to, not replaced, so no ``--force`` is needed; a trace's files, the inputs, folders,
    block devices and sockets are refused as for any file output."""
    g = os.fspath(given)
    real = Path(os.path.realpath(os.path.abspath(g)))
    if real.is_file():
        _never(real, g, Protected(inputs))
        return Target(real, g, Kind.FILE, False, stream=True, exists=True)
    return file_target(given, False, inputs)


def append_text(target: Target, text: str) -> None:
    """Append ``text`` (UTF-8) to the file ``target`` names; a failed append (a full
    disk) is cut back off a regular file, which then holds what it held before."""
    data = text.encode("utf-8")
    try:
        fd = os.open(target.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as e:
        raise TraceError(f"{_name(target.given)}: cannot write ({_os(e)})") from None
    try:
        st = os.fstat(fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as e:
            if stat.S_ISREG(st.st_mode):
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, st.st_size)
            raise TraceError(
                f"{_name(target.given)}: cannot write ({_os(e)}); the file is as it was"
            ) from None
    finally:
        os.close(fd)


def trace_target(
    given: str | os.PathLike[str],
    force: bool = False,
    inputs: Iterable[str | os.PathLike[str]] = (),
    min_free_bytes: int | None = None,
) -> outdir.Output:
    """Check ``given`` as a trace output and claim it (:func:`tbdtrace.outdir.claim`:
    absent, empty or a trace, replaced only with ``force``); an input of the command,
    or a directory holding one, is refused even with ``force``."""
    g = os.fspath(given)
    real = Path(os.path.realpath(os.path.abspath(g)))
    protected = Protected(inputs)
    why = protected.why(real)
    if why is None:
        for i in protected.paths:
            if Path(os.path.realpath(i)).is_relative_to(real) and outdir.own_files(real):
                rel = Path(os.path.realpath(i)).relative_to(real)
                if rel.parts and rel.parts[0] in (outdir.own_files(real) or []):
                    why = "holds this command's input among its own files"
    if why:
        raise TraceError(
            f"{_name(g)}: {why}; tbdtrace never writes a trace over its own inputs, with "
            "or without --force: choose another --out"
        )
    return outdir.claim(g, force=force, min_free_bytes=min_free_bytes)


# ---- writing ------------------------------------------------------------------------------


def file_mode() -> int:
    """Permissions a new file gets under the umask (what ``open()`` would give)."""
    return 0o666 & ~outdir.umask()


def write_file(target: Target, write: Callable[[IO[bytes]], object]) -> None:
    """Call ``write`` with a binary file that ends up at ``target`` (see the module
    docstring); a failure leaves the earlier file, if any, as it was."""
    if target.stream:
        try:
            with open(target.path, "wb") as f:
                write(f)
        except OSError as e:
            raise TraceError(f"{_name(target.given)}: cannot write ({_os(e)})") from None
        return
    _replace(target.path, target.given, write)


def replace(path: Path, data: bytes | Callable[[IO[bytes]], object]) -> None:
    """Write ``data`` (bytes, or a writer given the file) to ``path`` in a folder already
    checked (:func:`folder_target`): a temporary file beside it, then a rename."""
    write = data if callable(data) else (lambda f: f.write(data))
    _replace(path, str(path), write)


def write_text(target: Target, text: str) -> None:
    """``text`` (UTF-8) to ``target``."""
    data = text.encode("utf-8")
    write_file(target, lambda f: f.write(data))


def _os(e: OSError) -> str:
    return outdir.describe_os_error(OSError(e.errno, e.strerror))


def _staged(path: Path, given: str, write: Callable[[IO[bytes]], object]) -> str:
    """Write a temporary file beside ``path`` (mode from the umask); returns its name.
    A failure removes it and raises TraceError (one line)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:200]}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise TraceError(f"{_name(given)}: cannot write there ({_os(e)})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.chmod(tmp, file_mode())
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        kept = "; the file there is unchanged" if os.path.lexists(path) else ""
        raise TraceError(f"{_name(given)}: cannot write ({_os(e)}){kept}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def _replace(path: Path, given: str, write: Callable[[IO[bytes]], object]) -> None:
    """Write through a temporary file beside ``path``, then rename it into place."""
    tmp = _staged(path, given, write)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def folder_writer(target: Target) -> Iterator[Callable[[str, Callable[[IO[bytes]], object]], Path]]:
    """Make the folder ``target`` (when absent) and hold it for this process (a second
    writer gets one line); yields ``put(name, write)``, which writes one file there under
    a temporary name (an entry of that name that is a folder or a special file is
    refused). The files are renamed into place together when the block ends without an
    error: a failed write (a full disk) leaves every earlier file of the folder as it was."""
    made = not target.path.exists()
    try:
        target.path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TraceError(f"{_name(target.given)}: cannot create it ({_os(e)})") from None
    fd = os.open(target.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TraceError(
                f"{_name(target.given)}: another tbdtrace process is writing this folder; "
                "wait for it to finish or choose another one"
            ) from None

        staged: list[tuple[str, Path]] = []

        def put(name: str, write: Callable[[IO[bytes]], object]) -> Path:
            path = target.path / name
            mode = os.lstat(path).st_mode if os.path.lexists(path) else stat.S_IFREG
            if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                raise TraceError(
                    f"{_name(path)}: is not a regular file; move it away and run again"
                )
            staged.append((_staged(path, str(target.given), write), path))
            return path

        try:
            yield put
            for tmp, path in staged:
                os.replace(tmp, path)
        finally:
            for tmp, _ in staged:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
    except BaseException:
        if made:
            with contextlib.suppress(OSError):
                target.path.rmdir()  # only when nothing was written
        raise
    finally:
        os.close(fd)


__all__ = [
    "Kind",
    "append_target",
    "append_text",
    "Protected",
    "Target",
    "file_mode",
    "file_target",
    "folder_target",
    "folder_writer",
    "replace",
    "trace_file_reason",
    "trace_target",
    "write_file",
    "write_text",
]
