#include "worker/backend/cpu/cpu_gemm.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/kernels/cpu/convert.h"
#include "worker/kernels/cpu/parallel.h"

namespace mobius::backend {
namespace {

struct Scratch {
  std::vector<float> a, b, c;
};
// One set per queue thread, reused so that a steady stream of GEMMs does not fault in fresh pages.
thread_local Scratch tls_scratch;

using kernels::cpu::ParallelFor;
using kernels::cpu::ParallelForRange;

// Rows per conversion work item: about kElementwiseGrain elements.
int64_t RowGrain(int64_t cols) {
  return std::max<int64_t>(1, kernels::cpu::kElementwiseGrain / std::max<int64_t>(cols, 1));
}

// dst [n] fp32 = src [n] of 16-bit `type` (bf16 or fp16), exactly.
void WidenRow(DType type, float* dst, const uint16_t* src, int64_t n) {
  type == DType::kF16 ? kernels::cpu::F16RowToFp32(dst, src, n)
                      : kernels::cpu::Bf16RowToFp32(dst, src, n);
}

// dst [n] of 16-bit `type` = src [n] fp32, rounded once to nearest even.
void NarrowRow(DType type, uint16_t* dst, const float* src, int64_t n) {
  type == DType::kF16 ? kernels::cpu::Fp32RowToF16(dst, src, n)
                      : kernels::cpu::Fp32RowToBf16(dst, src, n);
}

// A rows x cols matrix (leading dimension ld) as fp32: the input itself, or a packed fp32 copy of
// a bf16 or fp16 one in `scratch` (leading dimension cols).
const float* AsFp32(DType type, const void* ptr, int64_t rows, int64_t cols, int64_t ld,
                    std::vector<float>& scratch, int64_t* out_ld, optim::ThreadPool* pool) {
  if (type == DType::kFp32) {
    *out_ld = ld;
    return static_cast<const float*>(ptr);
  }
  scratch.resize(static_cast<size_t>(rows * cols));
  const auto* src = static_cast<const uint16_t*>(ptr);
  float* dst = scratch.data();
  ParallelForRange(pool, rows, RowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      WidenRow(type, dst + r * cols, src + r * ld, cols);
    }
  });
  *out_ld = std::max<int64_t>(cols, 1);
  return scratch.data();
}

// One fp32 product C = alpha op(A) op(B) + beta C, cut into CpuGemmPieces pieces along the longer
// dimension of C (rows of C and op(A), or columns of C and op(B)), one sgemm call per piece.
void PiecewiseSgemm(const GemmParams& p, const float* a, int64_t lda, const float* b, int64_t ldb,
                    float* c, int64_t ldc, optim::ThreadPool* pool) {
  const bool by_rows = p.m >= p.n;
  const int64_t dim = by_rows ? p.m : p.n;
  const int64_t pieces = CpuGemmPieces(p.m, p.n, p.k);
  // Whole multiples of 16 rows/columns, so that every piece but the last runs OpenBLAS's full
  // register blocks.
  const int64_t step = ((dim + pieces - 1) / pieces + 15) / 16 * 16;
  ParallelFor(pool, pieces, [&](int64_t piece) {
    const int64_t begin = piece * step, end = std::min(dim, begin + step);
    if (begin >= end) return;
    const float* pa = a;
    const float* pb = b;
    float* pc = c;
    int64_t m = p.m, n = p.n;
    if (by_rows) {  // rows [begin, end) of op(A): stored rows, or columns of a stored A^T
      pa += p.trans_a ? begin : begin * lda;
      pc += begin * ldc;
      m = end - begin;
    } else {  // columns [begin, end) of op(B): stored columns, or rows of a stored B^T
      pb += p.trans_b ? begin * ldb : begin;
      pc += begin;
      n = end - begin;
    }
    cblas_sgemm(CblasRowMajor, p.trans_a ? CblasTrans : CblasNoTrans,
                p.trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
                static_cast<blasint>(n), static_cast<blasint>(p.k), p.alpha, pa,
                static_cast<blasint>(lda), pb, static_cast<blasint>(ldb), p.beta, pc,
                static_cast<blasint>(ldc));
  });
}

const void* Offset(const void* ptr, DType type, int64_t elements) {
  return static_cast<const char*>(ptr) + elements * DTypeBytes(type);
}

// C = beta * C for k == 0 (BLAS would reject the empty operands' leading dimensions).
void ScaleC(float* c, int64_t m, int64_t n, int64_t ldc, float beta) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
  }
}

absl::Status CheckBlasInt(const GemmParams& p) {
  for (int64_t v : {p.m, p.n, p.k, p.lda, p.ldb, p.ldc}) {
    if (v > INT_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat("gemm: dimension or leading dimension ", v, " exceeds BLAS's 32-bit int"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int64_t CpuGemmPieces(int64_t m, int64_t n, int64_t k) {
  // Each piece packs the operand it shares with the others again: op(B) [k, n] when C is cut by
  // rows, op(A) [m, k] when by columns. Packing an element costs about as much as ~25
  // multiply-adds, and a piece of r rows does r multiply-adds per element of op(B) (columns
  // likewise), so kMinPieceDim = 256 keeps the repacking near 10% (measured: more, smaller pieces
  // cost more CPU time); kMinPieceMacs keeps small products in one call.
  constexpr int64_t kMinPieceMacs = int64_t{1} << 22, kMinPieceDim = 256, kMaxPieces = 8;
  const int64_t macs = m * n * std::max<int64_t>(k, 1);
  const int64_t pieces = std::min(macs / kMinPieceMacs, std::max(m, n) / kMinPieceDim);
  return std::clamp<int64_t>(pieces, 1, kMaxPieces);
}

namespace {

absl::Status RunWhole(const GemmParams& p, optim::ThreadPool* pool);

// The columns [j0, j1) of C (and of op(B)), or its rows [i0, i1) (and op(A)'s), of batch element
// `batch`: a one-element product over the same K.
GemmParams Chunk(const GemmParams& p, int64_t batch, bool by_columns, int64_t begin,
                 int64_t end) {
  GemmParams s = p;
  s.batch = 1;
  s.stride_a = s.stride_b = s.stride_c = 0;
  s.a = Offset(p.a, p.a_type, batch * p.stride_a);
  s.b = Offset(p.b, p.b_type, batch * p.stride_b);
  const void* c = Offset(p.c, p.c_type, batch * p.stride_c);
  if (by_columns) {
    s.b = Offset(s.b, p.b_type, p.trans_b ? begin * p.ldb : begin);
    c = Offset(c, p.c_type, begin);
    s.n = end - begin;
  } else {
    s.a = Offset(s.a, p.a_type, p.trans_a ? begin : begin * p.lda);
    c = Offset(c, p.c_type, begin * p.ldc);
    s.m = end - begin;
  }
  s.c = const_cast<void*>(c);
  return s;
}

}  // namespace

absl::Status RunCpuGemm(const GemmParams& p, optim::ThreadPool* pool) {
  if (p.m == 0 || p.n == 0) return absl::OkStatus();
  if (absl::Status s = CheckBlasInt(p); !s.ok()) return s;
  // A 16-bit weight is converted to fp32 before sgemm; a whole one would cost 4 bytes per element
  // of host memory per queue thread (262 MB for a 32000 x 2048 head), kept for reuse. Above
  // kMaxConvertedBytes the product is cut along the weight's non-K dimension so that each piece
  // converts at most about that much. The cut depends on the shape only, not on the operands'
  // types: OpenBLAS's result for an element depends on the shape of the sgemm call it is in (on
  // its AVX2 cores, Haswell and Zen, any M or N; on all, one-row calls), so a 16-bit operand and
  // its exact fp32 widening give the same bits only through the same calls.
  constexpr int64_t kMaxConvertedBytes = int64_t{16} << 20;
  const int64_t k = std::max<int64_t>(p.k, 1);
  const bool big_b = 4 * p.n * k > kMaxConvertedBytes;
  const bool big_a = !big_b && 4 * p.m * k > kMaxConvertedBytes;
  if (p.k > 0 && (big_a || big_b)) {
    const int64_t dim = big_b ? p.n : p.m;
    // At least 64 rows or columns per piece (a 128k-vocabulary head's K: 33 MB); the planner's
    // estimate counts max(16 MiB, 4 x 64 x K) per GPU (host/planner/estimator.cc).
    const int64_t step = std::max<int64_t>(64, kMaxConvertedBytes / (4 * k) / 16 * 16);
    for (int64_t batch = 0; batch < p.batch; ++batch) {
      for (int64_t begin = 0; begin < dim; begin += step) {
        const GemmParams s = Chunk(p, batch, big_b, begin, std::min(dim, begin + step));
        if (absl::Status st = RunWhole(s, pool); !st.ok()) return st;
      }
    }
    return absl::OkStatus();
  }
  return RunWhole(p, pool);
}

namespace {

absl::Status RunWhole(const GemmParams& p, optim::ThreadPool* pool) {
  Scratch& scratch = tls_scratch;
  const int64_t a_rows = p.trans_a ? p.k : p.m, a_cols = p.trans_a ? p.m : p.k;
  const int64_t b_rows = p.trans_b ? p.n : p.k, b_cols = p.trans_b ? p.k : p.n;
  const float* a32 = nullptr;
  const float* b32 = nullptr;
  int64_t lda = 0, ldb = 0;
  for (int64_t batch = 0; batch < p.batch; ++batch) {
    // A broadcast 16-bit operand (stride 0) is converted once for the whole batch.
    if (p.k > 0 && (batch == 0 || p.stride_a != 0)) {
      a32 = AsFp32(p.a_type, Offset(p.a, p.a_type, batch * p.stride_a), a_rows, a_cols, p.lda,
                   scratch.a, &lda, pool);
    }
    if (p.k > 0 && (batch == 0 || p.stride_b != 0)) {
      b32 = AsFp32(p.b_type, Offset(p.b, p.b_type, batch * p.stride_b), b_rows, b_cols, p.ldb,
                   scratch.b, &ldb, pool);
    }
    void* c_ptr = static_cast<char*>(p.c) + batch * p.stride_c * DTypeBytes(p.c_type);
    float* c32 = static_cast<float*>(c_ptr);
    int64_t ldc = p.ldc;
    auto* c16 = static_cast<uint16_t*>(c_ptr);
    // A 16-bit C (half_accumulate or not) is computed in fp32 and rounded once.
    if (IsHalf(p.c_type)) {
      scratch.c.resize(static_cast<size_t>(p.m * p.n));
      c32 = scratch.c.data();
      ldc = p.n;
      if (p.beta != 0.0f) {
        ParallelForRange(pool, p.m, RowGrain(p.n), [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i) {
            WidenRow(p.c_type, c32 + i * p.n, c16 + i * p.ldc, p.n);
          }
        });
      }  // beta == 0: sgemm does not read C
    }
    if (p.k == 0) {
      ScaleC(c32, p.m, p.n, ldc, p.beta);
    } else {
      PiecewiseSgemm(p, a32, lda, b32, ldb, c32, ldc, pool);
    }
    if (IsHalf(p.c_type)) {
      ParallelForRange(pool, p.m, RowGrain(p.n), [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          NarrowRow(p.c_type, c16 + i * p.ldc, c32 + i * p.n, p.n);
        }
      });
    }
  }
  return absl::OkStatus();
}

}  // namespace

void SetBlasThreads(int threads) { openblas_set_num_threads(std::max(threads, 1)); }

}  // namespace mobius::backend
