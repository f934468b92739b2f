"""The tracker must not change what the program computes or when memory is freed."""

from __future__ import annotations

import gc
import time
from pathlib import Path

import pyarrow as pa
import pytest
import torch
from torch import nn

import tbdtrace
from tbdtrace.analysis.passes import memory
from tbdtrace.collector.memory import TorchMemoryTracker, profile

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3),
        nn.BatchNorm2d(8),
        nn.ReLU(inplace=True),
        nn.Flatten(),
        nn.Linear(8 * 14 * 14, 10),
        nn.Softmax(-1),
    )


def _grads(m: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    m.zero_grad()
    m(x).pow(2).sum().backward()
    return [p.grad.clone() for p in m.parameters() if p.grad is not None]


def test_gradients_unchanged() -> None:
    m, x = _model(), torch.randn(4, 3, 16, 16)
    want = _grads(m, x)
    t = TorchMemoryTracker()
    t.start()
    try:
        got = _grads(m, x)
    finally:
        t.stop()
    assert len(got) == len(want) == 6
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))


@pytest.mark.parametrize("tracked", [False, True])
def test_inplace_change_of_saved_tensor_still_raises(tracked: bool) -> None:
    t = TorchMemoryTracker()
    if tracked:
        t.start()
    try:
        a = torch.randn(5, requires_grad=True)
        b = a.sigmoid()  # saves its output
        b.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            b.sum().backward()
    finally:
        if tracked:
            t.stop()


def test_dropped_graph_frees_activations_without_gc(tmp_path: Path) -> None:
    m = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    gc.disable()
    try:
        with profile(tmp_path / "t", mode="exact"):  # the hooks' saved-tensor aliases
            x = torch.randn(256, 32)
            out = m(x)  # builds a graph holding saved activations...
            del out  # ...dropped without backward: freed by reference counting alone
    finally:
        gc.enable()
    tl = memory.timeline(tbdtrace.open(tmp_path / "t"))
    acts = tl.column("activations_bytes").to_pylist()
    assert max(acts) >= 256 * 64 * 4  # the ReLU output was saved
    assert acts[-1] == 0


def test_hooks_removed_after_stop() -> None:
    m = nn.Linear(4, 4)
    t = TorchMemoryTracker()
    t.start()
    t.stop()
    seen = len(t._obs.ptr)
    m(torch.randn(2, 4)).sum().backward()
    assert len(t._obs.ptr) == seen


def _ws_trace() -> tuple[pa.Table, pa.Table]:
    mem = tbdtrace.trace.to_table(
        "memory",
        {
            "ts_ns": [110, 120, 150, 160, 190, 250],
            "action": ["alloc", "alloc", "free", "alloc", "free", "free"],
            "level": ["allocated"] * 6,
            "bytes": [8, 16, 16, 32, 8, 32],
            "address": [1, 2, 2, 3, 1, 3],
            "device_type": ["cpu"] * 6,
            "tid": [7] * 6,
        },
    )
    ops = tbdtrace.trace.to_table(
        "ops",
        {
            "start_ns": [100, 115, 300],
            "end_ns": [200, 155, 400],
            "name": ["aten::outer", "aten::inner", "Optimizer.step"],
            "category": ["cpu_op", "cpu_op", "user_annotation"],
            "tid": [7, 7, 7],
        },
    )
    return mem, ops


def test_workspace_is_a_block_inside_one_op() -> None:
    mem, ops = _ws_trace()
    out = TorchMemoryTracker().classify(mem, ops).to_pylist()
    cats = {(r["address"], r["action"]): r["category"] for r in out}
    assert cats[(1, "alloc")] == cats[(1, "free")] == "workspace"  # inside aten::outer
    assert cats[(2, "alloc")] == "workspace"  # inside aten::inner
    assert cats[(3, "alloc")] == "other"  # outlives aten::outer


def test_workspace_needs_an_operator_not_an_annotation() -> None:
    mem, ops = _ws_trace()
    ops = ops.filter(pa.compute.equal(ops.column("category"), "user_annotation"))
    out = TorchMemoryTracker().classify(mem, ops)
    assert set(out.column("category").to_pylist()) == {"other"}
    other_thread = TorchMemoryTracker().classify(
        mem.set_column(mem.schema.get_field_index("tid"), "tid", pa.array([8] * 6, pa.int64())),
        _ws_trace()[1],
    )
    assert set(other_thread.column("category").to_pylist()) == {"other"}


def test_observation_labels_the_block_live_at_that_moment() -> None:
    """One address, three blocks over time: only the one live when seen is labelled."""
    w = torch.ones(16)
    ptr = w.untyped_storage().data_ptr()
    t = TorchMemoryTracker()
    before = time.time_ns()
    t.observe([w], "weights")
    after = time.time_ns()
    ms = 1_000_000
    rows = {  # block 1 ends 5 ms before; block 2 spans the observation; block 3 after
        "ts_ns": [before - 10 * ms, before - 5 * ms, before - 1, after + 5 * ms, after + 6 * ms],
        "action": ["alloc", "free", "alloc", "free", "alloc"],
        "level": ["allocated"] * 5,
        "bytes": [64] * 5,
        "address": [ptr] * 5,
        "device_type": ["cpu"] * 5,
    }
    out = t.classify(rows).to_pylist()
    assert [r["category"] for r in out] == ["other", "other", "weights", "weights", "other"]


def test_profile_refuses_a_non_trace_directory_before_running(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("user data")
    ran = False
    with (
        pytest.raises(tbdtrace.TraceError, match="exists and is not a tbdtrace trace"),
        profile(tmp_path),
    ):
        ran = True
    assert not ran
    assert (tmp_path / "keep.txt").read_text() == "user data"


def test_explicit_model_and_optimizer_without_gc_scan(tmp_path: Path) -> None:
    from tbdtrace.collector.memory import TrackerConfig
    from tests.collector.memory.models import MLP_PARAMS, mlp, mlp_batch, train

    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train(model, opt, mlp_batch(4), steps=1)  # state and gradients exist before capture
    with profile(tmp_path / "t", model=model, optimizer=opt, config=TrackerConfig(scan_gc=False)):
        pass
    tl = memory.timeline(tbdtrace.open(tmp_path / "t"))
    last = tl.slice(tl.num_rows - 1).to_pylist()[0]
    assert (last["weights_bytes"], last["gradients_bytes"], last["optimizer_state_bytes"]) == (
        4 * MLP_PARAMS,
    ) * 3
