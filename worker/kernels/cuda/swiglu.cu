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

// gpt-oss's clamps, written as std::min(gate, limit) and std::min(std::max(up, -limit), limit) on
// the CPU so that a NaN propagates the same way (fminf / fmaxf would drop it).
__device__ __forceinline__ float ClampGate(float gate, float limit) {
  return limit < gate ? limit : gate;
}
__device__ __forceinline__ float ClampUp(float up, float limit) {
  const float lo = up < -limit ? -limit : up;
  return limit < lo ? limit : lo;
}

// Element i of out [N, W] reads gate_up[2i] (gate) and gate_up[2i + 1] (up): row r's pairs start
// at 2 r W, so no division is needed.
template <typename T>
__global__ void clamped_swiglu_fwd_kernel(T* out, const T* gate_up, int64_t n, float alpha,
                                          float limit) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = ClampGate(Load(gate_up, 2 * i), limit);
    const float u = ClampUp(Load(gate_up, 2 * i + 1), limit);
    Store(out, i, (u + 1.0f) * (g * Sigmoid(alpha * g)));
  }
}

template <typename T>
__global__ void clamped_swiglu_bwd_kernel(T* dgate_up, const T* dout, const T* gate_up, int64_t n,
                                          float alpha, float limit) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float gate = Load(gate_up, 2 * i), up = Load(gate_up, 2 * i + 1), dy = Load(dout, i);
    const float g = ClampGate(gate, limit), u = ClampUp(up, limit);
    const float s = Sigmoid(alpha * g);
    const float dglu = dy * (u + 1.0f);
    Store(dgate_up, 2 * i, gate <= limit ? dglu * (s + alpha * g * s * (1.0f - s)) : 0.0f);
    Store(dgate_up, 2 * i + 1, up >= -limit && up <= limit ? dy * (g * s) : 0.0f);
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

KernelStatus clamped_swiglu_fwd(HalfType type, uint16_t* out, const uint16_t* gate_up, int64_t n,
                                int64_t width, float alpha, float limit, cudaStream_t stream) {
  const int64_t elems = n * width;
  if (elems == 0) return OkStatus();
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    clamped_swiglu_fwd_kernel<T><<<GridFor(elems, kThreads), kThreads, 0, stream>>>(
        As<T>(out), As<T>(gate_up), elems, alpha, limit);
    return MOBIUS_KERNEL_LAUNCH_STATUS("clamped_swiglu_fwd_kernel");
  });
}

KernelStatus clamped_swiglu_bwd(HalfType type, uint16_t* dgate_up, const uint16_t* dout,
                                const uint16_t* gate_up, int64_t n, int64_t width, float alpha,
                                float limit, cudaStream_t stream) {
  const int64_t elems = n * width;
  if (elems == 0) return OkStatus();
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    clamped_swiglu_bwd_kernel<T><<<GridFor(elems, kThreads), kThreads, 0, stream>>>(
        As<T>(dgate_up), As<T>(dout), As<T>(gate_up), elems, alpha, limit);
    return MOBIUS_KERNEL_LAUNCH_STATUS("clamped_swiglu_bwd_kernel");
  });
}

}  // namespace mobius::kernels::cuda
