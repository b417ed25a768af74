// Conversions between fp32, bf16 and fp16 (the backend's Cast op): to a 16-bit type = round to
// nearest even of the fp32 value (NaN kept quiet; bitwise common/numeric/bf16.h and f16.h; fp16
// overflows to +-inf), to fp32 = the 16-bit value exactly, bf16 <-> fp16 through fp32 (one
// rounding). Enqueued on `stream`; pointers are device addresses; src and dst must not overlap.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_CAST_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_CAST_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/kernels/cuda/half_type.h"
#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

KernelStatus cast_fp32_to_half(HalfType dst_type, uint16_t* dst, const float* src, int64_t n,
                               cudaStream_t stream);
KernelStatus cast_half_to_fp32(HalfType src_type, float* dst, const uint16_t* src, int64_t n,
                               cudaStream_t stream);
// dst[i] += src[i] in fp32 (the backend's Cast with `accumulate`; src fp32 or 16-bit).
KernelStatus add_half_to_fp32(HalfType src_type, float* dst, const uint16_t* src, int64_t n,
                              cudaStream_t stream);
KernelStatus add_fp32_to_fp32(float* dst, const float* src, int64_t n, cudaStream_t stream);
KernelStatus cast_half_to_half(HalfType dst_type, HalfType src_type, uint16_t* dst,
                               const uint16_t* src, int64_t n, cudaStream_t stream);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_CAST_CUH_
