"""A module for test_forkserver.py: prints what a program sees of how it was started."""

import atexit
import json
import os
import sys
import threading

if __name__ == "__main__":
    mode = sys.argv[1]
    atexit.register(lambda: print("atexit ran", flush=True))
    print(
        json.dumps(
            {
                "argv": sys.argv,
                "name": __name__,
                "main_is_this": sys.modules["__main__"].__dict__ is globals(),
                "path0": sys.path[0],
                "cwd": os.getcwd(),
                "probe_env": os.environ.get("FORKPROBE"),
                "threads": threading.active_count(),
                "stdin": sys.stdin.read(),
                "globals": sorted(k for k in globals() if not k.startswith("__")),
            }
        ),
        flush=True,
    )
    print("to stderr", file=sys.stderr)
    if mode == "exit3":
        sys.exit(3)
    if mode == "exitmsg":
        sys.exit("a message")
    if mode == "raise":
        raise ValueError("probe")
    if mode == "kill":
        os.kill(os.getpid(), 9)
