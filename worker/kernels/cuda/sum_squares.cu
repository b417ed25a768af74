#include "worker/kernels/cuda/device_utils.cuh"
#include "worker/kernels/cuda/sum_squares.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::kWarp;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1024;  // enough to fill any current GPU; keeps the atomics few

__device__ __forceinline__ double WarpSumDouble(double x) {
  for (int off = kWarp / 2; off > 0; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

__global__ void sum_squares_kernel(double* out, const float* x, int64_t n) {
  __shared__ double part[kThreads / kWarp];
  double acc = 0.0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double v = x[i];
    acc += v * v;
  }
  acc = WarpSumDouble(acc);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) part[warp] = acc;
  __syncthreads();
  if (warp != 0) return;
  acc = lane < kThreads / kWarp ? part[lane] : 0.0;
  acc = WarpSumDouble(acc);
  if (lane == 0) atomicAdd(out, acc);
}

}  // namespace

KernelStatus sum_squares(double* out, const float* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return OkStatus();
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  sum_squares_kernel<<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(out, x, n);
  return MOBIUS_KERNEL_LAUNCH_STATUS("sum_squares_kernel");
}

}  // namespace mobius::kernels::cuda
