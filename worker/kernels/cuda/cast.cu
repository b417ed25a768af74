#include "worker/kernels/cuda/cast.cuh"
#include "worker/kernels/cuda/device_utils.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::Bf16ToF32;
using internal::F32ToBf16;
using internal::GridFor;

constexpr int kThreads = 256;

__global__ void cast_to_bf16_kernel(uint16_t* dst, const float* src, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = F32ToBf16(src[i]);
  }
}

__global__ void cast_to_fp32_kernel(float* dst, const uint16_t* src, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = Bf16ToF32(src[i]);
  }
}

}  // namespace

KernelStatus cast_fp32_to_bf16(uint16_t* dst, const float* src, int64_t n, cudaStream_t stream) {
  if (n <= 0) return OkStatus();
  cast_to_bf16_kernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(dst, src, n);
  return MOBIUS_KERNEL_LAUNCH_STATUS("cast_to_bf16_kernel");
}

KernelStatus cast_bf16_to_fp32(float* dst, const uint16_t* src, int64_t n, cudaStream_t stream) {
  if (n <= 0) return OkStatus();
  cast_to_fp32_kernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(dst, src, n);
  return MOBIUS_KERNEL_LAUNCH_STATUS("cast_to_fp32_kernel");
}

}  // namespace mobius::kernels::cuda
