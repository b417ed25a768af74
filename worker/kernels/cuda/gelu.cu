#include "worker/kernels/cuda/device_utils.cuh"
#include "worker/kernels/cuda/gelu.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::As;
using internal::GridFor;
using internal::Load;
using internal::Store;

constexpr int kThreads = 256;
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kCubic = 0.044715f;

// 0.5 (1 + tanh u) == sigmoid(2u).
__device__ __forceinline__ float SigmoidTwoU(float x) {
  const float u = kGeluScale * (x + kCubic * x * x * x);
  return 1.0f / (1.0f + expf(-2.0f * u));
}

template <typename T>
__global__ void gelu_fwd_kernel(T* out, const T* inp, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = Load(inp, i);
    Store(out, i, x * SigmoidTwoU(x));
  }
}

template <typename T>
__global__ void gelu_bwd_kernel(T* dinp, const T* dout, const T* inp, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = Load(inp, i);
    const float sig = SigmoidTwoU(x);
    const float du_dx = kGeluScale * (1.0f + 3.0f * kCubic * x * x);
    const float grad = sig + 2.0f * x * sig * (1.0f - sig) * du_dx;
    Store(dinp, i, Load(dinp, i) + grad * Load(dout, i));
  }
}

}  // namespace

KernelStatus gelu_fwd(HalfType type, uint16_t* out, const uint16_t* inp, int64_t n,
                      cudaStream_t stream) {
  if (n == 0) return OkStatus();
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    gelu_fwd_kernel<T><<<GridFor(n, kThreads), kThreads, 0, stream>>>(As<T>(out), As<T>(inp), n);
    return MOBIUS_KERNEL_LAUNCH_STATUS("gelu_fwd_kernel");
  });
}

KernelStatus gelu_bwd(HalfType type, uint16_t* dinp, const uint16_t* dout, const uint16_t* inp,
                      int64_t n, cudaStream_t stream) {
  if (n == 0) return OkStatus();
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    gelu_bwd_kernel<T>
        <<<GridFor(n, kThreads), kThreads, 0, stream>>>(As<T>(dinp), As<T>(dout), As<T>(inp), n);
    return MOBIUS_KERNEL_LAUNCH_STATUS("gelu_bwd_kernel");
  });
}

}  // namespace mobius::kernels::cuda
