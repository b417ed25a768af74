#include <cmath>
#include <cstdint>
#include <string>

#include "worker/kernels/cuda/attention_cached.cuh"

#include "worker/kernels/cuda/attention.cuh"
#include "worker/kernels/cuda/device_utils.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::As;
using internal::kWarp;
using internal::Load;
using internal::Store;
using internal::WarpMax;
using internal::WarpSum;

constexpr int kWarpsPerBlock = 4;
constexpr int kDimsPerLane = static_cast<int>(kAttentionMaxHeadDim / kWarp);  // 8

struct Dims {
  int64_t b, t, heads, kv_heads, hd, window, group, start, capacity;
  float scale;
};

// Element offset of row (b, t, head) in a [B, rows, nh, hd] tensor.
__device__ __forceinline__ int64_t Offset(const Dims& s, int64_t rows, int64_t b, int64_t t,
                                          int64_t nh, int64_t head) {
  return ((b * rows + t) * nh + head) * s.hd;
}

// One warp per query row (b, h, t) at position p = start + t. T: the storage type of q, k, v and
// out (uint16_t bf16 or __half fp16).
template <typename T>
__global__ void attention_cached_fwd_kernel(T* out, float* lse, const T* q, const T* k, const T* v,
                                            Dims s) {
  __shared__ float q_shared[kWarpsPerBlock][kAttentionMaxHeadDim];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (row >= s.b * s.heads * s.t) return;
  const int64_t t = row % s.t, h = row / s.t % s.heads, b = row / (s.t * s.heads);
  const int64_t kvh = h / s.group, p = s.start + t;
  float* qs = q_shared[warp];
  const T* qrow = q + Offset(s, s.t, b, t, s.heads, h);
  for (int64_t d = lane; d < s.hd; d += kWarp) qs[d] = Load(qrow, d);
  __syncwarp();
  float acc[kDimsPerLane] = {};
  float m = -INFINITY, l = 0.0f;
  const int64_t first = s.window > 0 && p - s.window + 1 > 0 ? p - s.window + 1 : 0;
  for (int64_t j0 = first; j0 <= p; j0 += kWarp) {
    const int64_t j = j0 + lane;
    const bool visible = j <= p;
    float score = -INFINITY;
    if (visible) {
      const T* krow = k + Offset(s, s.capacity, b, j, s.kv_heads, kvh);
      float sum = 0.0f;
      for (int64_t d = 0; d < s.hd; ++d) sum += qs[d] * Load(krow, d);
      score = sum * s.scale;
    }
    const float m_new = fmaxf(m, WarpMax(score));  // finite: key j0 is always visible
    const float pr = visible ? expf(score - m_new) : 0.0f;
    const float alpha = expf(m - m_new);  // 0 on the first chunk
    l = l * alpha + WarpSum(pr);
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) acc[i] *= alpha;
    const int count = p - j0 + 1 < kWarp ? static_cast<int>(p - j0 + 1) : kWarp;
    for (int jj = 0; jj < count; ++jj) {
      const float pj = __shfl_sync(0xffffffffu, pr, jj);
      const T* vrow = v + Offset(s, s.capacity, b, j0 + jj, s.kv_heads, kvh);
#pragma unroll
      for (int i = 0; i < kDimsPerLane; ++i) {
        const int64_t d = lane + kWarp * i;
        if (d < s.hd) acc[i] += pj * Load(vrow, d);
      }
    }
    m = m_new;
  }
  T* o = out + Offset(s, s.t, b, t, s.heads, h);
  const float inv_l = 1.0f / l;
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) {
    const int64_t d = lane + kWarp * i;
    if (d < s.hd) Store(o, d, acc[i] * inv_l);
  }
  if (lse != nullptr && lane == 0) lse[(b * s.heads + h) * s.t + t] = m + logf(l);
}

}  // namespace

KernelStatus attention_cached_fwd(HalfType type, uint16_t* out, float* lse, const uint16_t* q,
                                  const uint16_t* k_cache, const uint16_t* v_cache,
                                  const AttentionShape& s, int64_t start, int64_t capacity,
                                  cudaStream_t stream) {
  MOBIUS_KERNEL_RETURN_IF_ERROR(CheckAttentionShape(s));
  if (start < 0 || start + s.t > capacity) {
    return InvalidArgument("cached_attention: start " + std::to_string(start) + " + t " +
                           std::to_string(s.t) + " exceeds capacity " + std::to_string(capacity));
  }
  const int64_t rows = s.b * s.heads * s.t;
  if (rows == 0) return OkStatus();
  // A prefill from position 0 is plain causal attention over the cache's first T rows: the tiled
  // forward, where it applies and this GPU passed its check.
  if (start == 0 && AttentionMmaFwdApplies(s, q, k_cache, v_cache) &&
      AttentionMmaFwdChecked(type, s.head_dim)) {
    return attention_mma_fwd_prefill(type, out, lse, q, k_cache, v_cache, s, capacity, stream);
  }
  Dims d;
  d.b = s.b;
  d.t = s.t;
  d.heads = s.heads;
  d.kv_heads = s.kv_heads;
  d.hd = s.head_dim;
  d.window = s.window;
  d.group = s.heads / s.kv_heads;
  d.start = start;
  d.capacity = capacity;
  d.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  const auto blocks = static_cast<unsigned int>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    attention_cached_fwd_kernel<T><<<blocks, kWarpsPerBlock * kWarp, 0, stream>>>(
        As<T>(out), lse, As<T>(q), As<T>(k_cache), As<T>(v_cache), d);
    return MOBIUS_KERNEL_LAUNCH_STATUS("attention_cached_fwd_kernel");
  });
}

}  // namespace mobius::kernels::cuda
