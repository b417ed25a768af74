#include "worker/kernels/cuda/device_utils.cuh"
#include "worker/kernels/cuda/layernorm.cuh"

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
__global__ void layernorm_fwd_kernel(T* out, float* mean, float* rstd, const T* inp,
                                     const T* weight, const T* bias, int64_t n, int64_t c,
                                     float eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= n) return;
  const T* x = inp + row * c;
  float sum = 0.0f;
  for (int64_t i = lane; i < c; i += kWarp) sum += Load(x, i);
  const float m = WarpSum(sum) / c;
  float var = 0.0f;
  for (int64_t i = lane; i < c; i += kWarp) {
    const float d = Load(x, i) - m;
    var += d * d;
  }
  const float s = 1.0f / sqrtf(WarpSum(var) / c + eps);
  T* y = out + row * c;  // may alias x: each element is read before its own write
  for (int64_t i = lane; i < c; i += kWarp) {
    const float b = bias == nullptr ? 0.0f : Load(bias, i);
    Store(y, i, (Load(x, i) - m) * s * Load(weight, i) + b);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = weight * dy.
template <typename T, typename DInp>
__global__ void layernorm_bwd_kernel(DInp* dinp, const T* dout, const T* inp, const T* weight,
                                     const float* mean, const float* rstd, int64_t n, int64_t c) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= n) return;
  const T* x = inp + row * c;
  const T* dy = dout + row * c;
  const float m = mean[row], s = rstd[row];
  float g_sum = 0.0f, gx_sum = 0.0f;
  for (int64_t i = lane; i < c; i += kWarp) {
    const float g = Load(weight, i) * Load(dy, i);
    g_sum += g;
    gx_sum += g * (Load(x, i) - m) * s;
  }
  const float g_mean = WarpSum(g_sum) / c, gx_mean = WarpSum(gx_sum) / c;
  DInp* dx = dinp + row * c;
  for (int64_t i = lane; i < c; i += kWarp) {
    const float xhat = (Load(x, i) - m) * s;
    const float g = Load(weight, i) * Load(dy, i);
    Store(dx, i, Load(dx, i) + s * (g - g_mean - xhat * gx_mean));
  }
}

// dweight += dy * xhat, dbias += dy.
template <typename T>
struct LayerNormParamTerm {
  static constexpr int kOuts = 2;
  const T* dout;
  const T* inp;
  const float* mean;
  const float* rstd;
  int64_t c;
  float* out[kOuts];
  __device__ void operator()(int64_t row, int64_t col, float* acc) const {
    const float dy = Load(dout, row * c + col);
    acc[0] += dy * ((Load(inp, row * c + col) - mean[row]) * rstd[row]);
    acc[1] += dy;
  }
};

template <typename T, typename DInp>
KernelStatus Backward(DInp* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                      const T* weight, const float* mean, const float* rstd, int64_t n, int64_t c,
                      cudaStream_t stream) {
  if (n == 0 || c == 0) return OkStatus();
  layernorm_bwd_kernel<T, DInp><<<RowBlocks(n), kWarpsPerBlock * kWarp, 0, stream>>>(
      dinp, dout, inp, weight, mean, rstd, n, c);
  MOBIUS_KERNEL_RETURN_IF_ERROR(MOBIUS_KERNEL_LAUNCH_STATUS("layernorm_bwd_kernel"));
  internal::LaunchColumnSums(LayerNormParamTerm<T>{dout, inp, mean, rstd, c, {dweight, dbias}}, n,
                             c, stream);
  return MOBIUS_KERNEL_LAUNCH_STATUS("column_sums_kernel<LayerNormParamTerm>");
}

}  // namespace

KernelStatus layernorm_fwd(HalfType type, uint16_t* out, float* mean, float* rstd,
                           const uint16_t* inp, const uint16_t* weight, const uint16_t* bias,
                           int64_t n, int64_t c, float eps, cudaStream_t stream) {
  if (n == 0 || c == 0) return OkStatus();
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    layernorm_fwd_kernel<T><<<RowBlocks(n), kWarpsPerBlock * kWarp, 0, stream>>>(
        As<T>(out), mean, rstd, As<T>(inp), As<T>(weight), As<T>(bias), n, c, eps);
    return MOBIUS_KERNEL_LAUNCH_STATUS("layernorm_fwd_kernel");
  });
}

KernelStatus layernorm_bwd(HalfType type, uint16_t* dinp, float* dweight, float* dbias,
                           const uint16_t* dout, const uint16_t* inp, const uint16_t* weight,
                           const float* mean, const float* rstd, int64_t n, int64_t c,
                           cudaStream_t stream) {
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Backward(As<T>(dinp), dweight, dbias, As<T>(dout), As<T>(inp), As<T>(weight), mean, rstd,
                    n, c, stream);
  });
}

KernelStatus layernorm_bwd(HalfType type, float* dinp, float* dweight, float* dbias,
                           const uint16_t* dout, const uint16_t* inp, const uint16_t* weight,
                           const float* mean, const float* rstd, int64_t n, int64_t c,
                           cudaStream_t stream) {
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Backward(dinp, dweight, dbias, As<T>(dout), As<T>(inp), As<T>(weight), mean, rstd, n, c,
                    stream);
  });
}

}  // namespace mobius::kernels::cuda
