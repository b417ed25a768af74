#include "worker/kernels/cuda/device_utils.cuh"
#include "worker/kernels/cuda/dropout.cuh"
#include "worker/kernels/dropout_mask.h"

namespace mobius::kernels::cuda {
namespace {

using internal::As;
using internal::GridFor;
using internal::Load;

constexpr int kThreads = 256;

template <typename T>
__global__ void dropout_kernel(float* out, const T* inp, int64_t n, int64_t c, float p,
                               float scale, uint64_t key, int64_t row_offset, bool accumulate) {
  const int64_t total = n * c;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / c, col = i - row * c;
    const float v = DropoutKeep(key, static_cast<uint64_t>(row_offset + row),
                                static_cast<uint64_t>(col), p)
                        ? __fmul_rn(Load(inp, i), scale)
                        : 0.0f;
    out[i] = accumulate ? __fadd_rn(out[i], v) : v;
  }
}

template <typename T>
KernelStatus Launch(float* out, const T* inp, int64_t n, int64_t c, float p, uint64_t key,
                    int64_t row_offset, bool accumulate, cudaStream_t stream) {
  if (n == 0 || c == 0) return OkStatus();
  const float scale = 1.0f / (1.0f - p);
  dropout_kernel<<<GridFor(n * c, kThreads), kThreads, 0, stream>>>(out, inp, n, c, p, scale, key,
                                                                     row_offset, accumulate);
  return MOBIUS_KERNEL_LAUNCH_STATUS("dropout_kernel");
}

}  // namespace

KernelStatus dropout(HalfType inp_type, float* out, const uint16_t* inp, int64_t n, int64_t c,
                     float p, uint64_t key, int64_t row_offset, bool accumulate,
                     cudaStream_t stream) {
  return internal::DispatchHalf(inp_type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Launch(out, As<T>(inp), n, c, p, key, row_offset, accumulate, stream);
  });
}

KernelStatus dropout(float* out, const float* inp, int64_t n, int64_t c, float p, uint64_t key,
                     int64_t row_offset, bool accumulate, cudaStream_t stream) {
  return Launch(out, inp, n, c, p, key, row_offset, accumulate, stream);
}

}  // namespace mobius::kernels::cuda
