"""Step-boundary snapshots on real PyTorch (CPU): what is read, when, and that the
recorder neither keeps tensors alive nor fails a training step."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
from torch.optim import optimizer as optim_module

from tbdtrace.collector.memory.posthoc import GRADIENTS, OPTIMIZER_STATE, WEIGHTS
from tbdtrace.collector.memory.torch_snapshots import SnapshotRecorder
from tests.collector.memory.models import bn_cnn, cnn_batch, train

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)


def _by_time(rec: SnapshotRecorder) -> dict[int, dict[int, set[int]]]:
    s = rec.snapshots()
    out: dict[int, dict[int, set[int]]] = {}
    for t, a, c in zip(s.ts_ns.tolist(), s.address.tolist(), s.category.tolist(), strict=True):
        out.setdefault(t, {}).setdefault(c, set()).add(a)
    return out


def test_snapshots_at_an_optimizers_first_second_fourth_step() -> None:
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
        steps=5,
        on_step=lambda: grads_seen.append({p.grad.data_ptr() for p in model.parameters()}),
    )
    rec.stop()
    assert len(optim_module._global_optimizer_post_hooks) == hooks
    params = {p.data_ptr() for p in model.parameters()}
    buffers = {b.data_ptr() for b in model.buffers()}
    momentum = {s["momentum_buffer"].data_ptr() for s in opt.state.values()}
    snaps = _by_time(rec)
    times = sorted(snaps)
    assert len(times) == 5  # start, the 1st, 2nd and 4th step, stop
    start, stop = snaps[times[0]], snaps[times[-1]]
    assert start[WEIGHTS] == params | buffers and GRADIENTS not in start
    for s, step in zip((snaps[t] for t in times[1:4]), (0, 1, 3), strict=True):
        assert s[GRADIENTS] == grads_seen[step]
        assert s[OPTIMIZER_STATE] == momentum
        assert s[WEIGHTS] == params  # buffers: read at start, where the model existed
    assert stop[WEIGHTS] == params | buffers and stop[GRADIENTS] == grads_seen[-1]
    st = rec.stats()
    assert st["optimizer_steps"] == 5 and st["snapshot_times"] == 5 and st["errors"] == []
    assert len(rec.hook_thread_ns) == 5 and st["hook_thread_ns"] == sum(rec.hook_thread_ns)


def test_each_optimizer_has_its_own_schedule() -> None:
    a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    oa = torch.optim.SGD(a.parameters(), lr=0.1)
    ob = torch.optim.SGD(b.parameters(), lr=0.1)
    rec = SnapshotRecorder(scan_gc=False)
    rec.start()
    for _ in range(3):  # alternating, as a GAN's two optimizers do
        for m, o in ((a, oa), (b, ob)):
            m(torch.ones(1, 2)).sum().backward()
            o.step()
    rec.stop()
    s = rec.snapshots()
    got = {}
    for p in (*a.parameters(), *b.parameters()):
        got[p.data_ptr()] = int(((s.address == p.data_ptr()) & (s.category == WEIGHTS)).sum())
    assert set(got.values()) == {2}  # each optimizer's 1st and 2nd step, not its 3rd


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
    assert buffers <= step_weights  # registered while built, read at the first step
    st = rec.stats()
    # conv, batch norm, linear, and the loss (CrossEntropyLoss registers a None `weight`)
    assert st["gc_scans"] == 0 and st["modules_registered"] == 4


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
