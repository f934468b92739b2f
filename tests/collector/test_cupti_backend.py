"""The CUPTI backend without a GPU: the documented line and exit codes, in-process and via
the command line, and the injection library loaded with dlopen."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tbdtrace import _native
from tbdtrace.collector import CaptureConfig, capture, cupti_backend
from tbdtrace.collector.child_protocol import INJECT_LIB
from tbdtrace.errors import TraceError

ROOT = Path(__file__).resolve().parents[2]
NO_GPU = _native.cupti_version() > 0 and not cupti_backend.probe()[0]
pytestmark = [
    pytest.mark.heavy,
    pytest.mark.skipif(not NO_GPU, reason="these check the no-GPU path"),
]
LINE = "tbdtrace: cupti backend: no CUDA driver/device (CUPTI: CUPTI_ERROR_UNKNOWN)"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tbdtrace", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_capture_backend_cupti_without_gpu_prints_one_line_and_exits_1(tmp_path: Path) -> None:
    out = tmp_path / "t"
    r = cli(
        "capture",
        "--backend",
        "cupti",
        "--out",
        str(out),
        "--",
        sys.executable,
        "-c",
        "raise SystemExit(3)",
    )
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [LINE]
    assert not out.exists()


def test_unknown_activity_is_one_line(tmp_path: Path) -> None:
    r = cli(
        "capture",
        "--backend",
        "cupti",
        "--activities",
        "kernel,bogus",
        "--out",
        str(tmp_path / "t"),
        "--",
        "true",
    )
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        "tbdtrace: unknown activity 'bogus'; choose from "
        + ", ".join(sorted(_native.activity_names()))
    ]


def test_in_process_start_raises_the_line_and_leaves_nothing_running(tmp_path: Path) -> None:
    with pytest.raises(TraceError) as e:
        cupti_backend.Backend().start()
    assert f"tbdtrace: {e.value}" == LINE
    assert not _native.running()
    with (
        pytest.raises(TraceError, match="no CUDA driver/device"),
        capture(tmp_path / "t", backend="cupti"),
    ):
        pass
    assert not (tmp_path / "t").exists() and not _native.running()


def test_native_start_reports_no_device_status(tmp_path: Path) -> None:
    spool = tmp_path / "s.tbds"
    ok, status, msg = _native.start(str(spool), ["kernel"], 1 << 20, 2, 100)
    assert (ok, status) == (False, "no_device") and "no CUDA driver/device" in msg
    assert not spool.exists()  # a failed start leaves no spool behind
    assert _native.stop() == ""


def _inject(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = "import ctypes,sys; lib=ctypes.CDLL(sys.argv[1]); print('rc', lib.InitializeInjection())"
    return subprocess.run(
        [sys.executable, "-c", code, str(INJECT_LIB)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_injection_library_loads_and_returns_cleanly_without_device(tmp_path: Path) -> None:
    env = dict(os.environ, TBDTRACE_SPOOL_DIR=str(tmp_path), TBDTRACE_ACTIVITIES="kernel")
    r = _inject(env)
    assert r.returncode == 0 and r.stdout.strip() == "rc 1"
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tbdtrace: pid ")
    assert lines[0].endswith(": no CUDA driver/device (CUPTI: CUPTI_ERROR_UNKNOWN)")
    assert list(tmp_path.iterdir()) == []


def test_injection_without_spool_dir_says_so() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TBDTRACE_SPOOL_DIR"}
    r = _inject(env)
    assert r.returncode == 0 and r.stdout.strip() == "rc 1"
    assert r.stderr.strip() == "tbdtrace: TBDTRACE_SPOOL_DIR is not set; nothing captured"


def test_child_env_points_cuda_and_nvtx_at_the_injection_library(tmp_path: Path) -> None:
    from tbdtrace.collector.strategies import Injection, command_env

    cfg = cupti_backend.CuptiConfig(activities=("kernel", "memcpy"))
    env = command_env(Injection(cfg), tmp_path, None)
    assert Path(env["CUDA_INJECTION64_PATH"]) == INJECT_LIB and INJECT_LIB.exists()
    assert Path(env["NVTX_INJECTION64_PATH"]) == INJECT_LIB
    assert env["TBDTRACE_ACTIVITIES"] == "kernel,memcpy"
    assert env["TBDTRACE_STEPS_FILE"] == str(tmp_path / "steps.jsonl")


@pytest.mark.parametrize("api", ["lite", "full"])
def test_child_env_carries_the_api_set(tmp_path: Path, api: str) -> None:
    from tbdtrace.collector.strategies import Injection, command_env

    cfg = cupti_backend.CuptiConfig(api=api, buffer_max=16)
    env = command_env(Injection(cfg), tmp_path, None)
    assert env["TBDTRACE_API"] == api and env["TBDTRACE_BUFFER_MAX"] == "16"
    assert cupti_backend.CuptiConfig().api == "lite"  # the default


def test_injection_reads_the_api_set(tmp_path: Path) -> None:
    env = dict(os.environ, TBDTRACE_SPOOL_DIR=str(tmp_path), TBDTRACE_API="most")
    r = _inject(env)
    assert r.returncode == 0 and r.stdout.strip() == "rc 1"
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(": unknown API set 'most' (lite or full)")


def test_a_bad_api_set_is_one_line_in_process(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"^unknown API set 'most'; choose lite or full$"):
        cfg = CaptureConfig(backend="cupti", cupti=cupti_backend.CuptiConfig(api="most"))
        with capture(tmp_path / "t", config=cfg):
            pass
    assert not _native.running()
