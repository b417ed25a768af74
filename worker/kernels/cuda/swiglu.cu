#include "worker/kernels/cuda/device_utils.cuh"
#include "worker/kernels/cuda/swiglu.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::As;
using internal::GridFor;
using internal::Load;
using internal::Store;

constexpr int kThreads = 256;

__device__ __forceinline__ float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

template <typename T>
__global__ void swiglu_fwd_kernel(T* out, const T* gate, const T* up, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = Load(gate, i);
    Store(out, i, g * Sigmoid(g) * Load(up, i));
  }
}

template <typename T>
__global__ void swiglu_bwd_kernel(T* dgate, T* dup, const T* dout, const T* gate, const T* up,
                                  int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = Load(gate, i), u = Load(up, i), dy = Load(dout, i);
    const float sig = Sigmoid(g);
    const float silu = g * sig;
    const float dsilu = sig * (1.0f + g * (1.0f - sig));
    Store(dgate, i, Load(dgate, i) + dy * u * dsilu);
    Store(dup, i, Load(dup, i) + dy * silu);
  }
}

}  // namespace

KernelStatus swiglu_fwd(HalfType type, uint16_t* out, const uint16_t* gate, const uint16_t* up,
                        int64_t n, cudaStream_t stream) {
  if (n == 0) return OkStatus();
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    swiglu_fwd_kernel<T>
        <<<GridFor(n, kThreads), kThreads, 0, stream>>>(As<T>(out), As<T>(gate), As<T>(up), n);
    return MOBIUS_KERNEL_LAUNCH_STATUS("swiglu_fwd_kernel");
  });
}

KernelStatus swiglu_bwd(HalfType type, uint16_t* dgate, uint16_t* dup, const uint16_t* dout,
                        const uint16_t* gate, const uint16_t* up, int64_t n, cudaStream_t stream) {
  if (n == 0) return OkStatus();
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    swiglu_bwd_kernel<T><<<GridFor(n, kThreads), kThreads, 0, stream>>>(
        As<T>(dgate), As<T>(dup), As<T>(dout), As<T>(gate), As<T>(up), n);
    return MOBIUS_KERNEL_LAUNCH_STATUS("swiglu_bwd_kernel");
  });
}

}  // namespace mobius::kernels::cuda
