"""The MXNet venv has what the workloads need: MXNet 1.9.1 and NumPy < 1.24."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.workloads.runner import REPO, mxnet_python, run_workload

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)


def _pins() -> dict[str, str]:
    pins = {}
    for line in (REPO / "requirements-mxnet.lock").read_text().splitlines():
        name, _, version = line.partition("==")
        pins[name.strip().lower()] = version.strip()
    return pins


def test_venv_matches_the_lock_and_numpy_is_below_1_24() -> None:
    code = "import mxnet, numpy; print(mxnet.__version__, numpy.__version__)"
    out = subprocess.run([mxnet_python(), "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    mx_version, np_version = out.stdout.split()
    pins = _pins()
    assert mx_version == pins["mxnet"] == "1.9.1"
    assert np_version == pins["numpy"]
    major, minor = (int(x) for x in np_version.split(".")[:2])
    assert (major, minor) < (1, 24)


def test_cuda_without_a_gpu_is_one_line_and_exit_1(tmp_path: Path) -> None:
    # The registry's mxnet wheel is CPU-only, so --device cuda never finds a GPU.
    run = run_workload(
        "workloads.mxnet.wgan", tmp_path, "--steps", "1", "--device", "cuda", python=mxnet_python()
    )
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert "--device cuda but MXNet sees no GPU" in run.stderr
    assert run.records == []


def test_run_without_mxnet_is_one_line_and_exit_1(tmp_path: Path) -> None:
    # .venv (this test's interpreter) has no MXNet.
    run = run_workload("workloads.mxnet.resnet50", tmp_path, "--steps", "1")
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == [
        f"workloads.mxnet: MXNet is not installed for {sys.executable}; "
        "run with .venv-mxnet/bin/python (make venv-mxnet)"
    ]
