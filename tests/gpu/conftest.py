"""GPU checks (tests marked ``gpu``): skipped with the reason where no CUDA device is;
``scripts/gpu_check.sh`` runs them on a GPU machine. Settings from the environment that
script sets (this is the one place these tests read it):

* ``TBDTRACE_GPU_OUT``: where traces and logs go (brought back by the script);
* ``TBDTRACE_GPU_BUDGET_S``: seconds for all of them; a test that no longer fits its
  declared cost (``@pytest.mark.gpu_cost(seconds)``) is skipped and says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
HAS_GPU = Path("/dev/nvidiactl").exists()
NO_GPU = "needs a CUDA device (no /dev/nvidiactl here); scripts/gpu_check.sh runs it on one"
_T0 = time.monotonic()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("gpu") is not None and not HAS_GPU:
            item.add_marker(pytest.mark.skip(reason=NO_GPU))


def pytest_runtest_setup(item: pytest.Item) -> None:
    cost = item.get_closest_marker("gpu_cost")
    if cost is None or not HAS_GPU:
        return
    budget = float(os.environ.get("TBDTRACE_GPU_BUDGET_S", "300"))
    left = budget - (time.monotonic() - _T0)
    if left < cost.args[0]:
        pytest.skip(f"no longer fits the GPU budget ({left:.0f} s left, needs {cost.args[0]} s)")


@pytest.fixture(scope="session")
def gpu_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = os.environ.get("TBDTRACE_GPU_OUT")
    out = Path(env) if env else tmp_path_factory.mktemp("gpu")
    out.mkdir(parents=True, exist_ok=True)
    return out


def run(cmd: list[str], log: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` from the repository root; its output goes to ``log`` too."""
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    log.write_text(f"$ {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    assert r.returncode == 0, f"{' '.join(cmd[:6])} ...: exit {r.returncode}; {r.stderr[-2000:]}"
    return r


def tbdtrace(*args: str) -> list[str]:
    return [sys.executable, "-m", "tbdtrace", *args]


def capture_help() -> str:
    r = subprocess.run(tbdtrace("capture", "--help"), capture_output=True, text=True, cwd=ROOT)
    return r.stdout


def open_trace(path: Path) -> Any:
    import tbdtrace as t

    return t.open(path)
