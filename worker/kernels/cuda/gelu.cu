#include "worker/kernels/cuda/device_utils.cuh"
#include "worker/kernels/cuda/gelu.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::Bf16ToF32;
using internal::F32ToBf16;
using internal::GridFor;

constexpr int kThreads = 256;
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kCubic = 0.044715f;

// 0.5 (1 + tanh u) == sigmoid(2u).
__device__ __forceinline__ float SigmoidTwoU(float x) {
  const float u = kGeluScale * (x + kCubic * x * x * x);
  return 1.0f / (1.0f + expf(-2.0f * u));
}

__global__ void gelu_fwd_kernel(uint16_t* out, const uint16_t* inp, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = Bf16ToF32(inp[i]);
    out[i] = F32ToBf16(x * SigmoidTwoU(x));
  }
}

__global__ void gelu_bwd_kernel(uint16_t* dinp, const uint16_t* dout, const uint16_t* inp,
                                int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = Bf16ToF32(inp[i]);
    const float sig = SigmoidTwoU(x);
    const float du_dx = kGeluScale * (1.0f + 3.0f * kCubic * x * x);
    const float grad = sig + 2.0f * x * sig * (1.0f - sig) * du_dx;
    dinp[i] = F32ToBf16(Bf16ToF32(dinp[i]) + grad * Bf16ToF32(dout[i]));
  }
}

}  // namespace

KernelStatus gelu_fwd(uint16_t* out, const uint16_t* inp, int64_t n, cudaStream_t stream) {
  if (n == 0) return OkStatus();
  gelu_fwd_kernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(out, inp, n);
  return MOBIUS_KERNEL_LAUNCH_STATUS("gelu_fwd_kernel");
}

KernelStatus gelu_bwd(uint16_t* dinp, const uint16_t* dout, const uint16_t* inp, int64_t n,
                      cudaStream_t stream) {
  if (n == 0) return OkStatus();
  gelu_bwd_kernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(dinp, dout, inp, n);
  return MOBIUS_KERNEL_LAUNCH_STATUS("gelu_bwd_kernel");
}

}  // namespace mobius::kernels::cuda
