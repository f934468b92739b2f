"""NVTX through the injection library: one libcupti per process.

NVTX dlopens NVTX_INJECTION64_PATH by path. Pointing it at a libcupti file other than the
one the program links (torch's wheel copy) maps a second CUPTI, whose NVTX hooks feed a
collector nobody enabled. The injection library forwards NVTX to the copy already loaded.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tbdtrace import _native
from tbdtrace.collector.child_protocol import INJECT_LIB

CODE = """
import torch
torch.cuda.nvtx.range_push("step 0"); torch.cuda.nvtx.range_pop()
libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if l.rstrip().endswith(".so.13")
               or "libtbdtrace_inject" in l})
print("\\n".join(l for l in libs if "cupti" in l or "inject" in l))
"""


def _mapped(nvtx_path: str) -> list[str]:
    env = dict(os.environ, NVTX_INJECTION64_PATH=nvtx_path)
    r = subprocess.run(
        [sys.executable, "-c", CODE],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=True,
    )
    return r.stdout.split()


def test_nvtx_through_the_injection_library_shares_the_programs_libcupti() -> None:
    libs = _mapped(str(INJECT_LIB))
    assert str(INJECT_LIB) in libs  # NVTX loaded it
    cupti = [p for p in libs if "libcupti" in p]
    assert len(cupti) == 1, cupti


def test_a_libcupti_path_of_its_own_would_map_a_second_copy() -> None:
    # The failure the forwarding avoids, shown with the libcupti _native links when it is
    # another file than torch's.
    ours = _native.cupti_library_path()
    libs = _mapped(ours)
    cupti = sorted(p for p in libs if "libcupti" in p)
    torch_copy = [p for p in cupti if os.path.realpath(p) != os.path.realpath(ours)]
    if not torch_copy:
        return  # _native links torch's own file: one copy either way
    assert len(cupti) == 2


def test_injection_library_exports_the_nvtx_entry_points() -> None:
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(INJECT_LIB)], capture_output=True, text=True, check=True
    ).stdout
    names = {line.split()[-1] for line in out.splitlines() if line.strip()}
    assert {
        "InitializeInjection",
        "InitializeInjectionNvtx2",
        "InitializeInjectionNvtx",
        "InitializeInjectionNvtxExtension",
        # capture windows (tbdtrace.collector.window_child.InjectedWindows, through ctypes)
        "tbdtrace_collector_pause",
        "tbdtrace_collector_resume",
        "tbdtrace_collector_paused",
    } <= names


def test_window_entry_points_answer_without_a_session() -> None:
    """The window controller's ctypes calls: without a collector session (this process
    never initialized CUDA) they do nothing and say so; the seam test drives a session."""
    code = (
        "import ctypes, os, sys; lib = ctypes.CDLL(sys.argv[1]); "
        "print(lib.tbdtrace_collector_pause(), lib.tbdtrace_collector_resume(), "
        "lib.tbdtrace_collector_paused())"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(INJECT_LIB)], capture_output=True, text=True, check=True
    )
    assert r.stdout.split() == ["0", "0", "0"]
