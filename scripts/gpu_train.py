"""ResNet-50 training steps for the GPU check (scripts/gpu_check.sh), one mode per run.

    python scripts/gpu_train.py MODE STEPS BATCH OUT_JSON

MODE: ``plain`` (no tool), ``capture`` (run under ``tbdtrace capture``: nothing differs in
here), ``profile`` (torch.profiler around the measured steps, Chrome trace next to
OUT_JSON), ``inproc`` (``tbdtrace.capture(..., backend="cupti")`` around the measured
steps, trace next to OUT_JSON).

Every step runs inside an NVTX range ``step N`` and ends with ``loss.item()``, so its GPU
work ends inside the range; warm-up steps are numbered -1, -2, -3. Writes per-step wall
times, throughput, the model's exact sizes (parameters, buffers, momentum, each rounded
as the caching allocator rounds) and the allocator's own totals to OUT_JSON.
"""

from __future__ import annotations

import json
import pickle
import statistics
import sys
import time
from pathlib import Path

import torch
import torchvision


def round512(n: int) -> int:
    return max(512, -(-n // 512) * 512)


def storage_bytes(tensors: list[torch.Tensor]) -> tuple[int, int]:
    """(sum of exact bytes, sum of 512-rounded bytes) over distinct storages."""
    seen: dict[int, int] = {}
    for t in tensors:
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values()), sum(round512(b) for b in seen.values())


def main() -> None:
    mode, steps, batch, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    if mode == "inproc":
        import tbdtrace.collector  # noqa: F401 - before the first NVTX call (docs/COLLECTOR.md)
    torch.backends.cudnn.benchmark = False  # the same kernels in every run
    dev = torch.device("cuda")
    model = torchvision.models.resnet50().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, 224, 224, device=dev)
    y = torch.randint(0, 1000, (batch,), device=dev)
    lossf = torch.nn.CrossEntropyLoss()

    def step(i: int) -> float:
        t0 = time.perf_counter()
        torch.cuda.nvtx.range_push(f"step {i}")
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
        torch.cuda.nvtx.range_pop()
        return time.perf_counter() - t0

    for i in range(3):  # warm-up: allocator, cuBLAS/cuDNN handles, momentum buffers
        step(-1 - i)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    tool = None
    if mode == "profile":
        from torch.profiler import ProfilerActivity, profile

        tool = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        tool.__enter__()
    elif mode == "inproc":
        import tbdtrace

        tool = tbdtrace.capture(str(out) + ".trace", backend="cupti")
        tool.__enter__()
    t = time.perf_counter()
    times = [step(i) for i in range(steps)]
    torch.cuda.synchronize()
    dt = time.perf_counter() - t
    if tool is not None:
        tool.__exit__(None, None, None)
        if mode == "profile":
            tool.export_chrome_trace(str(out) + ".torch_trace.json")
    params = list(model.parameters())
    mom = [s["momentum_buffer"] for s in opt.state.values() if "momentum_buffer" in s]
    res = {
        "mode": mode,
        "steps": steps,
        "batch": batch,
        "seconds": dt,
        "images_per_s": batch * steps / dt,
        "step_s": times,
        "median_step_s": statistics.median(times),
        "median_images_per_s": batch / statistics.median(times),
        "parameters": sum(p.numel() for p in params),
        "param_tensors": len(params),
        "weights_bytes": storage_bytes(params + list(model.buffers())),
        "param_bytes": storage_bytes(params),
        "momentum_bytes": storage_bytes(mom),
        "memory_allocated_bytes": torch.cuda.memory_allocated(),
        "max_memory_allocated_bytes": torch.cuda.max_memory_allocated(),
        "memory_reserved_bytes": torch.cuda.memory_reserved(),
        "time_ns_at_end": time.time_ns(),
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
    }
    if mode == "capture":
        # Under capture the allocator history is on (tbdtrace.collector.memory.torch_cuda): keep a
        # copy of its raw entries (no stack frames) to test the conversion against.
        try:
            snap = torch.cuda.memory._snapshot()
            traces = [
                [{k: v for k, v in e.items() if k != "frames"} for e in d]
                for d in snap.get("device_traces", [])
            ]
            with open(str(out) + ".history.pkl", "wb") as f:
                pickle.dump(
                    {
                        "device_traces": traces,
                        "time_ns": time.time_ns(),
                        "memory_allocated_bytes": torch.cuda.memory_allocated(),
                        "memory_reserved_bytes": torch.cuda.memory_reserved(),
                    },
                    f,
                )
            res["history_entries"] = sum(len(d) for d in traces)
        except Exception as e:  # recorded, the check reports it
            res["history_error"] = repr(e)
    out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
