#include "worker/kernels/cuda/cross_entropy.cuh"
#include "worker/kernels/cuda/device_utils.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::As;
using internal::BlockMax;
using internal::BlockSum;
using internal::kWarp;
using internal::Load;
using internal::Store;

constexpr int kThreads = 256;       // per row
constexpr int kMeanThreads = 1024;  // the one block that forms the mean

__device__ __forceinline__ bool Counted(int32_t target, int64_t v) {
  return target >= 0 && target < v;
}

template <typename T>
__global__ void cross_entropy_fwd_kernel(float* losses, float* lse, const T* logits,
                                         const int32_t* targets, int64_t v,
                                         int32_t* invalid_count) {
  __shared__ float scratch[kWarp];
  const int64_t row = blockIdx.x;
  const int32_t target = targets[row];
  if (!Counted(target, v)) {
    if (threadIdx.x == 0) {
      losses[row] = 0.0f;
      lse[row] = 0.0f;
      if (target != kIgnoreIndex && invalid_count != nullptr) atomicAdd(invalid_count, 1);
    }
    return;
  }
  const T* z = logits + row * v;
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < v; i += blockDim.x) m = fmaxf(m, Load(z, i));
  m = BlockMax(m, scratch);
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < v; i += blockDim.x) sum += expf(Load(z, i) - m);
  sum = BlockSum(sum, scratch);
  if (threadIdx.x == 0) {
    const float l = m + logf(sum);
    lse[row] = l;
    losses[row] = l - Load(z, target);
  }
}

// mean_loss = sum of counted losses / count, in double, in a fixed order.
__global__ void cross_entropy_mean_kernel(float* mean_loss, const float* losses,
                                          const int32_t* targets, int64_t n, int64_t v) {
  __shared__ double sums[kMeanThreads];
  __shared__ long long counts[kMeanThreads];
  double sum = 0.0;
  long long count = 0;
  for (int64_t row = threadIdx.x; row < n; row += blockDim.x) {
    if (!Counted(targets[row], v)) continue;
    sum += losses[row];
    ++count;
  }
  sums[threadIdx.x] = sum;
  counts[threadIdx.x] = count;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      sums[threadIdx.x] += sums[threadIdx.x + stride];
      counts[threadIdx.x] += counts[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    *mean_loss = counts[0] == 0 ? 0.0f : static_cast<float>(sums[0] / counts[0]);
  }
}

// counted / counted_n: the rows the count covers (the call's, or the whole microbatch's when
// chunked).
template <typename T>
__global__ void cross_entropy_bwd_kernel(T* dlogits, const T* logits, const float* lse,
                                         const int32_t* targets, const int32_t* counted,
                                         int64_t counted_n, int64_t v, float dloss) {
  // Every block counts the rows itself (counted_n int32 reads, from L2 after the first block):
  // the op has no workspace for a separate count.
  int64_t count = 0;
  for (int64_t r0 = 0; r0 < counted_n; r0 += blockDim.x) {
    const int64_t r = r0 + threadIdx.x;
    count += __syncthreads_count(r < counted_n && Counted(counted[r], v));
  }
  const float scale = count == 0 ? 0.0f : static_cast<float>(static_cast<double>(dloss) / count);
  const int64_t row = blockIdx.x;
  const int32_t target = targets[row];
  T* dz = dlogits + row * v;
  if (!Counted(target, v)) {
    for (int64_t i = threadIdx.x; i < v; i += blockDim.x) Store(dz, i, 0.0f);
    return;
  }
  const T* z = logits + row * v;
  const float m = lse[row];
  // Each element is read and written by the same thread, so dlogits may alias logits.
  for (int64_t i = threadIdx.x; i < v; i += blockDim.x) {
    const float p = expf(Load(z, i) - m);
    Store(dz, i, (i == target ? p - 1.0f : p) * scale);
  }
}

template <typename T>
KernelStatus Forward(float* losses, float* lse, float* mean_loss, const T* logits,
                     const int32_t* targets, int64_t n, int64_t v, int32_t* invalid_count,
                     cudaStream_t stream, int64_t row0, int64_t total_rows) {
  if (n > 0) {
    cross_entropy_fwd_kernel<T><<<static_cast<unsigned int>(n), kThreads, 0, stream>>>(
        losses, lse, logits, targets, v, invalid_count);
    MOBIUS_KERNEL_RETURN_IF_ERROR(MOBIUS_KERNEL_LAUNCH_STATUS("cross_entropy_fwd_kernel"));
  }
  if (mean_loss == nullptr) return OkStatus();
  const bool chunked = total_rows > 0;
  cross_entropy_mean_kernel<<<1, kMeanThreads, 0, stream>>>(
      mean_loss, chunked ? losses - row0 : losses, chunked ? targets - row0 : targets,
      chunked ? total_rows : n, v);
  return MOBIUS_KERNEL_LAUNCH_STATUS("cross_entropy_mean_kernel");
}

template <typename T>
KernelStatus Backward(T* dlogits, const T* logits, const float* lse, const int32_t* targets,
                      int64_t n, int64_t v, float dloss, cudaStream_t stream, int64_t row0,
                      int64_t total_rows) {
  if (n == 0) return OkStatus();
  const bool chunked = total_rows > 0;
  cross_entropy_bwd_kernel<T><<<static_cast<unsigned int>(n), kThreads, 0, stream>>>(
      dlogits, logits, lse, targets, chunked ? targets - row0 : targets,
      chunked ? total_rows : n, v, dloss);
  return MOBIUS_KERNEL_LAUNCH_STATUS("cross_entropy_bwd_kernel");
}

}  // namespace

KernelStatus cross_entropy_fwd(HalfType logits_type, float* losses, float* lse, float* mean_loss,
                               const uint16_t* logits, const int32_t* targets, int64_t n, int64_t v,
                               int32_t* invalid_count, cudaStream_t stream, int64_t row0,
                               int64_t total_rows) {
  return internal::DispatchHalf(logits_type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Forward(losses, lse, mean_loss, As<T>(logits), targets, n, v, invalid_count, stream,
                   row0, total_rows);
  });
}
KernelStatus cross_entropy_fwd(float* losses, float* lse, float* mean_loss, const float* logits,
                               const int32_t* targets, int64_t n, int64_t v, int32_t* invalid_count,
                               cudaStream_t stream, int64_t row0, int64_t total_rows) {
  return Forward(losses, lse, mean_loss, logits, targets, n, v, invalid_count, stream, row0,
                 total_rows);
}

KernelStatus cross_entropy_bwd(HalfType logits_type, uint16_t* dlogits, const uint16_t* logits,
                               const float* lse, const int32_t* targets, int64_t n, int64_t v,
                               float dloss, cudaStream_t stream, int64_t row0,
                               int64_t total_rows) {
  return internal::DispatchHalf(logits_type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Backward(As<T>(dlogits), As<T>(logits), lse, targets, n, v, dloss, stream, row0,
                    total_rows);
  });
}
KernelStatus cross_entropy_bwd(float* dlogits, const float* logits, const float* lse,
                               const int32_t* targets, int64_t n, int64_t v, float dloss,
                               cudaStream_t stream, int64_t row0, int64_t total_rows) {
  return Backward(dlogits, logits, lse, targets, n, v, dloss, stream, row0, total_rows);
}

}  // namespace mobius::kernels::cuda
