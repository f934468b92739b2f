"""A fork server for the kill-point tests: started under the fault-injection library
(faultshim.c, LD_PRELOAD), it imports tbdtrace once, then for each request (a JSON line
on stdin: ``{"argv": [...], "target": N}``) sets the library's target, forks, runs
``tbdtrace.cli.main(argv)`` in the child and answers with a JSON line: how the child
ended (``killed`` by the library's SIGKILL, or its exit ``rc``) and how many counted
file operations it made. A kill point then costs a fork, not a Python start-up.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import mmap
import os
import struct
import sys


def main() -> None:
    import pyarrow.parquet  # noqa: F401 - loaded once, before the forks

    import tbdtrace.cli as cli

    for name in ("tbdtrace.importers", "tbdtrace.trace_write", "tbdtrace.upgrade"):
        with contextlib.suppress(ImportError):  # loaded before the forks, where present
            importlib.import_module(name)

    fd = os.open(os.environ["TBDTRACE_FAULT_CTL"], os.O_RDWR)
    ctl = mmap.mmap(fd, 16)
    for line in sys.stdin:
        req = json.loads(line)
        ctl[0:16] = struct.pack("qq", int(req["target"]), 0)
        pid = os.fork()
        if pid == 0:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.chdir(req.get("cwd") or "/")
            try:
                rc = cli.main(req["argv"])
            except BaseException:  # noqa: BLE001 - a traceback would be the test's failure
                rc = 99
            os._exit(rc)
        _, status = os.waitpid(pid, 0)
        count = struct.unpack("qq", ctl[0:16])[1]
        if os.WIFSIGNALED(status):
            out = {"killed": os.WTERMSIG(status), "count": count}
        else:
            out = {"rc": os.WEXITSTATUS(status), "count": count}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
