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
