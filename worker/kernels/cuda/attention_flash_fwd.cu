// attention_flash_fwd: the tiled forward (FlashAttention-2's loop) on tensor cores through WMMA
// (bf16 or fp16 16x16x16 fragments, fp32 accumulation; sm_80+). One block of 4 warps per (b, h,
// 64 query rows); each warp owns 16 rows. Per tile of 32 keys: S = Q K^T (tensor cores), the
// online softmax on S in shared memory (two lanes per row), P rounded to the inputs' type as
// FlashAttention does, O += P V (tensor cores). O lives in shared memory in fp32 so that rows can
// be rescaled by exp(m_old - m_new): WMMA's register layout is opaque. The first step beyond the
// reference kernels, not the last: no cp.async pipelining, no wgmma on Hopper, one kernel for
// every architecture.
#include <cuda_bf16.h>
#include <mma.h>

#include <cmath>
#include <cstdint>

#include "worker/kernels/cuda/attention.cuh"
#include "worker/kernels/cuda/device_utils.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::As;
using internal::kWarp;
using internal::Store;
namespace wmma = nvcuda::wmma;

constexpr int kRows = 64;  // query rows per block
constexpr int kWarps = 4;  // 16 rows each
constexpr int kKeys = 32;  // keys per tile
constexpr int kThreads = kWarps * kWarp;

struct FlashDims {
  int64_t t, heads, kv_heads, group, window;
  float scale;
};

// The WMMA element type of a storage type: bf16 bits (uint16_t) or __half.
template <typename T>
struct WmmaType {
  using type = __nv_bfloat16;
};
template <>
struct WmmaType<__half> {
  using type = __half;
};

template <int kHd>
constexpr size_t SharedBytes() {
  return size_t{kRows} * kHd * 2            // Q staging, then the K and V tiles
         + size_t{kWarps} * 16 * kKeys * 4  // S (fp32)
         + size_t{kWarps} * 16 * kKeys * 2  // P (16-bit)
         + size_t{kWarps} * 16 * kHd * 4;   // O (fp32)
}

// Copies rows [r0, r0 + n) of head `head` of a [B, T, nh, kHd] tensor of 16-bit values (either
// format: the bits are copied) into dst [n][kHd], zeros past T. 16-byte loads: REQUIRES the tensor
// 16-byte aligned.
template <int kHd>
__device__ void LoadTile(uint16_t* dst, const uint16_t* src, int64_t b, int64_t r0, int n,
                         int64_t t, int64_t nh, int64_t head) {
  constexpr int kChunks = kHd / 8;  // uint4 per row
  for (int i = threadIdx.x; i < n * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r0 + r < t) {
      val = reinterpret_cast<const uint4*>(src + ((b * t + r0 + r) * nh + head) * kHd)[c];
    }
    reinterpret_cast<uint4*>(dst + r * kHd)[c] = val;
  }
}

// T: the storage type (uint16_t bf16 or __half fp16); q, k, v are read as raw 16-bit tiles.
template <int kHd, typename T>
__global__ void __launch_bounds__(kThreads)
    attention_flash_fwd_kernel(T* out, float* lse, const uint16_t* q, const uint16_t* k,
                               const uint16_t* v, FlashDims s) {
  using W = typename WmmaType<T>::type;
  extern __shared__ __align__(128) unsigned char smem[];
  uint16_t* q_tile = reinterpret_cast<uint16_t*>(smem);  // [kRows][kHd], then K and V
  uint16_t* k_tile = q_tile;                             // [kKeys][kHd]
  uint16_t* v_tile = q_tile + kKeys * kHd;               // [kKeys][kHd]
  float* s_all = reinterpret_cast<float*>(smem + size_t{kRows} * kHd * 2);
  T* p_all = reinterpret_cast<T*>(s_all + kWarps * 16 * kKeys);
  float* o_all = reinterpret_cast<float*>(p_all + kWarps * 16 * kKeys);

  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int64_t b = blockIdx.y / s.heads, h = blockIdx.y % s.heads, kvh = h / s.group;
  float* s_w = s_all + warp * 16 * kKeys;
  T* p_w = p_all + warp * 16 * kKeys;
  float* o_w = o_all + warp * 16 * kHd;

  // Q fragments stay in registers for the whole key loop.
  LoadTile<kHd>(q_tile, q, b, t0, kRows, s.t, s.heads, h);
  __syncthreads();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, W, wmma::row_major> qa[kHd / 16];
#pragma unroll
  for (int kk = 0; kk < kHd / 16; ++kk) {
    wmma::load_matrix_sync(qa[kk], reinterpret_cast<const W*>(q_tile + warp * 16 * kHd + kk * 16),
                           kHd);
  }
  for (int i = lane; i < 16 * kHd; i += kWarp) o_w[i] = 0.0f;

  // Two lanes per row: row r = lane / 2, half `side` of the columns.
  const int r = lane / 2, side = lane % 2;
  const int64_t t = t0 + warp * 16 + r;
  float m = -INFINITY, l = 0.0f;

  const int64_t last_row = t0 + kRows - 1 < s.t - 1 ? t0 + kRows - 1 : s.t - 1;
  const int64_t first_key = s.window > 0 && t0 - s.window + 1 > 0 ? t0 - s.window + 1 : 0;
  for (int64_t j0 = first_key / kKeys * kKeys; j0 <= last_row; j0 += kKeys) {
    __syncthreads();  // the previous tile (or the Q staging) is no longer read
    LoadTile<kHd>(k_tile, k, b, j0, kKeys, s.t, s.kv_heads, kvh);
    LoadTile<kHd>(v_tile, v, b, j0, kKeys, s.t, s.kv_heads, kvh);
    __syncthreads();

    // S [16, kKeys] = Q_w K^T.
#pragma unroll
    for (int nc = 0; nc < kKeys / 16; ++nc) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < kHd / 16; ++kk) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, W, wmma::col_major> kb;
        wmma::load_matrix_sync(kb, reinterpret_cast<const W*>(k_tile + nc * 16 * kHd + kk * 16),
                               kHd);
        wmma::mma_sync(acc, qa[kk], kb, acc);
      }
      wmma::store_matrix_sync(s_w + nc * 16, acc, kKeys, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax of row r over this tile's visible keys.
    constexpr int kHalf = kKeys / 2;
    float sc[kHalf];
    float tile_max = -INFINITY;
#pragma unroll
    for (int c = 0; c < kHalf; ++c) {
      const int64_t j = j0 + side * kHalf + c;
      const bool visible = j <= t && j < s.t && (s.window == 0 || j > t - s.window);
      sc[c] = visible ? s_w[r * kKeys + side * kHalf + c] * s.scale : -INFINITY;
      tile_max = fmaxf(tile_max, sc[c]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float m_new = fmaxf(m, tile_max);
    // Nothing visible yet (a window's first tiles, padding rows): keep m = -inf, l = 0, O = 0.
    const float alpha = m_new == -INFINITY ? 1.0f : expf(m - m_new);
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < kHalf; ++c) {
      const float p = m_new == -INFINITY ? 0.0f : expf(sc[c] - m_new);
      sum += p;
      Store(p_w, r * kKeys + side * kHalf + c, p);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * alpha + sum;
    m = m_new;
    for (int d = side * (kHd / 2); d < (side + 1) * (kHd / 2); ++d) o_w[r * kHd + d] *= alpha;
    __syncwarp();

    // O_w [16, kHd] += P [16, kKeys] V [kKeys, kHd].
#pragma unroll
    for (int dc = 0; dc < kHd / 16; ++dc) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, o_w + dc * 16, kHd, wmma::mem_row_major);
#pragma unroll
      for (int kc = 0; kc < kKeys / 16; ++kc) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, W, wmma::row_major> pa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, W, wmma::row_major> vb;
        wmma::load_matrix_sync(pa, reinterpret_cast<const W*>(p_w + kc * 16), kKeys);
        wmma::load_matrix_sync(vb, reinterpret_cast<const W*>(v_tile + kc * 16 * kHd + dc * 16),
                               kHd);
        wmma::mma_sync(acc, pa, vb, acc);
      }
      wmma::store_matrix_sync(o_w + dc * 16, acc, kHd, wmma::mem_row_major);
    }
    __syncwarp();
  }

  if (t >= s.t) return;
  const float inv_l = 1.0f / l;
  T* o = out + ((b * s.t + t) * s.heads + h) * kHd;
  for (int d = side * (kHd / 2); d < (side + 1) * (kHd / 2); ++d) {
    Store(o, d, o_w[r * kHd + d] * inv_l);
  }
  if (side == 0) lse[(b * s.heads + h) * s.t + t] = m + logf(l);
}

template <int kHd, typename T>
KernelStatus Launch(T* out, float* lse, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                    const AttentionShape& s, cudaStream_t stream) {
  constexpr size_t bytes = SharedBytes<kHd>();
  MOBIUS_KERNEL_RETURN_IF_ERROR(FromCudaError(
      cudaFuncSetAttribute(attention_flash_fwd_kernel<kHd, T>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
      "cudaFuncSetAttribute(attention_flash_fwd_kernel)", __FILE__, __LINE__));
  FlashDims d;
  d.t = s.t;
  d.heads = s.heads;
  d.kv_heads = s.kv_heads;
  d.group = s.heads / s.kv_heads;
  d.window = s.window;
  d.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(kHd)));
  const dim3 grid(static_cast<unsigned int>((s.t + kRows - 1) / kRows),
                  static_cast<unsigned int>(s.b * s.heads));
  attention_flash_fwd_kernel<kHd, T><<<grid, kThreads, bytes, stream>>>(out, lse, q, k, v, d);
  return MOBIUS_KERNEL_LAUNCH_STATUS("attention_flash_fwd_kernel");
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool AttentionFlashFwdApplies(const AttentionShape& s, const void* q, const void* k,
                              const void* v) {
  return (s.head_dim == 64 || s.head_dim == 128) && s.b * s.heads <= 65535 && Aligned16(q) &&
         Aligned16(k) && Aligned16(v);
}

KernelStatus attention_flash_fwd(HalfType type, uint16_t* out, float* lse, const uint16_t* q,
                                 const uint16_t* k, const uint16_t* v, const AttentionShape& s,
                                 cudaStream_t stream) {
  MOBIUS_KERNEL_RETURN_IF_ERROR(CheckAttentionShape(s));
  if (!AttentionFlashFwdApplies(s, q, k, v)) {
    return Unimplemented(
        "attention_flash_fwd: needs head_dim 64 or 128, b * heads <= 65535 and 16-byte aligned "
        "q, k, v");
  }
  if (s.b * s.t == 0) return OkStatus();
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return s.head_dim == 64 ? Launch<64>(As<T>(out), lse, q, k, v, s, stream)
                            : Launch<128>(As<T>(out), lse, q, k, v, s, stream);
  });
}

}  // namespace mobius::kernels::cuda
