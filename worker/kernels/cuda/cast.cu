#include "worker/kernels/cuda/cast.cuh"
#include "worker/kernels/cuda/device_utils.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::As;
using internal::GridFor;
using internal::Load;
using internal::Store;

constexpr int kThreads = 256;

// One conversion per element through fp32 (exact for a 16-bit source; fp32 -> 16-bit rounds once).
template <typename Dst, typename Src>
__global__ void cast_kernel(Dst* dst, const Src* src, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    Store(dst, i, Load(src, i));
  }
}

template <typename Dst, typename Src>
KernelStatus Cast(Dst* dst, const Src* src, int64_t n, cudaStream_t stream) {
  if (n <= 0) return OkStatus();
  cast_kernel<Dst, Src><<<GridFor(n, kThreads), kThreads, 0, stream>>>(dst, src, n);
  return MOBIUS_KERNEL_LAUNCH_STATUS("cast_kernel");
}

template <typename Src>
__global__ void add_kernel(float* dst, const Src* src, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] += Load(src, i);
  }
}

template <typename Src>
KernelStatus Add(float* dst, const Src* src, int64_t n, cudaStream_t stream) {
  if (n <= 0) return OkStatus();
  add_kernel<Src><<<GridFor(n, kThreads), kThreads, 0, stream>>>(dst, src, n);
  return MOBIUS_KERNEL_LAUNCH_STATUS("add_kernel");
}

}  // namespace

KernelStatus add_half_to_fp32(HalfType src_type, float* dst, const uint16_t* src, int64_t n,
                              cudaStream_t stream) {
  return internal::DispatchHalf(src_type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Add(dst, As<T>(src), n, stream);
  });
}

KernelStatus add_fp32_to_fp32(float* dst, const float* src, int64_t n, cudaStream_t stream) {
  return Add(dst, src, n, stream);
}

KernelStatus cast_fp32_to_half(HalfType dst_type, uint16_t* dst, const float* src, int64_t n,
                               cudaStream_t stream) {
  return internal::DispatchHalf(dst_type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Cast(As<T>(dst), src, n, stream);
  });
}

KernelStatus cast_half_to_fp32(HalfType src_type, float* dst, const uint16_t* src, int64_t n,
                               cudaStream_t stream) {
  return internal::DispatchHalf(src_type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Cast(dst, As<T>(src), n, stream);
  });
}

KernelStatus cast_half_to_half(HalfType dst_type, HalfType src_type, uint16_t* dst,
                               const uint16_t* src, int64_t n, cudaStream_t stream) {
  return internal::DispatchHalf(dst_type, [&](auto dst_tag) {
    using D = typename decltype(dst_tag)::type;
    return internal::DispatchHalf(src_type, [&](auto src_tag) {
      using S = typename decltype(src_tag)::type;
      return Cast(As<D>(dst), As<S>(src), n, stream);
    });
  });
}

}  // namespace mobius::kernels::cuda
