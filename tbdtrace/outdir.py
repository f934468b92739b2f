"""Output directories: what tbdtrace may write into, and one writer at a time.

A trace directory is recognized by its marker file (:data:`MARKER`, JSON: the format name
and the files tbdtrace wrote there), not by a file named ``meta.json``. Traces written
before the marker existed count as traces only when every visible entry is tbdtrace's
own (``meta.json`` with a readable schema version, ``<known table>.arrow``).

:func:`claim` is what commands that write a trace (``capture``, ``import``, ``recover``)
call before doing any work: it makes the path absolute, checks the name, the parent, the
permissions and the free space, creates the directory when absent, takes the writer lock
(``.tbdtrace.lock`` inside it, an ``flock`` that dies with its process), and refuses a
directory that is neither empty nor a trace, or a trace without ``force``. Writing and
replacing follow in :func:`tbdtrace.trace.write`, which only ever removes files the
marker lists (a user's files in a trace directory survive a replacement).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tbdtrace.errors import TraceError

MARKER = ".tbdtrace-trace.json"
MARKER_FORMAT = "tbdtrace-trace"
LOCK = ".tbdtrace.lock"
STAGING_PREFIX = ".tbdtrace-staging-"
SPOOL_PREFIX = ".tbdtrace-spool-"
# Free space an output needs before any work starts: a capture that runs for an hour and
# then cannot write its trace is the failure this guards against (its spool, host
# samples and tables need some room; a small trace is ~1 MB).
MIN_FREE_BYTES = 16 << 20
META_FILE = "meta.json"
_WRITABLE = "choose a writable location"


def is_private(name: str) -> bool:
    """Hidden working entries of tbdtrace (lock, staging, spools, marker)."""
    return name in (MARKER, LOCK) or name.startswith((STAGING_PREFIX, SPOOL_PREFIX))


def umask() -> int:
    """This process's umask (read without changing it where /proc allows)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    old = os.umask(0o022)
    os.umask(old)
    return old


def dir_mode() -> int:
    """Permissions a new directory gets under the umask (what ``mkdir`` would give)."""
    return 0o777 & ~umask()


def _legacy_files(path: Path, names: list[str]) -> list[str] | None:
    """A marker-less trace from an older tbdtrace: its files, or None when any visible
    entry is not tbdtrace's own."""
    from tbdtrace import schema

    visible = [n for n in names if not is_private(n)]
    if META_FILE not in visible:
        return None
    for n in visible:
        stem, dot, ext = n.rpartition(".")
        if n != META_FILE and not (
            dot and ext in ("arrow", "parquet") and stem in schema.TABLES_BY_NAME
        ):
            return None
    try:
        meta = json.loads((path / META_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("schema_version") not in schema.READABLE_VERSIONS:
        return None
    return visible


def own_files(path: Path) -> list[str] | None:
    """The files tbdtrace wrote in the trace directory ``path``, or None when ``path``
    is not a trace (no marker, and not an all-tbdtrace legacy trace)."""
    try:
        names = os.listdir(path)
    except NotADirectoryError:
        return None
    if MARKER in names:
        try:
            doc = json.loads((path / MARKER).read_text())
        except (OSError, ValueError):
            doc = None
        if isinstance(doc, dict) and doc.get("format") == MARKER_FORMAT:
            files = doc.get("files")
            if isinstance(files, list):
                return [f for f in files if isinstance(f, str) and "/" not in f and f]
    return _legacy_files(path, names)


def state(path: Path) -> str:
    """``absent``, ``file``, ``empty`` (nothing but tbdtrace's hidden working entries),
    ``trace`` or ``other``."""
    if not path.exists() and not path.is_symlink():
        return "absent"
    if not path.is_dir():
        return "file"
    names = [n for n in os.listdir(path) if not is_private(n) or n == MARKER]
    if not names:
        return "empty"
    return "trace" if own_files(path) is not None else "other"


def marker_text(files: list[str]) -> str:
    from tbdtrace.version import __version__

    doc = {"format": MARKER_FORMAT, "files": sorted(files), "writer": f"tbdtrace {__version__}"}
    return json.dumps(doc, indent=2) + "\n"


def _check_names(path: Path) -> None:
    for part in path.parts:
        if len(os.fsencode(part)) > 255:
            raise TraceError(
                f"{path.parent if part == path.name else path}: the name {part[:24]}... "
                f"is {len(os.fsencode(part))} bytes, over the 255 bytes a file name may "
                "have; choose a shorter name"
            )


def _make_parent(path: Path) -> None:
    """Create the parents of ``path``; one line when one is a file or not writable."""
    for anc in reversed(path.parents):
        if anc.exists() and not anc.is_dir():
            raise TraceError(f"{path}: {anc} is a file, not a directory; choose another path")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TraceError(
            f"{path}: cannot create its parent directory {e.filename or path.parent} "
            f"({e.strerror}); choose a writable location"
        ) from None


@dataclass
class Output:
    """An output directory claimed by this process: created if absent, locked."""

    path: Path  # absolute
    created: bool  # this process created the directory
    force: bool  # replacing an existing trace is allowed
    _fd: int | None = field(default=None, repr=False)

    def release(self) -> None:
        """Drop the lock; remove the directory when this process created it and nothing
        but tbdtrace's lock is in it (a failed run leaves no empty directory behind)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path / LOCK)
        os.close(self._fd)
        self._fd = None
        if self.created:
            with contextlib.suppress(OSError):
                self.path.rmdir()  # only succeeds when empty

    def __enter__(self) -> Output:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _lock(path: Path) -> int:
    """Take the writer lock of ``path``; TraceError when another process holds it."""
    lock = path / LOCK
    for _ in range(10):
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise TraceError(
                f"{path}: another tbdtrace process (pid {holder}) is writing this output; "
                "wait for it to finish or choose another --out"
            ) from None
        # The holder before us may have unlinked the file after we opened it: the lock
        # must be on the file that is there now.
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            with contextlib.suppress(OSError):  # the pid is for messages; a full disk
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            return fd
        os.close(fd)
    raise TraceError(f"{path}: could not take the writer lock {lock}; try again")


def _check_writable(path: Path) -> None:
    probe = path / f"{STAGING_PREFIX}probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as e:
        raise TraceError(
            f"{path}: cannot write there ({e.strerror}); choose a writable location"
        ) from None


def _check_space(path: Path, need: int, out: Path) -> None:
    st = os.statvfs(path)
    if st.f_blocks == 0 or st.f_flag & os.ST_RDONLY:
        return  # a pseudo or read-only file system: writing there fails with its own error
    free = st.f_bavail * st.f_frsize
    if free < need:
        raise TraceError(
            f"{out}: only {free / 2**20:.1f} MiB free on its file system, tbdtrace needs "
            f"at least {need / 2**20:.0f} MiB; free some space or choose another location"
        )


def claim(
    path: str | os.PathLike[str], force: bool = False, min_free_bytes: int | None = None
) -> Output:
    """Validate ``path`` as an output, create it when absent and lock it (see module doc).

    ``min_free_bytes``: free space required (default :data:`MIN_FREE_BYTES`). Raises
    TraceError (one line) when the path cannot be used; nothing is left behind then.
    """
    p = Path(os.path.abspath(os.fspath(path)))
    _check_names(p)
    st = state(p)
    if st == "file":
        raise TraceError(f"{p}: exists and is a file; --out names a directory")
    need = MIN_FREE_BYTES if min_free_bytes is None else min_free_bytes
    existing = next((a for a in (p, *p.parents) if a.is_dir()), None)
    if existing is not None:
        _check_space(existing, need, p)
    created = False
    if st == "absent":
        _make_parent(p)
        try:
            p.mkdir()
            created = True
        except FileExistsError:
            pass  # made meanwhile (another writer): the lock decides below
        except OSError as e:
            raise TraceError(f"{p}: cannot create it ({e.strerror}); {_WRITABLE}") from None
    try:
        fd = _lock(p)
    except OSError as e:
        if created:
            with contextlib.suppress(OSError):
                p.rmdir()
        raise TraceError(f"{p}: cannot write there ({e.strerror}); {_WRITABLE}") from None
    out = Output(p, created, force, fd)
    try:
        st = state(p)
        if st == "other":
            raise TraceError(
                f"{p}: exists, is not empty and is not a tbdtrace trace; tbdtrace writes only "
                "into a new or empty directory or over a trace; choose another --out"
            )
        if st == "trace" and not force:
            raise TraceError(
                f"{p}: holds a trace already; pass --force to replace it (files of your own "
                "in it are kept), or choose another --out"
            )
        _check_writable(p)
        _check_space(p, need, p)
    except BaseException:
        out.release()
        raise
    return out


def describe_os_error(e: OSError) -> str:
    """One line for an OSError: the path, the problem and what to do."""
    what = e.strerror or str(e)
    where = e.filename
    hint = {
        errno.ENOSPC: "free some space or choose another location",
        errno.EDQUOT: "free some space or choose another location",
        errno.EACCES: "check the permissions or choose another location",
        errno.EPERM: "check the permissions or choose another location",
        errno.EROFS: "the file system is read-only; choose another location",
        errno.ENAMETOOLONG: "choose a shorter name",
        errno.ENOENT: "check the path",
        errno.ENOTDIR: "a part of the path is a file, not a directory; check the path",
        errno.EISDIR: "the path is a directory; pass a file",
    }.get(e.errno or 0)
    head = f"{where}: {what}" if where else what
    if e.filename2:
        head = f"{where} -> {e.filename2}: {what}"
    return f"{head}; {hint}" if hint else head


__all__ = [
    "LOCK",
    "MARKER",
    "MIN_FREE_BYTES",
    "Output",
    "claim",
    "describe_os_error",
    "dir_mode",
    "is_private",
    "own_files",
    "state",
]
