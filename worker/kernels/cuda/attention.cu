#include <cmath>
#include <cstdint>
#include <string>

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

// Device copy of the shape with the derived quantities.
struct Dims {
  int64_t b, t, heads, kv_heads, hd, window, group;
  float scale;
  bool vec;  // rows are 16-byte aligned (hd % 8 == 0 and aligned bases): 8 elements per load
};

// Element offset of row (b, t, head) in a [B, T, nh, hd] tensor.
__device__ __forceinline__ int64_t Row(const Dims& s, int64_t b, int64_t t, int64_t nh,
                                       int64_t head) {
  return ((b * s.t + t) * nh + head) * s.hd;
}
__device__ __forceinline__ int64_t LseIndex(const Dims& s, int64_t b, int64_t h, int64_t t) {
  return (b * s.heads + h) * s.t + t;
}
__device__ __forceinline__ int64_t FirstKey(const Dims& s, int64_t t) {
  return s.window > 0 && t - s.window + 1 > 0 ? t - s.window + 1 : 0;
}
__device__ __forceinline__ int64_t LastQuery(const Dims& s, int64_t t2) {
  return s.window > 0 && t2 + s.window - 1 < s.t - 1 ? t2 + s.window - 1 : s.t - 1;
}

// The 8 16-bit values of a 16-byte load as fp32 (element 2i in the low half of word i).
__device__ __forceinline__ void Unpack8(uint4 w, float* f, const uint16_t* /*bf16*/) {
  const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(u[i] << 16);
    f[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ void Unpack8(uint4 w, float* f, const __half* /*fp16*/) {
  const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 pair = __half22float2(*reinterpret_cast<const __half2*>(&u[i]));
    f[2 * i] = pair.x;
    f[2 * i + 1] = pair.y;
  }
}

// T below: the storage type of q, k, v, out and the gradients (uint16_t bf16 or __half fp16).

// sum_d a[d] * row[d]; a in fp32 (shared memory), row in global memory, read by one lane.
template <typename T>
__device__ float DotRow(const float* a, const T* row, int64_t hd, bool vec) {
  float sum = 0.0f;
  if (vec) {
    const uint4* r4 = reinterpret_cast<const uint4*>(row);
    for (int64_t c = 0; c < hd / 8; ++c) {
      float f[8];
      Unpack8(r4[c], f, row);
#pragma unroll
      for (int i = 0; i < 8; ++i) sum += a[8 * c + i] * f[i];
    }
    return sum;
  }
  for (int64_t d = 0; d < hd; ++d) sum += a[d] * Load(row, d);
  return sum;
}

// Both rows in global memory.
template <typename T>
__device__ float DotRows(const T* x, const T* y, int64_t hd, bool vec) {
  float sum = 0.0f;
  if (vec) {
    const uint4* x4 = reinterpret_cast<const uint4*>(x);
    const uint4* y4 = reinterpret_cast<const uint4*>(y);
    for (int64_t c = 0; c < hd / 8; ++c) {
      float fx[8], fy[8];
      Unpack8(x4[c], fx, x);
      Unpack8(y4[c], fy, y);
#pragma unroll
      for (int i = 0; i < 8; ++i) sum += fx[i] * fy[i];
    }
    return sum;
  }
  for (int64_t d = 0; d < hd; ++d) sum += Load(x, d) * Load(y, d);
  return sum;
}

// A row (hd elements) into fp32 shared memory, lane-strided. Followed by __syncwarp.
template <typename T>
__device__ __forceinline__ void LoadRowShared(float* dst, const T* src, int64_t hd, int lane) {
  for (int64_t d = lane; d < hd; d += kWarp) dst[d] = Load(src, d);
  __syncwarp();
}

// acc[i] (dimension lane + 32 i) += w * row[d].
template <typename T>
__device__ __forceinline__ void Axpy(float* acc, float w, const T* row, int64_t hd, int lane) {
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) {
    const int64_t d = lane + kWarp * i;
    if (d < hd) acc[i] += w * Load(row, d);
  }
}

// One warp per query row; rows numbered (b, h, t) so that a block's rows share k and v in cache.
template <typename T>
__global__ void attention_fwd_kernel(T* out, float* lse, const T* q, const T* k, const T* v,
                                     Dims s) {
  __shared__ float q_shared[kWarpsPerBlock][kAttentionMaxHeadDim];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (row >= s.b * s.heads * s.t) return;
  const int64_t t = row % s.t, h = row / s.t % s.heads, b = row / (s.t * s.heads);
  const int64_t kvh = h / s.group;
  float* qs = q_shared[warp];
  LoadRowShared(qs, q + Row(s, b, t, s.heads, h), s.hd, lane);
  float acc[kDimsPerLane] = {};
  float m = -INFINITY, l = 0.0f;
  for (int64_t j0 = FirstKey(s, t); j0 <= t; j0 += kWarp) {
    const int64_t j = j0 + lane;
    const bool visible = j <= t;
    float score = -INFINITY;
    if (visible) score = DotRow(qs, k + Row(s, b, j, s.kv_heads, kvh), s.hd, s.vec) * s.scale;
    const float m_new = fmaxf(m, WarpMax(score));  // finite: key j0 is always visible
    const float p = visible ? expf(score - m_new) : 0.0f;
    const float alpha = expf(m - m_new);  // 0 on the first chunk
    l = l * alpha + WarpSum(p);
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) acc[i] *= alpha;
    const int count = t - j0 + 1 < kWarp ? static_cast<int>(t - j0 + 1) : kWarp;
    for (int jj = 0; jj < count; ++jj) {
      const float pj = __shfl_sync(0xffffffffu, p, jj);
      Axpy(acc, pj, v + Row(s, b, j0 + jj, s.kv_heads, kvh), s.hd, lane);
    }
    m = m_new;
  }
  T* o = out + Row(s, b, t, s.heads, h);
  const float inv_l = 1.0f / l;
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) {
    const int64_t d = lane + kWarp * i;
    if (d < s.hd) Store(o, d, acc[i] * inv_l);
  }
  if (lane == 0) lse[LseIndex(s, b, h, t)] = m + logf(l);
}

// dQ of one query row: dS = P * (dP - D) * scale with P = exp(S - lse), dP = dO . v, D = dO . O;
// dq += dS K.
template <typename T>
__global__ void attention_bwd_dq_kernel(T* dq, const T* dout, const T* q, const T* k, const T* v,
                                        const T* out, const float* lse, Dims s) {
  __shared__ float q_shared[kWarpsPerBlock][kAttentionMaxHeadDim];
  __shared__ float do_shared[kWarpsPerBlock][kAttentionMaxHeadDim];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (row >= s.b * s.heads * s.t) return;
  const int64_t t = row % s.t, h = row / s.t % s.heads, b = row / (s.t * s.heads);
  const int64_t kvh = h / s.group;
  const int64_t qrow = Row(s, b, t, s.heads, h);
  float* qs = q_shared[warp];
  float* dos = do_shared[warp];
  LoadRowShared(qs, q + qrow, s.hd, lane);
  LoadRowShared(dos, dout + qrow, s.hd, lane);
  float d_part = 0.0f;
  for (int64_t d = lane; d < s.hd; d += kWarp) d_part += dos[d] * Load(out, qrow + d);
  const float dsum = WarpSum(d_part);
  const float row_lse = lse[LseIndex(s, b, h, t)];
  float acc[kDimsPerLane] = {};
  for (int64_t j0 = FirstKey(s, t); j0 <= t; j0 += kWarp) {
    const int64_t j = j0 + lane;
    float ds = 0.0f;
    if (j <= t) {
      const int64_t krow = Row(s, b, j, s.kv_heads, kvh);
      const float p = expf(DotRow(qs, k + krow, s.hd, s.vec) * s.scale - row_lse);
      ds = p * (DotRow(dos, v + krow, s.hd, s.vec) - dsum) * s.scale;
    }
    const int count = t - j0 + 1 < kWarp ? static_cast<int>(t - j0 + 1) : kWarp;
    for (int jj = 0; jj < count; ++jj) {
      const float dsj = __shfl_sync(0xffffffffu, ds, jj);
      Axpy(acc, dsj, k + Row(s, b, j0 + jj, s.kv_heads, kvh), s.hd, lane);
    }
  }
  T* g = dq + qrow;
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) {
    const int64_t d = lane + kWarp * i;
    if (d < s.hd) Store(g, d, Load(g, d) + acc[i]);
  }
}

// dK, dV of one key row of kv head kvh, summed over the group's query heads and the query rows
// that see it: dv += P^T dO, dk += dS^T Q.
template <typename T>
__global__ void attention_bwd_dkdv_kernel(T* dk, T* dv, const T* dout, const T* q, const T* k,
                                          const T* v, const T* out, const float* lse, Dims s) {
  __shared__ float k_shared[kWarpsPerBlock][kAttentionMaxHeadDim];
  __shared__ float v_shared[kWarpsPerBlock][kAttentionMaxHeadDim];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (row >= s.b * s.kv_heads * s.t) return;
  const int64_t t2 = row % s.t, kvh = row / s.t % s.kv_heads, b = row / (s.t * s.kv_heads);
  const int64_t krow = Row(s, b, t2, s.kv_heads, kvh);
  float* ks = k_shared[warp];
  float* vs = v_shared[warp];
  LoadRowShared(ks, k + krow, s.hd, lane);
  LoadRowShared(vs, v + krow, s.hd, lane);
  const int64_t last = LastQuery(s, t2);
  float dk_acc[kDimsPerLane] = {}, dv_acc[kDimsPerLane] = {};
  for (int64_t g = 0; g < s.group; ++g) {
    const int64_t h = kvh * s.group + g;
    for (int64_t t0 = t2; t0 <= last; t0 += kWarp) {
      const int64_t t = t0 + lane;
      float p = 0.0f, ds = 0.0f;
      if (t <= last) {
        const int64_t qrow = Row(s, b, t, s.heads, h);
        p = expf(DotRow(ks, q + qrow, s.hd, s.vec) * s.scale - lse[LseIndex(s, b, h, t)]);
        const float dsum = DotRows(dout + qrow, out + qrow, s.hd, s.vec);
        ds = p * (DotRow(vs, dout + qrow, s.hd, s.vec) - dsum) * s.scale;
      }
      const int count = last - t0 + 1 < kWarp ? static_cast<int>(last - t0 + 1) : kWarp;
      for (int tt = 0; tt < count; ++tt) {
        const float pt = __shfl_sync(0xffffffffu, p, tt);
        const float dst = __shfl_sync(0xffffffffu, ds, tt);
        const int64_t qrow = Row(s, b, t0 + tt, s.heads, h);
        Axpy(dv_acc, pt, dout + qrow, s.hd, lane);
        Axpy(dk_acc, dst, q + qrow, s.hd, lane);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) {
    const int64_t d = lane + kWarp * i;
    if (d >= s.hd) continue;
    Store(dk, krow + d, Load(dk, krow + d) + dk_acc[i]);
    Store(dv, krow + d, Load(dv, krow + d) + dv_acc[i]);
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

Dims MakeDims(const AttentionShape& s, bool aligned) {
  Dims d;
  d.b = s.b;
  d.t = s.t;
  d.heads = s.heads;
  d.kv_heads = s.kv_heads;
  d.hd = s.head_dim;
  d.window = s.window;
  d.group = s.heads / s.kv_heads;
  d.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  d.vec = aligned && s.head_dim % 8 == 0;
  return d;
}

unsigned int Blocks(int64_t rows) {
  return static_cast<unsigned int>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace

KernelStatus CheckAttentionShape(const AttentionShape& s) {
  if (s.b < 0 || s.t < 0 || s.window < 0) {
    return InvalidArgument("attention: negative b, t or window");
  }
  if (s.heads <= 0 || s.kv_heads <= 0 || s.head_dim <= 0) {
    return InvalidArgument("attention: heads, kv_heads and head_dim must be > 0");
  }
  if (s.heads % s.kv_heads != 0) {
    return InvalidArgument("attention: heads " + std::to_string(s.heads) +
                           " not a multiple of kv_heads " + std::to_string(s.kv_heads));
  }
  if (s.head_dim > kAttentionMaxHeadDim) {
    return Unimplemented("attention: head_dim " + std::to_string(s.head_dim) + " > " +
                         std::to_string(kAttentionMaxHeadDim));
  }
  return OkStatus();
}

KernelStatus attention_fwd(HalfType type, uint16_t* out, float* lse, const uint16_t* q,
                           const uint16_t* k, const uint16_t* v, const AttentionShape& s,
                           cudaStream_t stream) {
  MOBIUS_KERNEL_RETURN_IF_ERROR(CheckAttentionShape(s));
  if (s.b * s.t > 0 && AttentionMmaFwdApplies(s, q, k, v) &&
      AttentionMmaFwdChecked(type, s.head_dim)) {
    return attention_mma_fwd(type, out, lse, q, k, v, s, stream);
  }
  if (AttentionFlashFwdApplies(s, q, k, v))
    return attention_flash_fwd(type, out, lse, q, k, v, s, stream);
  return attention_fwd_reference(type, out, lse, q, k, v, s, stream);
}

KernelStatus attention_fwd_reference(HalfType type, uint16_t* out, float* lse, const uint16_t* q,
                                     const uint16_t* k, const uint16_t* v, const AttentionShape& s,
                                     cudaStream_t stream) {
  MOBIUS_KERNEL_RETURN_IF_ERROR(CheckAttentionShape(s));
  const int64_t rows = s.b * s.heads * s.t;
  if (rows == 0) return OkStatus();
  // Scores read q from shared memory and k rows from global: k must be 16-byte aligned to
  // vectorise.
  const Dims d = MakeDims(s, Aligned16(k));
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    attention_fwd_kernel<T><<<Blocks(rows), kWarpsPerBlock * kWarp, 0, stream>>>(
        As<T>(out), lse, As<T>(q), As<T>(k), As<T>(v), d);
    return MOBIUS_KERNEL_LAUNCH_STATUS("attention_fwd_kernel");
  });
}

KernelStatus attention_bwd(HalfType type, uint16_t* dq, uint16_t* dk, uint16_t* dv,
                           const uint16_t* dout, const uint16_t* q, const uint16_t* k,
                           const uint16_t* v, const uint16_t* out, const float* lse,
                           const AttentionShape& s, cudaStream_t stream) {
  MOBIUS_KERNEL_RETURN_IF_ERROR(CheckAttentionShape(s));
  if (s.b * s.t > 0 && AttentionFlashBwdApplies(s, q, k, v, dout) &&
      AttentionFlashBwdChecked(type, s.head_dim)) {
    return attention_flash_bwd(type, dq, dk, dv, dout, q, k, v, out, lse, s, stream);
  }
  return attention_bwd_reference(type, dq, dk, dv, dout, q, k, v, out, lse, s, stream);
}

KernelStatus attention_bwd_reference(HalfType type, uint16_t* dq, uint16_t* dk, uint16_t* dv,
                                     const uint16_t* dout, const uint16_t* q, const uint16_t* k,
                                     const uint16_t* v, const uint16_t* out, const float* lse,
                                     const AttentionShape& s, cudaStream_t stream) {
  MOBIUS_KERNEL_RETURN_IF_ERROR(CheckAttentionShape(s));
  if (s.b * s.t == 0) return OkStatus();
  const Dims d = MakeDims(
      s, Aligned16(q) && Aligned16(k) && Aligned16(v) && Aligned16(dout) && Aligned16(out));
  return internal::DispatchHalf(type, [&](auto tag) -> KernelStatus {
    using T = typename decltype(tag)::type;
    attention_bwd_dq_kernel<T><<<Blocks(s.b * s.heads * s.t), kWarpsPerBlock * kWarp, 0, stream>>>(
        As<T>(dq), As<T>(dout), As<T>(q), As<T>(k), As<T>(v), As<T>(out), lse, d);
    MOBIUS_KERNEL_RETURN_IF_ERROR(MOBIUS_KERNEL_LAUNCH_STATUS("attention_bwd_dq_kernel"));
    attention_bwd_dkdv_kernel<T>
        <<<Blocks(s.b * s.kv_heads * s.t), kWarpsPerBlock * kWarp, 0, stream>>>(
            As<T>(dk), As<T>(dv), As<T>(dout), As<T>(q), As<T>(k), As<T>(v), As<T>(out), lse, d);
    return MOBIUS_KERNEL_LAUNCH_STATUS("attention_bwd_dkdv_kernel");
  });
}

}  // namespace mobius::kernels::cuda
