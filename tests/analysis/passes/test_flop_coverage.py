"""FLOP coverage counts only kernels that could carry counted FLOPs.

A standalone softmax (``aten::_softmax`` launching ``cunn_SoftMaxForward`` or
``softmax_warp_forward``) has no FLOP formula: it is not in the denominator, so a model
whose every matmul is counted reads coverage 1. A matmul kernel that no counted op
launched stays in the denominator (coverage below 1). Expected values are sums of the
durations written here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tbdtrace.analysis.passes import flops
from tests.analysis.tiny import US, make

# (op start_us, end_us, name, shapes, kernel (start_us, end_us, name)); each op launches
# its kernel 1 us after it starts, on one thread.
OPS = [
    (0, 20, "aten::mm", [[64, 128], [128, 32]], (5, 25, "sm90_xmma_gemm_bf16bf16_bf16f32")),
    (30, 40, "aten::_softmax", [[64, 32], [], []], (31, 38, "cunn_SoftMaxForward")),
    (50, 60, "aten::_softmax", [[64, 32], [], []], (51, 55, "softmax_warp_forward")),
    (70, 90, "aten::mm", [[64, 128], [128, 32]], (71, 81, "ampere_bf16_s16816gemm")),
    # An attention kernel of an op with a formula: in the denominator, counted.
    (
        100,
        120,
        "aten::scaled_dot_product_attention",
        [[1, 2, 16, 8], [1, 2, 16, 8], [1, 2, 16, 8], [], [], [], [], []],
        (101, 115, "flash_fwd_kernel"),
    ),
]


def _trace(tmp_path: Path, uncounted_gemm: bool = False):
    ops = list(OPS)
    kern = [o[4] for o in ops]
    if uncounted_gemm:  # a GEMM kernel launched outside any op with a formula
        kern.append((130, 150, "sm90_xmma_gemm_bf16bf16_bf16f32"))
    launch = [k[0] - 1 for k in kern[: len(ops)]] + ([129] if uncounted_gemm else [])
    n = len(kern)
    tables = {
        "ops": {
            "start_ns": [o[0] * US for o in ops],
            "end_ns": [o[1] * US for o in ops],
            "name": [o[2] for o in ops],
            "pid": [1] * len(ops),
            "tid": [7] * len(ops),
            "input_shapes": [json.dumps(o[3]) for o in ops],
            "input_dtypes": [json.dumps(["c10::BFloat16"] * 3) for _ in ops],
            "concrete_inputs": [
                json.dumps(["", "", "", "", "0.", "False", "", "False"])
                if "attention" in o[2]
                else None
                for o in ops
            ],
        },
        "runtime": {
            "start_ns": [t * US for t in launch],
            "end_ns": [t * US + 1 for t in launch],
            "name": ["cudaLaunchKernel"] * n,
            "pid": [1] * n,
            "tid": [7] * n,
            "correlation_id": list(range(1, n + 1)),
        },
        "kernels": {
            "start_ns": [k[0] * US for k in kern],
            "end_ns": [k[1] * US for k in kern],
            "name": [k[2] for k in kern],
            "device_id": [0] * n,
            "device_type": ["cuda"] * n,
            "correlation_id": list(range(1, n + 1)),
        },
        "steps": {"step": [0], "start_ns": [0], "end_ns": [200 * US], "warmup": [False]},
    }
    return make(tmp_path, tables, name="u" if uncounted_gemm else "t")


def test_standalone_softmax_is_not_in_the_coverage_denominator(tmp_path: Path) -> None:
    (r,) = flops.run(_trace(tmp_path)).to_pylist()
    matmul = [o[4] for o in OPS if o[2] != "aten::_softmax"]
    want = sum((e - s) * US for s, e, _ in matmul)
    assert r["flop_kernel_ns"] == want  # the softmax kernels' 11 us are not in it
    assert r["counted_kernel_ns"] == want
    assert r["coverage"] == pytest.approx(1.0)


def test_an_uncounted_matmul_kernel_lowers_coverage(tmp_path: Path) -> None:
    (r,) = flops.run(_trace(tmp_path, uncounted_gemm=True)).to_pylist()
    counted = sum((e - s) * US for _, _, n, _, (s, e, _) in OPS if n != "aten::_softmax")
    assert r["counted_kernel_ns"] == counted
    assert r["flop_kernel_ns"] == counted + 20 * US
    assert r["coverage"] == pytest.approx(counted / (counted + 20 * US))


@pytest.mark.parametrize(
    "name,bearing",
    [
        ("cunn_SoftMaxForward", False),
        ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10>", False),
        ("triton_per_fused__softmax_0", False),
        ("flash_fwd_kernel", True),
        ("fmha_cutlassF_f16_aligned_64x64_rf_sm80", True),
        ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>", True),
        ("triton_tem_fused_attention_softmax_0", True),
        ("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n", True),
        ("vectorized_elementwise_kernel", False),
    ],
)
def test_flop_bearing_names(name: str, bearing: bool) -> None:
    assert flops.flop_bearing_name(name) is bearing
