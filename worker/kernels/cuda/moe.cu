#include "worker/kernels/cuda/device_utils.cuh"
#include "worker/kernels/cuda/moe.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::As;
using internal::GridFor;
using internal::kWarp;
using internal::Load;
using internal::Store;
using internal::WarpSum;

constexpr int kThreads = 256;
constexpr int kMaxK = 64;  // backend::kMaxMoeTopK

#define MOBIUS_GRID_STRIDE(i, n)                                                           \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// Token t's K slot positions in increasing order (insertion sort; K is small).
__device__ __forceinline__ void SortedSlots(const int32_t* pos, int64_t t, int64_t k,
                                            int32_t* out) {
  for (int64_t j = 0; j < k; ++j) {
    const int32_t p = pos[t * k + j];
    int64_t m = j;
    while (m > 0 && out[m - 1] > p) {
      out[m] = out[m - 1];
      --m;
    }
    out[m] = p;
  }
}

__global__ void route_kernel(float* probs, int32_t* ids, float* weights, const float* logits,
                             int64_t n, int64_t e, int64_t k, bool renormalize) {
  MOBIUS_GRID_STRIDE(t, n) {
    const float* l = logits + t * e;
    float* p = probs + t * e;
    float max = l[0];
    for (int64_t i = 1; i < e; ++i) max = fmaxf(max, l[i]);
    float sum = 0.0f;
    for (int64_t i = 0; i < e; ++i) sum += expf(l[i] - max);
    for (int64_t i = 0; i < e; ++i) p[i] = expf(l[i] - max) / sum;
    float chosen = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      int32_t best = -1;
      for (int32_t i = 0; i < e; ++i) {
        bool taken = false;
        for (int64_t m = 0; m < j; ++m) taken |= ids[t * k + m] == i;
        if (!taken && (best < 0 || p[i] > p[best])) best = i;
      }
      ids[t * k + j] = best;
      chosen += p[best];
    }
    for (int64_t j = 0; j < k; ++j) {
      const float pj = p[ids[t * k + j]];
      weights[t * k + j] = renormalize ? pj / chosen : pj;
    }
  }
}

// offsets[e + 1] = #rows routed to e (one thread per expert, in row order).
__global__ void count_kernel(int32_t* offsets, const int32_t* ids, int64_t rows, int64_t e) {
  MOBIUS_GRID_STRIDE(x, e) {
    int32_t count = 0;
    for (int64_t r = 0; r < rows; ++r) count += ids[r] == x;
    offsets[x + 1] = count;
  }
}

__global__ void scan_kernel(int32_t* offsets, int64_t e) {
  offsets[0] = 0;
  for (int64_t i = 0; i < e; ++i) offsets[i + 1] += offsets[i];
}

__global__ void place_kernel(int32_t* order, int32_t* pos, const int32_t* offsets,
                             const int32_t* ids, int64_t rows, int64_t e) {
  MOBIUS_GRID_STRIDE(x, e) {
    int32_t p = offsets[x];
    for (int64_t r = 0; r < rows; ++r) {
      if (ids[r] != x) continue;
      order[p] = static_cast<int32_t>(r);
      pos[r] = p++;
    }
  }
}

__global__ void route_bwd_kernel(float* dlogits, const float* dweights, const float* aux_grad,
                                 const float* probs, const int32_t* ids, const float* weights,
                                 int64_t n, int64_t e, int64_t k, bool renormalize) {
  MOBIUS_GRID_STRIDE(t, n) {
    const float* p = probs + t * e;
    const float* w = weights + t * k;
    const float* dw = dweights + t * k;
    float dsel[kMaxK];
    float s = 0.0f, dot = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      s += p[ids[t * k + j]];
      dot += dw[j] * w[j];
    }
    float pdp = 0.0f;
    if (aux_grad != nullptr) {
      for (int64_t i = 0; i < e; ++i) pdp += p[i] * aux_grad[i];
    }
    for (int64_t j = 0; j < k; ++j) {
      dsel[j] = renormalize ? (dw[j] - dot) / s : dw[j];
      pdp += p[ids[t * k + j]] * dsel[j];
    }
    for (int64_t i = 0; i < e; ++i) {
      float dp = aux_grad != nullptr ? aux_grad[i] : 0.0f;
      for (int64_t j = 0; j < k; ++j) dp += ids[t * k + j] == i ? dsel[j] : 0.0f;
      dlogits[t * e + i] = p[i] * (dp - pdp);
    }
  }
}

template <typename T>
__global__ void gather_kernel(T* dst, const T* src, const int32_t* order, int64_t rows, int64_t k,
                              int64_t c) {
  MOBIUS_GRID_STRIDE(i, rows * c) {
    const int64_t r = i / c, x = i % c;
    dst[i] = src[static_cast<int64_t>(order[r] / k) * c + x];
  }
}

template <typename T>
__global__ void combine_kernel(T* out, const T* y, const int32_t* pos, const float* weights,
                               int64_t n, int64_t k, int64_t c) {
  MOBIUS_GRID_STRIDE(i, n * c) {
    const int64_t t = i / c, x = i % c;
    int32_t slots[kMaxK];
    SortedSlots(pos, t, k, slots);
    float acc = 0.0f;
    for (int64_t s = 0; s < k; ++s) {
      int64_t j = 0;
      while (pos[t * k + j] != slots[s]) ++j;
      acc += weights[t * k + j] * Load(y, static_cast<int64_t>(slots[s]) * c + x);
    }
    Store(out, i, acc);
  }
}

__global__ void combine_dy_kernel(float* dy, const float* dout, const int32_t* pos,
                                  const float* weights, int64_t n, int64_t k, int64_t c) {
  MOBIUS_GRID_STRIDE(i, n * k * c) {
    const int64_t r = i / c, x = i % c, t = r / k;
    dy[static_cast<int64_t>(pos[r]) * c + x] = weights[r] * dout[t * c + x];
  }
}

// One warp per routed row: dweights[r] = dout[t] . y[pos[r]].
template <typename T>
__global__ void combine_dw_kernel(float* dweights, const float* dout, const T* y,
                                  const int32_t* pos, int64_t n, int64_t k, int64_t c) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x / kWarp) + threadIdx.x / kWarp;
       r < n * k; r += warps) {
    const int64_t t = r / k, p = pos[r];
    float acc = 0.0f;
    for (int64_t x = threadIdx.x % kWarp; x < c; x += kWarp) {
      acc += dout[t * c + x] * Load(y, p * c + x);
    }
    acc = WarpSum(acc);
    if (threadIdx.x % kWarp == 0) dweights[r] = acc;
  }
}

__global__ void scatter_add_kernel(float* dst, const float* src, const int32_t* pos, int64_t n,
                                   int64_t k, int64_t c) {
  MOBIUS_GRID_STRIDE(i, n * c) {
    const int64_t t = i / c, x = i % c;
    int32_t slots[kMaxK];
    SortedSlots(pos, t, k, slots);
    float acc = dst[i];
    for (int64_t s = 0; s < k; ++s) acc += src[static_cast<int64_t>(slots[s]) * c + x];
    dst[i] = acc;
  }
}

}  // namespace

KernelStatus moe_route(float* probs, int32_t* ids, float* weights, int32_t* order, int32_t* pos,
                       int32_t* offsets, const float* logits, int64_t n, int64_t e, int64_t k,
                       bool renormalize, cudaStream_t stream) {
  if (n == 0) {
    cudaMemsetAsync(offsets, 0, 4 * (e + 1), stream);
    return MOBIUS_KERNEL_LAUNCH_STATUS("moe_route memset");
  }
  route_kernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(probs, ids, weights, logits, n, e, k,
                                                               renormalize);
  MOBIUS_KERNEL_RETURN_IF_ERROR(MOBIUS_KERNEL_LAUNCH_STATUS("route_kernel"));
  count_kernel<<<GridFor(e, 128), 128, 0, stream>>>(offsets, ids, n * k, e);
  MOBIUS_KERNEL_RETURN_IF_ERROR(MOBIUS_KERNEL_LAUNCH_STATUS("count_kernel"));
  scan_kernel<<<1, 1, 0, stream>>>(offsets, e);
  MOBIUS_KERNEL_RETURN_IF_ERROR(MOBIUS_KERNEL_LAUNCH_STATUS("scan_kernel"));
  place_kernel<<<GridFor(e, 128), 128, 0, stream>>>(order, pos, offsets, ids, n * k, e);
  return MOBIUS_KERNEL_LAUNCH_STATUS("place_kernel");
}

KernelStatus moe_route_bwd(float* dlogits, const float* dweights, const float* aux_grad,
                           const float* probs, const int32_t* ids, const float* weights, int64_t n,
                           int64_t e, int64_t k, bool renormalize, cudaStream_t stream) {
  if (n == 0) return OkStatus();
  route_bwd_kernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(
      dlogits, dweights, aux_grad, probs, ids, weights, n, e, k, renormalize);
  return MOBIUS_KERNEL_LAUNCH_STATUS("route_bwd_kernel");
}

KernelStatus moe_gather(HalfType type, uint16_t* dst, const uint16_t* src, const int32_t* order,
                        int64_t n, int64_t k, int64_t c, cudaStream_t stream) {
  if (n == 0) return OkStatus();
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    gather_kernel<T><<<GridFor(n * k * c, kThreads), kThreads, 0, stream>>>(
        As<T>(dst), As<T>(src), order, n * k, k, c);
    return MOBIUS_KERNEL_LAUNCH_STATUS("gather_kernel");
  });
}

KernelStatus moe_combine(HalfType type, uint16_t* out, const uint16_t* y, const int32_t* pos,
                         const float* weights, int64_t n, int64_t k, int64_t c,
                         cudaStream_t stream) {
  if (n == 0) return OkStatus();
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    combine_kernel<T><<<GridFor(n * c, kThreads), kThreads, 0, stream>>>(As<T>(out), As<T>(y), pos,
                                                                          weights, n, k, c);
    return MOBIUS_KERNEL_LAUNCH_STATUS("combine_kernel");
  });
}

KernelStatus moe_combine_bwd(HalfType type, float* dy, float* dweights, const float* dout,
                             const uint16_t* y, const int32_t* pos, const float* weights,
                             int64_t n, int64_t k, int64_t c, cudaStream_t stream) {
  if (n == 0) return OkStatus();
  combine_dy_kernel<<<GridFor(n * k * c, kThreads), kThreads, 0, stream>>>(dy, dout, pos, weights,
                                                                           n, k, c);
  MOBIUS_KERNEL_RETURN_IF_ERROR(MOBIUS_KERNEL_LAUNCH_STATUS("combine_dy_kernel"));
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    combine_dw_kernel<T><<<GridFor(n * k * kWarp, kThreads), kThreads, 0, stream>>>(
        dweights, dout, As<T>(y), pos, n, k, c);
    return MOBIUS_KERNEL_LAUNCH_STATUS("combine_dw_kernel");
  });
}

KernelStatus moe_scatter_add(float* dst, const float* src, const int32_t* pos, int64_t n,
                             int64_t k, int64_t c, cudaStream_t stream) {
  if (n == 0) return OkStatus();
  scatter_add_kernel<<<GridFor(n * c, kThreads), kThreads, 0, stream>>>(dst, src, pos, n, k, c);
  return MOBIUS_KERNEL_LAUNCH_STATUS("scatter_add_kernel");
}

}  // namespace mobius::kernels::cuda
