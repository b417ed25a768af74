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

__global__ void sum_squares_chunks_kernel(double* out, const float* x, int64_t n, int64_t chunk,
                                          int64_t chunks) {
  __shared__ double part[kThreads / kWarp];
  for (int64_t j = blockIdx.x; j < chunks; j += gridDim.x) {
    const int64_t begin = j * chunk;
    const int64_t end = begin + chunk < n ? begin + chunk : n;
    double acc = 0.0;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const double v = x[i];
      acc += v * v;
    }
    acc = WarpSumDouble(acc);
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    __syncthreads();  // part may still be read for the previous chunk
    if (lane == 0) part[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      acc = lane < kThreads / kWarp ? part[lane] : 0.0;
      acc = WarpSumDouble(acc);
      if (lane == 0) out[j] += acc;
    }
  }
}

}  // namespace

KernelStatus sum_squares_chunks(double* out, const float* x, int64_t n, int64_t chunk,
                                cudaStream_t stream) {
  if (n <= 0) return OkStatus();
  if (chunk <= 0) return InvalidArgument("sum_squares_chunks: chunk must be positive");
  const int64_t chunks = (n + chunk - 1) / chunk;
  const int64_t blocks = chunks < 65535 ? chunks : 65535;
  sum_squares_chunks_kernel<<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(
      out, x, n, chunk, chunks);
  return MOBIUS_KERNEL_LAUNCH_STATUS("sum_squares_chunks_kernel");
}

KernelStatus sum_squares(double* out, const float* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return OkStatus();
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  sum_squares_kernel<<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(out, x, n);
  return MOBIUS_KERNEL_LAUNCH_STATUS("sum_squares_kernel");
}

}  // namespace mobius::kernels::cuda
