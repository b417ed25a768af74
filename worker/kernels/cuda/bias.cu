#include "worker/kernels/cuda/bias.cuh"
#include "worker/kernels/cuda/device_utils.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::As;
using internal::GridFor;
using internal::Load;
using internal::Store;

constexpr int kThreads = 256;

template <typename R, typename T>
__global__ void bias_add_fwd_kernel(R* out, const R* inp, const T* bias, int64_t n, int64_t c) {
  const int64_t total = n * c;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    Store(out, i, Load(inp, i) + Load(bias, i % c));
  }
}

template <typename T>
struct BiasGradTerm {
  static constexpr int kOuts = 1;
  const T* dout;
  int64_t c;
  float* out[kOuts];
  __device__ void operator()(int64_t row, int64_t col, float* acc) const {
    acc[0] += Load(dout, row * c + col);
  }
};

template <typename T>
KernelStatus BiasBackward(float* dbias, const T* dout, int64_t n, int64_t c, cudaStream_t stream) {
  internal::LaunchColumnSums(BiasGradTerm<T>{dout, c, {dbias}}, n, c, stream);
  return MOBIUS_KERNEL_LAUNCH_STATUS("column_sums_kernel<BiasGradTerm> (bias_bwd)");
}

}  // namespace

KernelStatus bias_add_fwd(HalfType type, uint16_t* out, const uint16_t* inp, const uint16_t* bias,
                          int64_t n, int64_t c, cudaStream_t stream) {
  if (n * c == 0) return OkStatus();
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    bias_add_fwd_kernel<T, T><<<GridFor(n * c, kThreads), kThreads, 0, stream>>>(
        As<T>(out), As<T>(inp), As<T>(bias), n, c);
    return MOBIUS_KERNEL_LAUNCH_STATUS("bias_add_fwd_kernel");
  });
}

KernelStatus bias_add_fwd_f32(HalfType bias_type, float* out, const float* inp,
                              const uint16_t* bias, int64_t n, int64_t c, cudaStream_t stream) {
  if (n * c == 0) return OkStatus();
  return internal::DispatchHalf(bias_type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    bias_add_fwd_kernel<float, T><<<GridFor(n * c, kThreads), kThreads, 0, stream>>>(
        out, inp, As<T>(bias), n, c);
    return MOBIUS_KERNEL_LAUNCH_STATUS("bias_add_fwd_kernel (fp32 rows)");
  });
}

KernelStatus bias_bwd(HalfType dout_type, float* dbias, const uint16_t* dout, int64_t n, int64_t c,
                      cudaStream_t stream) {
  return internal::DispatchHalf(dout_type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return BiasBackward(dbias, As<T>(dout), n, c, stream);
  });
}

KernelStatus bias_bwd(float* dbias, const float* dout, int64_t n, int64_t c, cudaStream_t stream) {
  return BiasBackward(dbias, dout, n, c, stream);
}

}  // namespace mobius::kernels::cuda
