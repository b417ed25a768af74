#include "worker/kernels/cuda/device_utils.cuh"
#include "worker/kernels/cuda/swiglu.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::Bf16ToF32;
using internal::F32ToBf16;
using internal::GridFor;

constexpr int kThreads = 256;

__device__ __forceinline__ float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void swiglu_fwd_kernel(uint16_t* out, const uint16_t* gate, const uint16_t* up,
                                  int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = Bf16ToF32(gate[i]);
    out[i] = F32ToBf16(g * Sigmoid(g) * Bf16ToF32(up[i]));
  }
}

__global__ void swiglu_bwd_kernel(uint16_t* dgate, uint16_t* dup, const uint16_t* dout,
                                  const uint16_t* gate, const uint16_t* up, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = Bf16ToF32(gate[i]), u = Bf16ToF32(up[i]), dy = Bf16ToF32(dout[i]);
    const float sig = Sigmoid(g);
    const float silu = g * sig;
    const float dsilu = sig * (1.0f + g * (1.0f - sig));
    dgate[i] = F32ToBf16(Bf16ToF32(dgate[i]) + dy * u * dsilu);
    dup[i] = F32ToBf16(Bf16ToF32(dup[i]) + dy * silu);
  }
}

}  // namespace

KernelStatus swiglu_fwd(uint16_t* out, const uint16_t* gate, const uint16_t* up, int64_t n,
                        cudaStream_t stream) {
  if (n == 0) return OkStatus();
  swiglu_fwd_kernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(out, gate, up, n);
  return MOBIUS_KERNEL_LAUNCH_STATUS("swiglu_fwd_kernel");
}

KernelStatus swiglu_bwd(uint16_t* dgate, uint16_t* dup, const uint16_t* dout, const uint16_t* gate,
                        const uint16_t* up, int64_t n, cudaStream_t stream) {
  if (n == 0) return OkStatus();
  swiglu_bwd_kernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(dgate, dup, dout, gate, up, n);
  return MOBIUS_KERNEL_LAUNCH_STATUS("swiglu_bwd_kernel");
}

}  // namespace mobius::kernels::cuda
