"""The trainer callbacks with the real trainers: a tiny PyTorch Lightning module and a tiny
Hugging Face BERT (built from a config: nothing is downloaded) train on the CPU under an
in-process capture whose windows the callback drives. Expected values come from the plan
(which steps) and from the models themselves (one ``aten::linear`` per ``nn.Linear``
module per forward pass)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import tbdtrace
from tbdtrace import trace
from tbdtrace.collector.run import CaptureConfig
from tbdtrace.collector.torch_backend import TorchConfig

pytestmark = [
    pytest.mark.heavy,
    # Lightning 2.6.6 on torch 2.14 (its pytree use), and its advice on DataLoader workers.
    pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning"),
    pytest.mark.filterwarnings("ignore:.*does not have many workers.*"),
]

# Memory labelling and FLOPs are not what these tests are about: less work per window.
CONFIG = CaptureConfig(backend="torch", torch=TorchConfig(profile_memory=False, with_flops=False))


def linear_modules(model: torch.nn.Module) -> int:
    return sum(isinstance(m, torch.nn.Linear) for m in model.modules())


def per_step(tr: trace.Trace, op: str) -> dict[int, int]:
    """``op`` rows inside each step of the trace's steps table."""
    steps = tr.table("steps").to_pylist()
    ops = tr.table("ops", ["name", "start_ns"]).to_pylist()
    return {
        s["step"]: sum(
            o["name"] == op and s["start_ns"] <= o["start_ns"] <= s["end_ns"] for o in ops
        )
        for s in steps
    }


def test_lightning_callback_records_the_scheduled_steps(tmp_path: Path) -> None:
    import lightning.pytorch as pl

    from tbdtrace.integrations.lightning import TbdtraceCallback

    class Tiny(pl.LightningModule):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(8, 2)

        def training_step(self, batch: Any, _i: int) -> torch.Tensor:
            x, y = batch
            return torch.nn.functional.cross_entropy(self.layer(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(64, 8, generator=g), torch.arange(64) % 2)
    # wait 1, warm-up 1, active 2, twice: steps 2-3 and 6-7 of 0..7 (1 and 5 discarded).
    cb = TbdtraceCallback(
        tmp_path / "t",
        schedule=tbdtrace.schedule(wait=1, warmup=1, active=2, repeat=2),
        config=CONFIG,
    )
    model = Tiny()
    pl.Trainer(
        max_steps=8,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[cb],
    ).fit(model, torch.utils.data.DataLoader(data, batch_size=8))
    assert cb.path == tmp_path / "t"
    tr = tbdtrace.open(cb.path)
    wins = [
        (w["reason"], w["first_step"], w["last_step"], w["complete"]) for w in tr.meta["windows"]
    ]
    assert wins == [("schedule", 2, 3, True), ("schedule", 6, 7, True)]
    assert tr.table("steps").column("source").to_pylist() == ["lightning"] * 4
    one = linear_modules(model)
    assert per_step(tr, "aten::linear") == {2: one, 3: one, 6: one, 7: one}
    # The warm-up steps were collected and discarded: no forward pass outside the four.
    names = tr.table("ops", ["name"]).column("name").to_pylist()
    assert names.count("aten::linear") == 4 * one


def test_huggingface_callback_records_the_steps(tmp_path: Path) -> None:
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        Trainer,
        TrainingArguments,
    )

    from tbdtrace.integrations.huggingface import TbdtraceTrainerCallback

    cfg = BertConfig(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
    )
    torch.manual_seed(0)
    model = BertForSequenceClassification(cfg)

    class Data(torch.utils.data.Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 32

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            g = torch.Generator().manual_seed(i)
            return {
                "input_ids": torch.randint(0, 64, (8,), generator=g),
                "labels": torch.tensor(i % 2),
            }

    cb = TbdtraceTrainerCallback(tmp_path / "t", steps=(2, 4), config=CONFIG)
    args = TrainingArguments(
        output_dir=str(tmp_path / "hf"),
        max_steps=6,
        per_device_train_batch_size=4,
        report_to=[],
        use_cpu=True,
        logging_strategy="no",
        save_strategy="no",
        disable_tqdm=True,
    )
    Trainer(model=model, args=args, train_dataset=Data(), callbacks=[cb]).train()
    tr = tbdtrace.open(tmp_path / "t")
    (w,) = tr.meta["windows"]
    assert (w["reason"], w["first_step"], w["last_step"], w["complete"]) == ("steps", 2, 4, True)
    assert tr.table("steps").column("step").to_pylist() == [2, 3, 4]
    n = linear_modules(model)  # each nn.Linear runs once per forward pass
    assert per_step(tr, "aten::linear") == {2: n, 3: n, 4: n}
    assert tr.table("ops", ["name"]).column("name").to_pylist().count("aten::linear") == 3 * n


def test_callback_without_a_capture_says_what_to_do() -> None:
    from tbdtrace.errors import TraceError
    from tbdtrace.integrations.session import TrainerSession

    with pytest.raises(TraceError, match="no capture window to drive"):
        TrainerSession("lightning", None, None, None, None, "auto", None).begin_run()
