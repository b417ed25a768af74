#include <string>

#include "worker/kernels/cuda/device_utils.cuh"
#include "worker/kernels/cuda/rope.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::As;
using internal::GridFor;
using internal::Load;
using internal::Store;

constexpr int kThreads = 256;

__global__ void rope_tables_kernel(float* cos_out, float* sin_out, const float* inv_freq, int64_t t,
                                   int64_t half, float scale) {
  const int64_t total = t * half;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float angle = __fmul_rn(static_cast<float>(i / half), inv_freq[i % half]);
    cos_out[i] = __fmul_rn(static_cast<float>(cos(static_cast<double>(angle))), scale);
    sin_out[i] = __fmul_rn(static_cast<float>(sin(static_cast<double>(angle))), scale);
  }
}

// One thread per rotated pair (bt, head, i < half): the forward rotates by a, the backward by -a
// and accumulates.
template <bool kBackward, typename T>
__device__ __forceinline__ void RotatePairs(T* out, const T* inp, const float* cos_t,
                                            const float* sin_t, int64_t n_pairs, int64_t t,
                                            int64_t nh, int64_t half) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n_pairs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t d = i % half, row = i / half;  // row = (bt, head)
    const int64_t pos = row / nh % t;
    const int64_t off = row * 2 * half + d;
    const float c = cos_t[pos * half + d], s = sin_t[pos * half + d];
    const float x0 = Load(inp, off), x1 = Load(inp, off + half);
    if (kBackward) {
      Store(out, off, Load(out, off) + (x0 * c + x1 * s));
      Store(out, off + half, Load(out, off + half) + (x1 * c - x0 * s));
    } else {
      Store(out, off, x0 * c - x1 * s);
      Store(out, off + half, x1 * c + x0 * s);
    }
  }
}

template <typename T>
__global__ void rope_fwd_kernel(T* out, const T* inp, const float* cos_t, const float* sin_t,
                                int64_t n_pairs, int64_t t, int64_t nh, int64_t half) {
  RotatePairs<false>(out, inp, cos_t, sin_t, n_pairs, t, nh, half);
}

template <typename T>
__global__ void rope_bwd_kernel(T* dinp, const T* dout, const float* cos_t, const float* sin_t,
                                int64_t n_pairs, int64_t t, int64_t nh, int64_t half) {
  RotatePairs<true>(dinp, dout, cos_t, sin_t, n_pairs, t, nh, half);
}

template <bool kBackward, typename T>
KernelStatus Rope(T* out, const T* inp, const float* cos, const float* sin, int64_t b, int64_t t,
                  int64_t nh, int64_t head_dim, cudaStream_t stream) {
  if (head_dim % 2 != 0) {
    return InvalidArgument("rope: head_dim " + std::to_string(head_dim) + " is odd");
  }
  const int64_t half = head_dim / 2, n_pairs = b * t * nh * half;
  if (n_pairs == 0) return OkStatus();
  if (kBackward) {
    rope_bwd_kernel<T><<<GridFor(n_pairs, kThreads), kThreads, 0, stream>>>(out, inp, cos, sin,
                                                                            n_pairs, t, nh, half);
  } else {
    rope_fwd_kernel<T><<<GridFor(n_pairs, kThreads), kThreads, 0, stream>>>(out, inp, cos, sin,
                                                                            n_pairs, t, nh, half);
  }
  return MOBIUS_KERNEL_LAUNCH_STATUS(kBackward ? "rope_bwd_kernel" : "rope_fwd_kernel");
}

}  // namespace

KernelStatus rope_tables(float* cos, float* sin, const float* inv_freq, int64_t t, int64_t half,
                         float scale, cudaStream_t stream) {
  if (t * half == 0) return OkStatus();
  rope_tables_kernel<<<GridFor(t * half, kThreads), kThreads, 0, stream>>>(cos, sin, inv_freq, t,
                                                                           half, scale);
  return MOBIUS_KERNEL_LAUNCH_STATUS("rope_tables_kernel");
}

KernelStatus rope_fwd(HalfType type, uint16_t* out, const uint16_t* inp, const float* cos,
                      const float* sin, int64_t b, int64_t t, int64_t nh, int64_t head_dim,
                      cudaStream_t stream) {
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Rope<false>(As<T>(out), As<T>(inp), cos, sin, b, t, nh, head_dim, stream);
  });
}

KernelStatus rope_bwd(HalfType type, uint16_t* dinp, const uint16_t* dout, const float* cos,
                      const float* sin, int64_t b, int64_t t, int64_t nh, int64_t head_dim,
                      cudaStream_t stream) {
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Rope<true>(As<T>(dinp), As<T>(dout), cos, sin, b, t, nh, head_dim, stream);
  });
}

}  // namespace mobius::kernels::cuda
