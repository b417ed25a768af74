// Internal to worker/kernels/cuda/: the pieces of the mma.sync attention kernels
// (attention_flash_bwd.cu, attention_mma_fwd.cu). mma.sync m16n8k16 with bf16 or fp16 inputs and
// fp32 accumulation (sm_80+), its fragments loaded from shared-memory tiles, and the tiles loaded
// from [B, T, heads, head_dim] tensors. Fragment layouts are the PTX ISA's ("Matrix Fragments for
// mma.m16n8k16 with floating point type"): with g = lane / 4 and q = lane % 4,
//   A 16x16: a register j holds elements 2j, 2j+1: (row g, cols 2q, 2q+1), (row g+8, the same),
//            (row g, cols 2q+8, 2q+9), (row g+8, the same);
//   B 16x8:  (rows 2q, 2q+1 of column g), (rows 2q+8, 2q+9 of column g);
//   C 16x8:  c0, c1 = (row g, cols 2q, 2q+1), c2, c3 = (row g+8, the same).
// test/gpu/attention_mma_emulation.py transcribes these tables and the kernels that use them.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_MMA_TILES_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_MMA_TILES_CUH_

#include <cuda_fp16.h>

#include <cstdint>
#include <initializer_list>

#include <cmath>

#include "worker/kernels/cuda/attention.cuh"
#include "worker/kernels/cuda/device_utils.cuh"

namespace mobius::kernels::cuda::internal {

// The attention problem as the tiled kernels see it.
struct TileDims {
  int64_t t, heads, kv_heads, group, window;
  float scale;
  int64_t kv_rows;  // rows per sequence of the k and v tensors: t, or a KV cache's capacity
};

inline TileDims MakeTileDims(const AttentionShape& shape) {
  TileDims s;
  s.t = shape.t;
  s.heads = shape.heads;
  s.kv_heads = shape.kv_heads;
  s.group = shape.heads / shape.kv_heads;
  s.window = shape.window;
  s.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.head_dim)));
  s.kv_rows = shape.t;
  return s;
}

inline bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The shapes the tiled kernels take: head_dim 64 or 128, at most 65535 (b, head) pairs (the grid's
// y), 16-byte aligned tensors (their 16-byte loads).
inline bool TiledShape(const AttentionShape& s, std::initializer_list<const void*> tensors) {
  if ((s.head_dim != 64 && s.head_dim != 128) || s.b * s.heads > 65535) return false;
  for (const void* p : tensors) {
    if (!Aligned16(p)) return false;
  }
  return true;
}

// The shared-memory row stride of a tile, in 16-bit elements: 16 bytes of padding per row.
template <int kHd>
__host__ __device__ constexpr int Ld() {
  return kHd + 8;
}

// d += a b on tensor cores: A 16x16 (row), B 16x8 (col), C/D 16x8 fp32.
template <typename T>
__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]);
template <>
__device__ __forceinline__ void Mma<uint16_t>(float (&d)[4], const uint32_t (&a)[4],
                                              const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <>
__device__ __forceinline__ void Mma<__half>(float (&d)[4], const uint32_t (&a)[4],
                                            const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// The 16-bit bits of x rounded to T, and a 16-bit value of T widened.
template <typename T>
__device__ __forceinline__ uint16_t Bits(float x);
template <>
__device__ __forceinline__ uint16_t Bits<uint16_t>(float x) {
  return F32ToBf16(x);
}
template <>
__device__ __forceinline__ uint16_t Bits<__half>(float x) {
  return __half_as_ushort(F32ToF16(x));
}
template <typename T>
__device__ __forceinline__ float Widen(uint16_t bits);
template <>
__device__ __forceinline__ float Widen<uint16_t>(uint16_t bits) {
  return Bf16ToF32(bits);
}
template <>
__device__ __forceinline__ float Widen<__half>(uint16_t bits) {
  return __half2float(__ushort_as_half(bits));
}

__device__ __forceinline__ uint32_t Pack(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}
__device__ __forceinline__ uint32_t Word(const uint16_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// Fragments from shared memory (row stride ld; g = lane / 4, q = lane % 4).
// A = X[m0 .. m0+16)[k0 .. k0+16) of a row-major X.
__device__ __forceinline__ void LoadA(uint32_t (&a)[4], const uint16_t* x, int ld, int m0, int k0,
                                      int g, int q) {
  const uint16_t* r0 = x + (m0 + g) * ld + k0 + 2 * q;
  const uint16_t* r8 = r0 + 8 * ld;
  a[0] = Word(r0);
  a[1] = Word(r8);
  a[2] = Word(r0 + 8);
  a[3] = Word(r8 + 8);
}
// B[k][n] = X[n0 + n][k0 + k] (B = X^T of a row-major X whose rows are the output's columns).
__device__ __forceinline__ void LoadBt(uint32_t (&b)[2], const uint16_t* x, int ld, int n0, int k0,
                                       int g, int q) {
  const uint16_t* r = x + (n0 + g) * ld + k0 + 2 * q;
  b[0] = Word(r);
  b[1] = Word(r + 8);
}
// B[k][n] = X[k0 + k][n0 + n] of a row-major X.
__device__ __forceinline__ void LoadB(uint32_t (&b)[2], const uint16_t* x, int ld, int k0, int n0,
                                      int g, int q) {
  const uint16_t* c = x + (k0 + 2 * q) * ld + n0 + g;
  b[0] = Pack(c[0], c[ld]);
  b[1] = Pack(c[8 * ld], c[9 * ld]);
}

// The A fragment of columns [16 kc, 16 kc + 16) of a 16 x (8 n) fp32 result held as n m16n8
// accumulators, rounded to T.
template <typename T>
__device__ __forceinline__ void AsA(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
  a[0] = Pack(Bits<T>(lo[0]), Bits<T>(lo[1]));
  a[1] = Pack(Bits<T>(lo[2]), Bits<T>(lo[3]));
  a[2] = Pack(Bits<T>(hi[0]), Bits<T>(hi[1]));
  a[3] = Pack(Bits<T>(hi[2]), Bits<T>(hi[3]));
}

// Element 0 of row t of head `head` of sequence b in a [B, rows, nh, hd] tensor.
__device__ __forceinline__ int64_t RowIndex(int64_t rows, int64_t b, int64_t t, int64_t nh,
                                            int64_t head, int hd) {
  return ((b * rows + t) * nh + head) * hd;
}
// The same in a [B, T, nh, hd] tensor (q, out, dout and the gradients).
__device__ __forceinline__ int64_t RowIndex(const TileDims& s, int64_t b, int64_t t, int64_t nh,
                                            int64_t head, int hd) {
  return RowIndex(s.t, b, t, nh, head, hd);
}

// Rows [r0, r0 + n) of head `head` of sequence b of a [B, rows, nh, kHd] tensor into dst
// [n][Ld], zeros from row T on, by the whole block. 16-byte loads: REQUIRES the tensor 16-byte
// aligned.
template <int kHd>
__device__ void LoadRows(uint16_t* dst, const uint16_t* src, const TileDims& s, int64_t rows,
                         int64_t b, int64_t r0, int n, int64_t nh, int64_t head) {
  constexpr int kChunks = kHd / 8;
  for (int i = threadIdx.x; i < n * kChunks; i += blockDim.x) {
    const int r = i / kChunks, c = i % kChunks;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r0 + r < s.t) {
      v = reinterpret_cast<const uint4*>(src + RowIndex(rows, b, r0 + r, nh, head, kHd))[c];
    }
    reinterpret_cast<uint4*>(dst + r * Ld<kHd>())[c] = v;
  }
}

// Whether query t sees key j (causal, with an optional window).
__device__ __forceinline__ bool Visible(const TileDims& s, int64_t t, int64_t j) {
  return t < s.t && j <= t && (s.window == 0 || j > t - s.window);
}

}  // namespace mobius::kernels::cuda::internal

#endif  // MOBIUS_WORKER_KERNELS_CUDA_MMA_TILES_CUH_
