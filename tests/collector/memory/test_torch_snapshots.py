"""Step-boundary snapshots on real PyTorch (CPU): what is read, when, and that the
recorder neither keeps tensors alive nor fails a training step."""

from __future__ import annotations

import gc
import weakref

import torch
from torch.optim import optimizer as optim_module

from tbdtrace.collector.memory.posthoc import GRADIENTS, OPTIMIZER_STATE, WEIGHTS
from tbdtrace.collector.memory.torch_snapshots import SnapshotRecorder
from tests.collector.memory.models import bn_cnn, cnn_batch, train


def _by_time(rec: SnapshotRecorder) -> dict[int, dict[int, set[int]]]:
    s = rec.snapshots()
    out: dict[int, dict[int, set[int]]] = {}
    for t, a, c in zip(s.ts_ns.tolist(), s.address.tolist(), s.category.tolist(), strict=True):
        out.setdefault(t, {}).setdefault(c, set()).add(a)
    return out


def test_one_snapshot_per_optimizer_step() -> None:
    gc.collect()
    torch.manual_seed(0)
    model = bn_cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rec = SnapshotRecorder(model, opt, scan_gc=False)
    hooks = len(optim_module._global_optimizer_post_hooks)
    rec.start()
    assert len(optim_module._global_optimizer_post_hooks) == hooks + 1
    grads_seen = []
    train(
        model,
        opt,
        cnn_batch(2),
        steps=3,
        on_step=lambda: grads_seen.append({p.grad.data_ptr() for p in model.parameters()}),
    )
    rec.stop()
    assert len(optim_module._global_optimizer_post_hooks) == hooks
    params = {p.data_ptr() for p in model.parameters()}
    buffers = {b.data_ptr() for b in model.buffers()}
    momentum = {s["momentum_buffer"].data_ptr() for s in opt.state.values()}
    snaps = _by_time(rec)
    times = sorted(snaps)
    assert len(times) == 5  # start, 3 optimizer steps, stop
    start, steps, stop = snaps[times[0]], [snaps[t] for t in times[1:4]], snaps[times[4]]
    assert start[WEIGHTS] == params | buffers and GRADIENTS not in start
    for i, s in enumerate(steps):
        assert s[GRADIENTS] == grads_seen[i]
        assert s[OPTIMIZER_STATE] == momentum
        assert s[WEIGHTS] == params  # buffers: read at start, where the model existed
    assert stop[WEIGHTS] == params | buffers and stop[GRADIENTS] == grads_seen[-1]
    st = rec.stats()
    assert st["optimizer_steps"] == 3 and st["snapshot_times"] == 5 and st["errors"] == []
    assert st["hook_thread_ns"] > 0


def test_finds_modules_made_after_start_and_keeps_nothing_alive() -> None:
    gc.collect()
    rec = SnapshotRecorder()
    rec.start()
    model = bn_cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train(model, opt, cnn_batch(2), steps=1)
    buffers = {b.data_ptr() for b in model.buffers()}
    ref = weakref.ref(model)
    del model, opt
    gc.collect()
    assert ref() is None
    rec.stop()
    s = rec.snapshots()
    step_weights = set(s.address[(s.category == WEIGHTS) & (s.ts_ns < rec.stop_ns)].tolist())
    assert buffers <= step_weights  # found with gc at the first step


class _NoStorage(torch.Tensor):
    """A tensor whose data pointer cannot be read (as a sparse or nested tensor's)."""

    def data_ptr(self) -> int:
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")


def test_a_failing_snapshot_never_fails_the_step() -> None:
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.state[model.weight]["odd"] = torch.zeros(3).as_subclass(_NoStorage)
    rec = SnapshotRecorder(model, opt, scan_gc=False)
    rec.start()  # the start snapshot skips it
    model(torch.ones(1, 4)).sum().backward()
    before = model.weight.detach().clone()
    opt.step()  # its data_ptr() raises inside the hook
    rec.stop()
    assert not torch.equal(before, model.weight)  # the step happened
    assert rec.steps == 1 and rec.stats()["errors"][0].startswith("RuntimeError: Cannot access")
