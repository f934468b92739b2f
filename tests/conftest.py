"""Shared test fixtures: where the real third-party traces are.

Real traces made by other projects (PyTorch-profiler traces from HTA, TraceLens and kineto;
Nsight Systems exports from pipit) are never copied into this repository. They are provided
beside the checkout, in `shared/fixtures/` (CI has the same layout), or wherever
`TBDTRACE_FIXTURES` points. Their provenance and licences are in docs/TEST_DATA.md and in the
READMEs of that folder.

Tests reach them only through this module: `KINETO`/`NSYS` (folders), `KINETO_TRACES` (every
Kineto file) and `fixture(rel)` (one file, skipping with the reason when it is absent). A test
module that holds `KINETO`, `NSYS` or `KINETO_TRACES` at module level is skipped as a whole,
with the reason, when the folder is absent.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# torch._dynamo (torch.optim and torch.compile load it, and it loads triton) crashes the
# process with a segmentation fault when it is first imported after TensorFlow; test files
# share worker processes (pytest-xdist), so it is loaded first, before any TensorFlow test.
with contextlib.suppress(ImportError):  # without torch, the tests that need it skip
    import torch._dynamo  # noqa: F401

    # One intra-op thread for the models the tests run in this process: beside the other
    # worker and the training subprocesses on 2 cores, a second OpenMP thread spins
    # waiting for its turn. Set here, not in the environment, so processes the tests
    # start keep what their own test gives them.
    torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"  # data this project made itself
FIXTURES = Path(os.environ.get("TBDTRACE_FIXTURES") or ROOT.parent / "shared" / "fixtures")
KINETO = FIXTURES / "kineto"
NSYS = FIXTURES / "nsys"
KINETO_TRACES = sorted(KINETO.glob("*/*.json.gz"))
MISSING = (
    f"real-trace fixtures not found at {FIXTURES}: they are provided beside the checkout "
    "(shared/fixtures/) or where TBDTRACE_FIXTURES points"
)


def fixture(rel: str) -> Path:
    """The fixture file `rel` (relative to the fixtures folder, e.g. "kineto/hta/x.json.gz");
    skips the calling test, with the reason, when it is absent."""
    path = FIXTURES / rel
    if not path.is_file():
        pytest.skip(MISSING if not FIXTURES.is_dir() else f"fixture {path} is absent")
    return path


@pytest.fixture(scope="session")
def kineto_dir() -> Path:
    if not KINETO.is_dir():
        pytest.skip(MISSING)
    return KINETO


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if KINETO.is_dir() and NSYS.is_dir():
        return
    skip = pytest.mark.skip(reason=MISSING)
    for item in items:
        module = getattr(item, "module", None)
        if module is None:
            continue
        held = vars(module)
        if (
            (held.get("KINETO") is KINETO and not KINETO.is_dir())
            or (held.get("KINETO_TRACES") is KINETO_TRACES and not KINETO.is_dir())
            or (held.get("NSYS") is NSYS and not NSYS.is_dir())
        ):
            item.add_marker(skip)


# Files whose tests make test spreads over its workers one by one (each test is a long
# training run of its own, a subprocess, and the file shares no fixture between them).
SPREAD_FILES = frozenset({"tests/workloads/test_to_quality.py", "tests/workloads/test_train.py"})


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook; absent under -p no:xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (make test) runs the tests of one file on one worker, so a
    file's module- and session-scoped fixtures are made once; the tests of
    ``SPREAD_FILES`` go to the workers one by one instead, so that no worker is left
    with all of them. (``--dist loadgroup`` with ``xdist_group`` marks would say the same
    but does not group under pytest 9: docs/DECISIONS.md 101.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FileOrTestScheduling(LoadFileScheduling):  # type: ignore[misc]
        started = False

        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            return nodeid if file in SPREAD_FILES else file

        def _assign_work_unit(self, node: Any) -> None:
            # The long runs first (the queue puts files with the most tests first, so
            # these one-test units would come last and end the run on one worker).
            if not self.started:
                self.started = True
                spread = [u for u in self.workqueue if "::" in u]
                for unit in reversed(spread):
                    self.workqueue.move_to_end(unit, last=False)
            super()._assign_work_unit(node)

    return FileOrTestScheduling(config, log)


@pytest.fixture(autouse=True)
def _pandas_stays_importable() -> Iterator[None]:
    """The CLI's analysis commands refuse `import pandas` for the rest of the process
    (tbdtrace/_pandas_gate.py); a test that runs them in-process through main() must not
    leave later tests without pandas, so the gate is opened again after each test."""
    yield
    from tbdtrace import _pandas_gate

    _pandas_gate.open_()


# ---- The quick tier (`make test-quick`, DECISIONS 185) ----
#
# `make test-quick` runs `pytest -m "not heavy"` with TBDTRACE_TEST_QUICK=1. A test that runs a
# training, a capture, a workload, a browser or a process cluster is marked `heavy` (per file:
# `pytestmark = pytest.mark.heavy`). So that the tier stays quick as tests are added, in quick
# mode the starting of such a process fails the test with the line that says to mark it.
QUICK = os.environ.get("TBDTRACE_TEST_QUICK") == "1"
# Subcommands and programs that are a training, capture, workload, browser or cluster.
_HEAVY_SUBCOMMANDS = {"capture", "bench", "recover"}
_HEAVY_PROGRAMS = {
    "chromium", "chromium-browser", "google-chrome", "chrome", "headless_shell",
    "torchrun", "mpirun", "dask", "dask-scheduler", "dask-worker",
}  # fmt: skip
_HEAVY_WORDS = ("workloads", "torch.distributed.run", "forkserver", "profiler_child")


def _heavy_argv(args: Any) -> bool:
    argv = [os.fspath(a) for a in ([args] if isinstance(args, str | bytes | os.PathLike) else args)]
    argv = [a.decode() if isinstance(a, bytes) else a for a in argv]
    if not argv or "--help" in argv or "-h" in argv:  # a command's help runs nothing
        return False
    if Path(argv[0].split()[0]).name in _HEAVY_PROGRAMS:
        return True
    if any(a in _HEAVY_SUBCOMMANDS for a in argv[1:]):
        return True
    return any(w in a for a in argv for w in _HEAVY_WORDS)


def _quick_refusal(what: str) -> None:
    pytest.fail(
        f"make test-quick: this test starts {what}, which the quick tier leaves out; mark the "
        "test or its file `heavy` (pytestmark = pytest.mark.heavy; DECISIONS 185)",
        pytrace=False,
    )


def _install_quick_guard() -> None:
    import multiprocessing.process
    import subprocess

    execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def guarded_execute_child(self: Any, args: Any, *rest: Any, **kw: Any) -> Any:
        # _execute_child(args, executable, preexec_fn, close_fds, pass_fds, cwd, env, ...)
        env = rest[5] if len(rest) > 5 else kw.get("env")
        added = [k for k in (env or {}) if str(k).startswith("TBDTRACE_") and k not in os.environ]
        if _heavy_argv(args) or added:
            argv = " ".join(map(str, [args] if isinstance(args, str | bytes) else args))
            why = f" with {added[0]} (a capture child)" if added else ""
            _quick_refusal(f"the process {argv[:160]!r}{why}")
        return execute_child(self, args, *rest, **kw)

    subprocess.Popen._execute_child = guarded_execute_child  # type: ignore[attr-defined]

    start = multiprocessing.process.BaseProcess.start

    def guarded_start(self: Any) -> None:
        _quick_refusal(f"a worker process ({type(self).__name__}: a pool or cluster)")
        start(self)

    multiprocessing.process.BaseProcess.start = guarded_start  # type: ignore[method-assign]


def pytest_configure(config: pytest.Config) -> None:
    if QUICK:
        _install_quick_guard()
