#include "worker/kernels/cuda/device_utils.cuh"
#include "worker/kernels/cuda/rmsnorm.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::As;
using internal::kWarp;
using internal::Load;
using internal::Store;
using internal::WarpSum;

constexpr int kWarpsPerBlock = 8;

unsigned int RowBlocks(int64_t n) {
  return static_cast<unsigned int>((n + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

// T: the storage type of the 16-bit tensors (uint16_t bf16 or __half fp16).
template <typename T>
__global__ void rmsnorm_fwd_kernel(T* out, float* rstd, const T* inp, const T* weight, int64_t n,
                                   int64_t c, float eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= n) return;
  const T* x = inp + row * c;
  float ss = 0.0f;
  for (int64_t i = lane; i < c; i += kWarp) {
    const float v = Load(x, i);
    ss += v * v;
  }
  const float s = 1.0f / sqrtf(WarpSum(ss) / c + eps);
  T* y = out + row * c;
  for (int64_t i = lane; i < c; i += kWarp) {
    Store(y, i, Load(weight, i) * (Load(x, i) * s));  // LlamaRMSNorm's order
  }
  if (lane == 0) rstd[row] = s;
}

// dx = s * w * dy - s^3 * x * mean(w * dy * x).
template <typename T, typename DInp>
__global__ void rmsnorm_bwd_kernel(DInp* dinp, const T* dout, const T* inp, const T* weight,
                                   const float* rstd, int64_t n, int64_t c) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= n) return;
  const T* x = inp + row * c;
  const T* dy = dout + row * c;
  const float s = rstd[row];
  float gx_sum = 0.0f;
  for (int64_t i = lane; i < c; i += kWarp) gx_sum += Load(weight, i) * Load(dy, i) * Load(x, i);
  const float k = s * s * s * (WarpSum(gx_sum) / c);
  DInp* dx = dinp + row * c;
  for (int64_t i = lane; i < c; i += kWarp) {
    const float w = Load(weight, i);
    Store(dx, i, Load(dx, i) + (s * w * Load(dy, i) - k * Load(x, i)));
  }
}

// dweight += dy * x * rstd.
template <typename T>
struct RmsNormParamTerm {
  static constexpr int kOuts = 1;
  const T* dout;
  const T* inp;
  const float* rstd;
  int64_t c;
  float* out[kOuts];
  __device__ void operator()(int64_t row, int64_t col, float* acc) const {
    acc[0] += Load(dout, row * c + col) * Load(inp, row * c + col) * rstd[row];
  }
};

template <typename T, typename DInp>
KernelStatus Backward(DInp* dinp, float* dweight, const T* dout, const T* inp, const T* weight,
                      const float* rstd, int64_t n, int64_t c, cudaStream_t stream) {
  if (n == 0 || c == 0) return OkStatus();
  rmsnorm_bwd_kernel<T, DInp>
      <<<RowBlocks(n), kWarpsPerBlock * kWarp, 0, stream>>>(dinp, dout, inp, weight, rstd, n, c);
  MOBIUS_KERNEL_RETURN_IF_ERROR(MOBIUS_KERNEL_LAUNCH_STATUS("rmsnorm_bwd_kernel"));
  internal::LaunchColumnSums(RmsNormParamTerm<T>{dout, inp, rstd, c, {dweight}}, n, c, stream);
  return MOBIUS_KERNEL_LAUNCH_STATUS("column_sums_kernel<RmsNormParamTerm>");
}

}  // namespace

KernelStatus rmsnorm_fwd(HalfType type, uint16_t* out, float* rstd, const uint16_t* inp,
                         const uint16_t* weight, int64_t n, int64_t c, float eps,
                         cudaStream_t stream) {
  if (n == 0 || c == 0) return OkStatus();
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    rmsnorm_fwd_kernel<T><<<RowBlocks(n), kWarpsPerBlock * kWarp, 0, stream>>>(
        As<T>(out), rstd, As<T>(inp), As<T>(weight), n, c, eps);
    return MOBIUS_KERNEL_LAUNCH_STATUS("rmsnorm_fwd_kernel");
  });
}

KernelStatus rmsnorm_bwd(HalfType type, uint16_t* dinp, float* dweight, const uint16_t* dout,
                         const uint16_t* inp, const uint16_t* weight, const float* rstd, int64_t n,
                         int64_t c, cudaStream_t stream) {
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Backward(As<T>(dinp), dweight, As<T>(dout), As<T>(inp), As<T>(weight), rstd, n, c,
                    stream);
  });
}

KernelStatus rmsnorm_bwd(HalfType type, float* dinp, float* dweight, const uint16_t* dout,
                         const uint16_t* inp, const uint16_t* weight, const float* rstd, int64_t n,
                         int64_t c, cudaStream_t stream) {
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Backward(dinp, dweight, As<T>(dout), As<T>(inp), As<T>(weight), rstd, n, c, stream);
  });
}

}  // namespace mobius::kernels::cuda
