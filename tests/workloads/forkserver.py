"""A fork server for the workload tests: import a framework once, fork one child per run.

Every workload test runs ``python -m workloads.<framework>.<model> ...``. A fresh interpreter
spends 4-6 CPU seconds importing torch (with torchvision and TorchDynamo, which the first
optimizer step pulls in), TensorFlow or MXNet before the workload's first line, and the
suite runs about sixty of them on two cores. This server pays that once: it starts with
the test's environment, imports the framework, and then, for each request, forks a child
that takes the request's environment, working directory, argv and output files and runs the
module exactly as ``python -m`` does (``runpy._run_module_as_main``, which ``-m`` calls; the
exit status from ``SystemExit``, atexit handlers at the end; the environment variables the
preloaded modules set on import, such as TensorFlow's ``TF2_BEHAVIOR``, where the request has
none). The workload, the harness and the steps file are the real ones; what the child shares
with its parent is a set of imported modules that no code has run yet (DECISIONS 133).

Protocol, one JSON object per line: the client writes ``{"module", "args", "env", "cwd",
"stdout", "stderr"}`` on the server's stdin; the server answers ``{"pid"}`` when the child
starts and ``{"returncode"}`` (negative: killed by that signal, as ``subprocess``) when it
ends. The server exits when its stdin closes.

Run as ``python forkserver.py pytorch|tensorflow|mxnet``; only the standard library is used
here, so the same file serves .venv and .venv-mxnet.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import runpy
import sys
import traceback
import types

# What each framework's workloads import before their first step. Only modules that run no
# framework code at import time (no thread pools, no devices): the child must start as a
# fresh process would. The workload modules themselves are not preloaded (runpy would
# warn that the module ran twice).
PRELOAD = {
    "pytorch": [
        "numpy",
        "torch",
        "torch.optim",
        "torch._dynamo",  # the first optimizer.step() imports it
        "torchvision",
        "workloads.harness",
        "workloads.quality",
        "workloads.specs",
        "workloads.pytorch._common",
    ],
    # the package first: it sets TF_CPP_MIN_LOG_LEVEL before TensorFlow loads
    "tensorflow": [
        "workloads.tensorflow",
        "numpy",
        "tensorflow",
        "keras",
        "workloads.harness",
        "workloads.quality",
    ],
    "mxnet": [
        "numpy",
        "mxnet",
        "mxnet.gluon.model_zoo.vision",
        "workloads.harness",
        "workloads.quality",
        "workloads.mxnet._common",
    ],
}


def _exit_code(e: SystemExit) -> int:
    """What the interpreter does with ``SystemExit(code)``."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def _child(req: dict, protocol_fds: tuple[int, int], preload_env: dict[str, str]) -> None:
    """Become ``python -m module args`` with the request's environment; never returns.
    ``preload_env``: the variables the preloaded modules set with their imports, which a
    fresh process would have set the same way (only where the request has none)."""
    code = 1
    try:
        for fd in protocol_fds:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(f, fd)
            os.close(f)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - lives as long as the process
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        # as the interpreter opens them for a file: stdout block-buffered, stderr
        # line-buffered with backslash escapes
        sys.stderr = open(2, "w", buffering=1, errors="backslashreplace", closefd=False)  # noqa: SIM115
        os.environ.clear()
        os.environ.update(preload_env)
        os.environ.update(req["env"])
        os.chdir(req["cwd"])
        sys.path[0] = req["cwd"]  # what `python -m` puts first
        # What `python -m` does: argv[0] is "-m" while the packages import (a package may
        # look), then the module's file; the code runs in a fresh __main__ module.
        sys.argv = ["-m", *req["args"]]
        sys.modules["__main__"] = types.ModuleType("__main__")
        code = 0
        try:
            runpy._run_module_as_main(req["module"], alter_argv=True)
        except SystemExit as e:
            code = _exit_code(e)
        except BaseException:  # noqa: BLE001 - printed as the interpreter would
            traceback.print_exc()
            code = 1
        try:
            atexit._run_exitfuncs()
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def main() -> int:
    framework = sys.argv[1]
    # The protocol runs on private copies of fds 0 and 1; a module that prints while it is
    # imported writes to /dev/null, not into the protocol.
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    sys.path[0] = os.getcwd()
    before = dict(os.environ)
    for name in PRELOAD[framework]:
        try:
            importlib.import_module(name)
        except ImportError:
            # Not installed under this interpreter (a test runs a workload without its
            # framework on purpose): the child meets the same error itself, as a fresh
            # process would. Nothing after it is preloaded.
            break
    preload_env = {k: v for k, v in os.environ.items() if before.get(k) != v}
    reader = os.fdopen(proto_in, "r")
    writer = os.fdopen(proto_out, "w")

    def send(obj: dict) -> None:
        writer.write(json.dumps(obj) + "\n")
        writer.flush()

    send({"ready": framework})
    for line in reader:
        req = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(req, (proto_in, proto_out), preload_env)
        send({"pid": pid})
        _, status = os.waitpid(pid, 0)
        send({"returncode": os.waitstatus_to_exitcode(status)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
