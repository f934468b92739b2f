"""Caching-allocator history -> memory rows, and the capture bootstrap that records it.

The history format is the one ``torch.cuda.memory._snapshot()["device_traces"]`` gives
(actions, ``addr``, ``size``, ``stream``, ``time_us``); expected rows are worked out by
hand from the allocator's rules in the module docstring.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from tbdtrace import trace
from tbdtrace.collector.child_protocol import BOOTSTRAP_DIR
from tbdtrace.collector.injection import join_torch_memory
from tbdtrace.collector.memory.torch_cuda import MODE_ENV, SPOOL_ENV, history_rows

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

ROOT = Path(__file__).resolve().parents[3]
MB2 = 2 << 20


def e(action: str, addr: int, size: int, t_us: int, stream: int = 0) -> dict[str, object]:
    return {
        "action": action,
        "addr": addr,
        "size": size,
        "stream": stream,
        "time_us": t_us,
        "frames": [],
    }


def test_history_rows_follow_requests_and_fall_back_to_completions() -> None:
    dev0 = [
        e("segment_alloc", 0x1000, MB2, 10),
        e("alloc", 0x1000, 512, 11),
        e("alloc", 0x1200, 1024, 12),
        e("free_requested", 0x1000, 512, 13),
        e("free_completed", 0x1000, 512, 14),  # follows its request: no row
        e("snapshot", 0, 0, 15),
        e("alloc", 0x1000, 512, 16),  # the block reused
        e("free_completed", 0x1200, 1024, 17),  # its request fell out of the ring buffer
        e("segment_free", 0x1000, MB2, 18),
    ]
    dev1 = [e("alloc", 0x9000, 4096, 20, stream=7)]
    cols, stats = history_rows([dev0, dev1], pid=42)
    assert cols["ts_ns"] == [11_000, 12_000, 13_000, 16_000, 17_000, 20_000]
    assert cols["action"] == ["alloc", "alloc", "free", "alloc", "free", "alloc"]
    assert cols["bytes"] == [512, 1024, 512, 512, 1024, 4096]
    assert cols["address"] == [0x1000, 0x1200, 0x1000, 0x1000, 0x1200, 0x9000]
    assert cols["device_id"] == [0, 0, 0, 0, 0, 1]
    assert cols["stream_id"] == [0, 0, 0, 0, 0, 7]
    assert cols["total_allocated_bytes"] == [512, 1536, 1024, 1536, 512, 4096]
    assert cols["total_reserved_bytes"] == [MB2] * 5 + [0]
    assert set(cols["level"]) == {"allocated"} and set(cols["device_type"]) == {"cuda"}
    assert set(cols["pid"]) == {42}
    assert stats["entries"] == 10
    assert stats["actions"] == {
        "segment_alloc": 1,
        "alloc": 4,
        "free_requested": 1,
        "free_completed": 2,
        "snapshot": 1,
        "segment_free": 1,
    }
    assert [d["device_id"] for d in stats["devices"]] == [0, 1]
    # The rows make a valid memory table.
    t = trace.to_table("memory", cols, num_rows=len(cols["ts_ns"]))
    assert t.num_rows == 6


def _bootstrapped(
    code: str, spool: Path, mode: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(BOOTSTRAP_DIR), TBDTRACE_PACKAGE_ROOT=str(ROOT))
    env[SPOOL_ENV] = str(spool)
    env.pop(MODE_ENV, None)
    if mode is not None:
        env[MODE_ENV] = mode
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        cwd=spool,
    )


def test_bootstrap_leaves_programs_without_torch_alone(tmp_path: Path) -> None:
    r = _bootstrapped(
        "import sys; print('torch' in sys.modules, 'tbdtrace' in sys.modules)", tmp_path
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]


@pytest.mark.parametrize(("mode", "module_hooks"), [(None, "0"), ("posthoc", "0"), ("exact", "1")])
def test_bootstrap_starts_tracking_when_the_program_imports_torch(
    tmp_path: Path, mode: str | None, module_hooks: str
) -> None:
    """Post hoc (the default) adds one optimizer step post-hook and no module hook; exact
    adds the tracker's module hooks too."""
    code = (
        "import torch, sys\n"
        "from torch.nn.modules import module\n"
        "from torch.optim import optimizer\n"
        "hooks = len(module._global_forward_pre_hooks)\n"
        "post = len(optimizer._global_optimizer_post_hooks)\n"
        "print('tbdtrace.collector.memory.torch_cuda' in sys.modules, hooks, post)\n"
        "m = torch.nn.Linear(4, 2); m(torch.ones(3, 4)).sum().backward()\n"
    )
    r = _bootstrapped(code, tmp_path, mode)
    assert r.returncode == 0, r.stderr
    post = "2" if mode == "exact" else "1"  # exact: the tracker's and the snapshots' hooks
    assert r.stdout.split() == ["True", module_hooks, post]
    assert r.stderr == ""
    # CUDA never initialized (no GPU here, or none used): nothing to write.
    assert not list(tmp_path.glob("torchmem-*"))


def test_join_torch_memory_appends_the_allocated_level(tmp_path: Path) -> None:
    cols, _ = history_rows(
        [[e("alloc", 0x1000, 512, 5), e("free_requested", 0x1000, 512, 6)]], pid=7
    )
    part = trace.to_table("memory", cols, num_rows=2)
    trace.write(
        tmp_path / "torchmem-7",
        {"memory": part},
        {"source": "torch_cuda_history", "extra": {"torch_cuda_history": {"entries": 2}}},
    )
    cupti = {
        "ts_ns": pa.array([1, 9], pa.int64()),
        "action": pa.array(["alloc", "free"]),
        "level": pa.array(["reserved", "reserved"]),
        "bytes": pa.array([MB2, MB2]),
        "address": pa.array([0x1000, 0x1000], pa.uint64()),
    }
    tables: dict[str, object] = {"memory": cupti}
    extra: dict[str, object] = {}
    join_torch_memory(tmp_path, tables, extra)  # type: ignore[arg-type]
    mem = tables["memory"]
    assert isinstance(mem, pa.Table)
    assert mem.column("level").to_pylist() == ["reserved", "reserved", "allocated", "allocated"]
    assert mem.column("bytes").to_pylist() == [MB2, MB2, 512, 512]
    assert extra["torch_cuda_history"] == [{"entries": 2, "pid": 7}]
