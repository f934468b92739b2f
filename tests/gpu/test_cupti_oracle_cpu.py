"""The cupti-python oracle (tests/gpu/cupti_oracle.py) on a machine without a GPU: the
pinned cupti-python imports beside torch's CUPTI 13.0.85, and starting it refuses in one
line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tbdtrace import _native

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    Path("/dev/nvidia0").exists(), reason="checks the no-driver path; the GPU test covers a GPU"
)


def test_cupti_python_imports_with_torchs_cupti() -> None:
    from importlib.metadata import version

    from cupti import cupti

    assert version("cupti-python").startswith("13.0.")
    assert version("nvidia-cuda-cupti").startswith("13.0.")
    assert version("cuda-bindings").startswith("13.0.")
    assert int(cupti.ActivityKind.CONCURRENT_KERNEL) == 10  # the 13.0 header's value
    assert _native.cupti_version() == 130001  # ours still loads 13.0's libcupti


def test_the_oracle_refuses_without_a_driver_in_one_line() -> None:
    code = (
        "from tests.gpu.cupti_oracle import Oracle, OracleError\n"
        "try:\n    Oracle().start()\nexcept OracleError as e:\n    print(e)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("cupti-python oracle: CUDA driver is not found (libcuda.so.1")
