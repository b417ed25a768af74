#include "worker/kernels/cuda/bias.cuh"
#include "worker/kernels/cuda/device_utils.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::Bf16ToF32;
using internal::F32ToBf16;
using internal::GridFor;

constexpr int kThreads = 256;

__global__ void bias_add_fwd_kernel(uint16_t* out, const uint16_t* inp, const uint16_t* bias,
                                    int64_t n, int64_t c) {
  const int64_t total = n * c;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = F32ToBf16(Bf16ToF32(inp[i]) + Bf16ToF32(bias[i % c]));
  }
}

template <typename T>
struct BiasGradTerm {
  static constexpr int kOuts = 1;
  const T* dout;
  int64_t c;
  float* out[kOuts];
  __device__ void operator()(int64_t row, int64_t col, float* acc) const {
    acc[0] += internal::Load(dout, row * c + col);
  }
};

template <typename T>
KernelStatus BiasBackward(float* dbias, const T* dout, int64_t n, int64_t c, cudaStream_t stream) {
  internal::LaunchColumnSums(BiasGradTerm<T>{dout, c, {dbias}}, n, c, stream);
  return MOBIUS_KERNEL_LAUNCH_STATUS("column_sums_kernel<BiasGradTerm> (bias_bwd)");
}

}  // namespace

KernelStatus bias_add_fwd(uint16_t* out, const uint16_t* inp, const uint16_t* bias, int64_t n,
                          int64_t c, cudaStream_t stream) {
  if (n * c == 0) return OkStatus();
  bias_add_fwd_kernel<<<GridFor(n * c, kThreads), kThreads, 0, stream>>>(out, inp, bias, n, c);
  return MOBIUS_KERNEL_LAUNCH_STATUS("bias_add_fwd_kernel");
}

KernelStatus bias_bwd(float* dbias, const uint16_t* dout, int64_t n, int64_t c,
                      cudaStream_t stream) {
  return BiasBackward(dbias, dout, n, c, stream);
}

KernelStatus bias_bwd(float* dbias, const float* dout, int64_t n, int64_t c, cudaStream_t stream) {
  return BiasBackward(dbias, dout, n, c, stream);
}

}  // namespace mobius::kernels::cuda
