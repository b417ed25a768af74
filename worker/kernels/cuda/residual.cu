#include "worker/kernels/cuda/device_utils.cuh"
#include "worker/kernels/cuda/residual.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::As;
using internal::GridFor;
using internal::Load;
using internal::Store;

constexpr int kThreads = 256;

template <typename T>
__global__ void residual_fwd_kernel(T* out, const T* a, const T* b, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    Store(out, i, Load(a, i) + Load(b, i));
  }
}

}  // namespace

KernelStatus residual_fwd(HalfType type, uint16_t* out, const uint16_t* a, const uint16_t* b,
                          int64_t n, cudaStream_t stream) {
  if (n == 0) return OkStatus();
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    residual_fwd_kernel<T>
        <<<GridFor(n, kThreads), kThreads, 0, stream>>>(As<T>(out), As<T>(a), As<T>(b), n);
    return MOBIUS_KERNEL_LAUNCH_STATUS("residual_fwd_kernel");
  });
}

}  // namespace mobius::kernels::cuda
