"""What every PyTorch workload shares: device choice, seeding, the training loop hookup,
synthetic, learnable data and its input pipeline.

Synthetic data is made on the host (CPU tensors) from seeded generators, so nothing is
read or downloaded at run time. :func:`batches` feeds it to the training loop as
``--data`` says: ``host`` through a ``torch.utils.data.DataLoader`` whose worker
processes build the batches ahead of the training thread (pinned memory and a copy to the
GPU on a side stream, one batch ahead, on CUDA); ``device`` as a pool of
:data:`harness.POOL_BATCHES` batches built once before the first step and kept on the
training device. Either way no batch is built inside a timed step.
"""

from __future__ import annotations

import itertools
import os
import random
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numpy as np
import torch

from workloads import dimensions, harness, quality

FRAMEWORK = "pytorch"
B = TypeVar("B")


def device_for(args: harness.HarnessArgs) -> torch.device:
    """``--device auto`` is cuda when available, else cpu; an unusable cuda exits 1."""
    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            "workloads: --device cuda but no CUDA device is visible to PyTorch; "
            "use --device cpu or auto",
            file=sys.stderr,
        )
        raise SystemExit(1)
    if args.device == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda")


def seed_all(seed: int) -> torch.Generator:
    """Seed Python and torch RNGs; return a CPU generator for the synthetic data."""
    random.seed(seed)
    torch.manual_seed(seed)
    gen = torch.Generator()
    gen.manual_seed(seed + 1)
    return gen


def setup(args: harness.HarnessArgs) -> tuple[torch.device, torch.Generator]:
    """Device and data generator for a run (models are built after this, so seeded).

    With ``--nproc N`` (N > 1) the first call starts N ranks of this same workload through
    ``torch.distributed.run --standalone`` and exits with its status; in each rank (a
    process with ``RANK`` and ``WORLD_SIZE`` > 1, so a workload started by the user's own
    torchrun is a rank too) it
    joins the process group (gloo on CPU, NCCL on GPU, one GPU per local rank) and seeds the
    data with ``seed + rank`` (the model's initial weights are rank 0's: DDP broadcasts
    them). Wrap the model with :func:`distribute`."""
    _check_precision(args)
    if args.nproc > 1 and "RANK" not in os.environ:
        _launch_ranks(args.nproc)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and "RANK" in os.environ:
        import torch.distributed as dist

        device = device_for(args)
        if device.type == "cuda":
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        return device, seed_all(args.seed + dist.get_rank())
    return device_for(args), seed_all(args.seed)


def _check_precision(args: harness.HarnessArgs) -> None:
    """Refuse a GPU-only precision on the CPU (one line, exit 2); turn TF32 on or off."""
    device = device_for(args)
    why = dimensions.unsupported(FRAMEWORK, "", 1, args.precision, False, device.type)
    if why:
        print(f"workloads: {why}", file=sys.stderr)
        raise SystemExit(2)
    if device.type == "cuda":  # fp32 means fp32: PyTorch's own TF32 defaults vary
        tf32 = args.precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32


def autocast_dtype(args: harness.HarnessArgs) -> torch.dtype | None:
    """The autocast dtype of ``--precision`` (bf16, fp16), None for fp32 and tf32."""
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)


def _launch_ranks(nproc: int) -> None:
    """Run this workload's module again as ``nproc`` ranks through torch.distributed.run
    (``--standalone``), whose launcher runs in this process: torch is loaded here already,
    and a launcher process of its own would start Python and load torch once more only to
    wait on the ranks. Exits 0 when every rank succeeded; a failed rank raises the
    launcher's ChildFailedError (exit 1 with its report), as ``python -m
    torch.distributed.run`` does."""
    main = sys.modules["__main__"]
    spec = getattr(main, "__spec__", None)
    if spec is None or not spec.name:
        print(
            "workloads: --nproc needs the workload run as a module (python -m ...)", file=sys.stderr
        )
        raise SystemExit(2)
    # torch.distributed.run gives every rank one thread when OMP_NUM_THREADS is unset; a
    # share of the cores each keeps N ranks on the cores one rank had (fair scaling).
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    from torch.distributed import run as launcher

    launcher.main(
        [
            "--standalone",
            "--nproc_per_node",
            str(nproc),
            "-m",
            spec.name,
            *_without_nproc(sys.argv[1:]),
        ]
    )
    raise SystemExit(0)


def _without_nproc(argv: list[str]) -> list[str]:
    """``argv`` less ``--nproc N`` / ``--nproc=N`` (the launcher's own option prefix would
    take it; the ranks know they are ranks from WORLD_SIZE)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--nproc":
            skip = True
        elif not a.startswith("--nproc="):
            out.append(a)
    return out


def distribute(
    net: torch.nn.Module, device: torch.device, args: harness.HarnessArgs | None = None
) -> torch.nn.Module:
    """``net`` as DistributedDataParallel when the process is a rank (``--nproc``), else
    ``net`` itself; compiled with ``torch.compile`` when ``args.compile`` (after the DDP
    wrap, as PyTorch's DDP documentation has it, so DDP's bucketing sees the compiled
    graph's gradients)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        from torch.nn.parallel import DistributedDataParallel

        net = DistributedDataParallel(
            net, device_ids=[device.index] if device.type == "cuda" else None
        )
    if args is not None and args.compile:
        net = torch.compile(net)  # type: ignore[assignment]
    return net


def run(
    model: str,
    args: harness.HarnessArgs,
    device: torch.device,
    step_fn: Callable[[int], float],
    samples_per_step: int | None = None,
    evaluate: Callable[[], float] | None = None,
    target: harness.Target | None = None,
) -> harness.StepRecorder:
    """Train through the harness; steps end after the device finishes their work.
    ``evaluate`` and ``target``: the held-out quality (see :func:`harness.train`)."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    dtype = autocast_dtype(args)
    if dtype is not None:
        plain = step_fn

        def step_fn(i: int) -> float:
            # Mixed precision: ops autocast lists run in ``dtype``, weights stay float32.
            with torch.autocast(device.type, dtype=dtype):
                return plain(i)

    return harness.train(model, FRAMEWORK, args, step_fn, sync, samples_per_step, evaluate, target)


def held_out_generator(args: harness.HarnessArgs) -> torch.Generator:
    """The held-out split's generator: seeded apart from the training data's
    (``seed + 1``), so no held-out sample is a training sample."""
    gen = torch.Generator()
    gen.manual_seed(args.seed + 1_000_003)
    return gen


def class_templates(n_classes: int, channels: int, size: int, gen: torch.Generator) -> torch.Tensor:
    """One smooth random image per class, ``[n_classes, channels, size, size]``, in [-1, 1].

    Upsampled from a 4x4 grid, so classes differ in coarse layout and colour, which
    convolutional nets pick up within a few steps.
    """
    coarse = torch.rand(n_classes, channels, 4, 4, generator=gen) * 2 - 1
    return torch.nn.functional.interpolate(
        coarse, size=(size, size), mode="bilinear", align_corners=False
    )


def image_batch(
    templates: torch.Tensor, batch: int, gen: torch.Generator, noise: float = 0.5
) -> tuple[torch.Tensor, torch.Tensor]:
    """Images = class template + Gaussian noise; returns (images, labels) on the CPU."""
    labels = torch.randint(0, templates.shape[0], (batch,), generator=gen)
    x = templates[labels] + noise * torch.randn((batch, *templates.shape[1:]), generator=gen)
    return x, labels


def translation_batch(
    batch: int, min_len: int, max_len: int, vocab: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A reversal task: target = source reversed with each token shifted by one.

    Token ids: 0 = pad, 1 = begin, 2 = end, 3.. = words. Returns (src [B, S], src_len [B],
    tgt [B, T], tgt_len [B]); tgt starts with begin and ends with end, padded with 0.
    """
    words = vocab - 3
    lens = torch.randint(min_len, max_len + 1, (batch,), generator=gen)
    src = torch.zeros(batch, max_len, dtype=torch.long)
    tgt = torch.zeros(batch, max_len + 2, dtype=torch.long)
    for i, n in enumerate(lens.tolist()):
        toks = torch.randint(0, words, (n,), generator=gen)
        src[i, :n] = toks + 3
        tgt[i, 0] = 1
        tgt[i, 1 : n + 1] = (toks.flip(0) + 1) % words + 3
        tgt[i, n + 1] = 2
    return src, lens, tgt, lens + 2


HELD_OUT = 64  # held-out samples per evaluation (a fixed set, drawn once)


def classifier_eval(
    net: torch.nn.Module, templates: torch.Tensor, device: torch.device, args: harness.HarnessArgs
) -> Callable[[], float]:
    """Top-1 accuracy on a fixed held-out set of :data:`HELD_OUT` images (eval mode)."""
    x, y = image_batch(templates, HELD_OUT, held_out_generator(args))

    def evaluate() -> float:
        net.eval()
        with torch.no_grad():
            out = net(x.to(device))
            pred = getattr(out, "logits", out).argmax(-1).cpu()
        net.train()
        return quality.accuracy(pred.numpy(), y.numpy())

    return evaluate


def translation_eval(
    decode_step: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    net: torch.nn.Module,
    min_len: int,
    max_len: int,
    vocab: int,
    device: torch.device,
    args: harness.HarnessArgs,
) -> Callable[[], float]:
    """Corpus BLEU of greedy decoding on :data:`HELD_OUT` held-out sentences
    (:func:`quality.greedy_translation_bleu`, shared with the other frameworks).

    ``decode_step(src, src_len, ys) -> logits [B, T, vocab]`` runs the teacher-forced
    model on the target prefix ``ys``.
    """
    src, src_len, tgt, tgt_len = translation_batch(
        HELD_OUT, min_len, max_len, vocab, held_out_generator(args)
    )
    s, sl = src.to(device), src_len.to(device)

    def logits(_s: np.ndarray, _sl: np.ndarray, ys: np.ndarray) -> np.ndarray:
        y = torch.as_tensor(ys, dtype=torch.long, device=device)
        return decode_step(s, sl, y).float().cpu().numpy()

    def evaluate() -> float:
        net.eval()
        with torch.no_grad():
            got = quality.greedy_translation_bleu(
                logits, src.numpy(), src_len.numpy(), tgt.numpy(), tgt_len.numpy()
            )
        net.train()
        return got

    return evaluate


def batch_generator(base: int, index: int) -> torch.Generator:
    """The generator of training batch ``index``: each batch has its own seed (``base +
    index``), so the data is the same whichever worker builds it and however many there
    are."""
    gen = torch.Generator()
    gen.manual_seed(base + index)
    return gen


class SyntheticBatches(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
    """Training batches ``make(batch_generator(base, i))`` for i = 0, 1, ... (endless).

    With DataLoader workers, worker ``w`` of ``n`` builds batches w, w + n, ...; the
    DataLoader takes them from the workers in turn, so they arrive in index order."""

    def __init__(self, make: Callable[[torch.Generator], Any], base: int) -> None:
        self.make, self.base = make, base

    def __iter__(self) -> Iterator[Any]:
        info = torch.utils.data.get_worker_info()
        first, stride = (0, 1) if info is None else (info.id, info.num_workers)
        for i in itertools.count(first, stride):
            yield self.make(batch_generator(self.base, i))


def to_device(batch: B, device: torch.device, non_blocking: bool = False) -> B:
    """``batch`` (tensors in tuples, lists and dicts) with every tensor on ``device``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)  # type: ignore[return-value]
    if isinstance(batch, dict):
        return {k: to_device(v, device, non_blocking) for k, v in batch.items()}  # type: ignore[return-value]
    if isinstance(batch, list | tuple):
        return type(batch)(to_device(v, device, non_blocking) for v in batch)  # type: ignore[return-value]
    return batch


def _tensors(batch: Any) -> Iterator[torch.Tensor]:
    if isinstance(batch, torch.Tensor):
        yield batch
    elif isinstance(batch, dict):
        for v in batch.values():
            yield from _tensors(v)
    elif isinstance(batch, list | tuple):
        for v in batch:
            yield from _tensors(v)


class CudaPrefetch:
    """Batches from ``host`` (pinned CPU tensors) copied to ``device`` on a side stream one
    batch ahead: the copy of batch i + 1 overlaps step i's compute; the training stream
    waits for a batch's copy only when it takes that batch."""

    def __init__(self, host: Iterator[Any], device: torch.device) -> None:
        self._host, self._device = host, device
        self._stream = torch.cuda.Stream(device)
        self._next = self._load()

    def _load(self) -> Any:
        batch = next(self._host)
        with torch.cuda.stream(self._stream):
            return to_device(batch, self._device, non_blocking=True)

    def __iter__(self) -> CudaPrefetch:
        return self

    def __next__(self) -> Any:
        current = torch.cuda.current_stream(self._device)
        current.wait_stream(self._stream)
        batch = self._next
        for t in _tensors(batch):  # allocated on the side stream, used on this one
            t.record_stream(current)
        self._next = self._load()
        return batch


def batches(
    make: Callable[[torch.Generator], B],
    args: harness.HarnessArgs,
    device: torch.device,
    gen: torch.Generator,
    workers: int = harness.HOST_WORKERS,
) -> Iterator[B]:
    """The training batches of a run, on ``device``, as ``args.data`` says (see the module
    docstring): ``make(generator)`` builds one batch of CPU tensors (tuples, lists and
    dicts of them) from its own generator; call ``next()`` on the result in each step.

    The batches' seeds come from ``gen`` (the run's data generator, seeded by seed and
    rank), so a run's data is the same in both modes (``device`` cycles the first
    :data:`harness.POOL_BATCHES` of the ``host`` sequence) and whatever ``workers`` is.
    ``host`` starts the DataLoader's ``workers`` processes here, before the first step
    (forked: ``make`` may be a closure; each worker runs with one thread)."""
    base = int(torch.randint(0, 2**62, (1,), generator=gen))
    if args.data == "device":
        pool = [
            to_device(make(batch_generator(base, i)), device) for i in range(harness.POOL_BATCHES)
        ]
        return itertools.cycle(pool)
    cuda = device.type == "cuda"
    loader = torch.utils.data.DataLoader(
        SyntheticBatches(make, base),
        batch_size=None,  # each item is a whole batch
        num_workers=workers,
        pin_memory=cuda,
        prefetch_factor=harness.HOST_PREFETCH,
        multiprocessing_context="fork",
        generator=batch_generator(base, -1),  # its worker seeds: not the global RNG's draws
    )
    host: Iterator[B] = iter(loader)
    # CPU: the workers' tensors; each fetch marked (and --data-delay-ms later).
    return harness.fed(CudaPrefetch(host, device) if cuda else host, args, FRAMEWORK)
