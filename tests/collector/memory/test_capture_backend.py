"""The classifier inside ``tbdtrace.capture(backend="torch")``: same known answers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import tbdtrace
from tbdtrace.analysis.passes import memory
from tbdtrace.collector import CaptureConfig
from tbdtrace.collector.torch_backend import TorchConfig
from tests.collector.memory.models import MLP_PARAMS, MLP_TENSORS, mlp, mlp_batch, train

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)


@pytest.mark.parametrize("mode", ["posthoc", "exact"])
def test_capture_backend_torch_labels_memory(tmp_path: Path, mode: str) -> None:
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.Adam(model.parameters())
    batch = mlp_batch(4)
    train(model, opt, batch, steps=1)  # gradients and state exist before capture
    cfg = CaptureConfig(torch=TorchConfig(torch_memory=mode))
    with tbdtrace.capture(tmp_path / "t", backend="torch", config=cfg):
        train(model, opt, batch, steps=2)
    tr = tbdtrace.open(tmp_path / "t")
    assert tr.meta["backend"] == "torch"
    assert tr.meta["extra"]["torch_memory"]["mode"] == mode
    tl = memory.timeline(tr)
    last = tl.slice(tl.num_rows - 1).to_pylist()[0]
    assert last["weights_bytes"] == 4 * MLP_PARAMS
    assert last["gradients_bytes"] == 4 * MLP_PARAMS
    assert last["optimizer_state_bytes"] == 8 * MLP_PARAMS + 4 * MLP_TENSORS
    assert max(tl.column("gradients_bytes").to_pylist()) == 4 * MLP_PARAMS
    assert max(tl.column("activations_bytes").to_pylist()) > 0
    cats = set(tr.table("memory", ["category"]).column("category").to_pylist())
    assert None not in cats


def test_capture_backend_torch_memory_off(tmp_path: Path) -> None:
    cfg = CaptureConfig(torch=TorchConfig(torch_memory="off"))
    with tbdtrace.capture(tmp_path / "t", backend="torch", config=cfg):
        train(mlp(), None, mlp_batch(4), steps=1)
    tr = tbdtrace.open(tmp_path / "t")
    assert tr.meta["extra"]["torch_memory"] == {"mode": "off"}
    cats = set(tr.table("memory", ["category"]).column("category").to_pylist())
    assert cats <= {None}
