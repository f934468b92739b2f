"""FP32 GEMM loop for the GPU check's hardware FLOP counter stage (scripts/gpu_check.sh):
ITERS products of an MxK and a KxN FP32 matrix with TF32 off, so each product is 2*M*N*K
FP32 FLOPs on the CUDA cores (FFMA), what `capture --counters flops` must report.

    python scripts/gpu_gemm.py M N K ITERS OUT.json
"""

from __future__ import annotations

import json
import sys

import torch


def main() -> None:
    m, n, k, iters = (int(x) for x in sys.argv[1:5])
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    a = torch.randn(m, k, device="cuda")
    b = torch.randn(k, n, device="cuda")
    torch.cuda.synchronize()
    for _ in range(iters):
        c = a @ b
    torch.cuda.synchronize()
    info = {"M": m, "N": n, "K": k, "iters": iters, "checksum": float(c.sum())}
    with open(sys.argv[5], "w") as f:
        json.dump(info, f)


if __name__ == "__main__":
    main()
