"""categories pass: function names, the name table on real and vendor kernel names, the
launching op on a hand-built trace, golden sums and every fixture."""

from __future__ import annotations

import functools
import gzip
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import tbdtrace
from tbdtrace.analysis.engine import categories
from tbdtrace.analysis.engine import kernel_names as _kernel_names
from tbdtrace.analysis.passes import categories as categories_pass
from tbdtrace.importers import kineto
from tests import rawkineto
from tests.analysis.tiny import US, kernels, make
from tests.conftest import KINETO_TRACES

# One expected category per name, written by hand: names from the bundled fixtures and
# realistic names for each library the classifier covers.
KNOWN = [
    # From the bundled fixtures (CUDA: A100/V100/H100; ROCm: MI250).
    ("gemm", "volta_sgemm_128x64_nn"),
    ("gemm", "ampere_sgemm_128x64_nn"),
    (
        "gemm",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1>(cutlass_"
        "80_tensorop_s1688gemm_128x64_32x6_nt_align1::Params)",
    ),
    (
        "gemm",
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_"
        "align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8::Params)",
    ),
    (
        "gemm",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
        "execute_segment_k_off_kernel__5x_cublas",
    ),
    (
        "gemm",
        "void epilogue::impl::globalKernel<float, float, float, true, true>(int, int, long, "
        "float*, cublasLtEpilogue_t, int, float*, long, void*, long, long, long, float*, "
        "long, int*)",
    ),
    (
        "gemm",
        "void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, true, "
        "true, false>(cublasLt::cublasSplitKParams<float>, float const*, float const*, "
        "float*)",
    ),
    (
        "gemm",
        "void gemv2N_kernel<int, int, float, float, float, float, 128, 1, 4, 4, 1, false, "
        "cublasGemvParams<cublasGemvTensorStridedBatched<float const>, "
        "cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParams<x>)",
    ),
    (
        "gemm",
        "Cijk_Ailk_Bjlk_SB_Bias_AS_SAV_UserArgs_MT64x16x16_MI16x16x1_SN_LDSB0_AFC1_AFEM1_"
        "AFEM1_ASEM1_CLR1_CADS0_EPS0_GRVWA1_GRVWB1_GSUAMB_ISA90a_IU1_K1",
    ),
    (
        "conv",
        "void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, "
        "true>(int, int, int, float const*, int, float*, float const*, kernel_conv_params)",
    ),
    ("conv", "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw"),
    (
        "conv",
        "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, "
        "float const*, int, float const*, int, float*, kernel_grad_params)",
    ),
    ("conv", "volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1"),
    (
        "conv",
        "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, "
        "(cudnnKernelDataType_t)2>(cudnn::ops::nchw2nhwc_params_t<float>, float const*, "
        "float*)",
    ),
    (
        "conv",
        "void cask_cudnn::computeOffsetsKernel<false, false>(cask_cudnn::ComputeOffsetsParams)",
    ),
    (
        "normalization",
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(cudnnTensorStruct,"
        " float const*, cudnnTensorStruct, float*, float const*, float const*, float, float)",
    ),
    (
        "normalization",
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, "
        "float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, float*, "
        "c10::BFloat16*)",
    ),
    ("communication", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"),
    (
        "communication",
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
    ),
    (
        "elementwise",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_"
        "add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
        "at::detail::Array<char*, 3>)",
    ),
    (
        "elementwise",
        "void at::native::unrolled_elementwise_kernel<at::native::copy_device_to_"
        "device(at::TensorIterator&, bool)::{lambda()#2}::operator()() "
        "const::{lambda()#8}::operator()() const::{lambda(float)#1}, at::detail::Array<char*,"
        " 2>, OffsetCalculator<1, unsigned int>, char*, at::native::memory::LoadWithCast<1>, "
        "at::detail::Array<char*, 2> >(int, x)",
    ),
    (
        "elementwise",
        "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, "
        "128, 1>(float*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, "
        "unsigned int, 128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned "
        "int, 4u>, int, unsigned int)",
    ),
    (
        "elementwise",
        "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float, "
        "float>(int, int volatile*, TensorListMetadata<4>, AdamFunctor<float>, float, float)",
    ),
    (
        "elementwise",
        "void fbgemm_gpu::(anonymous namespace)::_compute_FP8_quantize_cuda_"
        "kernel<float>(float const*, float const*, int, int, unsigned char*, bool)",
    ),
    (
        "reduction",
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
        "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> "
        ">(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, "
        "unsigned int, float, 4>)",
    ),
    (
        "reduction",
        "void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int, "
        "int>::Policy800, false, long, int, int, int>(int*, int*, int*, int const*, long*)",
    ),
    (
        "reduction",
        "void cunn_ClassNLLCriterion_updateOutput_kernel<float, float>(float*, float*, "
        "float*, long*, float*, int, int, int, int, long)",
    ),
    (
        "softmax_attention",
        "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, "
        "true>(float*, float const*, int, int, int)",
    ),
    (
        "softmax_attention",
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128,"
        " 128, 4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, "
        "128, 128, 4, cutlass::bfloat16_t> >, false, false, false, false, true, true, "
        "false>(pytorch_flash::Flash_fwd_params)",
    ),
    (
        "pooling",
        "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, "
        "float const*, long, long, long, int, int, int, int, int, int, int, int, int, int, "
        "float*, long*)",
    ),
    (
        "embedding",
        "void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float, "
        "false, long, 2ul, 32ul>(at::GenericPackedTensorAccessor<c10::Half, 1ul, "
        "at::RestrictPtrTraits, long>)",
    ),
    (
        "embedding",
        "void at::native::(anonymous namespace)::indexSelectLargeIndex<float, long, unsigned "
        "int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<float, unsigned int>)",
    ),
    (
        "embedding",
        "void fbgemm_gpu::permute_2D_data_kernel<false, int, int, decltype(nullptr)>(int, "
        "int, int, int const*, decltype(nullptr) const*, int const*, int const*, int const*, "
        "int*)",
    ),
    ("rnn", "RNN_blockPersist_fp_LSTM<float, float, float, 128>"),
    ("elementwise", "triton_poi_fused_add_cos_sin_0"),
    # More ATen kernels (not in the fixtures).
    ("elementwise", "void at::native::index_put_with_sort_kernel<float, float>(long*, float*)"),
    (
        "reduction",
        "void at::native::tensor_kernel_scan_innermost_dim<float, std::plus<float> >(float*, "
        "float const*, unsigned int, unsigned int, unsigned int, float, std::plus<float>)",
    ),
    (
        "reduction",
        "void at::native::bitonicSortKVInPlace<2, -1, 16, 16, float, long, "
        "at::native::LTOp<float, true>, unsigned int>(x)",
    ),
    (
        "elementwise",
        "void at::native::(anonymous namespace)::upsample_bilinear2d_out_frame<float, float>("
        "int, float, float, bool, at::GenericPackedTensorAccessor<float, 4ul>)",
    ),
    ("elementwise", "void at::native::amp_update_scale_cuda_kernel(float*, int*, float const*)"),
    ("conv", "void at::native::vol2col_kernel<float>(long, float const*, int)"),
    (
        "softmax_attention",
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
        "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
    ),
    # cuDNN's runtime-fused attention (cuDNN 9 SDPA backend).
    (
        "softmax_attention",
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_"
        "kernel0_0",
    ),
    # cuBLAS 12.x nvjet kernels (Hopper/Blackwell), cuBLASLt.
    ("gemm", "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NNT"),
    ("gemm", "nvjet_hsh_256x128_64x4_1x2_h_bz_coopB_TNN"),
    ("gemm", "nvjet_sm100_tst_256x128_64x4_2x1_2cta_v_bz_Avec16UE4M3_Bvec16UE4M3_TNT"),
    (
        "gemm",
        "void cublasLt::epilogue::impl::globalKernel<8, 32, float, float, float, true, false,"
        " 3>(int, int, long, float*, int, cublasLtEpilogue_t)",
    ),
    (
        "gemm",
        "sm100_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_cgasize2x1x1_"
        "warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
    ),
    # CUTLASS 3.x (sm90/sm100) through cutlass::device_kernel.
    (
        "gemm",
        "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, "
        "int, int, int>, "
        "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpeci"
        "alized<4, cute::tuple<cute::C<2>, cute::C<1>, cute::C<1> >, "
        "cutlass::gemm::KernelTmaWarpSpecializedCooperative>, cutlass::bfloat16_t>, "
        "cutlass::epilogue::collective::DefaultEpilogue<cutlass::bfloat16_t> > "
        ">(cutlass::gemm::kernel::GemmUniversal<x>::Params)",
    ),
    (
        "softmax_attention",
        "void cutlass::device_kernel<flash::enable_sm90_or_"
        "later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2, "
        "cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cutlass::bfloat16_t> > > "
        ">(flash::FlashAttnFwdSm90<x>::Params)",
    ),
    (
        "softmax_attention",
        "void cutlass::device_"
        "kernel<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2, "
        "cute::tuple<cute::C<1>>, cutlass::bfloat16_t>>>(flash::FlashAttnFwdSm90<x>::Params)",
    ),
    (
        "gemm",
        "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x128x64_1x1x1_0_tnn_align8_"
        "warpspecialized_cooperative_epi_tma",
    ),
    # TensorRT-LLM: trtllm-gen grouped GEMMs (bmm_*), fmha, MoE helpers, all-reduce.
    (
        "gemm",
        "bmm_E4m3_E4m3E4m3_Fp32_t128x8x128u2_s6_et64x8_m64x8x32_cga1x1x1_16dp256b_TN_"
        "transOut_schedS_biasM_bN_ldgsts_sm100f",
    ),
    (
        "gemm",
        "bmm_Bfloat16_E2m1E2m1_Fp32_bA16_bB16_bC16_t128x64x256_s3_et128x64_m128x64x64_"
        "cga1x1x1_16dp256b_rM_TN_transOut_schedP2x2x1x3_bN_sm100f",
    ),
    (
        "softmax_attention",
        "fmhaSm100aKernel_QkvE4m3OBfloat16H128PagedKvCausalP32VarSeqQ128Kv128PersistentContext",
    ),
    (
        "elementwise",
        "void "
        "moe::dev::finalize::finalizeKernel<moe::dev::finalize::KernelParams<cutlass::bfloat1"
        "6_t, cutlass::bfloat16_t, float, false> "
        ">(moe::dev::finalize::KernelParams<cutlass::bfloat16_t, cutlass::bfloat16_t, float, "
        "false>)",
    ),
    (
        "elementwise",
        "void tensorrt_llm::kernels::finalizeMoeRoutingKernel<cutlass::bfloat16_t, "
        "cutlass::bfloat16_t, cutlass::bfloat16_t>(cutlass::bfloat16_t const*, "
        "cutlass::bfloat16_t*, float const*, int const*, int const*, long, long)",
    ),
    (
        "elementwise",
        "void tensorrt_llm::kernels::quantize_with_block_size<(tensorrt_"
        "llm::BlockScaleQuantizationType)0, __nv_bfloat16, 16, false>(int, int, int, int, __"
        "nv_bfloat16 const*, float const*, unsigned int*, unsigned int*, "
        "flashinfer::QuantizationSFLayout)",
    ),
    (
        "communication",
        "void tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_oneshot_lamport<__nv_"
        "bfloat16, 8, true, false>(tensorrt_llm::kernels::ar_fusion::AllReduceFusionParams)",
    ),
    # FlashInfer.
    (
        "softmax_attention",
        "void "
        "flashinfer::BatchPrefillWithPagedKVCacheKernel<flashinfer::KernelTraits<(flashinfer:"
        ":MaskMode)1, 128u, 1u, 4u, 16u, 16u, 1u, (flashinfer::PosEncodingMode)0, __nv_"
        "bfloat16, __nv_bfloat16, __nv_bfloat16, float, int, "
        "flashinfer::DefaultAttention<false, false, false, false> >, "
        "flashinfer::BatchPrefillPagedParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, "
        "int> >(flashinfer::BatchPrefillPagedParams<x>)",
    ),
    (
        "softmax_attention",
        "void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0, "
        "2u, 4u, 8u, 16u, 1u, 8u, flashinfer::DefaultAttention<false, false, false, false>, "
        "flashinfer::BatchDecodeParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int> "
        ">(flashinfer::BatchDecodeParams<x>)",
    ),
    (
        "softmax_attention",
        "void flashinfer::MergeStatesKernel<8u, 16u, 8u, 4u, __nv_bfloat16, __nv_bfloat16>(__"
        "nv_bfloat16*, float*, __nv_bfloat16*, unsigned int, unsigned int)",
    ),
    (
        "normalization",
        "void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*, __"
        "nv_bfloat16*, __nv_bfloat16*, unsigned int, unsigned int, unsigned int, float, "
        "float)",
    ),
    (
        "elementwise",
        "void flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, &silu<float> >(__nv_"
        "bfloat16*, __nv_bfloat16 const*, int)",
    ),
    (
        "elementwise",
        "void flashinfer::BatchQKApplyRotaryPosIdsCosSinCacheKernel<false, 128u, 8u, 16u, __"
        "nv_bfloat16, long>(__nv_bfloat16*, __nv_bfloat16*, float*, long*, unsigned int)",
    ),
    (
        "reduction",
        "void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024u, "
        "(cub::BlockScanAlgorithm)2, (cub::BlockReduceAlgorithm)2, 4u, false, float, "
        "int>(float*, int*)",
    ),
    # Triton kernels named by inductor.
    ("reduction", "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0"),
    ("softmax_attention", "triton_per_fused__log_softmax_backward_data_0"),
    ("normalization", "triton_per_fused_native_layer_norm_native_layer_norm_backward_7"),
    ("normalization", "triton_poi_fused__native_batch_norm_legit_functional_relu_12"),
    ("gemm", "triton_tem_fused_mm_0"),
    ("gemm", "triton_tem_fused_addmm_relu_t_4"),
    ("conv", "triton_tem_fused_convolution_3"),
    ("softmax_attention", "triton_tem_fused_flex_attention_0"),
    # NCCL/RCCL and symmetric memory.
    ("communication", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
    ("communication", "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"),
    ("communication", "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"),
    ("communication", "ncclSymkDevKernel_AllReduce_AGxLL_R_sum_bf16(ncclSymkDevWorkArgs4K)"),
    (
        "communication",
        "void c10d::symmetric_memory::one_shot_all_reduce_kernel<c10::BFloat16, 8, "
        "16>(c10::BFloat16**, unsigned long, c10::BFloat16*, unsigned long, unsigned long, "
        "unsigned int**, unsigned long, unsigned long)",
    ),
    (
        "communication",
        "void c10d::symmetric_memory::multimem_all_reduce_kernel<c10::BFloat16, true, "
        "8>(c10::BFloat16*, unsigned long, unsigned int**, unsigned long, unsigned long)",
    ),
    (
        "communication",
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, "
        "vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)",
    ),
    # ROCm: hipBLASLt/Tensile Cijk, CK, MIOpen, rocclr.
    (
        "gemm",
        "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x64_MI16x16x1_SN_LDSB1_AFC1_"
        "AFEM1_AFEM1_ASEM1_CLR1_CADS0_DTLA0_DTLB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8_GSUAMB_GLS0_"
        "ISA942",
    ),
    (
        "gemm",
        "void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<ck::tensor_"
        "layout::gemm::RowMajor, ck::tensor_layout::gemm::ColumnMajor, ck::bhalf_t>, true, "
        "(ck::InMemoryDataOperationEnum)0, 1, (ck::TailNumber)2>(ck::GridwiseGemm_"
        "x::Argument)",
    ),
    (
        "softmax_attention",
        "void ck_tile::kentry<256, 1, ck_tile::FmhaFwdKernel<ck_"
        "tile::BlockFmhaPipelineQRKSVSAsync<ck_tile::BlockFmhaPipelineProblem<ck_tile::bf16_"
        "t, ck_tile::bf16_t, float> >, ck_tile::Default2DEpilogue<float> > >(ck_"
        "tile::FmhaFwdKernel<x>::Kargs)",
    ),
    ("normalization", "MIOpenBatchNormFwdTrainSpatial"),
    ("conv", "MIOpenConvUni"),
    ("conv", "miopenSp3AsmConv_v21_1_3_gfx9_fp32_stride1"),
    ("conv", "naive_conv_ab_nonpacked_fwd_nchw_float_double_float"),
    (
        "conv",
        "igemm_fwd_gtcx_nhwc_fp16_bx0_ex1_bt128x128x32_wt32x32x8_ws2x1_wr2x2_ta1x8x2x1_"
        "1x4x1x64_tb1x8x2x1_1x4x1x64",
    ),
    ("pooling", "MIOpenPoolingForwardNDNCHW"),
    ("memset", "__amd_rocclr_fillBufferAligned"),
    ("memcpy", "__amd_rocclr_copyBuffer"),
    # CPU ops (the CPU backend's kernels are ops).
    ("gemm", "aten::addmm"),
    ("conv", "aten::mkldnn_convolution"),
    ("elementwise", "aten::relu"),
    ("normalization", "aten::native_batch_norm"),
    ("softmax_attention", "aten::_log_softmax"),
    ("pooling", "aten::max_pool2d_with_indices"),
    ("embedding", "aten::embedding"),
    ("reduction", "aten::sum"),
    ("memcpy", "aten::copy_"),
    ("memset", "aten::zero_"),
    ("elementwise", "aten::uniform_"),
    ("elementwise", "detach"),
    ("elementwise", "aten::resolve_conj"),
    ("memcpy", "aten::_local_scalar_dense"),
    ("normalization", "aten::native_layer_norm"),
    ("other", "something_unheard_of"),
]


@pytest.mark.parametrize("want,name", KNOWN)
def test_classifier_on_known_names(name: str, want: str) -> None:
    assert categories.classify(name) == want


@pytest.mark.parametrize(
    "name,want",
    [
        ("volta_sgemm_128x64_nn", "volta_sgemm_128x64_nn"),
        (
            "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, 2>(float*, int)",
            "at::native::CatArrayBatchedCopy",
        ),
        (
            "void moe::finalizeKernel<cutlass::bfloat16_t, 4>(moe::Params<cutlass::bfloat16_t>)",
            "moe::finalizeKernel",
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::foo(at::TensorIterator&)"
            "::{lambda()#1}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >"
            "(int, x)",
            "at::native::vectorized_elementwise_kernel",
        ),
        ("void k<(Enum)0, 3>(int)", "k"),
        ("aten::addmm", "aten::addmm"),
    ],
)
def test_function_name(name: str, want: str) -> None:
    assert _kernel_names.function_name(name) == want


def test_generic_entry_points_read_the_kernel_they_run() -> None:
    assert _kernel_names.candidates(
        "void cutlass::device_kernel<flash::FlashAttnFwdSm90<cutlass::bfloat16_t>>(int)"
    ) == ("flash::FlashAttnFwdSm90", "cutlass::device_kernel")
    assert _kernel_names.candidates(
        "void ck_tile::kentry<256, 1, ck_tile::FmhaFwdKernel<x>>(k)"
    ) == ("ck_tile::FmhaFwdKernel", "ck_tile::kentry")
    # A name row of the entry point beats a hint row of the kernel it runs.
    assert categories.classify_name("void cutlass::device_kernel<ns::AddOp<int>>(int)") == (
        "gemm",
        True,
    )
    # Template arguments of other kernels are never read.
    assert _kernel_names.candidates("void mine<cutlass::gemm::X>(int)") == ("mine",)
    assert categories.classify("void mine<cutlass::gemm::X>(int)") == "other"


def _launched(tmp_path: Path):
    # Thread (1, 1): linear [0,100] > addmm [10,40]; mm [110,130]; embedding backward
    # [140,160]; nccl:all_reduce [170,190]; add_ [200,210]. Each kernel's runtime call
    # (correlation id = its number) starts inside the op named beside it.
    ops = {
        "start_ns": [0, 10 * US, 110 * US, 140 * US, 170 * US, 200 * US],
        "end_ns": [100 * US, 40 * US, 130 * US, 160 * US, 190 * US, 210 * US],
        "name": [
            "aten::linear",
            "aten::addmm",
            "aten::mm",
            "aten::embedding_dense_backward",
            "nccl:all_reduce",
            "aten::add_",
        ],
        "category": ["cpu_op"] * 6,
        "pid": [1] * 6,
        "tid": [1] * 6,
        "external_id": [1, 2, 3, 4, 5, 6],
    }
    launch_us = [20, 50, 115, 145, 175, 205]
    runtime = {
        "start_ns": [t * US for t in launch_us],
        "end_ns": [(t + 1) * US for t in launch_us],
        "correlation_id": [1, 2, 3, 4, 5, 6],
        "pid": [1] * 6,
        "tid": [1] * 6,
        "name": ["cudaLaunchKernel"] * 6,
    }
    add = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int)"
    k = kernels(
        [
            (1000, 1030, "volta_sgemm_128x64_nn"),  # addmm; its own name decides: gemm
            (1030, 1035, add),  # linear's bias add: elementwise by its name, not gemm
            (1040, 1060, "kernel_3a"),  # unknown name, launched by mm: gemm by op
            (1060, 1070, "sum_and_scatter_kernel"),  # a hint (scatter): embedding by op
            (1070, 1085, "mystery_kernel"),  # launched by nccl:all_reduce: communication
            (1085, 1089, "mystery_kernel"),  # launched by add_ (not in the op table): other
            (1089, 1095, "add_kernel_fast"),
        ],  # no launch found: its hint, elementwise
        correlation_id=[1, 2, 3, 4, 5, 6, 77],
    )
    return make(tmp_path, {"kernels": k, "ops": ops, "runtime": runtime})


def test_launching_op_decides_where_the_name_does_not(tmp_path: Path) -> None:
    tr = _launched(tmp_path)
    rows = {r["category"]: r for r in categories_pass.run(tr).to_pylist()}
    got = {c: (r["count"], r["total_ns"], r["by_op_ns"], r["by_name_ns"]) for c, r in rows.items()}
    assert got == {
        "gemm": (2, 50 * US, 20 * US, 30 * US),
        "communication": (1, 15 * US, 15 * US, 0),
        "elementwise": (2, 11 * US, 0, 11 * US),
        "embedding": (1, 10 * US, 10 * US, 0),
        "other": (1, 4 * US, 0, 0),
    }
    kc = categories.kernel_codes(tr)
    assert [categories.CATEGORIES[c] for c in kc.code] == [
        "gemm",
        "elementwise",
        "gemm",
        "embedding",
        "communication",
        "other",
        "elementwise",
    ]
    assert [categories.SOURCES[s] for s in kc.source] == [
        "name",
        "name",
        "op",
        "op",
        "op",
        "none",
        "name",
    ]
    assert categories.name_categories(tr)["mystery_kernel"] == "communication"  # 15 us of 19
    assert categories.other_share(tr) == pytest.approx(4 / 90)


def test_op_table() -> None:
    for op, want in [
        ("aten::addmm", "gemm"),
        ("aten::linear", "gemm"),
        ("aten::_scaled_mm", "gemm"),
        ("aten::cudnn_convolution", "conv"),
        ("aten::convolution_backward", "conv"),
        ("aten::_scaled_dot_product_flash_attention", "softmax_attention"),
        ("nccl:all_reduce", "communication"),
        ("record_param_comms", "communication"),
        ("c10d::allreduce_", "communication"),
        ("aten::_fused_adam_", "elementwise"),
        ("aten::_foreach_mul_", "elementwise"),
        ("aten::native_layer_norm", "normalization"),
        ("aten::add_", None),
        ("aten::copy_", None),
    ]:
        assert categories.classify_op(op) == want, op


def test_golden_sums_include_copies_and_sets(tmp_path: Path) -> None:
    tr = make(
        tmp_path,
        {
            "kernels": kernels(
                [
                    (0, 30, "volta_sgemm_128x64_nn"),
                    (30, 40, "aten::relu"),
                    (40, 50, "volta_sgemm_32x32_nt"),
                    (50, 55, "mystery"),
                ]
            ),
            "memcpy": {
                "start_ns": [0],
                "end_ns": [20_000],
                "bytes": [8],
                "device_id": [0],
                "device_type": ["cuda"],
            },
            "memset": {
                "start_ns": [0],
                "end_ns": [5_000],
                "bytes": [8],
                "device_id": [0],
                "device_type": ["cuda"],
            },
        },
    )
    rows = categories_pass.run(tr).to_pylist()
    assert [(r["category"], r["count"], r["total_ns"], r["by_name_ns"]) for r in rows] == [
        ("gemm", 2, 40_000, 40_000),
        ("memcpy", 1, 20_000, 0),
        ("elementwise", 1, 10_000, 10_000),
        ("memset", 1, 5_000, 0),
        ("other", 1, 5_000, 0),
    ]  # ties: in CATEGORIES order
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert rows[0]["share"] == pytest.approx(40 / 80)
    assert categories.other_share(tr) == pytest.approx(5 / 55)


# The fixtures with kernel events, found by a scan of the bytes: parsing every fixture
# here would cost each test worker seconds at collection (the test parses its own). A
# file the scan takes for a kernel trace without any fails its test (no kernel time).
GPU_FIXTURES = [
    p
    for p in KINETO_TRACES
    if re.search(rb'"cat"\s*:\s*"[Kk]ernel"', gzip.decompress(p.read_bytes()))
    and p.name != "memory_timeline.raw.gz"
]


@functools.cache
def _imported(path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The importer's tables of one fixture, once per process (two tests read each)."""
    return kineto.import_files([path])


@pytest.mark.parametrize("path", GPU_FIXTURES, ids=lambda p: p.name)
def test_fixture_other_share_and_sums(path: Path, tmp_path: Path) -> None:
    tables, meta = _imported(path)
    tr = tbdtrace.open(tbdtrace.trace.write(tmp_path / "t", tables, meta))
    raw = rawkineto.device_events(path)
    kernel_ns = sum(e - s for s, e, _, _ in raw["kernels"])
    assert kernel_ns > 0
    copies_ns = sum(e - s for g in ("memcpy", "memset") for s, e, _, _ in raw[g])
    rows = {r["category"]: r for r in categories_pass.run(tr).to_pylist()}
    assert sum(r["total_ns"] for r in rows.values()) == kernel_ns + copies_ns
    # Every kernel whose own name decides is counted by name, in that name's category.
    decided: dict[str, int] = defaultdict(int)
    for s, e, _, ev in raw["kernels"]:
        cat, decisive = categories.classify_name(ev["name"])
        if decisive:
            decided[cat] += e - s
    for cat, ns in decided.items():
        assert rows[cat]["by_name_ns"] >= ns, cat
    assert sum(r["by_op_ns"] + r["by_name_ns"] for r in rows.values()) <= kernel_ns
    other = rows["other"]["total_ns"] if "other" in rows else 0
    print(f"{path.name}: other = {100 * other / kernel_ns:.3f}% of {kernel_ns} ns kernel time")
    assert other <= 0.01 * kernel_ns
    assert categories.other_share(tr) == pytest.approx(other / kernel_ns)


def _all_fixture_names() -> set[str]:
    names: set[str] = {n for _, n in KNOWN}
    for path in KINETO_TRACES:
        tables, _ = _imported(path)
        for t in ("kernels", "ops", "runtime"):
            if t in tables and "name" in tables[t]:
                names.update(n for n in tables[t]["name"].to_pylist() if n)
    return names


def test_rules_answer_as_re_search_on_every_fixture_name() -> None:
    # The fast matcher (substring tests for plain alternatives) must agree with the
    # tables' regular expressions, searched case-insensitively, on every real name (and
    # its function name) and on names built to hit its edges (case, non-ASCII, brackets,
    # alternatives in groups).
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
    names |= {c for n in names for c in _kernel_names.candidates(n)}
    assert len(names) > 300
    for rule in categories.rules() + categories.op_rules():
        full = re.compile(rule.pattern, re.IGNORECASE)
        for n in names:
            assert rule.matches(n) == (full.search(n) is not None), (rule.category, n)


# Itanium-mangled kernel names as g++ 12 mangles these declarations (nm of an object file
# instantiating them), each with the category its *function* name says, decided by hand:
#   namespace ck::tensor_operation::device { template <class Gemm, class ADesc, class Op,
#     bool> void kernel_grouped_conv_fwd_multiple_abd_xdl_cshuffle(const half_t*, ...); }
#   instantiated with ck::GridwiseGemmMultipleABD_xdl_cshuffle<...> and a
#   ck::TensorDescriptor<ck::Tuple<ck::Embed<ck::Sequence<3, 3>, ...>>> (CK's Embed
#   transform, the word that made convolutions embeddings); the same for bwd_weight;
#   rocprim::detail::lookback_scan_kernel<...> and init_lookback_scan_state_kernel<...>;
#   moe::dev::routing::routingIndices{Histogram,Offsets}Kernel<KernelParams<bf16, 8>>;
#   vllm::reshape_and_cache_flash_kernel<bf16, bf16, Fp8KVCacheDataType(0)>.
MANGLED = [
    (
        "conv",
        "_ZN2ck16tensor_operation6device49kernel_grouped_conv_fwd_multiple_abd_xdl_cshuffleINS_36"
        "GridwiseGemmMultipleABD_xdl_cshuffleINS_6half_tES4_NS0_12element_wise11PassThroughEEENS_"
        "16TensorDescriptorIJNS_5TupleIJNS_5EmbedINS_8SequenceIJLi3ELi3EEEENSB_IJLi1ELi1EEEELb0EEE"
        "NS_11PassThroughIiEEEEEEEES6_Lb1EEEvPKS4_SK_PS4_",
    ),
    (
        "conv",
        "_ZN2ck16tensor_operation6device43kernel_grouped_conv_bwd_weight_xdl_cshuffleINS_36Gridwis"
        "eGemmMultipleABD_xdl_cshuffleINS_6half_tES4_NS0_12element_wise11PassThroughEEENS_16Tensor"
        "DescriptorIJNS_5TupleIJNS_5EmbedINS_8SequenceIJLi3ELi3EEEENSB_IJLi1ELi1EEEELb0EEEEEEEEELb"
        "1EEEvPKS4_SI_PS4_",
    ),
    (
        "reduction",
        "_ZN7rocprim6detail20lookback_scan_kernelIiPKlPlNS_4plusIlEElNS0_19lookback_scan_stateIlEE"
        "EEvT0_T1_mT2_T4_",
    ),
    (
        "reduction",
        "_ZN7rocprim6detail31init_lookback_scan_state_kernelINS0_19lookback_scan_stateIlEEEEvT_j.kd",
    ),
    (
        "reduction",
        "_ZN3moe3dev7routing29routingIndicesHistogramKernelINS1_12KernelParamsI13__nv_bfloat16Li8E"
        "EEEEvT_",
    ),
    (
        "reduction",
        "_ZN3moe3dev7routing27routingIndicesOffsetsKernelINS1_12KernelParamsI13__nv_bfloat16Li8EEE"
        "EEvT_",
    ),
    (
        "elementwise",
        "_ZN4vllm30reshape_and_cache_flash_kernelI13__nv_bfloat16S1_LNS_18Fp8KVCacheDataTypeE0EEEv"
        "PKT_S5_PT0_S7_PKl",
    ),
]
# The same families as other tools record them (plain or demangled), and the Triton
# layout copies inductor names after the attention op whose output they rearrange.
PLAIN = [
    ("reduction", "routingIndicesHistogram"),
    ("reduction", "routingIndicesOffsets"),
    ("reduction", "void vllm::moe::moe_align_block_size_kernel<int>(int const*, int*)"),
    ("elementwise", "store_kvcache_kernel"),
    ("elementwise", "reshape_and_cache_flash"),
    ("elementwise", "void vllm::concat_and_cache_mla_kernel<float, float, 0>(float*)"),
    ("reduction", "void rocprim::detail::single_scan_kernel<int>(int*)"),
    ("elementwise", "triton_poi_fused__flash_attention_cat_transpose_0"),
    ("elementwise", "triton_poi_fused__scaled_dot_product_flash_attention_clone_view_3"),
    ("elementwise", "saxpy(double *, double *, double *, double, int)"),
    ("elementwise", "void clover::par_ranged2d_kernel<PdV_kernel(bool)::{lambda(int, int)#1}>(x)"),
    # Unchanged neighbours: attention over a paged KV cache, fused softmax reductions.
    ("softmax_attention", "BatchPrefillWithPagedKVCacheKernel"),
    ("softmax_attention", "triton_per_fused__softmax_0"),
]


def test_demangle_reads_the_cxx_runtime_names() -> None:
    # Expected text: c++filt (binutils) of the same symbols.
    assert _kernel_names.demangle(MANGLED[4][1]) == (
        "void moe::dev::routing::routingIndicesHistogramKernel<moe::dev::routing::KernelParams"
        "<__nv_bfloat16, 8> >(moe::dev::routing::KernelParams<__nv_bfloat16, 8>)"
    )
    assert _kernel_names.demangle("_Z5saxpyPdS_S_di") == (
        "saxpy(double*, double*, double*, double, int)"
    )
    for text in ("volta_sgemm_128x64_nn", "_Znot_a_name", "", "aten::mm"):
        assert _kernel_names.demangle(text) == text
    assert _kernel_names.function_name(MANGLED[0][1]) == (
        "ck::tensor_operation::device::kernel_grouped_conv_fwd_multiple_abd_xdl_cshuffle"
    )


@pytest.mark.parametrize("want,name", MANGLED + PLAIN)
def test_function_name_decides_also_when_mangled(want: str, name: str) -> None:
    assert categories.classify_name(name) == (want, True)


def test_synthetic_trace_of_these_names(tmp_path: Path) -> None:
    # One kernel per name, durations 10, 20, 30, ... us, plus one unknown kernel of 1 us
    # in 1 + sum: the categories table holds each name's time in its hand-decided
    # category, and other is the unknown kernel alone (under 1% of kernel time).
    names = MANGLED + PLAIN
    rows, t = [], 0
    want: dict[str, int] = defaultdict(int)
    for i, (cat, name) in enumerate(names):
        d = 10 * (i + 1)
        rows.append((t, t + d, name))
        want[cat] += d * US
        t += d
    rows.append((t, t + 1, "something_unheard_of"))
    want["other"] += US
    tr = make(tmp_path, {"kernels": kernels(rows)})
    got = {r["category"]: r["total_ns"] for r in categories_pass.run(tr).to_pylist()}
    assert got == dict(want)
    total = 10 * US * len(names) * (len(names) + 1) // 2 + US
    assert categories.other_share(tr) == pytest.approx(US / total)
    assert US / total <= 0.01


# The traces the Kineto test above does not read: the Nsight Systems fixtures (HPC codes:
# CloverLeaf's parallel-for loops, saxpy) and the project's own CUPTI and MXNet captures.
OTHER_TRACES = [
    "nsys/perlmutter-cloverleaf-cuda.sqlite",
    "nsys/saxpy-mpi-cuda_nsys_perlmutter0.sqlite",
    "tests/data/gpu/h200_demo_resnet50_small",
    "tests/data/gpu/h200_resnet50_cupti",
    "tests/data/mxnet/gluon_mlp_profile.json.gz",
]


@pytest.mark.parametrize("name", OTHER_TRACES)
def test_other_share_on_every_other_trace(name: str) -> None:
    from tbdtrace.commands._open import open_or_import
    from tests.conftest import ROOT, fixture

    path = ROOT / name if name.startswith("tests/") else fixture(name)
    tr = open_or_import(str(path))
    # Kernel time straight from the stored table, not from the categories pass.
    cols = tr.read_columns("kernels", ["start_ns", "end_ns"])
    kernel_ns = sum(e - s for s, e in zip(cols[0].to_pylist(), cols[1].to_pylist(), strict=True))
    assert kernel_ns > 0
    rows = {r["category"]: r for r in categories_pass.run(tr).to_pylist()}
    other = rows["other"]["total_ns"] if "other" in rows else 0
    print(f"{name}: other = {100 * other / kernel_ns:.3f}% of {kernel_ns} ns kernel time")
    if name.startswith("tests/data/mxnet"):
        # MXNet records its engine's storage release (DeleteVariable) as an operator: no
        # category fits it, it stays other, and it is the only name left there.
        names, starts, ends = (
            c.to_pylist() for c in tr.read_columns("kernels", ["name", "start_ns", "end_ns"])
        )
        left = {n for n in names if categories.classify(n) == "other"}
        assert left == {"DeleteVariable"}
        other -= sum(e - s for n, s, e in zip(names, starts, ends, strict=True) if n in left)
    assert other <= 0.01 * kernel_ns
