// The runtime/driver API calls the lite API set records (docs/COLLECTOR.md "Lite and full
// API sets", docs/DECISIONS.md 173): the calls the analysis reads, switched on per
// callback id with cuptiActivityEnableRuntimeApi / cuptiActivityEnableDriverApi while the
// RUNTIME and DRIVER kinds stay off, so CUPTI never writes a record for the rest (a
// cudaGetDevice, ~60% of PyTorch's API calls, then costs nothing but CUPTI's dispatch).
//
// Rules, over the CUDA 13.0 callback names (cupti_runtime_cbid.h, cupti_driver_cbid.h):
//   runtime: cudaLaunch*, __cudaLaunchKernel*, cudaGraphLaunch*; cudaMemcpy*, cudaMemset*;
//            cuda{Thread,Device,Stream,Event}Synchronize*, cudaStreamWaitEvent*,
//            cudaWaitExternalSemaphoresAsync*; cudaMalloc*, cudaFree*, cudaHostAlloc,
//            cudaHostRegister, cudaHostUnregister.
//   driver:  cuLaunch*, cuGraphLaunch*; cuMem* (copies, sets, allocations, pools, VMM);
//            cu{Ctx,Stream,Event}Synchronize*, cuStreamWaitEvent*, cuStreamWaitValue*,
//            cuWaitExternalSemaphoresAsync*.
// The lists name the header constants, so a renamed id fails to compile;
// tests/native/test_api_filter.py applies the rules to the headers and compares.
#pragma once

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tbdtrace {

// clang-format off
#define TBD_LITE_RUNTIME_CBIDS(X) X(CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020) X(CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020) X(CUPTI_RUNTIME_TRACE_CBID_cudaMallocArray_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaFreeArray_v3020) X(CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020) X(CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020) X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArray_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArray_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyArrayToArray_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArrayAsync_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArrayAsync_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArrayAsync_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020) X(CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaThreadSynchronize_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3D_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3DArray_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaHostRegister_v4000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaHostUnregister_v4000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeer_v4000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_v4000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMallocMipmappedArray_v5000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaFreeMipmappedArray_v5000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_ptds_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_ptds_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_ptds_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArray_ptds_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArray_ptds_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyArrayToArray_ptds_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_ptds_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_ptds_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_ptds_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArrayAsync_ptsz_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArrayAsync_ptsz_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArrayAsync_ptsz_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_ptsz_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_ptsz_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_ptsz_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_ptds_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_ptsz_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_ptds_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_ptsz_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_ptds_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_ptsz_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeer_ptds_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_ptsz_v7000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaWaitExternalSemaphoresAsync_v10000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaWaitExternalSemaphoresAsync_ptsz_v10000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_ptsz_v10000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaWaitExternalSemaphoresAsync_v11020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaWaitExternalSemaphoresAsync_ptsz_v11020) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v12080) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_ptsz_v12080) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_v12080) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_ptsz_v12080) \
  X(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000) \
  X(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v13000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_ptsz_v13000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_v13000) \
  X(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_ptsz_v13000)
#define TBD_LITE_DRIVER_CBIDS(X) X(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemGetInfo) X(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch) X(CUPTI_DRIVER_TRACE_CBID_cuMemFree) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemGetAddressRange) X(CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost) X(CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemHostGetDevicePointer) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemHostGetFlags) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync) X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD16) X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD32) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8) X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32) X(CUPTI_DRIVER_TRACE_CBID_cuLaunch) \
  X(CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid) X(CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync) \
  X(CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize) X(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async) X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async) X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async) X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemGetInfo_v2) X(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2) X(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemGetAddressRange_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemHostGetDevicePointer_v2) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2) X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2) X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2) X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc_v2) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync_v2) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA_v2) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync_v2) X(CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent) X(CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync) X(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemPeerRegister) X(CUPTI_DRIVER_TRACE_CBID_cuMemPeerUnregister) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemPeerGetDevicePointer) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync) X(CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2_ptds) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoA_v2_ptds) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoD_v2_ptds) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoA_v2_ptds) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoH_v2_ptds) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoA_v2_ptds) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2_ptds) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2_ptds) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2_ptds) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer_ptds) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer_ptds) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2_ptds) X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2_ptds) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2_ptds) X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2_ptds) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2_ptds) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2_ptds) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoAAsync_v2_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAtoHAsync_v2_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz) X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz) X(CUPTI_DRIVER_TRACE_CBID_cuMemAdvise) \
  X(CUPTI_DRIVER_TRACE_CBID_cuStreamWaitValue32) \
  X(CUPTI_DRIVER_TRACE_CBID_cuStreamWaitValue32_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemPrefetchAsync) X(CUPTI_DRIVER_TRACE_CBID_cuMemPrefetchAsync_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemRangeGetAttribute) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemRangeGetAttributes) \
  X(CUPTI_DRIVER_TRACE_CBID_cuStreamWaitValue64) \
  X(CUPTI_DRIVER_TRACE_CBID_cuStreamWaitValue64_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel) \
  X(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice) \
  X(CUPTI_DRIVER_TRACE_CBID_cuWaitExternalSemaphoresAsync) \
  X(CUPTI_DRIVER_TRACE_CBID_cuWaitExternalSemaphoresAsync_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch) X(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc) X(CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve) X(CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemCreate) X(CUPTI_DRIVER_TRACE_CBID_cuMemRelease) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemMap) X(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemSetAccess) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemExportToShareableHandle) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemImportFromShareableHandle) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemGetAllocationGranularity) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemGetAllocationPropertiesFromHandle) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemGetAccess) X(CUPTI_DRIVER_TRACE_CBID_cuMemRetainAllocationHandle) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemMapArrayAsync) X(CUPTI_DRIVER_TRACE_CBID_cuMemMapArrayAsync_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync) X(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync) X(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo) X(CUPTI_DRIVER_TRACE_CBID_cuMemPoolSetAttribute) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemPoolGetAttribute) X(CUPTI_DRIVER_TRACE_CBID_cuMemPoolSetAccess) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemPoolCreate) X(CUPTI_DRIVER_TRACE_CBID_cuMemPoolDestroy) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemPoolExportToShareableHandle) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemPoolImportFromShareableHandle) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemPoolExportPointer) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemPoolImportPointer) X(CUPTI_DRIVER_TRACE_CBID_cuMemPoolGetAccess) \
  X(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx) X(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuStreamWaitValue32_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuStreamWaitValue32_v2_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuStreamWaitValue64_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuStreamWaitValue64_v2_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemGetHandleForAddressRange) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemAdvise_v2) X(CUPTI_DRIVER_TRACE_CBID_cuMemPrefetchAsync_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemPrefetchAsync_v2_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemBatchDecompressAsync) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemBatchDecompressAsync_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync) X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemPrefetchBatchAsync) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemPrefetchBatchAsync_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemDiscardBatchAsync) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemDiscardBatchAsync_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemDiscardAndPrefetchBatchAsync) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemDiscardAndPrefetchBatchAsync_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_v2_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_v2) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_v2_ptsz) \
  X(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2) X(CUPTI_DRIVER_TRACE_CBID_cuMemGetDefaultMemPool) \
  X(CUPTI_DRIVER_TRACE_CBID_cuMemGetMemPool) X(CUPTI_DRIVER_TRACE_CBID_cuMemSetMemPool)
// clang-format on

enum class ApiSet : uint8_t { kLite = 0, kFull = 1 };

// "lite" / "full" -> the set; false for any other name.
bool parse_api_set(const std::string& name, ApiSet* out);
const char* api_set_name(ApiSet set);

// The callback ids of the lite set, in header order.
const std::vector<uint32_t>& lite_runtime_cbids();
const std::vector<uint32_t>& lite_driver_cbids();

}  // namespace tbdtrace
