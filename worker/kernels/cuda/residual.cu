#include "worker/kernels/cuda/device_utils.cuh"
#include "worker/kernels/cuda/residual.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::Bf16ToF32;
using internal::F32ToBf16;
using internal::GridFor;

constexpr int kThreads = 256;

__global__ void residual_fwd_kernel(uint16_t* out, const uint16_t* a, const uint16_t* b,
                                    int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = F32ToBf16(Bf16ToF32(a[i]) + Bf16ToF32(b[i]));
  }
}

}  // namespace

KernelStatus residual_fwd(uint16_t* out, const uint16_t* a, const uint16_t* b, int64_t n,
                          cudaStream_t stream) {
  if (n == 0) return OkStatus();
  residual_fwd_kernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(out, a, b, n);
  return MOBIUS_KERNEL_LAUNCH_STATUS("residual_fwd_kernel");
}

}  // namespace mobius::kernels::cuda
