"""The captured process's side of ``capture --backend torch|tf|mxnet|auto``: one lifecycle
for every framework profiler.

The bootstrap (``sitecustomize/``) calls :func:`start_in_child` with the backend's name:
right away for ``torch`` (``TBDTRACE_TORCH_SPOOL``), once the program imports its
framework for ``tf``, ``mxnet`` and ``auto`` (``TBDTRACE_FRAMEWORK_SPOOL``). The profiler
(:mod:`.torch_backend`, :mod:`.tf_backend`, :mod:`.mxnet_backend`) runs from then on, or,
when the capture has windows (``TBDTRACE_WINDOWS``, :mod:`.windows`), only inside them:
each window starts a profiler at its first step and stops it at its last.

:class:`Lifecycle` writes the process's part of the trace, ``<spool>/part-<pid>``, once:
at exit (atexit) or on SIGTERM. On SIGTERM it writes the part first, then dies of the
signal as it would have; on SIGINT Python's KeyboardInterrupt unwinds the program, atexit
writes the part, and the process still ends by SIGINT. Every Python process started with
the variables writes a part (spawned workers too); processes that leave through
``os._exit`` (forked DataLoader workers) write none. What the profiler prints on stderr
while it starts, stops and exports (Kineto's ``USDT:`` lines, "gpuGetDeviceCount failed"
without a GPU) goes to ``<spool>/profiler-<pid>.log``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tbdtrace.collector import child_protocol as proto

# The module whose import starts each backend (auto: the first of them).
MODULES = {"tf": "tensorflow", "mxnet": "mxnet", "torch": "torch"}
FRAMEWORKS = {"tf": "tensorflow", "mxnet": "mxnet", "torch": "pytorch"}
# Helper processes multiprocessing starts (spawn/forkserver): no training runs there, and
# they end when their parent does, often by a signal: they are not profiled.
MP_HELPERS = (b"multiprocessing.resource_tracker", b"multiprocessing.forkserver")


@contextlib.contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """Point file descriptor 2 (the C++ libraries' stderr too) at ``path`` for the block."""
    with contextlib.suppress(ValueError, OSError):
        sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError, OSError):
            sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def is_mp_helper() -> bool:
    try:
        cmdline = Path("/proc/self/cmdline").read_bytes()
    except OSError:
        return False
    return any(h in cmdline for h in MP_HELPERS)


def _make_backend(name: str) -> Any:
    if name == "torch":
        from tbdtrace.collector.torch_backend import TorchBackend, TorchConfig

        cfg = TorchConfig(**json.loads(os.environ.get(proto.TORCH_CONFIG, "{}")))
        return TorchBackend(cfg)
    if name == "tf":
        from tbdtrace.collector.tf_backend import TfBackend

        return TfBackend()
    from tbdtrace.collector.mxnet_backend import MxnetBackend

    return MxnetBackend()


class Lifecycle:
    """Runs ``finish`` once in the process that started it: at exit, or on SIGTERM before
    the process dies of it (the one child lifecycle of every capture backend)."""

    def __init__(self, finish: Callable[[], None]):
        self.owner = os.getpid()
        self._finish = finish
        self.state = "running"  # running -> finishing -> done

    def install(self) -> None:
        atexit.register(self.finish)
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, self.on_term)

    def finish(self) -> None:
        if self.state != "running" or os.getpid() != self.owner:
            return  # done already, or a forked child that inherited the profiler
        self.state = "finishing"
        try:
            self._finish()
        finally:
            self.state = "done"
        if getattr(sys, "last_type", None) is KeyboardInterrupt:
            # Python ends on an unhandled KeyboardInterrupt by killing itself with SIGINT,
            # unless code ran at exit (as here): keep that conventional status.
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)

    def on_term(self, sig: int, _frame: Any) -> None:
        if self.state == "finishing" and os.getpid() == self.owner:
            return  # writing the part already; a second signal from tbdtrace is SIGKILL
        if os.getpid() == self.owner:
            try:
                self.finish()
            except Exception as e:  # noqa: BLE001 - dying of the signal matters more
                sys.stderr.write(f"tbdtrace: profile not written on {sig}: {e}\n")
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)


class ProfilerWindows:
    """A framework profiler as a window :class:`~.windows.Collection`. Where the
    profiler starts and stops more than once in a process (torch.profiler,
    tf.profiler.experimental), each window starts a new one and stops it; the windows'
    tables are kept for the part. MXNet's profiler writes nothing after its first stop:
    it runs from the first window to the end, paused between windows
    (``mx.profiler.pause``/``resume``)."""

    def __init__(self, name: str, log: Path):
        self.name, self.log = name, log
        self.backend: Any = None
        self.paused = False
        self.collected: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def open(self) -> None:
        with stderr_to(self.log):
            if self.paused:
                self.backend.resume()
                self.paused = False
                return
            self.backend = _make_backend(self.name)
            self.backend.start()

    def close(self) -> None:
        with stderr_to(self.log):
            if hasattr(self.backend, "pause"):
                self.backend.pause()
                self.paused = True
                return
            b, self.backend = self.backend, None
            self.collected.append(b.stop())

    def finish(self) -> None:
        """The run ends: a profiler still running or paused stops."""
        if self.backend is not None:
            b, self.backend = self.backend, None
            with stderr_to(self.log):
                self.collected.append(b.stop())


def start_in_child(name: str) -> None:
    """Start backend ``name`` (torch, tf or mxnet) in this process, for the whole run or
    for the capture's windows; its part of the trace is written at exit or on SIGTERM."""
    if is_mp_helper():
        return
    spool = Path(os.environ.get(proto.TORCH_SPOOL) or os.environ[proto.FRAMEWORK_SPOOL])
    owner = os.getpid()
    coll = ProfilerWindows(name, spool / proto.profiler_log_name(owner))
    plan_text = os.environ.get(proto.WINDOWS)
    controller = None
    if name == "torch":
        # tbdtrace.collector.torch_dist needs torch: the process's rank, clock offsets.
        from tbdtrace.collector import torch_dist

        # auto found PyTorch: processes this one starts profile from their start, as
        # under --backend torch.
        os.environ.setdefault(proto.TORCH_SPOOL, str(spool))

    try:
        if plan_text:
            from tbdtrace.collector import window_child, windows

            if name == "torch":
                import torch  # noqa: F401 - as without windows; its NVTX ranges are watched

            coll.log.touch()  # the process ran under the capture, window or not
            controller = window_child.start_in_child(
                windows.WindowPlan.from_json(plan_text), coll, str(spool)
            )
        else:
            coll.open()
    except KeyboardInterrupt:
        # Ctrl-C while the framework loads, before the program ran: end as Python would on
        # an interrupt, by the signal, without a traceback from this bootstrap.
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        raise
    if name == "torch":
        torch_dist.watch_init()

    def finish() -> None:
        from tbdtrace import outdir, trace
        from tbdtrace.errors import TraceError

        try:
            if controller is not None:
                controller.finish()
            coll.finish()
            tables, meta = combine(coll.collected)
            rank = torch_dist.final_rank() if name == "torch" else None
            tag_process(tables, meta, rank if name == "torch" else None)
            trace.write(spool / proto.part_name(owner), tables, meta)
        except (OSError, TraceError) as e:  # a full disk: one line, not a traceback
            what = outdir.describe_os_error(e) if isinstance(e, OSError) else str(e)
            sys.stderr.write(f"tbdtrace: the profile of process {owner} was not written: {what}\n")

    Lifecycle(finish).install()


def combine(
    collected: list[tuple[dict[str, Any], dict[str, Any]]],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One part from the windows' (tables, meta): tables concatenated, the first window's
    meta (a process without a window writes an empty part)."""
    if not collected:
        return {}, {"source": None, "extra": {"windows_opened": 0}}
    if len(collected) == 1:
        return collected[0]
    import pyarrow as pa

    from tbdtrace import trace

    tables: dict[str, list[pa.Table]] = {}
    for tabs, _ in collected:
        for name, t in tabs.items():
            tables.setdefault(name, []).append(
                t if isinstance(t, pa.Table) else trace.to_table(name, t)
            )
    meta = dict(collected[0][1])
    out = {
        n: pa.concat_tables(ts).unify_dictionaries().combine_chunks() for n, ts in tables.items()
    }
    return out, meta


def tag_process(tables: dict[str, Any], meta: dict[str, Any], info: dict[str, Any] | None) -> None:
    """A part's meta names its process; its rows and meta get the process's rank (torch
    only; None: the process is no rank)."""
    meta.setdefault("extra", {})["process"] = {"pid": os.getpid(), **(info or {})}
    if info is not None:
        from tbdtrace.collector.torch_dist import set_rank

        set_rank(tables, info["rank"])
        meta["ranks"] = [info["rank"]]
