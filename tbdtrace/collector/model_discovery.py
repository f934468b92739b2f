"""Find a program's models and optimizers without its help, for the framework backends.

``capture --backend tf|mxnet`` changes nothing in the program, so nobody hands the
capture the model whose weights, gradients and optimizer state it should size. The
objects are found where Python keeps them: :func:`gc.get_objects` lists every live
instance of a class, so Keras models and optimizers, Gluon Blocks and Trainers are found
by type. A scan walks every tracked object (a few milliseconds in an MXNet process, tens
in a TensorFlow one), so :class:`Discovery` scans on a background thread with its cost
bounded: the next scan comes after 20 times the last one's duration (at most 5% of the
time), at least 0.1 s and at most 2 s later. Backends keep what a scan found: a
program's model is often a local variable of a function that has returned by the time
the capture stops.

A scan must not be interrupted by the program's threads: ``gc.get_objects()`` also lists
a tuple that ``tuple(generator)`` is still filling, and holding a reference to it while
that code resumes makes its resize fail (TensorFlow's graph tracing then dies with
``SystemError: bad argument to internal function``). :func:`instances` therefore raises
the interpreter's thread switch interval for the few milliseconds of the scan and drops
the object list before other Python code runs again.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

FIRST_INTERVAL_S = 0.1  # first scan after start, and the shortest interval
MAX_INTERVAL_S = 2.0  # the longest interval
MAX_SHARE = 0.05  # scans take at most this share of the time (interval >= scan time / share)


# While scanning: no switch to another thread (a thread already waiting may still take
# the interpreter once, before the object list exists; see the module docstring).
_SCAN_SWITCH_INTERVAL_S = 1000.0


def instances(types: tuple[type, ...]) -> list[Any]:
    """Live objects whose type is a subclass of ``types``, in gc order."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(_SCAN_SWITCH_INTERVAL_S)
    try:
        time.sleep(0)  # let a thread that asked before the change run now, not mid-scan
        objs = gc.get_objects()
        # type(o), not o.__class__: no attribute lookup on arbitrary objects.
        found = [o for o in objs if issubclass(type(o), types)]
        del objs
    finally:
        sys.setswitchinterval(old)
    return found


class Discovery:
    """Calls ``scan()`` on a background thread at a growing interval, and once at
    ``stop()``; ``scan`` finds and sizes the objects and keeps what it learnt itself."""

    def __init__(self, scan: Callable[[], None]):
        self._scan = scan
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tbdtrace-discovery", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._scan()

    def _loop(self) -> None:
        wait = FIRST_INTERVAL_S
        while not self._stop.wait(wait):
            t0 = time.perf_counter()
            self._scan()
            took = time.perf_counter() - t0
            wait = min(MAX_INTERVAL_S, max(FIRST_INTERVAL_S, took / MAX_SHARE))
