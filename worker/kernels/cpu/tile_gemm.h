// Internal to the CPU op kernels: a register-blocked fp32 GEMM for the small tiles inside a kernel
// (attention's 32 x 64 score tiles, head_dim-wide products), where a BLAS call per tile would
// cost more than the tile.
//
//   TileGemm(c, ldc, a, lda, b, ldb, m, n, k):   C[m x n] += A[m x k] * B[k x n], row-major.
//
// Determinism: every element of C adds its k products to its own value in k order, one rounded
// multiply and one rounded add each (no FMA: the build does not contract, fast_math.h). So the
// result is the plain triple loop's, bit for bit, whatever the blocking, the vector width or the
// clone that runs (tile_gemm_test.cc checks it).
//
// Blocking: 4 rows x 16 columns of C in 8 F32x8 registers, a row of B loaded once per k for the 4
// rows; 8-column and single-row remainders; columns past the last multiple of 8 in scalar.
// Everything is always_inline so that each MOBIUS_KERNEL_CLONES caller gets its own AVX2 or
// baseline copy.
//
// Thread-safety: pure functions.
#ifndef MOBIUS_WORKER_KERNELS_CPU_TILE_GEMM_H_
#define MOBIUS_WORKER_KERNELS_CPU_TILE_GEMM_H_

#include <cstdint>

#include "worker/kernels/cpu/fast_math.h"

namespace mobius::kernels::cpu::tile_internal {

// C[R x 8V] += A[R x k] * B[k x 8V].
template <int R, int V>
MOBIUS_SIMD_INLINE void TileBlock(float* c, int64_t ldc, const float* a, int64_t lda,
                                  const float* b, int64_t ldb, int64_t k) {
  F32x8 acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[r][v] = Load8(c + r * ldc + 8 * v);
  }
  for (int64_t p = 0; p < k; ++p) {
    F32x8 bv[V];
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) bv[v] = Load8(b + p * ldb + 8 * v);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float ar = a[r * lda + p];
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) acc[r][v] += ar * bv[v];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) Store8(c + r * ldc + 8 * v, acc[r][v]);
  }
}

// R rows of C, all n columns.
template <int R>
MOBIUS_SIMD_INLINE void TileRows(float* c, int64_t ldc, const float* a, int64_t lda,
                                 const float* b, int64_t ldb, int64_t n, int64_t k) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) TileBlock<R, 2>(c + j, ldc, a, lda, b + j, ldb, k);
  for (; j + 8 <= n; j += 8) TileBlock<R, 1>(c + j, ldc, a, lda, b + j, ldb, k);
  for (; j < n; ++j) {
    for (int r = 0; r < R; ++r) {
      float acc = c[r * ldc + j];
      for (int64_t p = 0; p < k; ++p) acc += a[r * lda + p] * b[p * ldb + j];
      c[r * ldc + j] = acc;
    }
  }
}

MOBIUS_SIMD_INLINE void TileGemm(float* c, int64_t ldc, const float* a, int64_t lda,
                                 const float* b, int64_t ldb, int64_t m, int64_t n, int64_t k) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) TileRows<4>(c + i * ldc, ldc, a + i * lda, lda, b, ldb, n, k);
  for (; i < m; ++i) TileRows<1>(c + i * ldc, ldc, a + i * lda, lda, b, ldb, n, k);
}

}  // namespace mobius::kernels::cpu::tile_internal

#endif  // MOBIUS_WORKER_KERNELS_CPU_TILE_GEMM_H_
