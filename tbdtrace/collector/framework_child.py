"""``capture --backend tf|mxnet|auto`` (without a GPU): the framework's profiler in the child.

The parent is :func:`tbdtrace.collector.torch_child.run_capture` (``backend=`` ``tf``,
``mxnet`` or ``auto``): it starts the command with the bootstrap (``sitecustomize/``) on
PYTHONPATH, ``TBDTRACE_FRAMEWORK_SPOOL`` naming the spool and ``TBDTRACE_FRAMEWORK`` the
backend, and assembles the parts the processes write, as for ``--backend torch``.

In the child the bootstrap waits for the program to import its framework (``tensorflow``
for ``tf``, ``mxnet`` for ``mxnet``; for ``auto`` whichever of ``torch``, ``tensorflow``
and ``mxnet`` comes first) and then calls :func:`start_in_child`, which starts that
framework's backend (:mod:`.tf_backend`, :mod:`.mxnet_backend`, or torch.profiler through
:func:`tbdtrace.collector.torch_child.start_in_child`) and writes ``<spool>/part-<pid>``
at exit or on SIGTERM. A program that never imports the framework writes no part, and
the capture says so. What the profiler prints goes to ``<spool>/profiler-<pid>.log``.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
from pathlib import Path
from typing import Any

from tbdtrace import outdir, trace
from tbdtrace.collector import torch_child
from tbdtrace.errors import TraceError

SPOOL_ENV = "TBDTRACE_FRAMEWORK_SPOOL"
FRAMEWORK_ENV = "TBDTRACE_FRAMEWORK"  # tf | mxnet | auto
# The module whose import starts each backend.
MODULES = {"tf": "tensorflow", "mxnet": "mxnet", "torch": "torch"}
FRAMEWORKS = {"tf": "tensorflow", "mxnet": "mxnet", "torch": "pytorch"}


def _backend(name: str) -> Any:
    if name == "tf":
        from tbdtrace.collector.tf_backend import TfBackend

        return TfBackend()
    from tbdtrace.collector.mxnet_backend import MxnetBackend

    return MxnetBackend()


def start_in_child(name: str) -> None:
    """Start backend ``name`` (tf, mxnet or torch) in this process; its part of the trace
    is written at exit or on SIGTERM."""
    if torch_child._is_mp_helper():
        return
    spool = Path(os.environ[SPOOL_ENV])
    if name == "torch":  # auto found PyTorch: the torch backend as --backend torch runs it
        os.environ[torch_child.SPOOL_ENV] = str(spool)
        torch_child.start_in_child()
        return
    owner = os.getpid()
    log = spool / f"profiler-{owner}.log"
    backend = _backend(name)
    with torch_child.stderr_to(log):
        backend.start()
    state = ["profiling"]

    def finish() -> None:
        if state[0] != "profiling" or os.getpid() != owner:
            return  # done already, or a forked child that inherited the profiler
        state[0] = "finishing"
        try:
            with torch_child.stderr_to(log):
                tables, meta = backend.stop()
            meta.setdefault("extra", {})["process"] = {"pid": owner}
            trace.write(spool / f"part-{owner}", tables, meta)
        except (OSError, TraceError) as e:  # a full disk: one line, not a traceback
            what = outdir.describe_os_error(e) if isinstance(e, OSError) else str(e)
            sys.stderr.write(f"tbdtrace: the profile of process {owner} was not written: {what}\n")
        state[0] = "done"

    def on_term(sig: int, _frame: Any) -> None:
        if os.getpid() == owner and state[0] == "profiling":
            try:
                finish()
            except Exception as e:  # noqa: BLE001 - dying of the signal matters more
                sys.stderr.write(f"tbdtrace: profile not written on {sig}: {e}\n")
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)

    atexit.register(finish)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, on_term)
