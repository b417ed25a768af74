#include "worker/backend/cpu/cpu_gemm.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/numeric/bf16.h"

namespace mobius::backend {
namespace {

struct Scratch {
  std::vector<float> a, b, c;
};
// One set per queue thread, reused so that a steady stream of GEMMs does not fault in fresh pages.
thread_local Scratch tls_scratch;

// A rows x cols matrix (leading dimension ld) as fp32: the input itself, or a packed fp32 copy of
// a bf16 one in `scratch` (leading dimension cols).
const float* AsFp32(DType type, const void* ptr, int64_t rows, int64_t cols, int64_t ld,
                    std::vector<float>& scratch, int64_t* out_ld) {
  if (type == DType::kFp32) {
    *out_ld = ld;
    return static_cast<const float*>(ptr);
  }
  scratch.resize(static_cast<size_t>(rows * cols));
  const auto* src = static_cast<const uint16_t*>(ptr);
  for (int64_t r = 0; r < rows; ++r) {
    numeric::Bf16ToFp32(src + r * ld, scratch.data() + r * cols, static_cast<size_t>(cols));
  }
  *out_ld = std::max<int64_t>(cols, 1);
  return scratch.data();
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

absl::Status RunCpuGemm(const GemmParams& p) {
  if (p.m == 0 || p.n == 0) return absl::OkStatus();
  if (absl::Status s = CheckBlasInt(p); !s.ok()) return s;
  Scratch& scratch = tls_scratch;
  const int64_t a_rows = p.trans_a ? p.k : p.m, a_cols = p.trans_a ? p.m : p.k;
  const int64_t b_rows = p.trans_b ? p.n : p.k, b_cols = p.trans_b ? p.k : p.n;
  const float* a32 = nullptr;
  const float* b32 = nullptr;
  int64_t lda = 0, ldb = 0;
  for (int64_t batch = 0; batch < p.batch; ++batch) {
    // A broadcast bf16 operand (stride 0) is converted once for the whole batch.
    if (p.k > 0 && (batch == 0 || p.stride_a != 0)) {
      a32 = AsFp32(p.a_type, Offset(p.a, p.a_type, batch * p.stride_a), a_rows, a_cols, p.lda,
                   scratch.a, &lda);
    }
    if (p.k > 0 && (batch == 0 || p.stride_b != 0)) {
      b32 = AsFp32(p.b_type, Offset(p.b, p.b_type, batch * p.stride_b), b_rows, b_cols, p.ldb,
                   scratch.b, &ldb);
    }
    void* c_ptr = static_cast<char*>(p.c) + batch * p.stride_c * DTypeBytes(p.c_type);
    float* c32 = static_cast<float*>(c_ptr);
    int64_t ldc = p.ldc;
    if (p.c_type == DType::kBf16) {  // compute in fp32, round once
      scratch.c.assign(static_cast<size_t>(p.m * p.n), 0.0f);
      if (p.beta != 0.0f) {
        for (int64_t i = 0; i < p.m; ++i) {
          numeric::Bf16ToFp32(static_cast<const uint16_t*>(c_ptr) + i * p.ldc,
                              scratch.c.data() + i * p.n, static_cast<size_t>(p.n));
        }
      }
      c32 = scratch.c.data();
      ldc = p.n;
    }
    if (p.k == 0) {
      ScaleC(c32, p.m, p.n, ldc, p.beta);
    } else {
      cblas_sgemm(CblasRowMajor, p.trans_a ? CblasTrans : CblasNoTrans,
                  p.trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(p.m),
                  static_cast<blasint>(p.n), static_cast<blasint>(p.k), p.alpha, a32,
                  static_cast<blasint>(lda), b32, static_cast<blasint>(ldb), p.beta, c32,
                  static_cast<blasint>(ldc));
    }
    if (p.c_type == DType::kBf16) {
      for (int64_t i = 0; i < p.m; ++i) {
        numeric::Fp32ToBf16(c32 + i * p.n, static_cast<uint16_t*>(c_ptr) + i * p.ldc,
                            static_cast<size_t>(p.n));
      }
    }
  }
  return absl::OkStatus();
}

void SetBlasThreads(int threads) { openblas_set_num_threads(std::max(threads, 1)); }
int BlasThreads() { return openblas_get_num_threads(); }

const char* BlasDescription() {
  static const std::string description =
      absl::StrCat("OpenBLAS ", openblas_get_config(), " core=", openblas_get_corename());
  return description.c_str();
}

}  // namespace mobius::backend
