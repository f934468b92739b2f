"""Timeline export: a trace as a Perfetto protobuf trace or Chrome trace-event JSON.

``export(trace, fmt, path)`` builds the viewer timeline (``timeline.build``) and writes
it with the format's writer (``perfetto.py``, ``chrome.py``).
"""

from __future__ import annotations

import os
from typing import IO, Any

from tbdtrace.trace import Trace

FORMATS = ("perfetto", "chrome")


def export(
    trace: Trace,
    fmt: str,
    path: str | os.PathLike[str],
    window: Any = None,
    critical_path: bool = False,
) -> int:
    """Write ``trace`` as ``fmt`` (one of FORMATS) to ``path``; returns events written.
    ``window`` (a :class:`tbdtrace.analysis.engine.window.Window`): only what is inside it
    (:func:`tbdtrace.export.timeline.build`); ``critical_path``: mark each step's critical
    path (a track of its segments, an argument on the slices it goes through)."""
    with open(path, "wb") as f:
        return write(trace, fmt, f, window, critical_path)


def write(
    trace: Trace, fmt: str, f: IO[bytes], window: Any = None, critical_path: bool = False
) -> int:
    """Write ``trace`` as ``fmt`` (one of FORMATS) to the binary stream ``f``; returns
    events written. ``window``, ``critical_path``: as for :func:`export`."""
    from tbdtrace.export import chrome, perfetto, timeline

    tl = timeline.build(trace, window, critical_path)
    writer = perfetto if fmt == "perfetto" else chrome
    return writer.write(tl, f)
