// attention_flash_bwd: the tiled backward (FlashAttention-2's math) on tensor cores through
// mma.sync m16n8k16 (bf16 or fp16 inputs, fp32 accumulation; sm_80+), in two race-free kernels so
// that it stays deterministic, as the reference backward is:
//
//   dQ   one block of 4 warps per (b, h, 64 query rows), each warp 16 rows; per tile of 32 keys:
//        S = Q K^T and dP = dO V^T (tensor cores), P = exp(S scale - lse), dS = P (dP - D) scale
//        in registers, dQ += dS K (tensor cores). It also computes D = rowsum(dO * O) of its rows
//        and writes it for the second kernel.
//   dK,dV one block per (b, kv head, 64 key rows), each warp 16 keys; per query head of the group
//        and tile of 32 queries: S^T = K Q^T, dP^T = V dO^T, P^T and dS^T in registers,
//        dV += P^T dO and dK += dS^T Q (tensor cores).
//
// The accumulators' register layout is mma.sync's documented one (PTX ISA, "Matrix Fragments for
// mma.m16n8k16"), so the softmax terms are computed where the products land and an m16n8 result
// pair is the A operand of the next product without a trip through shared memory. P and dS are
// rounded to the inputs' type before their products, as FlashAttention does (the reference
// backward keeps them in fp32). Tiles live in shared memory with rows padded by 16 bytes.
//
// Not the last word on speed: no cp.async pipelining, no ldmatrix, no wgmma on Hopper; B operands
// that need a transpose are gathered 16 bits at a time.
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <vector>

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
using internal::Widen;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarp;
constexpr int kBlockRows = 64;  // rows a block owns: queries (dQ) or keys (dK, dV); 16 per warp
constexpr int kTile = 32;       // rows of the other side per step

template <int kHd>
constexpr size_t SharedBytes() {
  return size_t{2 * kBlockRows + 2 * kTile} * Ld<kHd>() * 2 + size_t{2 * kBlockRows} * 4;
}

template <typename T, int kHd>
__global__ void __launch_bounds__(kThreads)
    flash_bwd_dq_kernel(T* dq, float* dsum, const uint16_t* dout, const uint16_t* q,
                        const uint16_t* k, const uint16_t* v, const T* out, const float* lse,
                        TileDims s) {
  extern __shared__ uint4 shared_raw[];
  constexpr int ld = Ld<kHd>();
  uint16_t* qs = reinterpret_cast<uint16_t*>(shared_raw);
  uint16_t* dos = qs + kBlockRows * ld;
  uint16_t* ks = dos + kBlockRows * ld;
  uint16_t* vs = ks + kTile * ld;
  float* lse_s = reinterpret_cast<float*>(vs + kTile * ld);
  float* d_s = lse_s + kBlockRows;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int g = lane / 4, qd = lane % 4;
  const int64_t b = blockIdx.y / s.heads, h = blockIdx.y % s.heads, kvh = h / s.group;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kBlockRows;
  LoadRows<kHd>(qs, q, s, s.t, b, q0, kBlockRows, s.heads, h);
  LoadRows<kHd>(dos, dout, s, s.t, b, q0, kBlockRows, s.heads, h);
  __syncthreads();
  // D = dO . O per row (O from global, dO from shared), lse; both 0 past T (those rows see nothing).
  for (int r = warp; r < kBlockRows; r += kWarps) {
    const int64_t t = q0 + r;
    float part = 0.0f;
    if (t < s.t) {
      const int64_t row = RowIndex(s, b, t, s.heads, h, kHd);
      for (int d = lane; d < kHd; d += kWarp) {
        part += Widen<T>(dos[r * ld + d]) * internal::Load(out, row + d);
      }
    }
    const float sum = internal::WarpSum(part);
    if (lane == 0) {
      d_s[r] = sum;
      lse_s[r] = t < s.t ? lse[(b * s.heads + h) * s.t + t] : 0.0f;
      if (t < s.t) dsum[(b * s.heads + h) * s.t + t] = sum;
    }
  }
  const int m0 = warp * 16;
  const int64_t ta = q0 + m0 + g, tb = ta + 8;  // this thread's two query rows
  float acc[kHd / 8][4] = {};
  const int64_t last_row = q0 + kBlockRows - 1 < s.t - 1 ? q0 + kBlockRows - 1 : s.t - 1;
  const int64_t first_key = s.window > 0 && q0 - s.window + 1 > 0 ? q0 - s.window + 1 : 0;
  for (int64_t j0 = first_key / kTile * kTile; j0 <= last_row; j0 += kTile) {
    __syncthreads();  // the previous tile's K, V are read; D and lse are written (first pass)
    LoadRows<kHd>(ks, k, s, s.kv_rows, b, j0, kTile, s.kv_heads, kvh);
    LoadRows<kHd>(vs, v, s, s.kv_rows, b, j0, kTile, s.kv_heads, kvh);
    __syncthreads();
    float sc[kTile / 8][4] = {}, dp[kTile / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kHd; kk += 16) {
      uint32_t aq[4], ado[4];
      LoadA(aq, qs, ld, m0, kk, g, qd);
      LoadA(ado, dos, ld, m0, kk, g, qd);
#pragma unroll
      for (int nt = 0; nt < kTile / 8; ++nt) {
        uint32_t bk[2], bv[2];
        LoadBt(bk, ks, ld, nt * 8, kk, g, qd);
        LoadBt(bv, vs, ld, nt * 8, kk, g, qd);
        Mma<T>(sc[nt], aq, bk);
        Mma<T>(dp[nt], ado, bv);
      }
    }
    // dS in place of S: element i of tile nt is (row g + 8 (i / 2), key 8 nt + 2 qd + i % 2).
#pragma unroll
    for (int nt = 0; nt < kTile / 8; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = m0 + g + 8 * (i / 2);
        const int64_t t = i < 2 ? ta : tb;
        const int64_t j = j0 + nt * 8 + 2 * qd + (i % 2);
        const float p = Visible(s, t, j) ? expf(sc[nt][i] * s.scale - lse_s[r]) : 0.0f;
        sc[nt][i] = p * (dp[nt][i] - d_s[r]) * s.scale;
      }
    }
    // dQ += dS K: dS (16 x 32 keys) as two A fragments of 16 keys; B = K rows (keys) x dims.
#pragma unroll
    for (int kc = 0; kc < kTile / 16; ++kc) {
      uint32_t a[4];
      AsA<T>(a, sc[2 * kc], sc[2 * kc + 1]);
#pragma unroll
      for (int nt = 0; nt < kHd / 8; ++nt) {
        uint32_t bk[2];
        LoadB(bk, ks, ld, kc * 16, nt * 8, g, qd);
        Mma<T>(acc[nt], a, bk);
      }
    }
  }
  // dq += acc: element i of tile nt is (row g + 8 (i / 2), dim 8 nt + 2 qd + i % 2).
#pragma unroll
  for (int nt = 0; nt < kHd / 8; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t t = i < 2 ? ta : tb;
      if (t >= s.t) continue;
      const int64_t idx = RowIndex(s, b, t, s.heads, h, kHd) + nt * 8 + 2 * qd + (i % 2);
      internal::Store(dq, idx, internal::Load(dq, idx) + acc[nt][i]);
    }
  }
}

template <typename T, int kHd>
__global__ void __launch_bounds__(kThreads)
    flash_bwd_dkdv_kernel(T* dk, T* dv, const uint16_t* dout, const uint16_t* q,
                          const uint16_t* k, const uint16_t* v, const float* lse,
                          const float* dsum, TileDims s) {
  extern __shared__ uint4 shared_raw[];
  constexpr int ld = Ld<kHd>();
  uint16_t* ks = reinterpret_cast<uint16_t*>(shared_raw);
  uint16_t* vs = ks + kBlockRows * ld;
  uint16_t* qs = vs + kBlockRows * ld;
  uint16_t* dos = qs + kTile * ld;
  float* lse_s = reinterpret_cast<float*>(dos + kTile * ld);
  float* d_s = lse_s + kTile;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int g = lane / 4, qd = lane % 4;
  const int64_t b = blockIdx.y / s.kv_heads, kvh = blockIdx.y % s.kv_heads;
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kBlockRows;
  LoadRows<kHd>(ks, k, s, s.kv_rows, b, k0, kBlockRows, s.kv_heads, kvh);
  LoadRows<kHd>(vs, v, s, s.kv_rows, b, k0, kBlockRows, s.kv_heads, kvh);
  const int m0 = warp * 16;
  const int64_t ja = k0 + m0 + g, jb = ja + 8;  // this thread's two key rows
  float dk_acc[kHd / 8][4] = {}, dv_acc[kHd / 8][4] = {};
  // Queries that see a key of this block: [k0, k0 + 64 + W - 1) with a window W, else [k0, T).
  const int64_t end = s.window > 0 && k0 + kBlockRows + s.window - 1 < s.t
                          ? k0 + kBlockRows + s.window - 1
                          : s.t;
  for (int64_t gh = 0; gh < s.group; ++gh) {
    const int64_t h = kvh * s.group + gh;
    for (int64_t t0 = k0; t0 < end; t0 += kTile) {
      __syncthreads();  // the previous tile is read (and, first, K and V are written)
      LoadRows<kHd>(qs, q, s, s.t, b, t0, kTile, s.heads, h);
      LoadRows<kHd>(dos, dout, s, s.t, b, t0, kTile, s.heads, h);
      for (int r = threadIdx.x; r < kTile; r += kThreads) {
        const int64_t t = t0 + r;
        lse_s[r] = t < s.t ? lse[(b * s.heads + h) * s.t + t] : 0.0f;
        d_s[r] = t < s.t ? dsum[(b * s.heads + h) * s.t + t] : 0.0f;
      }
      __syncthreads();
      float sc[kTile / 8][4] = {}, dp[kTile / 8][4] = {};
#pragma unroll
      for (int kk = 0; kk < kHd; kk += 16) {
        uint32_t ak[4], av[4];
        LoadA(ak, ks, ld, m0, kk, g, qd);
        LoadA(av, vs, ld, m0, kk, g, qd);
#pragma unroll
        for (int nt = 0; nt < kTile / 8; ++nt) {
          uint32_t bq[2], bdo[2];
          LoadBt(bq, qs, ld, nt * 8, kk, g, qd);
          LoadBt(bdo, dos, ld, nt * 8, kk, g, qd);
          Mma<T>(sc[nt], ak, bq);
          Mma<T>(dp[nt], av, bdo);
        }
      }
      // P^T in sc, dS^T in dp: element i of tile nt is (key g + 8 (i / 2), query 8 nt + 2 qd + i % 2).
#pragma unroll
      for (int nt = 0; nt < kTile / 8; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int c = nt * 8 + 2 * qd + (i % 2);
          const int64_t j = i < 2 ? ja : jb;
          const float p = Visible(s, t0 + c, j) ? expf(sc[nt][i] * s.scale - lse_s[c]) : 0.0f;
          sc[nt][i] = p;
          dp[nt][i] = p * (dp[nt][i] - d_s[c]) * s.scale;
        }
      }
      // dV += P^T dO, dK += dS^T Q: A = P^T / dS^T (16 keys x 32 queries) by 16 queries;
      // B = dO / Q rows (queries) x dims.
#pragma unroll
      for (int kc = 0; kc < kTile / 16; ++kc) {
        uint32_t ap[4], ads[4];
        AsA<T>(ap, sc[2 * kc], sc[2 * kc + 1]);
        AsA<T>(ads, dp[2 * kc], dp[2 * kc + 1]);
#pragma unroll
        for (int nt = 0; nt < kHd / 8; ++nt) {
          uint32_t bdo[2], bq[2];
          LoadB(bdo, dos, ld, kc * 16, nt * 8, g, qd);
          LoadB(bq, qs, ld, kc * 16, nt * 8, g, qd);
          Mma<T>(dv_acc[nt], ap, bdo);
          Mma<T>(dk_acc[nt], ads, bq);
        }
      }
    }
  }
#pragma unroll
  for (int nt = 0; nt < kHd / 8; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t j = i < 2 ? ja : jb;
      if (j >= s.t) continue;
      const int64_t idx = RowIndex(s, b, j, s.kv_heads, kvh, kHd) + nt * 8 + 2 * qd + (i % 2);
      internal::Store(dk, idx, internal::Load(dk, idx) + dk_acc[nt][i]);
      internal::Store(dv, idx, internal::Load(dv, idx) + dv_acc[nt][i]);
    }
  }
}

template <typename T, int kHd>
KernelStatus Launch(T* dq, T* dk, T* dv, const uint16_t* dout, const uint16_t* q,
                    const uint16_t* k, const uint16_t* v, const uint16_t* out, const float* lse,
                    const AttentionShape& shape, cudaStream_t stream) {
  const TileDims s = internal::MakeTileDims(shape);
  constexpr size_t bytes = SharedBytes<kHd>();
  auto* dq_kernel = flash_bwd_dq_kernel<T, kHd>;
  auto* dkdv_kernel = flash_bwd_dkdv_kernel<T, kHd>;
  for (const void* f : {reinterpret_cast<const void*>(dq_kernel),
                        reinterpret_cast<const void*>(dkdv_kernel)}) {
    const cudaError_t e =
        cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
    if (e != cudaSuccess) return FromCudaError(e, "cudaFuncSetAttribute(attention_flash_bwd)", __FILE__, __LINE__);
  }
  // D = rowsum(dO * O), [B, H, T] fp32, written by the dQ kernel for the dK/dV kernel: stream-ordered
  // scratch outside the backend's cap (as the mixed-type GEMMs' scratch).
  float* dsum = nullptr;
  const size_t dsum_bytes = static_cast<size_t>(shape.b * shape.heads * shape.t) * sizeof(float);
  cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&dsum), dsum_bytes, stream);
  if (e != cudaSuccess) return FromCudaError(e, "cudaMallocAsync (attention_flash_bwd D)", __FILE__, __LINE__);
  const unsigned int query_blocks = static_cast<unsigned int>((shape.t + kBlockRows - 1) / kBlockRows);
  const KernelStatus st = [&]() -> KernelStatus {
    flash_bwd_dq_kernel<T, kHd>
        <<<dim3(query_blocks, static_cast<unsigned int>(shape.b * shape.heads)), kThreads, bytes,
           stream>>>(dq, dsum, dout, q, k, v, As<T>(out), lse, s);
    MOBIUS_KERNEL_RETURN_IF_ERROR(MOBIUS_KERNEL_LAUNCH_STATUS("flash_bwd_dq_kernel"));
    flash_bwd_dkdv_kernel<T, kHd>
        <<<dim3(query_blocks, static_cast<unsigned int>(shape.b * shape.kv_heads)), kThreads,
           bytes, stream>>>(dk, dv, dout, q, k, v, lse, dsum, s);
    return MOBIUS_KERNEL_LAUNCH_STATUS("flash_bwd_dkdv_kernel");
  }();
  e = cudaFreeAsync(dsum, stream);
  if (st.ok() && e != cudaSuccess) {
    return FromCudaError(e, "cudaFreeAsync (attention_flash_bwd D)", __FILE__, __LINE__);
  }
  return st;
}

}  // namespace

bool AttentionFlashBwdApplies(const AttentionShape& s, const void* q, const void* k, const void* v,
                              const void* dout) {
  return internal::TiledShape(s, {q, k, v, dout});
}

KernelStatus attention_flash_bwd(HalfType type, uint16_t* dq, uint16_t* dk, uint16_t* dv,
                                 const uint16_t* dout, const uint16_t* q, const uint16_t* k,
                                 const uint16_t* v, const uint16_t* out, const float* lse,
                                 const AttentionShape& s, cudaStream_t stream) {
  MOBIUS_KERNEL_RETURN_IF_ERROR(CheckAttentionShape(s));
  if (!AttentionFlashBwdApplies(s, q, k, v, dout)) {
    return Unimplemented(
        "attention_flash_bwd: needs head_dim 64 or 128, b * heads <= 65535 and 16-byte aligned "
        "q, k, v, dout");
  }
  if (s.b * s.t == 0) return OkStatus();
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return s.head_dim == 64
               ? Launch<T, 64>(As<T>(dq), As<T>(dk), As<T>(dv), dout, q, k, v, out, lse, s, stream)
               : Launch<T, 128>(As<T>(dq), As<T>(dk), As<T>(dv), dout, q, k, v, out, lse, s,
                                stream);
  });
}

}  // namespace mobius::kernels::cuda
