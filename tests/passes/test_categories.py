"""categories pass: the classifier table on known names, golden sums, every fixture."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

import tbdtrace
from tbdtrace.importers import kineto
from tbdtrace.passes import categories
from tests import rawkineto
from tests.conftest import KINETO_TRACES
from tests.passes.tiny import kernels, make

KNOWN = {
    "volta_sgemm_128x64_nn": "gemm",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1>(x)": "gemm",
    "Cijk_Ailk_Bjlk_SB_Bias_AS_SAV_UserArgs_MT64x16x16": "gemm",
    "void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>": "conv",
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw": "conv",
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>": "normalization",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>":
        "normalization",
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)": "communication",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>":
        "elementwise",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps>>":
        "reduction",
    "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true>":
        "softmax_attention",
    "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64>>":
        "softmax_attention",
    "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>": "pooling",
    "void split_embedding_codegen_forward_unweighted_kernel<c10::Half, fbgemm_gpu::x>":
        "embedding",
    "void at::native::(anonymous namespace)::indexSelectLargeIndex<float, long>": "embedding",
    "RNN_blockPersist_fp_LSTM<float, float, float, 128>": "rnn",
    "aten::addmm": "gemm", "aten::mkldnn_convolution": "conv", "aten::relu": "elementwise",
    "aten::native_batch_norm": "normalization", "aten::_log_softmax": "softmax_attention",
    "aten::max_pool2d_with_indices": "pooling", "aten::embedding": "embedding",
    "aten::sum": "reduction", "aten::copy_": "memcpy", "aten::zero_": "memset",
    "triton_poi_fused_add_cos_sin_0": "elementwise", "something_unheard_of": "other",
    "aten::uniform_": "elementwise", "detach": "elementwise", "aten::resolve_conj": "elementwise",
    "aten::_local_scalar_dense": "memcpy", "aten::native_layer_norm": "normalization",
}


@pytest.mark.parametrize("name,want", sorted(KNOWN.items()))
def test_classifier_on_known_names(name: str, want: str) -> None:
    assert categories.classify(name) == want


def test_golden_sums_include_copies_and_sets(tmp_path: Path) -> None:
    tr = make(tmp_path, {
        "kernels": kernels([(0, 30, "volta_sgemm_128x64_nn"), (30, 40, "aten::relu"),
                            (40, 50, "volta_sgemm_32x32_nt"), (50, 55, "mystery")]),
        "memcpy": {"start_ns": [0], "end_ns": [20_000], "bytes": [8], "device_id": [0],
                   "device_type": ["cuda"]},
        "memset": {"start_ns": [0], "end_ns": [5_000], "bytes": [8], "device_id": [0],
                   "device_type": ["cuda"]},
    })
    rows = categories.run(tr).to_pylist()
    assert [(r["category"], r["count"], r["total_ns"]) for r in rows] == [
        ("gemm", 2, 40_000), ("memcpy", 1, 20_000), ("elementwise", 1, 10_000),
        ("memset", 1, 5_000), ("other", 1, 5_000)]  # ties: in CATEGORIES order
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert rows[0]["share"] == pytest.approx(40 / 80)
    assert categories.other_share(tr) == pytest.approx(5 / 55)


GPU_FIXTURES = [p for p in KINETO_TRACES
                if rawkineto.device_events(p).get("kernels") and p.name != "memory_timeline.raw.gz"]


@pytest.mark.parametrize("path", GPU_FIXTURES, ids=lambda p: p.name)
def test_fixture_other_share_and_sums(path: Path, tmp_path: Path) -> None:
    tables, meta = kineto.import_files([path])
    tr = tbdtrace.open(tbdtrace.trace.write(tmp_path / "t", tables, meta))
    raw = rawkineto.device_events(path)
    want: dict[str, int] = defaultdict(int)
    for s, e, _, ev in raw["kernels"]:
        want[categories.classify(ev["name"])] += e - s
    want["memcpy"] += sum(e - s for s, e, _, _ in raw["memcpy"])
    want["memset"] += sum(e - s for s, e, _, _ in raw["memset"])
    got = {r["category"]: r["total_ns"] for r in categories.run(tr).to_pylist()}
    assert got == {k: v for k, v in want.items() if v or k in got}
    kernel_ns = sum(e - s for s, e, _, _ in raw["kernels"])
    other = categories.other_share(tr)
    print(f"{path.name}: other = {100 * (other or 0):.2f}% of {kernel_ns} ns kernel time")
    assert other is not None and other < 0.05


def _all_fixture_names() -> set[str]:
    names: set[str] = set(KNOWN)
    for path in KINETO_TRACES:
        tables, _ = kineto.import_files([path])
        for t in ("kernels", "ops", "runtime"):
            if t in tables and "name" in tables[t]:
                names.update(n for n in tables[t]["name"].to_pylist() if n)
    return names


def test_rules_answer_as_re_search_on_every_fixture_name() -> None:
    # The fast matcher (substring tests for plain alternatives) must agree with the
    # table's regular expressions, searched case-insensitively, on every real name and on
    # names built to hit its edges (case, non-ASCII, brackets, alternatives in groups).
    import re

    extra = {
        "GEMM",
        "xxMemCpy",
        "Ünicode_gemm",
        "ß_conv",
        "a|b",
        "(conv)",
        "[relu]",
        "convert_kernel",
        "fbgemm_gpu::x",
        "",
        "elementwise_ÄÖ",
    }
    names = _all_fixture_names() | extra
    assert len(names) > 300
    for rule in categories.rules():
        full = re.compile(rule.pattern, re.IGNORECASE)
        for n in names:
            assert rule.matches(n) == (full.search(n) is not None), (rule.category, n)
