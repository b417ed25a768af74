// fp32 <-> bf16 conversion (the backend's Cast op): bf16 = round to nearest even of the fp32 value
// (NaN kept quiet, bitwise common/numeric/bf16.h), fp32 = the bf16 value exactly.
// Enqueued on `stream`; pointers are device addresses; src and dst must not overlap.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_CAST_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_CAST_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

KernelStatus cast_fp32_to_bf16(uint16_t* dst, const float* src, int64_t n, cudaStream_t stream);
KernelStatus cast_bf16_to_fp32(float* dst, const uint16_t* src, int64_t n, cudaStream_t stream);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_CAST_CUH_
