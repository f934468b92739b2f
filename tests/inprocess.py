"""``tbdtrace ARGS`` through :func:`tbdtrace.cli.main` in the test process.

The commands' own code, without the seconds a child process spends starting Python and
loading tbdtrace; what differs is only the process-wide tuning ``python -m tbdtrace``
adds for itself (tbdtrace/cli.py: heap settings, the no-pandas rule), which tests of
the commands' output do not look at.
"""

from __future__ import annotations

import contextlib
import io
import subprocess

from tbdtrace.cli import main


def tbd(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Exit status, standard output and standard error of ``tbdtrace ARGS``, as from
    ``subprocess.run(..., capture_output=True, text=True, check=check)``."""
    # byte buffers underneath, as a process's streams have, for writers of bytes
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(args))
        except SystemExit as e:  # argparse's usage errors
            rc = e.code if isinstance(e.code, int) else 1
    texts = []
    for stream in (out, err):
        stream.flush()
        raw = stream.buffer
        assert isinstance(raw, io.BytesIO)
        texts.append(raw.getvalue().decode())
    cp = subprocess.CompletedProcess(["tbdtrace", *args], rc, texts[0], texts[1])
    if check:
        cp.check_returncode()
    return cp
