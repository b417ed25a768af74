// attention_mma_fwd: the tiled forward (FlashAttention-2's loop) on tensor cores through mma.sync
// m16n8k16 (mma_tiles.cuh), the online softmax in registers: one block of 4 warps per (b, h, 64
// query rows), each warp 16 rows held as A fragments for the whole loop; per tile of 64 keys
// S = Q K^T lands in registers, each row's running max and sum are combined over the 4 lanes that
// share it (shuffles), O (16 x head_dim per warp, fp32 registers) is rescaled and O += P V with P
// rounded to the inputs' type, as FlashAttention does. The WMMA kernel (attention_flash_fwd.cu)
// keeps S and O in shared memory because WMMA's register layout is opaque; this one does not.
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "worker/kernels/cuda/attention.cuh"
#include "worker/kernels/cuda/device_utils.cuh"
#include "worker/kernels/cuda/mma_tiles.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::As;
using internal::AsA;
using internal::kWarp;
using internal::Ld;
using internal::LoadA;
using internal::LoadB;
using internal::LoadBt;
using internal::LoadRows;
using internal::Mma;
using internal::RowIndex;
using internal::TileDims;
using internal::Visible;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarp;
constexpr int kRows = 64;  // query rows per block, 16 per warp
constexpr int kKeys = 64;  // keys per tile

template <int kHd>
constexpr size_t SharedBytes() {
  return size_t{kRows + 2 * kKeys} * Ld<kHd>() * 2;
}

// The maximum and the sum over the 4 lanes that hold one row (lanes 4g .. 4g+3).
__device__ __forceinline__ float QuadMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float QuadSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

template <typename T, int kHd>
__global__ void __launch_bounds__(kThreads)
    attention_mma_fwd_kernel(T* out, float* lse, const uint16_t* q, const uint16_t* k,
                             const uint16_t* v, TileDims s) {
  extern __shared__ uint4 shared_raw[];
  constexpr int ld = Ld<kHd>();
  uint16_t* qs = reinterpret_cast<uint16_t*>(shared_raw);
  uint16_t* ks = qs + kRows * ld;
  uint16_t* vs = ks + kKeys * ld;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int g = lane / 4, qd = lane % 4;
  const int64_t b = blockIdx.y / s.heads, h = blockIdx.y % s.heads, kvh = h / s.group;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int m0 = warp * 16;
  const int64_t ta = q0 + m0 + g, tb = ta + 8;  // this thread's two query rows
  LoadRows<kHd>(qs, q, s, s.t, b, q0, kRows, s.heads, h);
  __syncthreads();
  uint32_t qa[kHd / 16][4];
#pragma unroll
  for (int kk = 0; kk < kHd / 16; ++kk) LoadA(qa[kk], qs, ld, m0, kk * 16, g, qd);
  float o[kHd / 8][4] = {};
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;
  const int64_t last_row = q0 + kRows - 1 < s.t - 1 ? q0 + kRows - 1 : s.t - 1;
  const int64_t first_key = s.window > 0 && q0 - s.window + 1 > 0 ? q0 - s.window + 1 : 0;
  for (int64_t j0 = first_key / kKeys * kKeys; j0 <= last_row; j0 += kKeys) {
    __syncthreads();  // the previous tile is read
    LoadRows<kHd>(ks, k, s, s.kv_rows, b, j0, kKeys, s.kv_heads, kvh);
    LoadRows<kHd>(vs, v, s, s.kv_rows, b, j0, kKeys, s.kv_heads, kvh);
    __syncthreads();
    float sc[kKeys / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kHd / 16; ++kk) {
#pragma unroll
      for (int nt = 0; nt < kKeys / 8; ++nt) {
        uint32_t bk[2];
        LoadBt(bk, ks, ld, nt * 8, kk * 16, g, qd);
        Mma<T>(sc[nt], qa[kk], bk);
      }
    }
    // Scaled and masked scores; element i of tile nt is (row g + 8 (i / 2), key 8 nt + 2 qd + i % 2).
    float max_a = -INFINITY, max_b = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t t = i < 2 ? ta : tb;
        const int64_t j = j0 + nt * 8 + 2 * qd + (i % 2);
        const float x = Visible(s, t, j) ? sc[nt][i] * s.scale : -INFINITY;
        sc[nt][i] = x;
        if (i < 2) {
          max_a = fmaxf(max_a, x);
        } else {
          max_b = fmaxf(max_b, x);
        }
      }
    }
    const float new_a = fmaxf(m_a, QuadMax(max_a)), new_b = fmaxf(m_b, QuadMax(max_b));
    // A row that has seen no key yet keeps -inf: exponentiate against 0 so that nothing is NaN.
    const float base_a = new_a == -INFINITY ? 0.0f : new_a;
    const float base_b = new_b == -INFINITY ? 0.0f : new_b;
    const float alpha_a = expf(m_a - base_a), alpha_b = expf(m_b - base_b);
    float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float p = expf(sc[nt][i] - (i < 2 ? base_a : base_b));
        sc[nt][i] = p;
        if (i < 2) {
          sum_a += p;
        } else {
          sum_b += p;
        }
      }
    }
    l_a = l_a * alpha_a + QuadSum(sum_a);
    l_b = l_b * alpha_b + QuadSum(sum_b);
    m_a = new_a;
    m_b = new_b;
#pragma unroll
    for (int nt = 0; nt < kHd / 8; ++nt) {
      o[nt][0] *= alpha_a;
      o[nt][1] *= alpha_a;
      o[nt][2] *= alpha_b;
      o[nt][3] *= alpha_b;
    }
    // O += P V: P (16 x 64 keys) as four A fragments of 16 keys; B = V rows (keys) x dims.
#pragma unroll
    for (int kc = 0; kc < kKeys / 16; ++kc) {
      uint32_t a[4];
      AsA<T>(a, sc[2 * kc], sc[2 * kc + 1]);
#pragma unroll
      for (int nt = 0; nt < kHd / 8; ++nt) {
        uint32_t bv[2];
        LoadB(bv, vs, ld, kc * 16, nt * 8, g, qd);
        Mma<T>(o[nt], a, bv);
      }
    }
  }
  // Every row sees its own key, so l > 0 for rows inside T.
  const float inv_a = 1.0f / l_a, inv_b = 1.0f / l_b;
#pragma unroll
  for (int nt = 0; nt < kHd / 8; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t t = i < 2 ? ta : tb;
      if (t >= s.t) continue;
      const int64_t idx = RowIndex(s, b, t, s.heads, h, kHd) + nt * 8 + 2 * qd + (i % 2);
      internal::Store(out, idx, o[nt][i] * (i < 2 ? inv_a : inv_b));
    }
  }
  if (qd == 0 && lse != nullptr) {
    if (ta < s.t) lse[(b * s.heads + h) * s.t + ta] = m_a + logf(l_a);
    if (tb < s.t) lse[(b * s.heads + h) * s.t + tb] = m_b + logf(l_b);
  }
}

template <typename T, int kHd>
KernelStatus Launch(T* out, float* lse, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                    const AttentionShape& shape, int64_t kv_rows, cudaStream_t stream) {
  TileDims s = internal::MakeTileDims(shape);
  s.kv_rows = kv_rows;
  constexpr size_t bytes = SharedBytes<kHd>();
  MOBIUS_KERNEL_RETURN_IF_ERROR(FromCudaError(
      cudaFuncSetAttribute(attention_mma_fwd_kernel<T, kHd>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
      "cudaFuncSetAttribute(attention_mma_fwd_kernel)", __FILE__, __LINE__));
  const dim3 grid(static_cast<unsigned int>((shape.t + kRows - 1) / kRows),
                  static_cast<unsigned int>(shape.b * shape.heads));
  attention_mma_fwd_kernel<T, kHd><<<grid, kThreads, bytes, stream>>>(out, lse, q, k, v, s);
  return MOBIUS_KERNEL_LAUNCH_STATUS("attention_mma_fwd_kernel");
}

}  // namespace

bool AttentionMmaFwdApplies(const AttentionShape& s, const void* q, const void* k, const void* v) {
  return internal::TiledShape(s, {q, k, v});
}

KernelStatus attention_mma_fwd(HalfType type, uint16_t* out, float* lse, const uint16_t* q,
                               const uint16_t* k, const uint16_t* v, const AttentionShape& s,
                               cudaStream_t stream) {
  return attention_mma_fwd_prefill(type, out, lse, q, k, v, s, s.t, stream);
}

KernelStatus attention_mma_fwd_prefill(HalfType type, uint16_t* out, float* lse,
                                       const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                       const AttentionShape& s, int64_t kv_rows,
                                       cudaStream_t stream) {
  MOBIUS_KERNEL_RETURN_IF_ERROR(CheckAttentionShape(s));
  if (kv_rows < s.t) {
    return InvalidArgument("attention_mma_fwd: " + std::to_string(kv_rows) +
                           " key rows per sequence, fewer than t " + std::to_string(s.t));
  }
  if (!AttentionMmaFwdApplies(s, q, k, v)) {
    return Unimplemented(
        "attention_mma_fwd: needs head_dim 64 or 128, b * heads <= 65535 and 16-byte aligned q, "
        "k, v");
  }
  if (s.b * s.t == 0) return OkStatus();
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return s.head_dim == 64 ? Launch<T, 64>(As<T>(out), lse, q, k, v, s, kv_rows, stream)
                            : Launch<T, 128>(As<T>(out), lse, q, k, v, s, kv_rows, stream);
  });
}

}  // namespace mobius::kernels::cuda
