"""A deterministic CUDA workload captured twice by the GPU check: once by the cupti-python
oracle (tests/gpu/cupti_oracle.py), once by tbdtrace's native collector in process. STEPS
steps of fixed FP32 GEMMs, a convolution, a reduction and a copy; host-side step bounds
(CUPTI's clock, CLOCK_REALTIME ns) go to the output with the kernels each collector saw.

    python tests/gpu/oracle_workload.py oracle|native OUT.json
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

STEPS = 6


def workload(torch: object, bounds: list[tuple[int, int]]) -> None:
    import torch as t

    t.backends.cuda.matmul.allow_tf32 = False
    t.backends.cudnn.benchmark = False
    a = t.randn(1024, 1024, device="cuda")
    w = t.randn(64, 3, 7, 7, device="cuda")
    x = t.randn(16, 3, 112, 112, device="cuda")
    host = t.empty(1024, 1024, pin_memory=True)
    t.cuda.synchronize()
    for _ in range(STEPS):
        s = time.time_ns()
        b = a
        for _ in range(4):
            b = b @ a
        y = t.nn.functional.conv2d(x, w, stride=2, padding=3)
        float((b.sum() + y.sum()).item())
        host.copy_(b, non_blocking=True)
        t.cuda.synchronize()
        bounds.append((s, time.time_ns()))


def main() -> None:
    mode, out = sys.argv[1], Path(sys.argv[2])
    import torch

    torch.zeros(1, device="cuda")  # the context exists before either collector starts
    bounds: list[tuple[int, int]] = []
    if mode == "oracle":
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        from tests.gpu.cupti_oracle import Oracle

        o = Oracle()
        o.start()
        workload(torch, bounds)
        kernels = [(n, s, e) for n, s, e, _ in o.stop().kernels]
    else:
        import tbdtrace.collector as collector

        with tempfile.TemporaryDirectory() as d:
            with collector.capture(Path(d) / "t", backend="cupti"):
                workload(torch, bounds)
            import tbdtrace

            k = tbdtrace.open(Path(d) / "t").table(
                "kernels", ["mangled_name", "start_ns", "end_ns"]
            )
            kernels = list(zip(*(k.column(i).to_pylist() for i in range(3)), strict=True))
    out.write_text(json.dumps({"bounds": bounds, "kernels": kernels}))


if __name__ == "__main__":
    main()
