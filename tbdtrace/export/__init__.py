"""Timeline export: a trace as a Perfetto protobuf trace or Chrome trace-event JSON.

``export(trace, fmt, path)`` builds the viewer timeline (``timeline.build``) and writes
it with the format's writer (``perfetto.py``, ``chrome.py``).
"""

from __future__ import annotations

import os
from typing import IO

from tbdtrace.trace import Trace

FORMATS = ("perfetto", "chrome")


def export(trace: Trace, fmt: str, path: str | os.PathLike[str]) -> int:
    """Write ``trace`` as ``fmt`` (one of FORMATS) to ``path``; returns events written."""
    with open(path, "wb") as f:
        return write(trace, fmt, f)


def write(trace: Trace, fmt: str, f: IO[bytes]) -> int:
    """Write ``trace`` as ``fmt`` (one of FORMATS) to the binary stream ``f``; returns
    events written."""
    from tbdtrace.export import chrome, perfetto, timeline

    tl = timeline.build(trace)
    writer = perfetto if fmt == "perfetto" else chrome
    return writer.write(tl, f)
