#include "worker/kernels/cuda/device_utils.cuh"
#include "worker/kernels/cuda/rmsnorm.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::Bf16ToF32;
using internal::F32ToBf16;
using internal::kWarp;
using internal::Load;
using internal::Store;
using internal::WarpSum;

constexpr int kWarpsPerBlock = 8;

unsigned int RowBlocks(int64_t n) {
  return static_cast<unsigned int>((n + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

__global__ void rmsnorm_fwd_kernel(uint16_t* out, float* rstd, const uint16_t* inp,
                                   const uint16_t* weight, int64_t n, int64_t c, float eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= n) return;
  const uint16_t* x = inp + row * c;
  float ss = 0.0f;
  for (int64_t i = lane; i < c; i += kWarp) {
    const float v = Bf16ToF32(x[i]);
    ss += v * v;
  }
  const float s = 1.0f / sqrtf(WarpSum(ss) / c + eps);
  uint16_t* y = out + row * c;
  for (int64_t i = lane; i < c; i += kWarp) {
    y[i] = F32ToBf16(Bf16ToF32(weight[i]) * (Bf16ToF32(x[i]) * s));  // LlamaRMSNorm's order
  }
  if (lane == 0) rstd[row] = s;
}

// dx = s * w * dy - s^3 * x * mean(w * dy * x).
template <typename DInp>
__global__ void rmsnorm_bwd_kernel(DInp* dinp, const uint16_t* dout, const uint16_t* inp,
                                   const uint16_t* weight, const float* rstd, int64_t n,
                                   int64_t c) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= n) return;
  const uint16_t* x = inp + row * c;
  const uint16_t* dy = dout + row * c;
  const float s = rstd[row];
  float gx_sum = 0.0f;
  for (int64_t i = lane; i < c; i += kWarp) {
    gx_sum += Bf16ToF32(weight[i]) * Bf16ToF32(dy[i]) * Bf16ToF32(x[i]);
  }
  const float k = s * s * s * (WarpSum(gx_sum) / c);
  DInp* dx = dinp + row * c;
  for (int64_t i = lane; i < c; i += kWarp) {
    const float w = Bf16ToF32(weight[i]);
    Store(dx, i, Load(dx, i) + (s * w * Bf16ToF32(dy[i]) - k * Bf16ToF32(x[i])));
  }
}

// dweight += dy * x * rstd.
struct RmsNormParamTerm {
  static constexpr int kOuts = 1;
  const uint16_t* dout;
  const uint16_t* inp;
  const float* rstd;
  int64_t c;
  float* out[kOuts];
  __device__ void operator()(int64_t row, int64_t col, float* acc) const {
    acc[0] += Bf16ToF32(dout[row * c + col]) * Bf16ToF32(inp[row * c + col]) * rstd[row];
  }
};

template <typename DInp>
KernelStatus Backward(DInp* dinp, float* dweight, const uint16_t* dout, const uint16_t* inp,
                      const uint16_t* weight, const float* rstd, int64_t n, int64_t c,
                      cudaStream_t stream) {
  if (n == 0 || c == 0) return OkStatus();
  rmsnorm_bwd_kernel<DInp>
      <<<RowBlocks(n), kWarpsPerBlock * kWarp, 0, stream>>>(dinp, dout, inp, weight, rstd, n, c);
  MOBIUS_KERNEL_RETURN_IF_ERROR(MOBIUS_KERNEL_LAUNCH_STATUS("rmsnorm_bwd_kernel"));
  internal::LaunchColumnSums(RmsNormParamTerm{dout, inp, rstd, c, {dweight}}, n, c, stream);
  return MOBIUS_KERNEL_LAUNCH_STATUS("column_sums_kernel<RmsNormParamTerm>");
}

}  // namespace

KernelStatus rmsnorm_fwd(uint16_t* out, float* rstd, const uint16_t* inp, const uint16_t* weight,
                         int64_t n, int64_t c, float eps, cudaStream_t stream) {
  if (n == 0 || c == 0) return OkStatus();
  rmsnorm_fwd_kernel<<<RowBlocks(n), kWarpsPerBlock * kWarp, 0, stream>>>(out, rstd, inp, weight, n,
                                                                          c, eps);
  return MOBIUS_KERNEL_LAUNCH_STATUS("rmsnorm_fwd_kernel");
}

KernelStatus rmsnorm_bwd(uint16_t* dinp, float* dweight, const uint16_t* dout, const uint16_t* inp,
                         const uint16_t* weight, const float* rstd, int64_t n, int64_t c,
                         cudaStream_t stream) {
  return Backward(dinp, dweight, dout, inp, weight, rstd, n, c, stream);
}

KernelStatus rmsnorm_bwd(float* dinp, float* dweight, const uint16_t* dout, const uint16_t* inp,
                         const uint16_t* weight, const float* rstd, int64_t n, int64_t c,
                         cudaStream_t stream) {
  return Backward(dinp, dweight, dout, inp, weight, rstd, n, c, stream);
}

}  // namespace mobius::kernels::cuda
