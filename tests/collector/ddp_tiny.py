"""A tiny DDP training (gloo, CPU) for capture tests: ``torchrun --nproc_per_node 2
ddp_tiny.py`` or ``python ddp_tiny.py --spawn 2``.

Each rank writes its steps through the workload harness's step recorder (the steps file
``tbdtrace capture`` names). ``TINY_SLEEP="RANK:STEP:SECONDS"`` sleeps that long on that
rank inside that step, before the backward pass: an injected straggler.
"""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from workloads.harness import StepRecorder  # noqa: E402

STEPS = int(os.environ.get("TINY_STEPS", "6"))


def train(rank: int, world: int) -> None:
    if not dist.is_initialized():
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sleep = os.environ.get("TINY_SLEEP", "")
    s_rank, s_step, s_sec = (sleep.split(":") + ["", "", ""])[:3] if sleep else ("-1", "-1", "0")
    rec = StepRecorder("ddp_tiny", "pytorch")
    x = torch.randn(16, 64, generator=torch.Generator().manual_seed(rank))
    y = torch.randint(0, 8, (16,), generator=torch.Generator().manual_seed(rank))
    try:
        for i in range(STEPS):
            with rec.step(i, 16, warmup=False) as r:
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x), y)
                if rank == int(s_rank) and i == int(s_step):
                    time.sleep(float(s_sec))
                loss.backward()
                opt.step()
                r["loss"] = loss.item()
    finally:
        rec.close()
    dist.barrier()
    dist.destroy_process_group()


def _spawned(rank: int, world: int) -> None:
    train(rank, world)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--spawn":
        n = int(sys.argv[2])
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
        torch.multiprocessing.spawn(_spawned, args=(n,), nprocs=n)
    else:
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
